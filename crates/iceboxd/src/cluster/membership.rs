//! A node's membership: who may join (same cluster, same admin key), its record under a lease
//! kept alive every third of the lease, and every node's view of the live members. A node
//! whose lease lapses (killed, stopped, cut off) disappears from everyone's placement when
//! etcd deletes its keys; it re-registers under a new lease when it can reach etcd again.

use super::store::{follow, Change, Follower, Item, Store};
use super::{ClusterConfig, Keys, Member};
use crate::state::AppState;
use anyhow::Context;
use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::watch;

/// The file in a state directory naming the cluster it joined.
const JOINED_FILE: &str = "cluster.json";
/// How long one keep-alive answer may take before the lease is treated as in doubt.
const KEEP_ALIVE_ANSWER: Duration = Duration::from_secs(2);

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

/// What this node tells the others about itself now.
fn record(state: &AppState) -> Member {
    let cluster = state.cluster.as_ref().expect("cluster mode");
    let memory = state.pool.memory_view();
    let views = state.pool.instance_views();
    let warm = views.iter().filter(|v| v.state.is_kept_alive()).count();
    let in_flight = views.iter().map(|v| u64::from(v.in_flight)).sum();
    Member {
        id: cluster.cfg.node_id.clone(),
        url: cluster.cfg.advertise.clone(),
        kinds: state.pool.runtimes().kinds(),
        budget: memory.budget,
        charged: memory.charged,
        memory_by_state: memory
            .by_state
            .iter()
            .map(|(s, m)| (s.clone(), m.memory.uss))
            .collect(),
        instances: state.pool.instance_count(),
        warm,
        in_flight,
        version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// A new lease and the record under it.
pub async fn register(state: &AppState) -> anyhow::Result<()> {
    let cluster = state.cluster.as_ref().expect("cluster mode");
    let ttl = i64::try_from(cluster.cfg.lease.as_secs().max(1)).unwrap_or(i64::MAX);
    let lease = cluster
        .etcd(|s| async move { s.client().lease_grant(ttl, None).await })
        .await?
        .id();
    cluster.lease.store(lease, Ordering::SeqCst);
    put_record(state, lease).await?;
    Ok(())
}

async fn put_record(state: &AppState, lease: i64) -> Result<(), super::ClusterError> {
    let cluster = state.cluster.as_ref().expect("cluster mode");
    let me = record(state);
    let value = serde_json::to_vec(&me).unwrap_or_default();
    let key = cluster.keys().node(&me.id);
    cluster
        .etcd(|s| {
            let (key, value) = (key.clone(), value.clone());
            async move {
                s.client()
                    .put(key, value, Some(PutOptions::new().with_lease(lease)))
                    .await
            }
        })
        .await?;
    // Our own record counts at once: placement must not wait for the watch to see us.
    cluster.members.write().unwrap().insert(me.id.clone(), me);
    Ok(())
}

/// Keeps the lease alive and the record fresh until `stop`; after a lapse (etcd unreachable for
/// longer than the lease) registers again.
pub async fn keep(state: AppState, mut stop: watch::Receiver<bool>) {
    let cluster = state.cluster.clone().expect("cluster mode");
    let period = (cluster.cfg.lease / 3).max(Duration::from_millis(200));
    let mut keeper: Option<(etcd_client::LeaseKeeper, etcd_client::LeaseKeepAliveStream)> = None;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            () = tokio::time::sleep(period) => {}
        }
        let lease = cluster.lease.load(Ordering::SeqCst);
        if lease == 0 {
            if let Err(e) = register(&state).await {
                tracing::debug!("cannot register with the cluster yet: {e:#}");
            }
            continue;
        }
        match keep_alive_once(&cluster, lease, &mut keeper).await {
            Ok(true) => {
                if let Err(e) = put_record(&state, lease).await {
                    tracing::debug!("cannot refresh this node's record: {e}");
                }
            }
            Ok(false) => {
                tracing::warn!("this node's cluster lease lapsed: registering again");
                keeper = None;
                cluster.lease.store(0, Ordering::SeqCst);
            }
            Err(why) => {
                keeper = None;
                cluster.etcd_failed(&why);
            }
        }
    }
}

/// Ok(false) when etcd says the lease is gone.
async fn keep_alive_once(
    cluster: &super::Cluster,
    lease: i64,
    keeper: &mut Option<(etcd_client::LeaseKeeper, etcd_client::LeaseKeepAliveStream)>,
) -> Result<bool, String> {
    if keeper.is_none() {
        let pair = tokio::time::timeout(
            KEEP_ALIVE_ANSWER,
            cluster.store().client().lease_keep_alive(lease),
        )
        .await
        .map_err(|_| "no answer to a lease keep-alive".to_string())?
        .map_err(|e| e.to_string())?;
        *keeper = Some(pair);
    }
    let (k, stream) = keeper.as_mut().expect("set above");
    k.keep_alive().await.map_err(|e| e.to_string())?;
    let answer = tokio::time::timeout(KEEP_ALIVE_ANSWER, stream.message())
        .await
        .map_err(|_| "no answer to a lease keep-alive".to_string())?
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "the lease keep-alive stream ended".to_string())?;
    cluster.etcd_ok();
    Ok(answer.ttl() > 0)
}

struct Members(AppState);

#[async_trait::async_trait]
impl Follower for Members {
    async fn reset(&mut self, items: Vec<Item>) {
        let cluster = self.0.cluster.as_ref().expect("cluster mode");
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
        let cluster = self.0.cluster.as_ref().expect("cluster mode");
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

pub async fn watch_members(state: AppState, stop: watch::Receiver<bool>) {
    let cluster = state.cluster.clone().expect("cluster mode");
    let prefix = cluster.keys().nodes();
    follow(&cluster, prefix, Members(state), stop).await;
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
