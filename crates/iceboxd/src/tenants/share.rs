//! The keep-alive memory share of a namespace: what its idle and frozen instances may be
//! charged together. Over its share, a namespace's own least recently used instances go,
//! never a neighbour's. Pure: the caller measures and evicts.

use std::collections::HashMap;

/// A kept-alive instance as the share policy sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptAlive {
    pub id: String,
    pub namespace: String,
    pub charged: u64,
    /// How long it has been idle: the longest idle goes first.
    pub idle_ms: u64,
}

/// Instances to evict so that every namespace with a share is back within it.
pub fn over_share(instances: &[KeptAlive], shares: &HashMap<String, u64>) -> Vec<String> {
    let mut by_namespace: HashMap<&str, Vec<&KeptAlive>> = HashMap::new();
    for i in instances {
        by_namespace.entry(&i.namespace).or_default().push(i);
    }
    let mut evict = Vec::new();
    for (namespace, mut list) in by_namespace {
        let Some(&share) = shares.get(namespace) else {
            continue;
        };
        let mut total: u64 = list.iter().map(|i| i.charged).sum();
        list.sort_by(|a, b| b.idle_ms.cmp(&a.idle_ms).then(a.id.cmp(&b.id)));
        for i in list {
            if total <= share {
                break;
            }
            total = total.saturating_sub(i.charged);
            evict.push(i.id.clone());
        }
    }
    evict.sort();
    evict
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::units::{GIB, MIB};

    fn kept(id: &str, ns: &str, mib: u64, idle_ms: u64) -> KeptAlive {
        KeptAlive {
            id: id.into(),
            namespace: ns.into(),
            charged: mib * MIB,
            idle_ms,
        }
    }

    #[test]
    fn only_the_namespace_over_its_share_loses_its_longest_idle_instances() {
        let list = [
            kept("a1", "a", 100, 5_000),
            kept("a2", "a", 100, 9_000),
            kept("a3", "a", 100, 1_000),
            kept("b1", "b", 500, 99_000),
        ];
        let shares = HashMap::from([("a".to_string(), 150 * MIB), ("b".to_string(), GIB)]);
        assert_eq!(over_share(&list, &shares), ["a1", "a2"]);
    }

    #[test]
    fn a_namespace_without_a_share_is_left_alone() {
        let list = [kept("c1", "c", 4096, 1)];
        assert!(over_share(&list, &HashMap::new()).is_empty());
    }
}
