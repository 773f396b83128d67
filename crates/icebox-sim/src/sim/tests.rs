//! Behaviour of the event loop on small hand-made workloads.

use super::*;
use crate::profile::Resolved;
use icebox_policy::placement::{probe_sequence, PlacementPolicy};
use icebox_policy::{DesiccantConfig, EvictOrder, HybridConfig, MemoryProfile, SharingMode};

use icebox_core::units::MIB;

fn class(base_mb: u64, inc_mb: u64, cold: u64, warm: u64) -> Resolved {
    Resolved {
        memory: MemoryProfile {
            base_bytes: base_mb * MIB,
            increment_bytes: inc_mb * MIB,
            base_activations: 0,
        },
        cold_start_ms: cold,
        warm_ms: warm,
        retained: 0.25,
        cpu: 1,
        placement_need: None,
    }
}

#[test]
fn an_idle_only_budget_never_holds_a_start_back_and_evicts_on_release() {
    // One node of 100 MiB; two overlapping calls of two functions of 64 MiB each.
    let classes = [class(64, 0, 500, 1_000), class(64, 0, 500, 1_000)];
    let events = [ev(0, 0), ev(10, 1)];
    let mut c = cfg(1, 100);
    let machine = run(&c, &classes, &events);
    // Capped as a machine: the second waits for the first to end (and then evicts it).
    assert!(machine.queued + machine.rejected > 0, "{machine:?}");
    c.budget_idle_only = true;
    let budget = run(&c, &classes, &events);
    // Capped as iceboxd's keep-alive budget: both run at once ...
    assert_eq!(
        (budget.queued, budget.rejected, budget.cold_starts),
        (0, 0, 2)
    );
    // ... and once both are idle only one of them fits: the least recently used goes.
    assert_eq!(budget.evictions, 1);
}

fn cfg(nodes: u32, node_mb: u64) -> SimConfig {
    SimConfig {
        budget_idle_only: false,
        nodes,
        node_memory: node_mb * MIB,
        node_cores: 0,
        placement: PlacementPolicy::WarmHome,
        keepalive: KeepAliveSpec::Infinite,
        evict: EvictOrder::Lru,
        sharing: SharingMode::Process,
        concurrency: 1,
        technique: Technique::None,
        desiccant: DesiccantConfig::default(),
        hybrid: HybridConfig::default(),
        count_from_ms: 0,
        end_ms: 1_000_000,
        timeline: false,
    }
}

fn ev(t: u64, func: u32) -> SimEvent {
    SimEvent {
        t,
        func,
        dur: PROFILE_DURATION,
    }
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("guest/f{i}")).collect()
}

/// Runs with one profile per function (function i uses classes[i], its name `guest/f{i}`).
fn run(cfg: &SimConfig, classes: &[Resolved], events: &[SimEvent]) -> Metrics {
    run_named(cfg, classes, &names(classes.len()), events).metrics
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "indices and counts of a simulated cluster (functions, instances, nodes, queued calls) stay far below 2^32"
)]
fn run_named(
    cfg: &SimConfig,
    classes: &[Resolved],
    names: &[String],
    events: &[SimEvent],
) -> RunOutput {
    let map: Vec<u32> = (0..classes.len() as u32).collect();
    Sim::new(cfg, classes, &map, names).run(events)
}

#[test]
fn a_warm_instance_serves_later_calls_and_the_first_is_cold() {
    let c = cfg(1, 1_000);
    let m = run(
        &c,
        &[class(100, 10, 500, 20)],
        &[ev(0, 0), ev(1_000, 0), ev(2_000, 0)],
    );
    assert_eq!((m.invocations, m.cold_starts, m.warm_starts), (3, 1, 2));
    assert_eq!(m.instances_created, 1);
    // Latencies: 520 (cold) and 20, 20.
    assert_eq!(m.latency_ms_p99, 520.0);
    assert_eq!(m.latency_ms_p50, 20.0);
}

#[test]
fn process_mode_starts_one_instance_per_concurrent_call_and_sharing_packs_them() {
    let events: Vec<SimEvent> = (0..4).map(|k| ev(k, 0)).collect();
    let mut c = cfg(1, 10_000);
    let m = run(&c, &[class(100, 10, 500, 1_000)], &events);
    assert_eq!((m.cold_starts, m.instances_created, m.joined), (4, 4, 0));
    assert_eq!(m.peak_memory_gib * 1024.0, 440.0);

    c.sharing = SharingMode::Shared;
    c.concurrency = 3;
    let m = run(&c, &[class(100, 10, 500, 1_000)], &events);
    // Three pack into the first instance (base + 3 increments), the fourth starts another.
    assert_eq!((m.cold_starts, m.instances_created, m.joined), (2, 2, 2));
    assert_eq!(m.peak_memory_gib * 1024.0, 130.0 + 110.0);
    // Joiners wait for the cold start of the instance they joined.
    assert_eq!(m.latency_ms_p50, 1_500.0 - 1.0);
}

