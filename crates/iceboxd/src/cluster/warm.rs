//! Which node holds an idle instance of which action: each node publishes its own under its
//! lease (so a dead node's entries vanish with it) and follows everyone's. Placement reads
//! this to send an invocation where it is a warm start.

use super::store::{follow, Change, Follower, Item};
use crate::state::AppState;
use etcd_client::PutOptions;
use icebox_core::EventKind;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// Fast enough that the next invocation after a release usually sees it; each round costs one
/// walk over the instances and etcd writes only for what changed.
const PUBLISH_EVERY: Duration = Duration::from_millis(250);

fn warm_actions(state: &AppState) -> BTreeSet<String> {
    state
        .pool
        .instance_views()
        .into_iter()
        .filter(|v| v.state.is_kept_alive() && v.action.contains('/'))
        .map(|v| v.action)
        .collect()
}

pub async fn publish(state: AppState, mut stop: watch::Receiver<bool>) {
    let cluster = state.cluster.clone().expect("cluster mode");
    let me = cluster.node_id().to_string();
    let mut published: BTreeSet<String> = BTreeSet::new();
    let mut published_lease = 0;
    // An instance going idle is published at once (a burst's next invocation should find it);
    // the timer catches evictions and anything the bounded event channel dropped.
    let (_, mut events) = state.events.subscribe(u64::MAX);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            () = tokio::time::sleep(PUBLISH_EVERY) => {}
            event = events.recv() => match event {
                Ok(e) if e.kind == EventKind::Idle && !published.contains(&e.action) => {}
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return,
            },
        }
        let lease = cluster.lease.load(Ordering::SeqCst);
        if lease == 0 {
            continue;
        }
        if lease != published_lease {
            // The old lease took its keys with it.
            published.clear();
            published_lease = lease;
        }
        let now = warm_actions(&state);
        for fqn in now.difference(&published).cloned().collect::<Vec<_>>() {
            let key = cluster.keys().warm(&fqn, &me);
            let put = cluster
                .etcd(|s| {
                    let key = key.clone();
                    async move {
                        s.client()
                            .put(key, Vec::new(), Some(PutOptions::new().with_lease(lease)))
                            .await
                    }
                })
                .await;
            if put.is_ok() {
                published.insert(fqn);
            }
        }
        for fqn in published.difference(&now).cloned().collect::<Vec<_>>() {
            let key = cluster.keys().warm(&fqn, &me);
            if cluster
                .etcd(|s| {
                    let key = key.clone();
                    async move { s.client().delete(key, None).await }
                })
                .await
                .is_ok()
            {
                published.remove(&fqn);
            }
        }
    }
}

struct Warm(AppState);

impl Warm {
    fn map(&self) -> &std::sync::RwLock<HashMap<String, BTreeSet<String>>> {
        &self.0.cluster.as_ref().expect("cluster mode").warm
    }
}

#[async_trait::async_trait]
impl Follower for Warm {
    async fn reset(&mut self, items: Vec<Item>) {
        let keys = self.0.cluster.as_ref().expect("cluster mode").keys();
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
        let keys = self.0.cluster.as_ref().expect("cluster mode").keys();
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

pub async fn watch(state: AppState, stop: watch::Receiver<bool>) {
    let cluster = state.cluster.clone().expect("cluster mode");
    let prefix = cluster.keys().warm_all();
    follow(&cluster, prefix, Warm(state), stop).await;
}
