//! A cold burst of an action whose instances take several activations at once (`shared` or
//! `isolate` sharing) must be absorbed by as few instances as their capacity allows: the
//! activations that arrive while the first instance is still starting wait for it instead of
//! each starting one of their own.

use super::tests::{action, eventually, Harness, Setup};
use super::*;
use icebox_core::KeyValue;
use serde_json::json;
use std::sync::atomic::Ordering;
use tokio::sync::Semaphore;

fn shared(name: &str, concurrency: u32) -> Arc<ActionSpec> {
    let mut a = (*action(name, "0.0.1")).clone();
    a.limits.concurrency = concurrency;
    a.limits.memory = 256;
    a.annotations = vec![KeyValue {
        key: "icebox.sharing".into(),
        value: json!("shared"),
    }];
    Arc::new(a)
}

/// A pool with room for a burst whose cold starts wait in /init until the gate opens.
fn gated() -> (Harness, Arc<Semaphore>) {
    let gate = Arc::new(Semaphore::new(0));
    let h = Harness::new(Setup {
        max_instances: 16,
        queue_size: 16,
        init_gate: Some(gate.clone()),
        ..Setup::default()
    });
    (h, gate)
}

/// Admits `n` activations of `a` while its first instance is held in /init, then lets it go.
async fn burst(h: &Harness, gate: &Semaphore, a: &Arc<ActionSpec>, n: usize) -> Vec<Lease> {
    let tickets: Vec<_> = (0..n).map(|_| h.pool.admit(a).expect("admitted")).collect();
    let leasing: Vec<_> = tickets
        .into_iter()
        .map(|t| tokio::spawn(t.lease(Duration::from_secs(30))))
        .collect();
    eventually("the first instance is in /init", || {
        h.backend.counters.inits.load(Ordering::SeqCst) >= 1
    })
    .await;
    gate.add_permits(100);
    let mut leases = Vec::new();
    for l in leasing {
        leases.push(l.await.unwrap().expect("leased"));
    }
    leases
}

#[tokio::test]
async fn a_cold_burst_joins_the_instance_being_started() {
    let (h, gate) = gated();
    let a = shared("burst", 8);
    let leases = burst(&h, &gate, &a, 8).await;
    assert_eq!(
        h.started(),
        1,
        "one instance absorbs a burst of its capacity"
    );
    let ids: std::collections::HashSet<_> = leases.iter().map(|l| l.instance.id.clone()).collect();
    assert_eq!(ids.len(), 1);
    assert_eq!(leases.iter().filter(|l| l.cold).count(), 1);
    for l in leases {
        l.release(Health::Reusable).await;
    }
}

#[tokio::test]
async fn a_burst_beyond_one_instance_starts_only_as_many_as_it_needs() {
    let (h, gate) = gated();
    let a = shared("burst", 4);
    let leases = burst(&h, &gate, &a, 10).await;
    assert_eq!(
        h.started(),
        3,
        "10 activations at 4 per instance need 3 instances"
    );
    for l in leases {
        l.release(Health::Reusable).await;
    }
}

#[tokio::test]
async fn activations_waiting_for_a_start_that_fails_start_their_own() {
    let (h, gate) = gated();
    let a = shared("burst", 4);
    h.backend.bad_code.store(true, Ordering::SeqCst);
    let first = tokio::spawn(h.pool.admit(&a).unwrap().lease(Duration::from_secs(30)));
    eventually("the first instance is in /init", || {
        h.backend.counters.inits.load(Ordering::SeqCst) == 1
    })
    .await;
    let waiting: Vec<_> = (0..3)
        .map(|_| tokio::spawn(h.pool.admit(&a).unwrap().lease(Duration::from_secs(30))))
        .collect();
    h.backend.bad_code.store(false, Ordering::SeqCst);
    gate.add_permits(100);
    assert!(first.await.unwrap().is_err(), "its /init failed");
    let mut leases = Vec::new();
    for w in waiting {
        leases.push(w.await.unwrap().expect("the waiting ones got an instance"));
    }
    assert_eq!(
        h.started(),
        2,
        "one failed start, then one instance for the three"
    );
    for l in leases {
        l.release(Health::Reusable).await;
    }
}
