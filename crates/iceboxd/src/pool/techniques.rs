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
use icebox_policy::{OffloadMode, ReclaimMode, Technique, TechniqueSet};
use std::sync::Arc;

/// The techniques the node's flags offer (what `--techniques auto` chooses among).
pub(super) fn available(cfg: &PoolConfig, backends: &Backends) -> TechniqueSet {
    let mut set = TechniqueSet::EMPTY;
    if cfg.reclaim_mode != ReclaimMode::Vanilla {
        set.insert(Technique::Reclaim);
    }
    if cfg.offload.mode != OffloadMode::None && cfg.offload_pool.present() {
        set.insert(Technique::Offload);
    }
    if cfg.snapshots.enabled && backends.all().iter().any(|b| b.snapshots().is_some()) {
        set.insert(Technique::Snapshot);
    }
    if !cfg.prewarm.is_empty() {
        set.insert(Technique::Stemcell);
    }
    // Sharing needs no node resource: the action's concurrency and annotation say.
    set.insert(Technique::Sharing);
    set
}

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
