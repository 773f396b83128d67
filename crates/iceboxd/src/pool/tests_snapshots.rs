//! The pool's snapshot flow against the in-memory backend (tests.rs), whose fake snapshots
//! are a file: built in the background after a cold start, the first restore recorded and
//! the next ones prefetched, a corrupt snapshot falling back to a normal start. The real
//! thing (CRIU, the pager) is tested in icebox-sandbox and tests/integration.

use super::snapshots::ActionSnapshots;
use super::tests::{action, eventually, FakeBackend, Harness, Setup};
use super::*;
use async_trait::async_trait;
use icebox_core::{ActionSpec, KeyValue, LoadingSetInfo, RestoreMode, SnapshotInfo};
use icebox_sandbox::{InstanceSpec, Sandbox, SandboxBackend, SandboxError, Snapshots};
use serde_json::json;
use std::path::Path;
use std::sync::atomic::Ordering;

const SNAPSHOT_FILE: &str = "fake.snapshot";

#[async_trait]
impl Snapshots for FakeBackend {
    async fn snapshot(
        &self,
        sandbox: &Arc<dyn Sandbox>,
        dir: &Path,
    ) -> Result<SnapshotInfo, SandboxError> {
        std::fs::write(dir.join(SNAPSHOT_FILE), sandbox.id())?;
        sandbox.destroy().await;
        self.counters.snapshots.fetch_add(1, Ordering::SeqCst);
        Ok(SnapshotInfo {
            backend: "fake".into(),
            memory_bytes: 4096,
            took_ms: 1,
        })
    }

    async fn restore(
        &self,
        spec: InstanceSpec,
        dir: &Path,
        mode: RestoreMode,
    ) -> Result<Arc<dyn Sandbox>, SandboxError> {
        if !dir.join(SNAPSHOT_FILE).exists() {
            return Err(SandboxError::restore(
                "test",
                std::path::Path::new("/none"),
                "the snapshot is missing",
            ));
        }
        self.counters.restores.lock().unwrap().push(mode);
        self.start(spec).await
    }

    async fn finish_record(
        &self,
        _sandbox: &Arc<dyn Sandbox>,
        dir: &Path,
    ) -> Result<LoadingSetInfo, SandboxError> {
        std::fs::write(dir.join("loading-set"), b"")?;
        self.counters.recorded.fetch_add(1, Ordering::SeqCst);
        Ok(LoadingSetInfo {
            working_set_pages: 3,
            ..Default::default()
        })
    }
}

fn snapshotted(name: &str) -> Arc<ActionSpec> {
    let mut a = (*action(name, "0.0.1")).clone();
    a.annotations.push(KeyValue {
        key: "icebox.snapshot".into(),
        value: json!(true),
    });
    Arc::new(a)
}

fn with_snapshots() -> Harness {
    Harness::new(Setup {
        snapshots: true,
        ..Setup::default()
    })
}

fn snapshot_views(h: &Harness) -> Vec<icebox_core::api::SnapshotView> {
    h.pool.component::<ActionSnapshots>().unwrap().views()
}

fn ready(h: &Harness) -> bool {
    snapshot_views(h).iter().any(|v| v.state == "ready")
}

fn restores(h: &Harness) -> Vec<RestoreMode> {
    h.backend.counters.restores.lock().unwrap().clone()
}

/// A cold start of `a` after every instance of it is gone.
async fn cold_start(h: &Harness, a: &Arc<ActionSpec>) -> Lease {
    for v in h.pool.instance_views() {
        if v.action == a.fqn() {
            h.pool.evict(&v.id, EvictReason::Stale).await;
        }
    }
    let lease = h.lease(a).await;
    assert!(lease.cold);
    lease
}

