//! Snapshots as a pool component: a cold start restores from the action's snapshot when it
//! has one (and asks for one to be built when it has none); the first restore's activation is
//! recorded into the snapshot's loading set; a restored instance whose pager failed discards
//! the snapshot.

use super::SnapshotBooks;
use crate::pool::backends::Isolation;
use crate::pool::component::{Component, Provided};
use crate::pool::instance::Instance;
use crate::pool::{EvictReason, Pool};
use async_trait::async_trait;
use icebox_core::api::SnapshotView;
use icebox_core::ActionSpec;
use icebox_sandbox::InstanceSpec;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The snapshots component: the books, and building/restoring through the backends.
pub struct ActionSnapshots {
    pub(in crate::pool) books: SnapshotBooks,
}

/// A restored instance's snapshot (its per-instance state).
pub struct RestoredFrom {
    /// The snapshot's image directory (where the loading set is written after recording).
    pub image_dir: PathBuf,
    /// The action version the snapshot is of.
    pub version: String,
    /// Its first activation is being recorded for the snapshot's loading set (FaaSnap).
    pub recording: AtomicBool,
}

impl ActionSnapshots {
    pub fn new(books: SnapshotBooks) -> ActionSnapshots {
        ActionSnapshots { books }
    }

    /// Every action's snapshot, by action.
    pub fn views(&self) -> Vec<SnapshotView> {
        self.books.views()
    }
}

#[async_trait]
impl Component for ActionSnapshots {
    fn name(&self) -> &'static str {
        "snapshots"
    }

    fn technique(&self) -> Option<icebox_policy::Technique> {
        Some(icebox_policy::Technique::Snapshot)
    }

    /// Keeps the snapshots an earlier run took of these actions (same version), deletes the
    /// rest, and builds the missing ones.
    async fn on_node_start(&self, pool: &Arc<Pool>, actions: &[Arc<ActionSpec>]) {
        self.take_over(pool, actions);
    }

    fn on_action_deployed(&self, pool: &Arc<Pool>, action: &Arc<ActionSpec>) {
        self.build_if_missing(pool, action);
    }

    fn on_action_retired(&self, _pool: &Pool, fqn: &str) {
        self.books.forget(fqn);
    }

    async fn provide(
        &self,
        pool: &Arc<Pool>,
        action: &Arc<ActionSpec>,
        isolation: Isolation,
        spec: &InstanceSpec,
    ) -> Option<Provided> {
        if let Some(restored) = self.restore(pool, action, isolation, spec).await {
            return Some(restored);
        }
        self.build_if_missing(pool, action);
        None
    }

    fn on_release(&self, pool: &Arc<Pool>, instance: &Arc<Instance>) {
        self.finish_recording(pool, instance);
    }

    /// Gone before its recording was finished: another restore may record.
    fn on_evict(&self, _pool: &Pool, instance: &Instance, _reason: EvictReason) {
        self.abandon_recording(instance);
    }

    fn on_destroyed(&self, pool: &Pool, instance: &Instance) {
        self.check_restored_memory(pool, instance);
    }
}
