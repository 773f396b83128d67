//! The per-action technique choice (choice.rs) against the in-memory backend (tests.rs): the
//! gate keeps a technique away from an action it is off for, `--techniques auto` follows the
//! measurements and says so in an event, and a technique that fails for one action is off for
//! that action only while the action keeps running.

use super::desiccant::Desiccant;
use super::snapshots::ActionSnapshots;
use super::tests::{action, eventually, Harness, Setup};
use super::*;
use icebox_core::api::TechniquesView;
use icebox_core::{EventKind, KeyValue, LifecycleEvent};
use icebox_policy::ReclaimMode;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use tokio::sync::Semaphore;

fn annotated(name: &str, memory: u64, annotations: &[(&str, Value)]) -> Arc<ActionSpec> {
    let mut a = (*action(name, "0.0.1")).clone();
    a.limits.memory = memory;
    for (key, value) in annotations {
        a.annotations.push(KeyValue {
            key: (*key).into(),
            value: value.clone(),
        });
    }
    Arc::new(a)
}

fn techniques_changed(
    events: &mut tokio::sync::broadcast::Receiver<LifecycleEvent>,
) -> Vec<LifecycleEvent> {
    let mut out = Vec::new();
    while let Ok(e) = events.try_recv() {
        if e.kind == EventKind::TechniquesChanged {
            out.push(e);
        }
    }
    out
}

fn view(h: &Harness, a: &ActionSpec) -> TechniquesView {
    h.pool.techniques_view(a)
}

async fn evict_all(h: &Harness, a: &ActionSpec) {
    for v in h.pool.instance_views() {
        if v.action == a.fqn() {
            h.pool.evict(&v.id, EvictReason::Stale).await;
        }
    }
}

#[tokio::test]
async fn an_action_whose_list_leaves_out_stem_cells_starts_fresh_while_one_waits() {
    let h = Harness::new(Setup {
        prewarm: vec![("python:3".into(), 1)],
        ..Setup::default()
    });
    let prewarmed = |h: &Harness| {
        h.pool
            .instance_views()
            .iter()
            .filter(|v| v.state == icebox_core::InstanceState::Prewarmed)
            .count()
    };
    h.pool.refill_prewarm();
    eventually("a stem cell is ready", || prewarmed(&h) == 1).await;
    // Stem cells serve only actions of their memory limit (256 MiB).
    let listed = annotated("listed", 256, &[("icebox.techniques", json!(["reclaim"]))]);
    let lease = h.lease(&listed).await;
    assert_eq!(lease.instance.origin, instance::Origin::Started);
    assert_eq!(prewarmed(&h), 1, "the stem cell was left for others");
    let v = view(&h, &listed);
    assert_eq!(v.mode, "annotation");
    assert!(
        v.on.is_empty(),
        "reclaim is not available on this node: {v:?}"
    );
    assert_eq!(v.reasons["stemcell"], "annotation");
    lease.release(Health::Reusable).await;

    // The same action without the list takes the stem cell (the node's default).
    let plain = annotated("plain", 256, &[]);
    let lease = h.lease(&plain).await;
    assert_eq!(lease.instance.origin, instance::Origin::Prewarmed);
    let v = view(&h, &plain);
    assert_eq!(v.mode, "default");
    assert!(v.on.contains(&"stemcell".to_string()), "{v:?}");
    lease.release(Health::Reusable).await;
    // The view of an instance carries its action's choice.
    let shown = h
        .pool
        .instance_views()
        .into_iter()
        .find(|i| i.action == listed.fqn())
        .and_then(|i| i.techniques)
        .expect("the instance shows its action's techniques");
    assert_eq!(shown.mode, "annotation");
}

