//! The snapshot books on their own: which restore a cold start gets, one recording per
//! snapshot, failures and their backoff, persistence across a restart.

use super::*;
use icebox_core::{ActionLimits, Exec, KeyValue};
use serde_json::json;

fn action(version: &str, annotations: &[(&str, serde_json::Value)]) -> ActionSpec {
    ActionSpec {
        namespace: "guest".into(),
        name: "a".into(),
        exec: Exec {
            kind: "python:3".into(),
            code: String::new(),
            binary: false,
            main: None,
            sha256: None,
        },
        limits: ActionLimits::default(),
        parameters: vec![],
        annotations: annotations
            .iter()
            .map(|(k, v)| KeyValue {
                key: k.to_string(),
                value: v.clone(),
            })
            .collect(),
        version: version.into(),
        updated: 0,
    }
}

fn snap(version: &str) -> ActionSpec {
    action(version, &[("icebox.snapshot", json!(true))])
}

fn books(dir: &Path) -> SnapshotBooks {
    SnapshotBooks::new(SnapshotConfig {
        enabled: true,
        restore: RestoreMode::Faasnap,
        state_dir: dir.to_path_buf(),
    })
}

fn info() -> SnapshotInfo {
    SnapshotInfo {
        backend: "crun".into(),
        memory_bytes: 1 << 20,
        took_ms: 40,
    }
}

/// Builds a snapshot of `a` the way build.rs does, minus the backend.
fn build(b: &SnapshotBooks, a: &ActionSpec) {
    assert!(b.start_build(a, Isolation::Process));
    let scratch = b.scratch(&a.fqn()).unwrap();
    b.built(a, Isolation::Process, &scratch, info()).unwrap();
}

fn view(instance: &str, mode: RestoreMode) -> RestoreView {
    RestoreView {
        instance: instance.into(),
        mode,
        ms: 5,
        at_ms: 1,
    }
}

#[test]
fn only_actions_that_ask_are_snapshotted() {
    let dir = tempfile::tempdir().unwrap();
    let b = books(dir.path());
    assert!(!b.start_build(&action("0.0.1", &[]), Isolation::Process));
    assert!(b.start_build(&snap("0.0.1"), Isolation::Process));
    // Already building: not twice.
    assert!(!b.start_build(&snap("0.0.1"), Isolation::Process));
    assert!(b.plan(&snap("0.0.1"), Isolation::Process).is_none());
}

#[test]
fn the_first_restore_records_and_the_others_wait_lazily_for_the_loading_set() {
    let dir = tempfile::tempdir().unwrap();
    let b = books(dir.path());
    let a = snap("0.0.1");
    build(&b, &a);
    let key = (a.fqn(), Isolation::Process);
    let first = b.plan(&a, Isolation::Process).unwrap();
    assert_eq!(first.mode, RestoreMode::Record);
    assert!(first.image_dir.starts_with(dir.path()));
    assert_eq!(
        b.plan(&a, Isolation::Process).unwrap().mode,
        RestoreMode::Lazy
    );
    b.restored(&key, "0.0.1", view("i1", RestoreMode::Record));
    assert_eq!(b.views()[0].recording.as_deref(), Some("i1"));

    b.recorded(&key, "0.0.1", LoadingSetInfo::default())
        .unwrap();
    assert_eq!(
        b.plan(&a, Isolation::Process).unwrap().mode,
        RestoreMode::Faasnap
    );
    let v = &b.views()[0];
    assert_eq!((v.restores, v.recording.clone()), (1, None));
    assert!(v.loading_set.is_some());
}

#[test]
fn an_abandoned_recording_lets_the_next_restore_record() {
    let dir = tempfile::tempdir().unwrap();
    let b = books(dir.path());
    let a = snap("0.0.1");
    build(&b, &a);
    let key = (a.fqn(), Isolation::Process);
    assert_eq!(
        b.plan(&a, Isolation::Process).unwrap().mode,
        RestoreMode::Record
    );
    b.restored(&key, "0.0.1", view("i1", RestoreMode::Record));
    // Another instance's end does not free the recording…
    b.recording_abandoned(&key, Some("i2"));
    assert_eq!(
        b.plan(&a, Isolation::Process).unwrap().mode,
        RestoreMode::Lazy
    );
    // …the recording one's does.
    b.recording_abandoned(&key, Some("i1"));
    assert_eq!(
        b.plan(&a, Isolation::Process).unwrap().mode,
        RestoreMode::Record
    );
}

#[test]
fn modes_that_need_no_loading_set_never_record() {
    let dir = tempfile::tempdir().unwrap();
    let b = books(dir.path());
    let a = action(
        "0.0.1",
        &[
            ("icebox.snapshot", json!(true)),
            ("icebox.snapshot_restore", json!("eager")),
        ],
    );
    build(&b, &a);
    assert_eq!(
        b.plan(&a, Isolation::Process).unwrap().mode,
        RestoreMode::Eager
    );
}

