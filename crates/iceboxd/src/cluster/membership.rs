//! Who may join (same cluster, same admin key, a free node id), and every node's view of the
//! live members: a node whose lease lapses (killed, stopped, cut off) disappears from
//! everyone's placement when etcd deletes its record. (Keeping this node's own record alive is
//! `cluster_sync::membership`.)

use super::store::{follow, Change, Follower, Item, Store};
use super::{Cluster, ClusterConfig, Keys, Member};
use anyhow::Context;
use etcd_client::{Compare, CompareOp, Txn, TxnOp};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::watch;

/// The file in a state directory naming the cluster it joined.
const JOINED_FILE: &str = "cluster.json";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Meta {
    cluster_id: String,
    /// SHA-256 of the admin key (`uuid:key`): nodes with different keys could not forward.
    key_fingerprint: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Joined {
    cluster_id: String,
    prefix: String,
}

fn fingerprint(admin_key: &str) -> String {
    Sha256::digest(admin_key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Refuses a node that does not belong: another cluster's state directory, another admin key,
/// or a node id a live node with another address holds. The first node creates the cluster.
pub async fn check_identity(
    store: &Store,
    keys: &Keys,
    cfg: &ClusterConfig,
    admin_key: &str,
    state_dir: &Path,
) -> anyhow::Result<()> {
    let ours = Meta {
        cluster_id: crate::auth::uuid_v4(),
        key_fingerprint: fingerprint(admin_key),
    };
    let meta_key = keys.meta();
    let created = store
        .client()
        .txn(
            Txn::new()
                .when([Compare::create_revision(
                    meta_key.clone(),
                    CompareOp::Equal,
                    0,
                )])
                .and_then([TxnOp::put(
                    meta_key.clone(),
                    serde_json::to_vec(&ours)?,
                    None,
                )]),
        )
        .await
        .with_context(|| format!("cannot reach etcd at {}", store.endpoints()))?
        .succeeded();
    let meta: Meta = if created {
        tracing::info!(prefix = %cfg.prefix, "created a new cluster {}", ours.cluster_id);
        ours.clone()
    } else {
        let read = store
            .client()
            .get(meta_key.clone(), None)
            .await
            .with_context(|| format!("cannot reach etcd at {}", store.endpoints()))?;
        let kv = read
            .kvs()
            .first()
            .context("the cluster's meta key vanished while joining")?;
        serde_json::from_slice(kv.value())
            .with_context(|| format!("{meta_key} in etcd is not an icebox cluster's meta record"))?
    };
    if meta.key_fingerprint != ours.key_fingerprint {
        anyhow::bail!(
            "refusing to join the cluster under prefix {} (etcd {}): this node's admin key \
             (--auth) differs from the cluster's; every node of a cluster needs the same key",
            cfg.prefix,
            store.endpoints()
        );
    }
    check_state_dir(state_dir, &meta, cfg)?;
    check_node_id(store, keys, cfg).await
}

/// A state directory holds one cluster's cached actions and activation records: joining
/// another cluster with it would serve the wrong actions.
fn check_state_dir(state_dir: &Path, meta: &Meta, cfg: &ClusterConfig) -> anyhow::Result<()> {
    let path = state_dir.join(JOINED_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => {
            let joined: Joined = serde_json::from_slice(&bytes)
                .with_context(|| format!("{} is not readable", path.display()))?;
            if joined.cluster_id != meta.cluster_id {
                anyhow::bail!(
                    "refusing to join: the state directory {} belongs to cluster {} (etcd prefix \
                     {}), but prefix {} holds cluster {}; use that cluster's prefix, or a fresh \
                     state directory",
                    state_dir.display(),
                    joined.cluster_id,
                    joined.prefix,
                    cfg.prefix,
                    meta.cluster_id
                );
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let joined = Joined {
                cluster_id: meta.cluster_id.clone(),
                prefix: cfg.prefix.clone(),
            };
            std::fs::write(&path, serde_json::to_vec_pretty(&joined)?)
                .with_context(|| format!("cannot write {}", path.display()))
        }
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Two live nodes with one id would overwrite each other's record and warm keys. The same id at
/// the same address is this node restarted before its old lease lapsed: that is fine.
async fn check_node_id(store: &Store, keys: &Keys, cfg: &ClusterConfig) -> anyhow::Result<()> {
    let read = store
        .client()
        .get(keys.node(&cfg.node_id), None)
        .await
        .with_context(|| format!("cannot reach etcd at {}", store.endpoints()))?;
    if let Some(kv) = read.kvs().first() {
        if let Ok(other) = serde_json::from_slice::<Member>(kv.value()) {
            if other.url != cfg.advertise {
                anyhow::bail!(
                    "refusing to join: node id '{}' is in use by a live node at {} (this node \
                     advertises {}); give each node its own --node-id",
                    cfg.node_id,
                    other.url,
                    cfg.advertise
                );
            }
        }
    }
    Ok(())
}

struct Members(Arc<Cluster>);

#[async_trait::async_trait]
impl Follower for Members {
    async fn reset(&mut self, items: Vec<Item>) {
        let cluster = &self.0;
        let me = cluster.node_id().to_string();
        let mut members = cluster.members.write().unwrap();
        let mine = members.remove(&me);
        members.clear();
        for item in items {
            if let Ok(m) = serde_json::from_slice::<Member>(&item.value) {
                members.insert(m.id.clone(), m);
            }
        }
        if let (Some(mine), false) = (mine, members.contains_key(&me)) {
            if cluster.lease.load(Ordering::SeqCst) != 0 {
                members.insert(me, mine);
            }
        }
    }

    async fn change(&mut self, change: Change) {
        let cluster = &self.0;
        let nodes = cluster.keys().nodes();
        match change {
            Change::Put(item) => {
                if let Ok(m) = serde_json::from_slice::<Member>(&item.value) {
                    cluster.members.write().unwrap().insert(m.id.clone(), m);
                }
            }
            Change::Delete(key) => {
                if let Some(id) = Keys::rest(&key, &nodes) {
                    if cluster.members.write().unwrap().remove(id).is_some() {
                        tracing::info!(
                            node = id,
                            "a cluster node left (its lease lapsed or it stopped)"
                        );
                    }
                    if id == cluster.node_id() {
                        // Our own lease is gone: register again under a new one.
                        cluster.lease.store(0, Ordering::SeqCst);
                    }
                }
            }
        }
    }
}

pub async fn watch_members(cluster: Arc<Cluster>, stop: watch::Receiver<bool>) {
    let prefix = cluster.keys().nodes();
    follow(&cluster.clone(), prefix, Members(cluster), stop).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_differ_by_key_and_hide_it() {
        let a = fingerprint("u:k1");
        assert_eq!(a.len(), 64);
        assert_ne!(a, fingerprint("u:k2"));
        assert!(!a.contains("k1"));
    }
}
