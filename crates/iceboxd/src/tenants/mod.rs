//! Tenants, OpenWhisk's way: namespaces, each with one or more `uuid:key` API keys and its
//! quotas. The node's own key (`--auth` or `<state>/auth`) is the admin key of the default
//! namespace: it manages namespaces and keys and sees every tenant's instances. Keys are kept
//! in the registry as a salted SHA-256 of their secret; this directory holds the same in
//! memory so a request is checked without touching SQLite.

pub mod quota;
pub mod share;

use crate::auth::{ApiKey, AuthError};
// The stored rows are the registry's (registry/tenants.rs); the names stay usable from here.
pub use crate::registry::{KeyRow, NamespaceRow, Quotas};

use crate::registry::{Registry, RegistryError};
use quota::{InFlight, Throttle, Throttled};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Who sent a request: its namespace, whether it holds the admin key, and its credentials
/// (handed to actions that ask for the caller's key, never stored).
#[derive(Debug, Clone)]
pub struct Caller {
    pub namespace: String,
    pub admin: bool,
    pub basic: String,
}

impl Caller {
    /// Whether this caller may see what belongs to `namespace`.
    pub fn sees(&self, namespace: &str) -> bool {
        self.admin || self.namespace == namespace
    }
}

struct NamespaceState {
    quotas: Quotas,
    throttle: Throttle,
}

pub struct Tenants {
    keys: RwLock<HashMap<String, KeyRow>>,
    namespaces: RwLock<HashMap<String, Arc<NamespaceState>>>,
    admin_namespace: String,
}

fn hash_secret(salt: &str, secret: &str) -> String {
    let mut h = Sha256::new();
    h.update(salt.as_bytes());
    h.update([0u8]);
    h.update(secret.as_bytes());
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn new_salt() -> String {
    icebox_core::ids::random_hex128()
}

fn row_for(key: &ApiKey, admin: bool) -> KeyRow {
    let salt = new_salt();
    KeyRow {
        uuid: key.uuid.clone(),
        namespace: key.namespace.clone(),
        hash: hash_secret(&salt, &key.key),
        salt,
        admin,
        created: icebox_core::now_ms(),
    }
}

fn same(a: &str, b: &str) -> bool {
    crate::auth::constant_time_eq(a.as_bytes(), b.as_bytes())
}

/// OpenWhisk's rule for entity names, which namespace names follow too.
pub fn check_namespace_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 256
        && name != "_"
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.@".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "The namespace name '{name}' is not valid: use letters, digits, '_', '-', '.' and '@' (a letter, digit or '_' first), at most 256 characters, and not '_'."
        ))
    }
}

impl Tenants {
    /// Loads namespaces and keys, making sure the admin key and its namespace are stored.
    pub fn load(registry: &Registry, admin: &ApiKey) -> Result<Tenants, RegistryError> {
        let stored_admin = registry
            .keys()?
            .into_iter()
            .find(|k| k.admin && k.uuid == admin.uuid && k.namespace == admin.namespace)
            .filter(|k| same(&k.hash, &hash_secret(&k.salt, &admin.key)));
        if !registry
            .namespaces()?
            .iter()
            .any(|n| n.name == admin.namespace)
        {
            registry.put_namespace(&admin.namespace, Quotas::default(), true)?;
        }
        if stored_admin.is_none() {
            registry.put_key(&row_for(admin, true))?;
        }
        let tenants = Tenants {
            keys: RwLock::new(HashMap::new()),
            namespaces: RwLock::new(HashMap::new()),
            admin_namespace: admin.namespace.clone(),
        };
        tenants.reload(registry)?;
        Ok(tenants)
    }

    /// Re-reads the registry's namespaces and keys. Throttle books of namespaces that stay
    /// are kept.
    pub fn reload(&self, registry: &Registry) -> Result<(), RegistryError> {
        let keys: HashMap<String, KeyRow> = registry
            .keys()?
            .into_iter()
            .map(|k| (k.uuid.clone(), k))
            .collect();
        let rows = registry.namespaces()?;
        let mut namespaces = self.namespaces.write().unwrap();
        let mut next = HashMap::new();
        for row in rows {
            let throttle_of_old = namespaces.remove(&row.name);
            let state = match throttle_of_old {
                Some(old) if old.quotas == row.quotas => old,
                _ => Arc::new(NamespaceState {
                    quotas: row.quotas,
                    throttle: Throttle::default(),
                }),
            };
            next.insert(row.name, state);
        }
        *namespaces = next;
        *self.keys.write().unwrap() = keys;
        Ok(())
    }

    pub fn admin_namespace(&self) -> &str {
        &self.admin_namespace
    }

    pub fn exists(&self, namespace: &str) -> bool {
        self.namespaces.read().unwrap().contains_key(namespace)
    }

