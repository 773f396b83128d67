//! Which node holds an idle instance of which action, as every node follows it: each node
//! publishes its own under its lease (`cluster_sync::warm`), so a dead node's entries vanish
//! with it. Placement reads this to send an invocation where it is a warm start.

use super::store::{follow, Change, Follower, Item};
use super::Cluster;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use tokio::sync::watch;

struct Warm(Arc<Cluster>);

impl Warm {
    fn map(&self) -> &std::sync::RwLock<HashMap<String, BTreeSet<String>>> {
        &self.0.warm
    }
}

#[async_trait::async_trait]
impl Follower for Warm {
    async fn reset(&mut self, items: Vec<Item>) {
        let keys = self.0.keys();
        let mut next: HashMap<String, BTreeSet<String>> = HashMap::new();
        for item in items {
            if let Some((fqn, node)) = keys.parse_warm(&item.key) {
                next.entry(fqn.to_string())
                    .or_default()
                    .insert(node.to_string());
            }
        }
        *self.map().write().unwrap() = next;
    }

    async fn change(&mut self, change: Change) {
        let keys = self.0.keys();
        let mut map = self.map().write().unwrap();
        match change {
            Change::Put(item) => {
                if let Some((fqn, node)) = keys.parse_warm(&item.key) {
                    map.entry(fqn.to_string())
                        .or_default()
                        .insert(node.to_string());
                }
            }
            Change::Delete(key) => {
                if let Some((fqn, node)) = keys.parse_warm(&key) {
                    if let Some(nodes) = map.get_mut(fqn) {
                        nodes.remove(node);
                        if nodes.is_empty() {
                            map.remove(fqn);
                        }
                    }
                }
            }
        }
    }
}

pub async fn watch(cluster: Arc<Cluster>, stop: watch::Receiver<bool>) {
    let prefix = cluster.keys().warm_all();
    follow(&cluster.clone(), prefix, Warm(cluster), stop).await;
}
