use super::*;
use crate::clock::{Clock, ManualClock};
use crate::desiccant::profile::{EstimateSource, Profile};
use crate::testutil::SplitMix64;

use icebox_core::units::MIB;

fn candidate(id: &str, action: &str, memory_mib: u64, frozen_since: Option<Millis>) -> Candidate {
    Candidate {
        id: id.to_string(),
        action: action.to_string(),
        memory: memory_mib * MIB,
        frozen_since,
        reclaimed_since_last_run: false,
    }
}

fn profile(memory_mib: u64, retained_mib: u64, cpu_ms: f64) -> Profile {
    Profile {
        memory_before: memory_mib * MIB,
        live_bytes: retained_mib * MIB / 2,
        cpu_ms,
        freed: (memory_mib - retained_mib) * MIB,
    }
}

fn cfg() -> DesiccantConfig {
    DesiccantConfig {
        frozen_timeout_ms: 1_000,
        ..DesiccantConfig::default()
    }
}

fn ranked_ids(ranked: &[Ranked<'_>]) -> Vec<String> {
    ranked.iter().map(|r| r.candidate.id.clone()).collect()
}

#[test]
fn candidates_respect_the_frozen_timeout_and_earlier_reclaims() {
    let cfg = cfg();
    let clock = ManualClock::new(5_000);
    let mut done = candidate("done", "ns/a", 100, Some(0));
    done.reclaimed_since_last_run = true;
    let candidates = vec![
        candidate("old", "ns/a", 100, Some(0)),
        candidate("young", "ns/a", 100, Some(4_500)),
        candidate("thawed", "ns/a", 100, None),
        done,
    ];
    let store = ProfileStore::new();

    assert_eq!(
        ranked_ids(&rank(&cfg, &store, &candidates, clock.now_ms())),
        ["old"]
    );
    clock.set(5_499);
    assert!(!candidates[1].eligible(&cfg, clock.now_ms()));
    clock.set(5_500);
    assert!(candidates[1].eligible(&cfg, clock.now_ms()));
    assert_eq!(
        ranked_ids(&rank(&cfg, &store, &candidates, clock.now_ms())),
        ["old", "young"]
    );
    clock.advance(1_000_000);
    assert!(!candidates[2].eligible(&cfg, clock.now_ms()));
    assert!(!candidates[3].eligible(&cfg, clock.now_ms()));
    assert_eq!(candidates[0].frozen_for(clock.now_ms()), Some(1_005_500));
    assert_eq!(candidates[2].frozen_for(clock.now_ms()), None);
}

#[test]
fn highest_estimated_throughput_goes_first() {
    let cfg = cfg();
    let mut store = ProfileStore::new();
    // Java-like: keeps 50 MiB, 35 ms. Node-like: keeps 45 MiB, 25 ms. Python-like: keeps
    // 13 MiB, 4 ms.
    store.record("j", "ns/java", profile(180, 50, 35.0));
    store.record("n", "ns/node", profile(130, 45, 25.0));
    store.record("p", "ns/py", profile(25, 13, 4.0));
    let candidates = vec![
        candidate("j", "ns/java", 190, Some(0)), // 140 MiB / 35 ms = 4.0 MiB/ms
        candidate("n", "ns/node", 120, Some(0)), // 75 MiB / 25 ms = 3.0 MiB/ms
        candidate("p", "ns/py", 33, Some(0)),    // 20 MiB / 4 ms = 5.0 MiB/ms
    ];
    let ranked = rank(&cfg, &store, &candidates, 10_000);
    assert_eq!(ranked_ids(&ranked), ["p", "j", "n"]);
    assert_eq!(ranked[0].reclaimable, 20 * MIB);
    assert_eq!(ranked[0].throughput, (5 * MIB) as f64);
    assert_eq!(ranked[1].throughput, (4 * MIB) as f64);
    assert_eq!(ranked[2].throughput, (3 * MIB) as f64);
    assert!(ranked
        .iter()
        .all(|r| r.estimate.source == EstimateSource::Instance));
}

#[test]
fn unprofiled_instances_are_ranked_by_their_fallback_estimate() {
    let cfg = cfg();
    let mut store = ProfileStore::new();
    store.record("a1", "ns/a", profile(100, 20, 10.0));
    let candidates = vec![
        // Its sibling's profile: 80 MiB in 10 ms.
        candidate("a2", "ns/a", 100, Some(0)),
        // The node's share (20 % kept) and CPU (10 ms): 160 MiB in 10 ms.
        candidate("b1", "ns/b", 200, Some(0)),
        // Its own: 30 MiB in 10 ms.
        candidate("a1", "ns/a", 50, Some(0)),
    ];
    let ranked = rank(&cfg, &store, &candidates, 10_000);
    assert_eq!(ranked_ids(&ranked), ["b1", "a2", "a1"]);
    let sources: Vec<EstimateSource> = ranked.iter().map(|r| r.estimate.source).collect();
    assert_eq!(
        sources,
        [
            EstimateSource::Global,
            EstimateSource::Action,
            EstimateSource::Instance
        ]
    );

    // With no profile anywhere the prior ranks by memory alone: half of it in 20 ms.
    let empty = ProfileStore::new();
    let ranked = rank(&cfg, &empty, &candidates, 10_000);
    assert_eq!(ranked_ids(&ranked), ["b1", "a2", "a1"]);
    assert!(ranked
        .iter()
        .all(|r| r.estimate.source == EstimateSource::Prior));
    assert_eq!(ranked[0].reclaimable, 100 * MIB);
    assert_eq!(ranked[0].throughput, (5 * MIB) as f64);
}

#[test]
fn instances_expected_to_free_nothing_are_left_alone() {
    let cfg = cfg();
    let mut store = ProfileStore::new();
    store.record("a1", "ns/a", profile(100, 60, 10.0));
    let candidates = vec![
        candidate("a1", "ns/a", 60, Some(0)),
        candidate("a2", "ns/a", 59, Some(0)),
        candidate("a3", "ns/a", 61, Some(0)),
        candidate("empty", "ns/b", 0, Some(0)),
    ];
    let ranked = rank(&cfg, &store, &candidates, 10_000);
    assert_eq!(ranked_ids(&ranked), ["a3"]);
}

#[test]
fn equal_throughputs_and_repeated_ids_are_settled_by_id() {
    let cfg = cfg();
    let store = ProfileStore::new();
    let candidates = vec![
        candidate("c", "ns/a", 100, Some(0)),
        candidate("a", "ns/a", 100, Some(0)),
        candidate("b", "ns/a", 100, Some(0)),
        candidate("a", "ns/a", 40, Some(0)),
    ];
    let ranked = rank(&cfg, &store, &candidates, 10_000);
    assert_eq!(ranked_ids(&ranked), ["a", "b", "c"]);
    assert_eq!(ranked[0].candidate.memory, 100 * MIB);
}

#[test]
fn plan_does_nothing_at_or_below_the_threshold() {
    let cfg = cfg();
    let threshold = ReclaimThreshold::new(&cfg);
    let store = ProfileStore::new();
    let candidates = vec![candidate("a", "ns/a", 100, Some(0))];
    let budget = 1_000 * MIB;
    let p = |candidates: &[Candidate], charged: u64, slots: usize| {
        plan(
            &cfg, &threshold, &store, candidates, charged, budget, 10_000, slots,
        )
    };
    // No eviction yet: the threshold is 90 %.
    assert!(p(&candidates, 900 * MIB, 2).is_empty());
    assert_eq!(p(&candidates, 900 * MIB + 1, 2), ["a"]);
    assert!(p(&candidates, 950 * MIB, 0).is_empty());
    assert!(p(&[], 950 * MIB, 2).is_empty());
}

#[test]
fn plan_takes_only_what_brings_the_pool_back_to_the_threshold() {
    let cfg = cfg();
    let mut threshold = ReclaimThreshold::new(&cfg);
    threshold.on_eviction(0);
    let store = ProfileStore::new();
    // The prior expects half of each: 50, 40, 30, 20 MiB, in that order.
    let candidates = vec![
        candidate("d", "ns/a", 40, Some(0)),
        candidate("b", "ns/a", 80, Some(0)),
        candidate("a", "ns/a", 100, Some(0)),
        candidate("c", "ns/a", 60, Some(0)),
    ];
    let budget = 1_000 * MIB;
    let p = |charged_mib: u64, slots: usize| {
        plan(
            &cfg,
            &threshold,
            &store,
            &candidates,
            charged_mib * MIB,
            budget,
            1_000,
            slots,
        )
    };
    // One second after the eviction the threshold is still 60 % of the budget: 600 MiB.
    assert_eq!(p(610, 4), ["a"]);
    assert_eq!(p(650, 4), ["a"]);
    assert_eq!(p(651, 4), ["a", "b"]);
    assert_eq!(p(690, 4), ["a", "b"]);
    assert_eq!(p(691, 4), ["a", "b", "c"]);
    assert_eq!(p(2_000, 4), ["a", "b", "c", "d"]);
    // Idle cores bound it whatever the need.
    assert_eq!(p(2_000, 2), ["a", "b"]);
    assert_eq!(p(2_000, 1), ["a"]);
}

#[test]
fn plan_follows_the_threshold_over_time() {
    let cfg = cfg();
    let clock = ManualClock::new(0);
    let mut threshold = ReclaimThreshold::new(&cfg);
    let mut store = ProfileStore::new();
    // a gave little per CPU millisecond last time, b a lot.
    store.record("a", "ns/a", profile(100, 80, 20.0));
    store.record("b", "ns/b", profile(100, 10, 5.0));
    let candidates = vec![
        candidate("a", "ns/a", 100, Some(0)),
        candidate("b", "ns/b", 100, Some(0)),
    ];
    let budget = 1_000 * MIB;
    let charged = 700 * MIB;
    let plan_at = |threshold: &ReclaimThreshold, now: Millis| {
        plan(
            &cfg,
            threshold,
            &store,
            &candidates,
            charged,
            budget,
            now,
            2,
        )
    };

    clock.set(5_000);
    assert!(plan_at(&threshold, clock.now_ms()).is_empty());
    threshold.on_eviction(clock.now_ms());
    // At 60 %, 100 MiB over: b's expected 90 MiB is not enough, a's 20 MiB complete it.
    assert_eq!(plan_at(&threshold, clock.now_ms()), ["b", "a"]);
    // At 65 %, 50 MiB over: b alone.
    clock.advance(2_000);
    assert_eq!(plan_at(&threshold, clock.now_ms()), ["b"]);
    // At 70 % the pool is not above the threshold any more.
    clock.advance(2_000);
    assert!(plan_at(&threshold, clock.now_ms()).is_empty());
    threshold.on_eviction(clock.now_ms());
    assert_eq!(plan_at(&threshold, clock.now_ms()), ["b", "a"]);
}

#[test]
fn plan_is_independent_of_the_input_order() {
    let cfg = cfg();
    let mut rng = SplitMix64::new(11);
    let mut store = ProfileStore::new();
    let mut candidates = Vec::new();
    for i in 0..60 {
        let action = format!("ns/f{}", rng.range(0, 7));
        let id = format!("i{i:02}");
        if rng.chance(40) {
            let memory = rng.range(20, 300);
            store.record(
                &id,
                &action,
                profile(memory, rng.range(5, memory), rng.range(1, 60) as f64),
            );
        }
        let mut c = candidate(
            &id,
            &action,
            rng.range(0, 400),
            rng.chance(90).then(|| rng.range(0, 4_000)),
        );
        c.reclaimed_since_last_run = rng.chance(15);
        candidates.push(c);
    }
    // Some exact ties in throughput, which only the id may settle.
    for id in ["t2", "t1", "t3"] {
        candidates.push(candidate(id, "ns/tied", 64, Some(0)));
    }

    let budget = 1_000 * MIB;
    let mut threshold = ReclaimThreshold::new(&cfg);
    threshold.on_eviction(0);
    let ranked_now = |candidates: &[Candidate]| ranked_ids(&rank(&cfg, &store, candidates, 5_000));
    // Far above the threshold, with a slot for everyone: the plan is the whole ranking.
    let plan_now = |candidates: &[Candidate]| {
        plan(
            &cfg,
            &threshold,
            &store,
            candidates,
            1_000_000 * MIB,
            budget,
            5_000,
            64,
        )
    };
    let expected_rank = ranked_now(&candidates);
    let expected_plan = plan_now(&candidates);
    assert!(expected_rank.len() > 20);
    assert_eq!(expected_plan, expected_rank);
    let tied: Vec<&String> = expected_rank
        .iter()
        .filter(|id| id.starts_with('t'))
        .collect();
    assert_eq!(tied, ["t1", "t2", "t3"]);
    for _ in 0..50 {
        rng.shuffle(&mut candidates);
        assert_eq!(ranked_now(&candidates), expected_rank);
        assert_eq!(plan_now(&candidates), expected_plan);
    }
}

#[test]
fn reclaims_use_idle_cores_only() {
    assert_eq!(reclaim_slots(2, 0, 0), 2);
    assert_eq!(reclaim_slots(2, 1, 0), 1);
    assert_eq!(reclaim_slots(2, 0, 1), 1);
    assert_eq!(reclaim_slots(2, 1, 1), 0);
    assert_eq!(reclaim_slots(2, 2, 0), 0);
    assert_eq!(reclaim_slots(2, 9, 0), 0);
    assert_eq!(reclaim_slots(8, 3, 2), 3);
    assert_eq!(reclaim_slots(0, 0, 0), 0);
    // Reclaims started before invocations arrived do not make room for more.
    assert_eq!(reclaim_slots(4, 3, 2), 0);
    for cores in 0..6 {
        for running in 0..8 {
            for busy in 0..8 {
                let slots = reclaim_slots(cores, running, busy);
                assert!(slots <= cores.saturating_sub(running));
                if slots > 0 {
                    // Every core ends up with exactly one job: none idle, none shared.
                    assert_eq!(running + busy + slots, cores);
                }
                if running >= cores {
                    assert_eq!(slots, 0);
                }
            }
        }
    }
}