#[test]
fn ttl_expires_idle_instances_exactly_at_the_ttl() {
    let mut c = cfg(1, 1_000);
    c.keepalive = KeepAliveSpec::Ttl(10_000);
    c.end_ms = 10_530;
    // Call ends at 520; expires at 10_520: a call at 10_519 is warm, one at 10_520 cold.
    let warm = run(&c, &[class(100, 0, 500, 20)], &[ev(0, 0), ev(10_519, 0)]);
    assert_eq!((warm.cold_starts, warm.expirations), (1, 0));
    let cold = run(&c, &[class(100, 0, 500, 20)], &[ev(0, 0), ev(10_520, 0)]);
    assert_eq!((cold.cold_starts, cold.expirations), (2, 1));
}

#[test]
fn memory_pressure_evicts_lru_or_least_frequent() {
    // One node fits two instances. f0 is called 3 times, f1 once, then f2 needs room.
    let classes = [
        class(400, 0, 10, 10),
        class(400, 0, 10, 10),
        class(400, 0, 10, 10),
    ];
    let events = [
        ev(0, 0),
        ev(100, 0),
        ev(200, 1),
        ev(300, 0),
        ev(400, 2),
        ev(500, 1),
        ev(600, 0),
    ];
    let mut c = cfg(1, 1_000);
    // LRU: at 400, f1 (idle since 220) is older than f0 (idle since 310): f1 goes, and its
    // call at 500 is cold again (evicting f0, the LRU then), so f0 at 600 is cold too.
    let lru = run(&c, &classes, &events);
    assert_eq!(lru.evictions, 3);
    assert_eq!(lru.cold_starts, 5);
    // Frequency: f1 (1 call) goes first both times; f0 (3 calls) stays warm.
    c.evict = EvictOrder::Frequency;
    let freq = run(&c, &classes, &events);
    assert_eq!(freq.cold_starts, 4);
    assert_eq!(freq.evictions, 2);
}

#[test]
fn calls_that_fit_nowhere_queue_until_memory_frees() {
    let c = cfg(1, 500);
    // Two long calls of different functions, each needing 400 MB: the second waits for the
    // first to end (at 10 + 1000) and its idle instance to be evicted.
    let classes = [class(400, 0, 10, 1_000), class(400, 0, 10, 1_000)];
    let m = run(&c, &classes, &[ev(0, 0), ev(5, 1)]);
    assert_eq!((m.queued, m.cold_starts, m.evictions), (1, 2, 1));
    assert_eq!(m.queue_delay_ms_max, 1_010 - 5);
    assert_eq!(m.latency_ms_p99, f64::from(1_010 - 5 + 10 + 1_000));
    assert_eq!(m.still_queued_at_end, 0);
}

#[test]
fn instances_larger_than_a_node_are_rejected_not_queued() {
    let c = cfg(2, 500);
    let m = run(
        &c,
        &[class(600, 0, 10, 10), class(100, 0, 10, 10)],
        &[ev(0, 0), ev(1, 1)],
    );
    assert_eq!(
        (m.rejected, m.queued, m.invocations, m.cold_starts),
        (1, 0, 1, 1)
    );
}

#[test]
fn hash_fills_the_home_node_then_overflows_along_the_probe_sequence_round_robin_spreads() {
    // Three nodes of 250 MB, three concurrent 100 MB instances of one function.
    let classes = [class(100, 0, 10, 100_000)];
    let events: Vec<SimEvent> = (0..3).map(|k| ev(k, 0)).collect();
    let mut c = cfg(3, 250);
    c.placement = PlacementPolicy::Hash;
    let names = names(1);
    let hash = run_named(&c, &classes, &names, &events);
    assert_eq!(hash.metrics.cold_starts, 3);
    // Nodes n1, n2, n3 are indices 0, 1, 2 (already in id order).
    let seq = probe_sequence(&names[0], 3);
    let mut expected = [0; 3];
    expected[seq[0]] = 200 * MIB;
    expected[seq[1]] = 100 * MIB;
    assert_eq!(hash.node_used, expected);
    c.placement = PlacementPolicy::RoundRobin;
    let rr = run_named(&c, &classes, &names, &events);
    assert_eq!(rr.node_used, [100 * MIB; 3]);
}

