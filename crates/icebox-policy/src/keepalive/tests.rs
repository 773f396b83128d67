use super::*;
use crate::clock::{Clock, ManualClock};
use crate::pool::total_charge;
use crate::testutil::{entry, SplitMix64};

use icebox_core::units::MIB;

fn policy(
    keep_alive_ms: u64,
    pause_grace_ms: u64,
    budget_bytes: u64,
    max_instances: usize,
) -> KeepAlivePolicy {
    KeepAlivePolicy::new(KeepAliveConfig {
        keep_alive_ms,
        pause_grace_ms,
        budget_bytes,
        max_instances,
    })
}

fn ids(list: &[(String, EvictionReason)]) -> Vec<&str> {
    list.iter().map(|(id, _)| id.as_str()).collect()
}

#[test]
fn config_defaults_and_partial_json() {
    let d = KeepAliveConfig::default();
    assert_eq!(d.keep_alive_ms, 600_000);
    assert_eq!(d.pause_grace_ms, 50);
    assert_eq!(d.budget_bytes, 2 * 1024 * MIB);
    assert!(d.validate().is_ok());

    let cfg: KeepAliveConfig = serde_json::from_str(r#"{"budget_bytes": 1024}"#).unwrap();
    assert_eq!(
        cfg,
        KeepAliveConfig {
            budget_bytes: 1024,
            ..KeepAliveConfig::default()
        }
    );
    let zero = KeepAliveConfig {
        max_instances: 0,
        ..d
    };
    assert_eq!(zero.validate(), Err(ConfigError::ZeroMaxInstances));
}

#[test]
fn eviction_reason_serialises_as_its_label() {
    for r in [
        EvictionReason::KeepAliveExpired,
        EvictionReason::MemoryBudget,
        EvictionReason::InstanceLimit,
    ] {
        assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{r}\""));
        assert_eq!(
            serde_json::from_str::<EvictionReason>(&format!("\"{}\"", r.as_str())).unwrap(),
            r
        );
    }
}

#[test]
fn freezes_after_grace_and_not_before() {
    let p = policy(600_000, 50, u64::MAX, 10);
    let clock = ManualClock::new(1_000);
    let pool = vec![
        entry("a", 1_000, MIB, false),
        entry("b", 1_010, MIB, false),
        entry("f", 900, MIB, true),
    ];

    clock.set(1_049);
    assert!(p.to_freeze(&pool, clock.now_ms()).is_empty());
    clock.set(1_050);
    assert_eq!(p.to_freeze(&pool, clock.now_ms()), ["a"]);
    clock.set(1_060);
    assert_eq!(p.to_freeze(&pool, clock.now_ms()), ["a", "b"]);
    // Already frozen entries are never listed again.
    clock.advance(100_000);
    assert!(!p
        .to_freeze(&pool, clock.now_ms())
        .contains(&"f".to_string()));
}

#[test]
fn zero_grace_freezes_immediately() {
    let p = policy(600_000, 0, u64::MAX, 10);
    assert_eq!(p.to_freeze(&[entry("a", 5, 0, false)], 5), ["a"]);
}

#[test]
fn expired_entries_are_evicted_not_frozen() {
    let p = policy(100, 50, u64::MAX, 10);
    let pool = vec![entry("a", 0, MIB, false)];
    assert_eq!(p.to_freeze(&pool, 99), ["a"]);
    assert!(p.to_freeze(&pool, 100).is_empty());
    assert_eq!(
        p.evictions(&pool, 100),
        [("a".to_string(), EvictionReason::KeepAliveExpired)]
    );
}

#[test]
fn ttl_expires_exactly_at_the_boundary() {
    let p = policy(600_000, 50, u64::MAX, 10);
    let clock = ManualClock::new(0);
    let pool = vec![entry("a", 1_000, MIB, true), entry("b", 2_000, MIB, false)];

    clock.set(600_999);
    assert!(p.evictions(&pool, clock.now_ms()).is_empty());
    clock.advance(1);
    assert_eq!(
        p.evictions(&pool, clock.now_ms()),
        [("a".to_string(), EvictionReason::KeepAliveExpired)]
    );
    clock.set(602_000);
    assert_eq!(ids(&p.evictions(&pool, clock.now_ms())), ["a", "b"]);
}

