//! Keeps this node and its cluster in step: registers it and keeps its record alive, publishes
//! its warm instances, mirrors the shared actions, namespaces and keys into its registry. The
//! cluster itself (etcd, members, placement, forwarding) is `crate::cluster`; this is the part
//! that reads and changes the node.

mod membership;
mod mirror;
mod warm;

pub use mirror::inline_code;

use crate::state::AppState;
use icebox_core::ActionSpec;
use std::sync::Arc;

/// Registers the node, mirrors the shared state into the local registry, and keeps both
/// current until `stop`.
pub async fn start(
    state: &AppState,
    stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let cluster = state
        .cluster
        .clone()
        .expect("start is only called in cluster mode");
    mirror::resync(state).await?;
    membership::register(state).await?;
    cluster.follow(&stop);
    tokio::spawn(membership::keep(state.clone(), stop.clone()));
    tokio::spawn(warm::publish(state.clone(), stop.clone()));
    tokio::spawn(mirror::watch(state.clone(), stop));
    tracing::info!(
        node = %cluster.cfg.node_id,
        prefix = %cluster.cfg.prefix,
        "joined the cluster (placement {})",
        cluster.cfg.placement
    );
    Ok(())
}

/// The node's cached action, or on a cluster node one deployed elsewhere that this node's
/// mirror has not caught up with yet (read from etcd and mirrored now: a deploy on one node is
/// invocable on every node at once).
pub async fn find_action(state: &AppState, namespace: &str, name: &str) -> Option<Arc<ActionSpec>> {
    if let Some(found) = state.action(namespace, name) {
        return Some(found);
    }
    if state.cluster.is_some() {
        return mirror::fetch_action(state, namespace, name).await;
    }
    None
}
