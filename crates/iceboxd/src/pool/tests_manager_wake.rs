//! Giving an instance back wakes the manager loop only when the keep-alive round has
//! something to do before the loop's planned wake-up: every wake-up for nothing costs the
//! activation a task (often a thread) switch.

use super::tests::{action, Harness, Setup};
use super::Health;
use icebox_policy::Clock;

#[tokio::test]
async fn a_release_is_due_only_when_the_round_must_run_sooner() {
    let h = Harness::new(Setup::default());
    let lease = h.lease(&action("a", "0.0.1")).await;
    let id = lease.instance.id.clone();
    let now = h.clock.now_ms();
    let policy = &h.pool.policy;

    // Busy: nothing the round sees has changed.
    assert!(!h.pool.slots.due_before(&id, policy, now, now + 1_000));
    lease.release(Health::Reusable).await;

    // Idle now, frozen after the 50 ms pause grace: due before a wake-up planned in 1 s, not
    // before one planned in 10 ms.
    assert!(h.pool.slots.due_before(&id, policy, now, now + 1_000));
    assert!(!h.pool.slots.due_before(&id, policy, now, now + 10));
    // A wake-up already past (or the loop mid-round, 0) always takes the change.
    assert!(h.pool.slots.due_before(&id, policy, now, now));
    assert!(h.pool.slots.due_before(&id, policy, now, 0));
}

#[tokio::test]
async fn a_release_that_puts_the_pool_over_its_budget_is_due_at_once() {
    // The action is charged its declared 256 MB; the budget holds less.
    let h = Harness::new(Setup {
        budget: 100 << 20,
        ..Setup::default()
    });
    let lease = h.lease(&action("a", "0.0.1")).await;
    let id = lease.instance.id.clone();
    lease.release(Health::Reusable).await;
    let now = h.clock.now_ms();
    assert!(h.pool.slots.due_before(&id, &h.pool.policy, now, now + 10));
}