/// Ten functions called in turn every 100 ms, 30 calls each, on three roomy nodes.
fn recurring() -> (Vec<Resolved>, Vec<SimEvent>) {
    let classes = vec![class(100, 0, 500, 20); 10];
    let events = (0..300).map(|k| ev(k * 100, (k % 10) as u32)).collect();
    (classes, events)
}

#[test]
fn warm_home_and_hash_cold_start_each_function_once_round_robin_on_every_node() {
    let (classes, events) = recurring();
    let mut c = cfg(3, 10_000);
    c.keepalive = KeepAliveSpec::Ttl(600_000);
    let by = |p| {
        let mut c = c.clone();
        c.placement = p;
        run(&c, &classes, &events)
    };
    let warm_home = by(PlacementPolicy::WarmHome);
    let hash = by(PlacementPolicy::Hash);
    let rr = by(PlacementPolicy::RoundRobin);
    // A function recurs on the node that ran it before; round robin (the arrival counter
    // steps by 10 between a function's calls, co-prime with 3) visits all three nodes.
    assert_eq!(warm_home.cold_starts, 10);
    assert_eq!(hash.cold_starts, 10, "with ample memory hash is warm-home");
    assert_eq!(rr.cold_starts, 30);
    assert!(rr.cold_starts >= 2 * warm_home.cold_starts);
    // Round robin also keeps three copies of every function in memory.
    assert!(rr.memory_gib_s > 2.5 * warm_home.memory_gib_s, "{rr:?}");
    c.nodes = 1;
    c.placement = PlacementPolicy::RoundRobin;
    assert_eq!(run(&c, &classes, &events).cold_starts, 10);
}

#[test]
fn warm_home_follows_a_warm_instance_off_its_home_hash_chases_free_memory() {
    // Two nodes of 150 MB: one 100 MB instance each. g takes f's home first, so f's first
    // call overflows to the other node; f recurs every 6 s with a 10 s keep-alive.
    let names: Vec<String> = {
        let f = "guest/f".to_string();
        let home = probe_sequence(&f, 2)[0];
        let g = (0..100)
            .map(|k| format!("guest/g{k}"))
            .find(|g| probe_sequence(g, 2)[0] == home)
            .expect("one of 100 names shares f's home");
        vec![f, g]
    };
    let home = probe_sequence(&names[0], 2)[0];
    let classes = [class(100, 0, 10, 10), class(100, 0, 10, 5_000)];
    let mut events = vec![ev(0, 1)];
    events.extend([1, 6_000, 12_000, 18_000, 24_000].map(|t| ev(t, 0)));
    let mut c = cfg(2, 150);
    c.keepalive = KeepAliveSpec::Ttl(10_000);
    let warm_home = run_named(&c, &classes, &names, &events).metrics;
    c.placement = PlacementPolicy::Hash;
    let hash = run_named(&c, &classes, &names, &events).metrics;
    // Warm-home: g and f's first call are cold, f stays warm where it went.
    assert_eq!(warm_home.cold_starts, 2);
    assert_eq!(warm_home.per_node[1 - home].invocations, 5);
    // Hash does not see f's idle instance, only that it leaves its node without free memory:
    // each call goes to the node whose copy has expired (or was evicted), so all are cold.
    assert_eq!(hash.cold_starts, 6);
    assert_eq!(hash.evictions, 1, "g, at 6 s");
}

#[test]
fn per_node_figures_add_up_to_the_cluster_s() {
    let (classes, events) = recurring();
    let mut c = cfg(3, 10_000);
    c.placement = PlacementPolicy::RoundRobin;
    let m = run(&c, &classes, &events);
    let ids: Vec<&str> = m.per_node.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(ids, ["n1", "n2", "n3"]);
    assert!(m.per_node.iter().all(|n| n.invocations == 100));
    assert_eq!(m.per_node.iter().map(|n| n.cold_starts).sum::<u64>(), 30);
    let gib_s: f64 = m.per_node.iter().map(|n| n.memory_gib_s).sum();
    assert!((gib_s - m.memory_gib_s).abs() < 1e-9 * m.memory_gib_s);
    assert!(m.per_node.iter().all(|n| n.memory_gib_s > 0.0));
}