#[test]
fn budget_evicts_lru_first_and_stops_as_soon_as_it_fits() {
    let p = policy(600_000, 50, 100, 10);
    // Total 160 > 100: evicting the oldest (30) leaves 130, the next (40) leaves 90 ≤ 100.
    let pool = vec![
        entry("newest", 40, 50, false),
        entry("oldest", 10, 30, true),
        entry("middle", 30, 40, false),
        entry("second", 20, 40, true),
    ];
    let out = p.evictions(&pool, 1_000);
    assert_eq!(
        out,
        [
            ("oldest".to_string(), EvictionReason::MemoryBudget),
            ("second".to_string(), EvictionReason::MemoryBudget)
        ]
    );
}

#[test]
fn pool_exactly_at_budget_is_left_alone() {
    let p = policy(600_000, 50, 100, 10);
    let pool = vec![entry("a", 0, 60, false), entry("b", 1, 40, false)];
    assert!(p.evictions(&pool, 10).is_empty());
}

#[test]
fn ttl_evictions_come_first_and_count_towards_the_budget() {
    let p = policy(1_000, 50, 100, 10);
    let pool = vec![
        entry("expired", 0, 80, false),
        entry("old", 500, 30, false),
        entry("young", 900, 50, false),
    ];
    // Without the expired entry the pool holds 80 ≤ 100: nothing else goes.
    assert_eq!(
        p.evictions(&pool, 1_000),
        [("expired".to_string(), EvictionReason::KeepAliveExpired)]
    );
    // Before expiry the budget has to evict the same (oldest) entry instead.
    assert_eq!(
        p.evictions(&pool, 999),
        [("expired".to_string(), EvictionReason::MemoryBudget)]
    );
}

#[test]
fn eviction_ties_are_broken_by_id_whatever_the_input_order() {
    let p = policy(100, 50, 10, 10);
    let mut pool = vec![
        entry("d", 50, 10, false),
        entry("b", 50, 10, true),
        entry("c", 50, 10, false),
        entry("a", 50, 10, false),
        entry("y", 0, 1, false),
        entry("x", 0, 1, false),
    ];
    let expected = vec![
        ("x".to_string(), EvictionReason::KeepAliveExpired),
        ("y".to_string(), EvictionReason::KeepAliveExpired),
        ("a".to_string(), EvictionReason::MemoryBudget),
        ("b".to_string(), EvictionReason::MemoryBudget),
        ("c".to_string(), EvictionReason::MemoryBudget),
    ];
    let mut rng = SplitMix64::new(7);
    for _ in 0..20 {
        rng.shuffle(&mut pool);
        assert_eq!(p.evictions(&pool, 100), expected);
    }
}

#[test]
fn budget_zero_evicts_every_idle_instance() {
    let p = policy(600_000, 50, 0, 10);
    let pool = vec![
        entry("a", 5, MIB, false),
        entry("b", 3, 0, true),
        entry("c", 4, 0, false),
    ];
    let out = p.evictions(&pool, 10);
    assert_eq!(ids(&out), ["b", "c", "a"]);
    assert!(out.iter().all(|(_, r)| *r == EvictionReason::MemoryBudget));
    assert!(p.evictions(&[], 10).is_empty());
}

#[test]
fn zero_charge_entries_fit_any_positive_budget() {
    let p = policy(600_000, 50, 1, 10);
    let pool = vec![entry("a", 0, 0, false), entry("b", 1, 0, true)];
    assert!(p.evictions(&pool, 10).is_empty());
}

#[test]
fn charges_beyond_u64_do_not_overflow() {
    let p = policy(600_000, 50, u64::MAX, 10);
    let pool = vec![
        entry("a", 0, u64::MAX, false),
        entry("b", 1, u64::MAX, false),
    ];
    assert_eq!(
        p.evictions(&pool, 10),
        [("a".to_string(), EvictionReason::MemoryBudget)]
    );
}

#[test]
fn admission_below_at_and_above_max() {
    let p = policy(600_000, 50, u64::MAX, 4);
    let pool = vec![
        entry("new", 30, 0, false),
        entry("old", 10, 0, true),
        entry("mid", 20, 0, false),
    ];
    let start = |ids: &[&str]| Admission::Start {
        evict: ids.iter().map(|s| s.to_string()).collect(),
    };

    // Below max: 0 running + 3 idle < 4.
    assert_eq!(p.admit_new_instance(&pool, 0), start(&[]));
    // At max: 1 + 3 = 4, the least recently used entry makes room.
    assert_eq!(p.admit_new_instance(&pool, 1), start(&["old"]));
    // Above max (the limit was lowered): 2 + 3 = 5 needs two evictions.
    assert_eq!(p.admit_new_instance(&pool, 2), start(&["old", "mid"]));
    assert_eq!(
        p.admit_new_instance(&pool, 3),
        start(&["old", "mid", "new"])
    );
    // Busy instances alone fill the node: evicting idle ones would not help.
    assert_eq!(p.admit_new_instance(&pool, 4), Admission::Queue);
    assert_eq!(p.admit_new_instance(&pool, 9), Admission::Queue);
    assert_eq!(p.admit_new_instance(&[], 4), Admission::Queue);
    assert_eq!(p.admit_new_instance(&[], 3), start(&[]));
}