#[test]
fn a_failed_restore_discards_the_snapshot_and_backs_off() {
    let dir = tempfile::tempdir().unwrap();
    let b = books(dir.path());
    let a = snap("0.0.1");
    build(&b, &a);
    let plan = b.plan(&a, Isolation::Process).unwrap();
    let snapshot_dir = plan.image_dir.parent().unwrap().to_path_buf();
    assert!(snapshot_dir.exists());
    b.fail(
        &(a.fqn(), Isolation::Process),
        "0.0.1",
        "corrupt".into(),
        true,
    );
    assert!(!snapshot_dir.exists());
    assert!(b.plan(&a, Isolation::Process).is_none());
    let v = &b.views()[0];
    assert_eq!((v.state.as_str(), v.fallbacks), ("failed", 1));
    assert_eq!(v.reason.as_deref(), Some("corrupt"));
    // A first failure is rebuilt at once (its history kept); a second in a row backs off.
    build(&b, &a);
    let v = &b.views()[0];
    assert_eq!((v.state.as_str(), v.fallbacks), ("ready", 1));
    b.plan(&a, Isolation::Process).unwrap();
    b.fail(
        &(a.fqn(), Isolation::Process),
        "0.0.1",
        "corrupt again".into(),
        true,
    );
    assert!(!b.start_build(&a, Isolation::Process));
    assert_eq!(b.views()[0].state, "failed");
}

#[test]
fn a_requested_build_skips_the_backoff_and_resets_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = books(dir.path());
    let a = snap("0.0.1");
    let key = (a.fqn(), Isolation::Process);
    for _ in 0..2 {
        assert!(b.start_build(&a, Isolation::Process));
        b.fail(&key, "0.0.1", "the template did not start".into(), false);
    }
    assert!(!b.start_build(&a, Isolation::Process), "backing off");
    assert!(b.request_build(&a, Isolation::Process));
    assert_eq!(b.views()[0].state, "building");
    // Nothing more to do while it builds or once it is ready.
    assert!(!b.request_build(&a, Isolation::Process));
    // Its backoff starts over: a failure now is retried at once.
    b.fail(&key, "0.0.1", "the template did not start".into(), false);
    assert!(b.start_build(&a, Isolation::Process));
}

#[test]
fn retries_back_off_exponentially_up_to_a_cap() {
    assert_eq!(retry_after(1), Duration::ZERO);
    assert_eq!(retry_after(2), RETRY_FIRST);
    assert_eq!(retry_after(3), RETRY_FIRST * 2);
    assert_eq!(retry_after(30), RETRY_MAX);
}

#[test]
fn a_new_version_replaces_the_old_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let b = books(dir.path());
    build(&b, &snap("0.0.1"));
    let old = b
        .plan(&snap("0.0.1"), Isolation::Process)
        .unwrap()
        .image_dir;
    assert!(b.plan(&snap("0.0.2"), Isolation::Process).is_none());
    build(&b, &snap("0.0.2"));
    assert!(!old.exists());
    assert_eq!(b.views().len(), 1);
    assert_eq!(b.views()[0].version, "0.0.2");
}

#[test]
fn snapshots_survive_a_restart_of_the_daemon_for_the_same_version_only() {
    let dir = tempfile::tempdir().unwrap();
    let a = snap("0.0.1");
    let image_dir = {
        let b = books(dir.path());
        build(&b, &a);
        let key = (a.fqn(), Isolation::Process);
        b.recorded(&key, "0.0.1", LoadingSetInfo::default())
            .unwrap();
        b.plan(&a, Isolation::Process).unwrap().image_dir
    };
    let b = books(dir.path());
    b.load(|fqn| (fqn == "guest/a").then(|| "0.0.1".to_string()));
    let plan = b.plan(&a, Isolation::Process).unwrap();
    assert_eq!(
        (plan.image_dir, plan.mode),
        (image_dir.clone(), RestoreMode::Faasnap)
    );

    let b = books(dir.path());
    b.load(|_| Some("0.0.2".to_string()));
    assert!(b.views().is_empty());
    assert!(!image_dir.exists());
}

#[test]
fn forgetting_an_action_deletes_its_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let b = books(dir.path());
    let a = snap("0.0.1");
    build(&b, &a);
    let image_dir = b.plan(&a, Isolation::Process).unwrap().image_dir;
    assert_eq!(b.forget("guest/a"), 1);
    assert!(!image_dir.exists());
    assert_eq!(b.forget("guest/a"), 0);
}

#[test]
fn off_means_off() {
    let dir = tempfile::tempdir().unwrap();
    let b = SnapshotBooks::new(SnapshotConfig {
        enabled: false,
        restore: RestoreMode::Faasnap,
        state_dir: dir.path().to_path_buf(),
    });
    assert!(!b.start_build(&snap("0.0.1"), Isolation::Process));
}