#[test]
fn desiccant_shrinks_idle_instances_under_pressure_and_saves_cold_starts() {
    // A node of 1000 MB; three functions of 400 MB each, called round-robin every 20 s.
    // Without reclaim only two stay warm; with Desiccant idle ones shrink to 100 MB.
    let classes = [
        class(400, 0, 10, 10),
        class(400, 0, 10, 10),
        class(400, 0, 10, 10),
    ];
    let events: Vec<SimEvent> = (0..30).map(|k| ev(k * 20_000, (k % 3) as u32)).collect();
    let mut c = cfg(1, 1_000);
    let none = run(&c, &classes, &events);
    c.technique = Technique::Desiccant;
    let des = run(&c, &classes, &events);
    assert_eq!(
        none.cold_starts, 30,
        "LRU thrashes with three 400 MB functions in 1000 MB"
    );
    assert!(des.reclaims > 0);
    assert_eq!(
        des.cold_starts, 3,
        "reclaimed instances fit: only the first calls are cold"
    );
    assert_eq!(des.evictions, 0);
    assert!(none.evictions >= 27);
}

#[test]
fn desiccant_does_not_reclaim_below_the_threshold() {
    let classes = [class(100, 0, 10, 10)];
    let mut c = cfg(1, 10_000);
    c.technique = Technique::Desiccant;
    let m = run(&c, &classes, &[ev(0, 0), ev(60_000, 0)]);
    assert_eq!(m.reclaims, 0);
}

#[test]
fn hybrid_unloads_and_prewarms_before_a_regular_call() {
    let mut c = cfg(1, 10_000);
    c.keepalive = KeepAliveSpec::Hybrid;
    c.hybrid.min_samples = 3;
    c.end_ms = 100 * 60_000;
    // A call every 20 minutes: after the histogram has 3 samples, instances are unloaded at
    // once and pre-warmed at 18 min (20 min less 10 %), so later calls are warm.
    let events: Vec<SimEvent> = (0..5).map(|k| ev(k * 20 * 60_000, 0)).collect();
    let m = run(&c, &[class(100, 0, 10, 10)], &events);
    assert!(m.unloads >= 1 && m.prewarms >= 1, "{m:?}");
    // Calls 0 (cold), 1–3 (fallback TTL of 10 min expired: cold), 4 (pre-warmed: warm).
    assert_eq!(m.cold_starts, 4);
    assert_eq!(m.warm_starts, 1);
}

#[test]
fn warmup_events_are_replayed_but_not_counted() {
    let mut c = cfg(1, 1_000);
    c.count_from_ms = 1_000;
    let m = run(&c, &[class(100, 0, 500, 20)], &[ev(0, 0), ev(2_000, 0)]);
    assert_eq!((m.invocations, m.cold_starts), (1, 0));
}

#[test]
fn the_timeline_has_one_row_per_counted_second() {
    let mut c = cfg(1, 1_000);
    c.timeline = true;
    c.end_ms = 5_000;
    let classes = [class(100, 0, 500, 2_000)];
    let out = run_named(&c, &classes, &names(1), &[ev(0, 0)]);
    let secs: Vec<u64> = out.timeline.iter().map(|r| r.second).collect();
    assert_eq!(secs, [1, 2, 3, 4, 5]);
    assert_eq!(out.timeline[0].busy_instances, 1);
    assert_eq!(out.timeline[0].memory_mib, 100.0);
    assert_eq!(out.timeline[4].busy_instances, 0);
}

#[test]
fn run_labels_name_small_nodes_in_mib() {
    assert_eq!(cfg(10, 256).label(), "process none infinite 256MiB");
    assert_eq!(cfg(10, 2048).label(), "process none infinite 2GiB");
    assert_eq!(cfg(10, 1536).label(), "process none infinite 1536MiB");
}

#[test]
fn placement_checks_the_declared_limit_when_the_profile_has_one() {
    // Two nodes of 300 MB, 50 MB instances. g (idle on f's home) leaves the home 250 MB of
    // free keep-alive memory: enough for f's instance, not for its declared 256 MB.
    let names: Vec<String> = {
        let f = "guest/f".to_string();
        let home = probe_sequence(&f, 2)[0];
        let g = (0..100)
            .map(|k| format!("guest/g{k}"))
            .find(|g| probe_sequence(g, 2)[0] == home)
            .expect("one of 100 names shares f's home");
        vec![f, g]
    };
    let home = probe_sequence(&names[0], 2)[0];
    let mut classes = [class(50, 0, 10, 10), class(50, 0, 10, 10)];
    let events = [ev(0, 1), ev(1_000, 0)];
    let mut c = cfg(2, 300);
    c.placement = PlacementPolicy::Hash;
    let measured = run_named(&c, &classes, &names, &events).metrics;
    assert_eq!(measured.per_node[home].cold_starts, 2, "both at home");
    classes[0].placement_need = Some(256 * MIB);
    let declared = run_named(&c, &classes, &names, &events).metrics;
    assert_eq!(declared.per_node[home].cold_starts, 1, "g at home");
    assert_eq!(declared.per_node[1 - home].cold_starts, 1, "f overflows");
}