#[tokio::test]
async fn a_snapshot_is_built_after_the_first_cold_start_then_restored_recorded_and_prefetched() {
    let h = with_snapshots();
    let a = snapshotted("a");
    let first = h.lease(&a).await;
    assert!(
        first.instance.origin.restored_mode().is_none(),
        "no snapshot yet: a normal start"
    );
    first.release(Health::Reusable).await;
    eventually("the snapshot is built", || ready(&h)).await;
    assert_eq!(h.backend.counters.snapshots.load(Ordering::SeqCst), 1);
    // The template ran /init too and is gone.
    assert_eq!(h.backend.counters.inits.load(Ordering::SeqCst), 2);

    let recorded = cold_start(&h, &a).await;
    let restored = recorded.instance.origin.restored_mode().expect("restored");
    assert_eq!(restored, RestoreMode::Record);
    recorded.release(Health::Reusable).await;
    eventually("the loading set is recorded", || {
        h.backend.counters.recorded.load(Ordering::SeqCst) == 1
    })
    .await;
    eventually("the books know it", || {
        snapshot_views(&h)[0].loading_set.is_some()
    })
    .await;

    let prefetched = cold_start(&h, &a).await;
    assert_eq!(
        prefetched.instance.origin.restored_mode().unwrap(),
        RestoreMode::Faasnap
    );
    prefetched.release(Health::Reusable).await;
    assert_eq!(
        restores(&h),
        vec![RestoreMode::Record, RestoreMode::Faasnap]
    );
    // Restored instances never ran /init.
    assert_eq!(h.backend.counters.inits.load(Ordering::SeqCst), 2);
    let v = &snapshot_views(&h)[0];
    assert_eq!((v.restores, v.fallbacks), (2, 0));
}

#[tokio::test]
async fn a_corrupt_snapshot_falls_back_to_a_normal_start_and_says_so() {
    let h = with_snapshots();
    let a = snapshotted("a");
    h.lease(&a).await.release(Health::Reusable).await;
    eventually("the snapshot is built", || ready(&h)).await;
    let image_dir = h
        .pool
        .component::<ActionSnapshots>()
        .unwrap()
        .books
        .plan(&a, super::backends::Isolation::Process)
        .unwrap()
        .image_dir;
    h.pool
        .component::<ActionSnapshots>()
        .unwrap()
        .books
        .recording_abandoned(&(a.fqn(), super::backends::Isolation::Process), None);
    std::fs::remove_file(image_dir.join(SNAPSHOT_FILE)).unwrap();

    let mut events = h.pool.events.subscribe(0).1;
    let lease = cold_start(&h, &a).await;
    assert!(
        lease.instance.origin.restored_mode().is_none(),
        "started normally"
    );
    lease.release(Health::Reusable).await;
    let mut failed = None;
    while let Ok(e) = events.try_recv() {
        if e.kind == icebox_core::EventKind::RestoreFailed {
            failed = e.detail;
        }
    }
    assert!(failed.expect("a restore_failed event").contains("missing"));
    // The bad snapshot is replaced by a new one at once (a first failure is not backed off).
    eventually("the snapshot is rebuilt", || ready(&h)).await;
    assert!(image_dir.join(SNAPSHOT_FILE).exists());
    assert_eq!(snapshot_views(&h)[0].fallbacks, 1);
    assert_eq!(h.backend.counters.snapshots.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn actions_without_the_annotation_are_never_snapshotted() {
    let h = with_snapshots();
    let a = action("plain", "0.0.1");
    h.lease(&a).await.release(Health::Reusable).await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(snapshot_views(&h).is_empty());
    assert_eq!(h.backend.counters.snapshots.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn updating_an_action_discards_its_snapshot() {
    let h = with_snapshots();
    let a = snapshotted("a");
    h.lease(&a).await.release(Health::Reusable).await;
    eventually("the snapshot is built", || ready(&h)).await;
    h.pool.retire_action(&a.fqn()).await;
    assert!(snapshot_views(&h).is_empty());
}

#[tokio::test]
async fn a_recording_instance_that_dies_lets_the_next_restore_record() {
    let h = with_snapshots();
    let a = snapshotted("a");
    h.lease(&a).await.release(Health::Reusable).await;
    eventually("the snapshot is built", || ready(&h)).await;
    let recording = cold_start(&h, &a).await;
    assert_eq!(
        recording.instance.origin.restored_mode().unwrap(),
        RestoreMode::Record
    );
    recording.release(Health::Broken(EvictReason::Error)).await;
    let again = cold_start(&h, &a).await;
    assert_eq!(
        again.instance.origin.restored_mode().unwrap(),
        RestoreMode::Record
    );
    again.release(Health::Reusable).await;
    assert_eq!(h.backend.counters.recorded.load(Ordering::SeqCst), 0);
}