    /// Checks an `Authorization` header value against the stored keys.
    pub fn authenticate(&self, header: Option<&str>) -> Result<Caller, AuthError> {
        let (uuid, secret) = crate::auth::parse_basic(header)?;
        let keys = self.keys.read().unwrap();
        let found = keys.get(&uuid);
        // An unknown uuid costs the same hash as a known one.
        let (salt, expected) = found
            .map(|k| (k.salt.as_str(), k.hash.as_str()))
            .unwrap_or(("", ""));
        let matches = same(&hash_secret(salt, &secret), expected);
        match found {
            Some(k) if matches => Ok(Caller {
                namespace: k.namespace.clone(),
                admin: k.admin,
                basic: format!("{uuid}:{secret}"),
            }),
            _ => Err(AuthError::Invalid),
        }
    }

    /// Creates a key for `namespace`; the secret is in the returned key only.
    pub fn create_key(&self, registry: &Registry, namespace: &str) -> Result<ApiKey, String> {
        if !self.exists(namespace) {
            return Err(format!("The namespace '{namespace}' does not exist."));
        }
        let key = ApiKey::generate(namespace);
        registry
            .put_key(&row_for(&key, false))
            .map_err(|e| e.to_string())?;
        self.reload(registry).map_err(|e| e.to_string())?;
        Ok(key)
    }

    /// The namespace of a stored key, and whether it is the admin key.
    pub fn key(&self, uuid: &str) -> Option<(String, bool)> {
        self.keys
            .read()
            .unwrap()
            .get(uuid)
            .map(|k| (k.namespace.clone(), k.admin))
    }

    /// Key uuids by namespace.
    pub fn key_uuids(&self) -> HashMap<String, Vec<String>> {
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        for k in self.keys.read().unwrap().values() {
            out.entry(k.namespace.clone())
                .or_default()
                .push(k.uuid.clone());
        }
        for v in out.values_mut() {
            v.sort();
        }
        out
    }

    /// Admits one invocation by `namespace` under its quotas.
    pub fn admit(&self, namespace: &str, now_ms: u64) -> Result<Option<InFlight>, Throttled> {
        let Some(state) = self.namespaces.read().unwrap().get(namespace).cloned() else {
            return Ok(None);
        };
        let q = state.quotas;
        if q.invocations_per_minute.is_none() && q.concurrent_invocations.is_none() {
            return Ok(None);
        }
        state
            .throttle
            .admit(now_ms, q.invocations_per_minute, q.concurrent_invocations)
            .map(Some)
    }

    /// Invocations of the namespace running now, as its concurrency quota counts them (0 for
    /// a namespace without quotas, which keeps no count).
    pub fn in_flight(&self, namespace: &str) -> u64 {
        self.namespaces
            .read()
            .unwrap()
            .get(namespace)
            .map_or(0, |s| s.throttle.in_flight())
    }

    /// Memory shares of the namespaces that have one.
    pub fn memory_shares(&self) -> HashMap<String, u64> {
        self.namespaces
            .read()
            .unwrap()
            .iter()
            .filter_map(|(n, s)| s.quotas.memory_share.map(|m| (n.clone(), m)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::basic_header as basic;

    #[test]
    fn keys_are_checked_against_their_salted_hash_and_name_their_namespace() {
        let reg = Registry::open_in_memory().unwrap();
        let admin = ApiKey::parse("admin-uuid:admin-secret", "guest").unwrap();
        let t = Tenants::load(&reg, &admin).unwrap();
        let caller = t
            .authenticate(Some(&basic("admin-uuid:admin-secret")))
            .unwrap();
        assert!(caller.admin);
        assert_eq!(caller.namespace, "guest");

        reg.put_namespace("alpha", Quotas::default(), false)
            .unwrap();
        t.reload(&reg).unwrap();
        let key = t.create_key(&reg, "alpha").unwrap();
        let caller = t.authenticate(Some(&basic(&key.as_basic()))).unwrap();
        assert!(!caller.admin);
        assert_eq!(caller.namespace, "alpha");
        assert!(caller.sees("alpha") && !caller.sees("guest"));

        // The registry holds no secret.
        for row in reg.keys().unwrap() {
            assert!(!row.hash.contains(&key.key) && !row.hash.contains("admin-secret"));
        }
        assert_eq!(
            t.authenticate(Some(&basic(&format!("{}:wrong", key.uuid))))
                .err(),
            Some(AuthError::Invalid)
        );
        assert_eq!(
            t.authenticate(Some(&basic("nobody:admin-secret"))).err(),
            Some(AuthError::Invalid)
        );
        assert!(t.create_key(&reg, "missing").is_err());
    }

    #[test]
    fn a_new_admin_key_replaces_the_old_one() {
        let reg = Registry::open_in_memory().unwrap();
        let old = ApiKey::parse("old:one", "guest").unwrap();
        Tenants::load(&reg, &old).unwrap();
        let new = ApiKey::parse("new:two", "guest").unwrap();
        let t = Tenants::load(&reg, &new).unwrap();
        assert!(t.authenticate(Some(&basic("old:one"))).is_err());
        assert!(t.authenticate(Some(&basic("new:two"))).unwrap().admin);
    }

    #[test]
    fn namespace_names_follow_openwhisk() {
        for ok in ["alpha", "team_1", "a.b-c@d", "_x"] {
            assert!(check_namespace_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "_", "a/b", "-a", "a b", &"x".repeat(257)] {
            assert!(check_namespace_name(bad).is_err(), "{bad}");
        }
    }
}
