//! Where each thing lives in etcd. Everything of one cluster is under `<prefix>/v1/`, so two
//! clusters can share an etcd under different prefixes and a format change gets a new `v2/`.

pub struct Keys {
    root: String,
}

impl Keys {
    /// `prefix` is normalised to one leading and no trailing slash ("icebox/" → "/icebox").
    pub fn new(prefix: &str) -> Keys {
        let trimmed = prefix.trim_matches('/');
        Keys {
            root: format!("/{trimmed}/v1"),
        }
    }

    /// Which cluster this is and the fingerprint of its admin key.
    pub fn meta(&self) -> String {
        format!("{}/meta", self.root)
    }

    pub fn nodes(&self) -> String {
        format!("{}/nodes/", self.root)
    }

    pub fn node(&self, id: &str) -> String {
        format!("{}{id}", self.nodes())
    }

    pub fn warm_all(&self) -> String {
        format!("{}/warm/", self.root)
    }

    /// An idle instance of `fqn` on `node`, under that node's lease.
    pub fn warm(&self, fqn: &str, node: &str) -> String {
        format!("{}{fqn}/{node}", self.warm_all())
    }

    /// `(fqn, node)` of a key under [`Self::warm_all`].
    pub fn parse_warm<'a>(&self, key: &'a str) -> Option<(&'a str, &'a str)> {
        key.strip_prefix(self.warm_all().as_str())?.rsplit_once('/')
    }

    /// Actions, namespaces and keys: one prefix, so one watch sees their changes in the order
    /// they were made (a key never arrives before its namespace).
    pub fn shared(&self) -> String {
        format!("{}/state/", self.root)
    }

    pub fn actions(&self) -> String {
        format!("{}actions/", self.shared())
    }

    pub fn action(&self, namespace: &str, name: &str) -> String {
        format!("{}{namespace}/{name}", self.actions())
    }

    pub fn namespaces(&self) -> String {
        format!("{}namespaces/", self.shared())
    }

    pub fn namespace(&self, name: &str) -> String {
        format!("{}{name}", self.namespaces())
    }

    pub fn api_keys(&self) -> String {
        format!("{}keys/", self.shared())
    }

    pub fn api_key(&self, uuid: &str) -> String {
        format!("{}{uuid}", self.api_keys())
    }

    pub fn activation(&self, id: &str) -> String {
        format!("{}/activations/{id}", self.root)
    }

    /// The part of `key` after `prefix`, if it is under it.
    pub fn rest<'a>(key: &'a str, prefix: &str) -> Option<&'a str> {
        key.strip_prefix(prefix).filter(|r| !r.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_normalised_and_warm_keys_round_trip() {
        for p in ["icebox", "/icebox", "/icebox/", "icebox/"] {
            assert_eq!(Keys::new(p).node("n1"), "/icebox/v1/nodes/n1");
        }
        let keys = Keys::new("/a/b");
        let k = keys.warm("guest/hello", "n2");
        assert_eq!(k, "/a/b/v1/warm/guest/hello/n2");
        assert_eq!(keys.parse_warm(&k), Some(("guest/hello", "n2")));
        assert_eq!(keys.parse_warm("/other/v1/warm/x/n"), None);
        assert_eq!(
            Keys::rest(&keys.action("guest", "f"), &keys.actions()),
            Some("guest/f")
        );
    }
}
