//! Which components the pool runs, from the node's configuration: one line per technique.
//! The order is the hook order: providers of a ready sandbox first (a snapshot restore beats a
//! stem cell), then the techniques that act on the instance.

use super::backends::Backends;
use super::component::{Component, Components};
use super::desiccant::Desiccant;
use super::host_budget::HostBudget;
use super::hybrid::HybridKeepAlive;
use super::offload::Offload;
use super::prewarm::Prewarm;
use super::sharing::Sharing;
use super::snapshots::{ActionSnapshots, SnapshotBooks};
use super::PoolConfig;
use std::sync::Arc;

pub(super) fn register(cfg: &PoolConfig, backends: &Backends) -> Components {
    let mut list: Vec<Arc<dyn Component>> = Vec::new();
    if backends.all().iter().any(|b| b.memory_budget().is_some()) {
        list.push(Arc::new(HostBudget));
    }
    list.push(Arc::new(ActionSnapshots::new(SnapshotBooks::new(
        cfg.snapshots.clone(),
    ))));
    if !cfg.prewarm.is_empty() {
        list.push(Arc::new(Prewarm::new(cfg.prewarm.clone())));
    }
    list.push(Arc::new(Desiccant::new(
        cfg.reclaim_mode,
        cfg.desiccant,
        cfg.charge,
        cfg.cores,
        cfg.library_pageout,
    )));
    list.push(Arc::new(Offload::new(
        cfg.offload.clone(),
        cfg.offload_pool.clone(),
    )));
    list.push(Arc::new(Sharing));
    if let Some(hybrid) = cfg.hybrid {
        list.push(Arc::new(HybridKeepAlive::new(hybrid)));
    }
    Components::new(list)
}