#[tokio::test]
async fn auto_turns_snapshots_on_once_starts_are_slow_and_frequent_and_says_so() {
    let gate = Arc::new(Semaphore::new(0));
    let h = Harness::new(Setup {
        snapshots: true,
        techniques: TechniquesMode::Auto,
        init_gate: Some(gate.clone()),
        ..Setup::default()
    });
    // No `icebox.snapshot`: only the choice can turn snapshots on.
    let a = annotated("slow", 128, &[]);
    let mut events = h.pool.events.subscribe(0).1;
    assert_eq!(view(&h, &a).reasons["snapshot"], "start_not_measured");
    for n in 1..=icebox_policy::technique_choice::MIN_COLD_STARTS {
        evict_all(&h, &a).await;
        let pool = h.pool.clone();
        let action = a.clone();
        let starting = tokio::spawn(async move {
            pool.admit(&action)
                .unwrap()
                .lease(Duration::from_secs(30))
                .await
        });
        let inits = usize::try_from(n).unwrap();
        eventually("the runtime is in /init", || {
            h.backend.counters.inits.load(Ordering::SeqCst) == inits
        })
        .await;
        // An /init slower than the snapshot threshold.
        tokio::time::sleep(Duration::from_millis(
            icebox_policy::technique_choice::SLOW_START_MS + 50,
        ))
        .await;
        gate.add_permits(1);
        let lease = starting.await.unwrap().unwrap();
        assert!(lease.cold);
        lease.release(Health::Reusable).await;
        if n < icebox_policy::technique_choice::MIN_COLD_STARTS {
            assert_eq!(view(&h, &a).reasons["snapshot"], "cold_starts_rare");
        }
    }
    let v = view(&h, &a);
    assert!(v.on.contains(&"snapshot".to_string()), "{v:?}");
    assert_eq!(v.reasons["snapshot"], "slow_start_and_cold_often");
    let changed = techniques_changed(&mut events);
    assert_eq!(changed.len(), 1, "{changed:?}");
    let detail = changed[0].detail.clone().unwrap();
    assert!(
        detail.contains("+snapshot (slow_start_and_cold_often)"),
        "{detail}"
    );
    assert_eq!(changed[0].action, a.fqn());

    // The next cold start (as slow) builds the snapshot…
    evict_all(&h, &a).await;
    let pool = h.pool.clone();
    let action = a.clone();
    let starting = tokio::spawn(async move {
        pool.admit(&action)
            .unwrap()
            .lease(Duration::from_secs(30))
            .await
    });
    // Its /init and the snapshot template's (spawned by this cold start) both wait.
    let inits = usize::try_from(icebox_policy::technique_choice::MIN_COLD_STARTS + 2).unwrap();
    eventually("the runtime and the template are in /init", || {
        h.backend.counters.inits.load(Ordering::SeqCst) >= inits
    })
    .await;
    tokio::time::sleep(Duration::from_millis(
        icebox_policy::technique_choice::SLOW_START_MS + 50,
    ))
    .await;
    gate.add_permits(100);
    starting
        .await
        .unwrap()
        .unwrap()
        .release(Health::Reusable)
        .await;
    let snapshots = h.pool.component::<ActionSnapshots>().unwrap();
    eventually("the snapshot is built", || {
        snapshots.views().iter().any(|v| v.state == "ready")
    })
    .await;
    // …and the one after restores from it.
    evict_all(&h, &a).await;
    let lease = h.lease(&a).await;
    assert!(lease.instance.origin.restored_mode().is_some());
    lease.release(Health::Reusable).await;
}

