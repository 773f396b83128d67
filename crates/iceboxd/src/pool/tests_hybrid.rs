//! The hybrid histogram keep-alive in the pool (`--keep-alive-policy hybrid`), on the manual
//! clock: with too little history an idle instance keeps the node's TTL; once the idle times
//! are representative it is unloaded at once, an instance is pre-warmed shortly before the next
//! invocation is expected, kept for the histogram's tail, and serves that invocation warm.

use super::tests::{action, eventually, Harness, Setup};
use super::*;
use icebox_policy::{Clock, HybridConfig};

const SEC: u64 = 1_000;

fn hybrid() -> Harness {
    Harness::new(Setup {
        hybrid: Some(HybridConfig {
            bin_ms: SEC,
            range_ms: 240 * SEC,
            min_samples: 3,
            ..HybridConfig::default()
        }),
        ..Setup::default()
    })
}

async fn run(h: &Harness, a: &Arc<ActionSpec>) -> bool {
    let lease = h.lease(a).await;
    let cold = lease.cold;
    lease.release(Health::Reusable).await;
    cold
}

async fn tick(h: &Harness) -> Option<u64> {
    let now = h.clock.now_ms();
    let wake = h
        .pool
        .components
        .iter()
        .filter_map(|c| c.tick(&h.pool, now))
        .min();
    h.pool.keep_alive_round(now).await;
    wake
}

/// Four calls 5 s apart (3 idle times in bin 5: representative), then the idle instance is
/// unloaded at once.
async fn steady_history(h: &Harness, a: &Arc<ActionSpec>) {
    run(h, a).await;
    for _ in 0..3 {
        h.clock.advance(5 * SEC);
        tick(h).await;
        run(h, a).await;
    }
    tick(h).await;
    eventually("unloaded", || h.live() == 0).await;
}

fn idle_instances(h: &Harness) -> usize {
    h.pool
        .instance_views()
        .iter()
        .filter(|v| v.state.is_kept_alive())
        .count()
}

#[tokio::test]
async fn a_representative_history_unloads_at_once_and_prewarms_before_the_next_call() {
    let h = hybrid();
    let a = action("periodic", "0.0.1");
    // Called every 5 s: 3 idle times of 5 s make the histogram representative (bin 5).
    assert!(run(&h, &a).await, "the first call is cold");
    for _ in 0..3 {
        // Too little history so far: kept for the TTL, so each call is warm.
        h.clock.advance(5 * SEC);
        tick(&h).await;
        assert!(!run(&h, &a).await);
    }
    // Now: pre-warm after 0.9 × 5 s = 4.5 s, keep until 1.1 × 6 s = 6.6 s after going idle.
    tick(&h).await;
    eventually("the idle instance is unloaded at once", || h.live() == 0).await;
    h.clock.advance(4_400);
    assert_eq!(
        tick(&h).await,
        Some(h.clock.now_ms() + 100),
        "the pre-warm is booked"
    );
    assert_eq!(h.started(), 1);
    h.clock.advance(100);
    tick(&h).await;
    eventually("an instance is pre-warmed", || idle_instances(&h) == 1).await;
    assert_eq!(h.started(), 2);
    // The expected call finds it warm.
    h.clock.advance(500);
    assert!(
        !run(&h, &a).await,
        "the pre-warmed instance serves the call"
    );
    assert_eq!(h.started(), 2);
}

#[tokio::test]
async fn a_prewarmed_instance_nobody_calls_goes_after_its_window() {
    let h = hybrid();
    let a = action("periodic", "0.0.1");
    steady_history(&h, &a).await;
    h.clock.advance(4_500);
    tick(&h).await;
    eventually("pre-warmed", || idle_instances(&h) == 1).await;
    // Kept 6.6 s - 4.5 s = 2.1 s from the pre-warm.
    h.clock.advance(2_000);
    tick(&h).await;
    assert_eq!(idle_instances(&h), 1, "still inside its window");
    h.clock.advance(200);
    tick(&h).await;
    eventually("evicted after its window", || h.live() == 0).await;
    // Nothing called it, so nothing is pre-warmed again.
    h.clock.advance(60 * SEC);
    assert_eq!(tick(&h).await, None);
    assert_eq!(h.started(), 2);
}

#[tokio::test]
async fn an_update_cancels_the_prewarm_of_the_old_version() {
    let h = hybrid();
    let a = action("periodic", "0.0.1");
    steady_history(&h, &a).await;
    h.pool.retire_action(&a.fqn()).await;
    h.clock.advance(10 * SEC);
    assert_eq!(tick(&h).await, None);
    assert_eq!(h.started(), 1, "no instance of the old version was started");
}