#[test]
fn admission_victims_are_deterministic_on_ties() {
    let p = policy(600_000, 50, u64::MAX, 2);
    let pool = vec![
        entry("b", 10, 0, false),
        entry("a", 10, 0, false),
        entry("c", 10, 0, false),
    ];
    assert_eq!(
        p.admit_new_instance(&pool, 0),
        Admission::Start {
            evict: vec!["a".into(), "b".into()]
        }
    );
}

#[test]
fn zero_max_instances_always_queues() {
    let p = policy(600_000, 50, u64::MAX, 0);
    assert_eq!(p.admit_new_instance(&[], 0), Admission::Queue);
}

#[test]
fn choose_warm_prefers_unfrozen_then_most_recently_used() {
    let p = policy(600_000, 50, u64::MAX, 10);
    assert!(p.choose_warm(&[]).is_none());

    let frozen_newer = vec![
        entry("f", 900, 0, true),
        entry("u_old", 100, 0, false),
        entry("u_new", 200, 0, false),
    ];
    assert_eq!(p.choose_warm(&frozen_newer).unwrap().id, "u_new");

    let all_frozen = vec![
        entry("f1", 100, 0, true),
        entry("f3", 300, 0, true),
        entry("f2", 200, 0, true),
    ];
    assert_eq!(p.choose_warm(&all_frozen).unwrap().id, "f3");

    let mut tied = vec![
        entry("c", 100, 0, false),
        entry("a", 100, 0, false),
        entry("b", 100, 0, false),
    ];
    let mut rng = SplitMix64::new(3);
    for _ in 0..10 {
        rng.shuffle(&mut tied);
        assert_eq!(p.choose_warm(&tied).unwrap().id, "a");
    }
}

#[test]
fn next_deadline_of_an_empty_pool_is_none() {
    assert_eq!(
        policy(600_000, 50, u64::MAX, 10).next_deadline(&[], 0),
        None
    );
}

#[test]
fn next_deadline_is_the_earliest_freeze_or_expiry() {
    let p = policy(1_000, 50, u64::MAX, 10);
    // Freeze of "u" at 550 comes before the expiry of "f" at 1_100.
    let pool = vec![entry("f", 100, 0, true), entry("u", 500, 0, false)];
    assert_eq!(p.next_deadline(&pool, 500), Some(550));
    // Once "u" is due to freeze, the next change is the expiry of "f".
    assert_eq!(p.next_deadline(&pool, 550), Some(1_100));
    // Frozen entries only have an expiry.
    assert_eq!(p.next_deadline(&pool[..1], 0), Some(1_100));
    // Then "u" expires; after that nothing is pending.
    assert_eq!(p.next_deadline(&pool, 1_100), Some(1_500));
    assert_eq!(p.next_deadline(&pool, 1_500), None);
}

#[test]
fn next_deadline_skips_freezes_that_would_follow_expiry() {
    let p = policy(40, 50, u64::MAX, 10);
    assert_eq!(p.next_deadline(&[entry("a", 0, 0, false)], 0), Some(40));
    let never_expires = policy(u64::MAX, 50, u64::MAX, 10);
    assert_eq!(
        never_expires.next_deadline(&[entry("a", 10, 0, false)], 10),
        Some(60)
    );
    assert_eq!(
        never_expires.next_deadline(&[entry("a", 10, 0, true)], 10),
        None
    );
}

