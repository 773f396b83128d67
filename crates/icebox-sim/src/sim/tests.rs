//! Behaviour of the event loop on small hand-made workloads.

use super::*;
use crate::profile::Resolved;
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
    }
}

fn cfg(nodes: u32, node_mb: u64) -> SimConfig {
    SimConfig {
        nodes,
        node_memory: node_mb * MIB,
        node_cores: 0,
        placement: Placement::Openwhisk,
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

/// Runs with one profile per function (function i uses classes[i]).
#[expect(
    clippy::cast_possible_truncation,
    reason = "indices and counts of a simulated cluster (functions, instances, nodes, queued calls) stay far below 2^32"
)]
fn run(cfg: &SimConfig, classes: &[Resolved], events: &[SimEvent]) -> Metrics {
    let map: Vec<u32> = (0..classes.len() as u32).collect();
    let homes: Vec<u64> = (0..classes.len() as u64)
        .map(|i| i * 0x1_0000_0001)
        .collect();
    Sim::new(cfg, classes, &map, &homes).run(events).metrics
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
fn openwhisk_placement_fills_the_home_node_least_loaded_spreads() {
    // Three nodes of 250 MB, three concurrent 100 MB instances of one function.
    let classes = [class(100, 0, 10, 100_000)];
    let events: Vec<SimEvent> = (0..3).map(|k| ev(k, 0)).collect();
    let mut c = cfg(3, 250);
    let map = [0u32];
    // Home node (2^32 + 1) % 3 = 2; step index (hash >> 32) % 2 = 1: steps of 2 (2 → 1 → 0).
    let homes = [1u64 | (1 << 32)];
    let ow = Sim::new(&c, &classes, &map, &homes).run(&events);
    assert_eq!(ow.metrics.cold_starts, 3);
    assert_eq!(ow.node_used, [0, 100 * MIB, 200 * MIB]);
    c.placement = Placement::LeastLoaded;
    let ll = Sim::new(&c, &classes, &map, &homes).run(&events);
    assert_eq!(ll.node_used, [100 * MIB; 3]);
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
    let out = Sim::new(&c, &classes, &[0], &[0]).run(&[ev(0, 0)]);
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
