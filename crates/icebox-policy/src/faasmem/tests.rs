//! Whole lifecycles, driven by a manual clock the way the daemon drives the policy.

use super::window::tests::pareto_cache;
use super::*;
use crate::clock::{Clock, ManualClock};
use OffloadStep::*;

/// Runs `requests` requests `gap_ms` apart; `untouched(k)` is the scan after the k-th request
/// (1-based) and `probes` the probe count. Returns every non-empty step list with its time.
fn drive(
    cfg: &FaasmemConfig,
    requests: u64,
    gap_ms: u64,
    probes: u64,
    untouched: impl Fn(u64) -> u64,
) -> (InstanceOffload, Vec<(u64, Vec<OffloadStep>)>) {
    let clock = ManualClock::new(0);
    let mut inst = InstanceOffload::new();
    let mut log = Vec::new();
    for k in 1..=requests {
        clock.advance(gap_ms);
        let steps = inst.after_request(cfg, clock.now_ms(), untouched(k), probes);
        if !steps.is_empty() {
            log.push((clock.now_ms(), steps));
        }
    }
    (inst, log)
}

#[test]
fn an_ml_instance_offloads_init_after_two_requests_then_rolls_back_every_ten_seconds() {
    let cfg = FaasmemConfig::default();
    let (inst, log) = drive(&cfg, 30, 1_000, 1_000, |_| 600);
    assert_eq!(
        log,
        [
            (1_000, vec![Runtime, ProbeInit]),
            (3_000, vec![InitCold]),
            (13_000, vec![Rollback]),
            (15_000, vec![RollbackCold]),
            (23_000, vec![Rollback]),
            (25_000, vec![RollbackCold]),
        ]
    );
    assert_eq!(inst.request_window(), Some(2));
    assert_eq!(inst.rollbacks(), 2);
}

#[test]
#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
fn a_web_instance_waits_for_its_cache_to_warm_and_rolls_back_by_requests() {
    let cfg = FaasmemConfig::default();
    let (probes, counts) = pareto_cache(32, 62, 500, 200);
    // Request 1 is not probed yet; request k >= 2 is the (k-1)-th watched.
    let (inst, log) = drive(&cfg, 200, 5_000, probes, |k| {
        counts[(k.max(2) - 2) as usize]
    });
    let window = inst.request_window().unwrap();
    assert!((15..=30).contains(&window), "{window}");
    let w = u64::from(window);
    let close = (w + 1) * 5_000;
    assert_eq!(log[1], (close, vec![InitCold]));
    // Requests every 5 s: the interval (10 s) is met long before a request window of them.
    assert_eq!(log[2], (close + w * 5_000, vec![Rollback]));
    assert_eq!(log[3], (close + 2 * w * 5_000, vec![RollbackCold]));
    assert_eq!(log[4], (close + 3 * w * 5_000, vec![Rollback]));
}

#[test]
fn semi_warm_instances_share_the_bandwidth_and_finish_together() {
    use icebox_core::units::MIB;
    let cfg = FaasmemConfig {
        // 1%/s of 100 + 50 MiB wants 1.5 MiB/s; the node allows half of that.
        bandwidth_bytes_per_s: 3 * MIB / 4,
        ..FaasmemConfig::default()
    };
    let mut history = ReuseHistory::new();
    for gap in 1..=100u64 {
        history.record(gap * 1_000);
    }
    let semiwarm_at = history.semiwarm_after(&cfg);
    assert_eq!(semiwarm_at, 99_000);

    let clock = ManualClock::new(semiwarm_at);
    let mut instances = vec![
        SemiWarmInstance {
            id: "big".into(),
            local_bytes: 100 * MIB,
            size_at_start: 100 * MIB,
        },
        SemiWarmInstance {
            id: "small".into(),
            local_bytes: 50 * MIB,
            size_at_start: 50 * MIB,
        },
    ];
    let mut last = clock.now_ms();
    let mut done_at = Vec::new();
    while instances.iter().any(|i| i.local_bytes > 0) {
        let now = clock.advance(1_000);
        for (id, bytes) in semiwarm_tick(&cfg, &instances, now - last) {
            let i = instances.iter_mut().find(|i| i.id == id).unwrap();
            i.local_bytes -= bytes;
            if i.local_bytes == 0 {
                done_at.push((id, now - semiwarm_at));
            }
        }
        last = now;
        assert!(now - semiwarm_at <= 300_000, "never finished");
    }
    // Uniformly halved: both take 200 s instead of 100 s.
    assert_eq!(
        done_at,
        [("big".to_string(), 200_000), ("small".to_string(), 200_000)]
    );
}