/// The daemon's loop, run against a manual clock: sleep until `next_deadline`, then apply
/// evictions and freezes. Every transition must land exactly on its deadline.
#[test]
fn driving_the_pool_by_deadlines_hits_every_transition_exactly() {
    let p = policy(1_000, 50, 100, 10);
    let clock = ManualClock::new(700);
    // 120 bytes against a budget of 100: the least recently used entry "a" must go at once.
    let mut pool = vec![
        entry("a", 600, 40, false),
        entry("b", 680, 40, false),
        entry("c", 690, 40, false),
        entry("d", 650, 0, true),
    ];
    let mut log: Vec<(Millis, String, String)> = Vec::new();
    loop {
        let now = clock.now_ms();
        for (id, reason) in p.evictions(&pool, now) {
            pool.retain(|e| e.id != id);
            log.push((now, id, reason.to_string()));
        }
        for id in p.to_freeze(&pool, now) {
            pool.iter_mut().find(|e| e.id == id).unwrap().frozen = true;
            log.push((now, id, "frozen".into()));
        }
        match p.next_deadline(&pool, now) {
            Some(t) => clock.set(t),
            None => break,
        }
    }
    let expected = [
        (700, "a", "memory_budget"),
        (730, "b", "frozen"),
        (740, "c", "frozen"),
        (1_650, "d", "keep_alive_expired"),
        (1_680, "b", "keep_alive_expired"),
        (1_690, "c", "keep_alive_expired"),
    ];
    let log: Vec<(Millis, &str, &str)> = log
        .iter()
        .map(|(t, id, what)| (*t, id.as_str(), what.as_str()))
        .collect();
    assert_eq!(log, expected);
    assert!(pool.is_empty());
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
fn random_pool(rng: &mut SplitMix64, now: Millis) -> Vec<PoolEntry> {
    let n = rng.range(0, 40) as usize;
    (0..n)
        .map(|i| {
            // Few distinct times and charges, so ties and exact boundaries happen often.
            let idle_since = now - rng.range(0, 30) * 50;
            let charged = if rng.chance(10) {
                0
            } else {
                rng.range(1, 8) * MIB
            };
            entry(
                &format!("i{:02}", rng.range(0, 99) * 100 + i as u64),
                idle_since,
                charged,
                rng.chance(40),
            )
        })
        .collect()
}

fn random_policy(rng: &mut SplitMix64) -> KeepAlivePolicy {
    let keep_alive_ms = rng.range(0, 30) * 50;
    let pause_grace_ms = rng.range(0, 6) * 25;
    let budget_bytes = if rng.chance(10) {
        0
    } else {
        rng.range(0, 160) * MIB / 2
    };
    policy(keep_alive_ms, pause_grace_ms, budget_bytes, 64)
}

#[test]
fn property_evictions_leave_a_pool_within_budget_and_ttl() {
    let mut rng = SplitMix64::new(0x01CE_B0C5);
    for case in 0..3_000 {
        let now = 10_000 + rng.range(0, 1_000);
        let p = random_policy(&mut rng);
        let cfg = *p.config();
        let mut pool = random_pool(&mut rng, now);

        let out = p.evictions(&pool, now);
        let evicted: Vec<&str> = ids(&out);
        let (gone, remaining): (Vec<PoolEntry>, Vec<PoolEntry>) = pool
            .iter()
            .cloned()
            .partition(|e| evicted.contains(&e.id.as_str()));
        assert_eq!(
            gone.len(),
            out.len(),
            "case {case}: evicted ids must be distinct pool entries"
        );

        // Safety: what stays fits the budget and has not outlived its TTL.
        if cfg.budget_bytes == 0 {
            assert!(remaining.is_empty(), "case {case}");
        }
        assert!(total_charge(&remaining) <= cfg.budget_bytes, "case {case}");
        assert!(
            remaining
                .iter()
                .all(|e| e.idle_for(now) < cfg.keep_alive_ms),
            "case {case}"
        );

        // Minimality: expiries are exactly the expired entries; budget victims are an LRU prefix
        // of the rest, and without the last one the pool would not have fitted.
        let expired: Vec<&(String, EvictionReason)> = out
            .iter()
            .filter(|(_, r)| *r == EvictionReason::KeepAliveExpired)
            .collect();
        assert_eq!(
            expired.len(),
            pool.iter()
                .filter(|e| e.idle_for(now) >= cfg.keep_alive_ms)
                .count()
        );
        let budget: Vec<&PoolEntry> = out
            .iter()
            .filter(|(_, r)| *r == EvictionReason::MemoryBudget)
            .map(|(id, _)| pool.iter().find(|e| &e.id == id).unwrap())
            .collect();
        assert!(out.iter().all(|(_, r)| *r != EvictionReason::InstanceLimit));
        for v in &budget {
            assert!(
                remaining
                    .iter()
                    .all(|r| (v.idle_since, &v.id) < (r.idle_since, &r.id)),
                "case {case}"
            );
        }
        if let (Some(last), true) = (budget.last(), cfg.budget_bytes > 0) {
            assert!(
                total_charge(&remaining) + last.charged > cfg.budget_bytes,
                "case {case}"
            );
        }

        // Determinism: the input order does not matter.
        rng.shuffle(&mut pool);
        assert_eq!(p.evictions(&pool, now), out, "case {case}");
    }
}

#[test]
fn property_next_deadline_marks_exactly_the_next_change() {
    let mut rng = SplitMix64::new(0x00F2_EE2E);
    for case in 0..2_000 {
        let now = 10_000 + rng.range(0, 1_000);
        let p = random_policy(&mut rng);
        let pool = random_pool(&mut rng, now);
        let answers = |t: Millis| (p.to_freeze(&pool, t), p.evictions(&pool, t));
        let at_now = answers(now);
        match p.next_deadline(&pool, now) {
            None => assert_eq!(answers(now + 1_000_000), at_now, "case {case}"),
            Some(deadline) => {
                assert!(deadline > now, "case {case}");
                assert_eq!(answers(deadline - 1), at_now, "case {case}");
                assert_ne!(answers(deadline), at_now, "case {case}");
            }
        }
    }
}

#[test]
fn expires_at_is_the_ttl_after_idle_since_and_matches_evictions() {
    let p = policy(1_000, 50, u64::MAX, 10);
    assert_eq!(p.expires_at(500), Some(1_500));
    assert_eq!(p.expires_at(u64::MAX - 10), None);
    let pool = vec![entry("a", 500, MIB, false)];
    assert!(p.evictions(&pool, 1_499).is_empty());
    assert_eq!(ids(&p.evictions(&pool, 1_500)), ["a"]);
    let never = policy(u64::MAX, 50, u64::MAX, 10);
    assert_eq!(never.expires_at(1), None);
    assert!(never
        .evictions(&[entry("b", 1, MIB, false)], u64::MAX)
        .is_empty());
}

#[test]
fn room_for_a_new_instance_evicts_the_least_recently_used_until_the_shortfall_is_covered() {
    let p = policy(600_000, 50, 0, 16);
    let pool = [
        entry("new", 300, 512, true),
        entry("old", 100, 512, true),
        entry("mid", 200, 512, false),
    ];
    // Enough free already: nobody goes.
    assert!(p.room_for(&pool, 512, 512).is_empty());
    // 600 short: two partitions of 512, oldest first.
    assert_eq!(p.room_for(&pool, 1024, 424), vec!["old", "mid"]);
    // More than the pool holds: all of it, the start then waits.
    assert_eq!(p.room_for(&pool, 4096, 0), vec!["old", "mid", "new"]);
}

#[test]
fn an_entry_with_its_own_window_expires_by_it_and_zero_unloads_at_once() {
    let p = policy(600_000, 50, 1 << 40, 100);
    let mut own = entry("own", 1_000, MIB, false);
    own.keep_alive_ms = Some(5_000);
    let mut unload = entry("unload", 1_000, MIB, false);
    unload.keep_alive_ms = Some(0);
    let ttl = entry("ttl", 1_000, MIB, false);
    let pool = vec![own, unload, ttl];
    // At once: the zero window is due, and such an entry is never frozen first.
    assert_eq!(ids(&p.evictions(&pool, 1_000)), ["unload"]);
    assert!(!p.to_freeze(&pool, 1_100).contains(&"unload".to_string()));
    assert_eq!(p.next_deadline(&pool[..1], 1_100), Some(6_000));
    assert_eq!(ids(&p.evictions(&pool, 6_000)), ["own", "unload"]);
    assert_eq!(ids(&p.evictions(&pool, 601_000)), ["own", "ttl", "unload"]);
}

#[test]
fn over_budget_agrees_with_evictions() {
    let p = policy(600_000, 50, 100, 8);
    for total in [0u64, 99, 100, 101, 1_000] {
        let pool = [entry("a", 0, total, false)];
        assert_eq!(
            p.over_budget(total),
            !p.evictions(&pool, 1).is_empty(),
            "total {total}"
        );
    }
    // Budget 0 is the operator's switch for no keep-alive: everything is over it.
    let none = policy(600_000, 50, 0, 8);
    assert!(none.over_budget(0));
    assert!(!none.evictions(&[entry("a", 0, 0, false)], 1).is_empty());
}