#[tokio::test]
async fn a_reclaim_that_times_out_turns_reclaim_off_for_that_action_only() {
    let h = Harness::new(Setup {
        reclaim_mode: ReclaimMode::Desiccant,
        max_instances: 8,
        ..Setup::default()
    });
    let (hung, other) = (action("hung", "0.0.1"), action("other", "0.0.1"));
    h.backend.hang_reclaim.store(true, Ordering::SeqCst);
    let lease = h.lease(&hung).await;
    let id = lease.instance.id.clone();
    lease.release(Health::Reusable).await;
    h.backend.hang_reclaim.store(false, Ordering::SeqCst);
    h.lease(&other).await.release(Health::Reusable).await;
    let mut events = h.pool.events.subscribe(0).1;

    let desiccant = h.pool.component::<Desiccant>().unwrap();
    let result = desiccant.reclaim(&h.pool, &id, None).await;
    assert!(
        matches!(result, Err(ControlError::Timeout(_))),
        "{result:?}"
    );

    let v = view(&h, &hung);
    assert!(!v.on.contains(&"reclaim".to_string()), "{v:?}");
    assert_eq!(v.reasons["reclaim"], "failed");
    assert!(v.failed["reclaim"].contains("did not answer"), "{v:?}");
    let changed = techniques_changed(&mut events);
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert!(
        changed[0]
            .detail
            .as_deref()
            .unwrap()
            .contains("-reclaim (failed)"),
        "{changed:?}"
    );
    // Nothing else changed: the other action keeps reclaim.
    let v = view(&h, &other);
    assert!(v.on.contains(&"reclaim".to_string()), "{v:?}");

    // The action keeps running, its new instance without Desiccant.
    let lease = h.lease(&hung).await;
    assert!(lease.cold, "the hung instance was evicted");
    let new_id = lease.instance.id.clone();
    lease.release(Health::Reusable).await;
    let modes: std::collections::HashMap<String, String> = h
        .pool
        .instance_views()
        .into_iter()
        .map(|i| (i.action, i.reclaim_mode))
        .collect();
    assert_eq!(modes[&hung.fqn()], "vanilla");
    assert_eq!(modes[&other.fqn()], "desiccant");
    assert!(h.pool.has_instance(&new_id));

    // An update of the action starts it afresh, reclaim included.
    let updated = action("hung", "0.0.2");
    h.pool.retire_action(&updated.fqn()).await;
    h.pool.action_deployed(&updated);
    assert!(view(&h, &updated).on.contains(&"reclaim".to_string()));
}

#[tokio::test]
async fn a_failed_snapshot_build_turns_snapshots_off_and_the_action_keeps_running() {
    let h = Harness::new(Setup {
        snapshots: true,
        ..Setup::default()
    });
    let a = annotated("snap", 128, &[("icebox.snapshot", json!(true))]);
    let snapshots = h.pool.component::<ActionSnapshots>().unwrap();
    let mut events = h.pool.events.subscribe(0).1;
    // The template's /init fails: the build fails.
    h.backend.bad_code.store(true, Ordering::SeqCst);
    h.pool.action_deployed(&a);
    eventually("the build failed", || {
        snapshots.views().iter().any(|v| v.state == "failed")
    })
    .await;
    h.backend.bad_code.store(false, Ordering::SeqCst);
    let v = view(&h, &a);
    assert_eq!(v.reasons["snapshot"], "failed", "{v:?}");
    assert!(v.failed["snapshot"].contains("snapshot build"), "{v:?}");
    let changed = techniques_changed(&mut events);
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert!(changed[0]
        .detail
        .as_deref()
        .unwrap()
        .contains("-snapshot (failed)"));

    // The action runs, and its cold starts no longer build (a first failure used to be
    // rebuilt at once on the next cold start).
    for _ in 0..2 {
        evict_all(&h, &a).await;
        let lease = h.lease(&a).await;
        assert!(lease.cold && lease.instance.origin.restored_mode().is_none());
        lease.release(Health::Reusable).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(h.backend.counters.snapshots.load(Ordering::SeqCst), 0);
    assert!(snapshots.views().iter().all(|v| v.state == "failed"));

    // An operator's request builds it again.
    snapshots.request(&h.pool, &a).unwrap();
    eventually("the requested snapshot is built", || {
        snapshots.views().iter().any(|v| v.state == "ready")
    })
    .await;
    assert!(view(&h, &a).on.contains(&"snapshot".to_string()));
}
