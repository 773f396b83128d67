//! Gradual offload of semi-warm instances (§6.2): each at its own rate, all slowed down by the
//! same factor when together they would exceed the node's offload bandwidth, so a burst of
//! instances going semi-warm at once shares the link instead of the first ones starving it.

use super::config::FaasmemConfig;
use crate::clock::Millis;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemiWarmInstance {
    pub id: String,
    /// Anonymous memory still local: nothing beyond it can be offloaded.
    pub local_bytes: u64,
    /// Local memory when semi-warm started: the base of a percentage rate, so the instance is
    /// fully offloaded after 100 / rate seconds rather than slowing down as it shrinks.
    pub size_at_start: u64,
}

/// Bytes each semi-warm instance may offload now, `elapsed_ms` after the previous tick: its
/// rate times the elapsed time, capped at its local memory, then scaled down uniformly so the
/// sum stays under `bandwidth_bytes_per_s` (0 = no cap). Instances with nothing to offload are
/// left out. The mechanism offloads whole pages, so an allowance under a page is lost: tick
/// often enough to be reactive, rarely enough that each allowance covers some pages.
pub fn semiwarm_tick(
    cfg: &FaasmemConfig,
    instances: &[SemiWarmInstance],
    elapsed_ms: Millis,
) -> Vec<(String, u64)> {
    let wanted: Vec<u64> = instances
        .iter()
        .map(|i| {
            cfg.semiwarm
                .allowance(i.size_at_start, elapsed_ms)
                .min(i.local_bytes)
        })
        .collect();
    let total: u128 = wanted.iter().map(|&b| u128::from(b)).sum();
    let cap = u128::from(cfg.bandwidth_bytes_per_s) * u128::from(elapsed_ms) / 1000;
    let scale = |b: u64| -> u64 {
        if cfg.bandwidth_bytes_per_s == 0 || total <= cap {
            b
        } else {
            // Exact integer scaling: the sum of the results never exceeds the cap.
            u64::try_from(u128::from(b) * cap / total).unwrap_or(u64::MAX)
        }
    };
    instances
        .iter()
        .zip(wanted)
        .map(|(i, b)| (i.id.clone(), scale(b)))
        .filter(|(_, b)| *b > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faasmem::rate::SemiWarm;

    use icebox_core::units::MIB;

    fn inst(id: &str, local_bytes: u64, size_at_start: u64) -> SemiWarmInstance {
        SemiWarmInstance {
            id: id.into(),
            local_bytes,
            size_at_start,
        }
    }

    fn cfg(semiwarm: SemiWarm, bandwidth_bytes_per_s: u64) -> FaasmemConfig {
        FaasmemConfig {
            semiwarm,
            bandwidth_bytes_per_s,
            ..FaasmemConfig::default()
        }
    }

    #[test]
    fn percent_rate_is_a_share_of_the_size_at_start() {
        let c = cfg(SemiWarm::PercentPerSec(1.0), 0);
        // Half offloaded already: the rate still counts from the starting 200 MiB.
        let plan = semiwarm_tick(
            &c,
            &[
                inst("a", 100 * MIB, 200 * MIB),
                inst("b", 50 * MIB, 50 * MIB),
            ],
            2_000,
        );
        assert_eq!(plan, [("a".to_string(), 4 * MIB), ("b".to_string(), MIB)]);
    }

    #[test]
    fn bytes_rate_is_the_same_for_everyone() {
        let c = cfg(SemiWarm::BytesPerSec(MIB), 0);
        let plan = semiwarm_tick(
            &c,
            &[
                inst("a", 100 * MIB, 200 * MIB),
                inst("b", 50 * MIB, 50 * MIB),
            ],
            500,
        );
        assert_eq!(
            plan,
            [("a".to_string(), MIB / 2), ("b".to_string(), MIB / 2)]
        );
    }

    #[test]
    fn capped_at_what_is_still_local_and_nothing_left_is_left_out() {
        let c = cfg(SemiWarm::BytesPerSec(10 * MIB), 0);
        let plan = semiwarm_tick(
            &c,
            &[
                inst("almost-done", MIB, 100 * MIB),
                inst("done", 0, 100 * MIB),
                inst("big", 500 * MIB, 500 * MIB),
            ],
            1_000,
        );
        assert_eq!(
            plan,
            [
                ("almost-done".to_string(), MIB),
                ("big".to_string(), 10 * MIB)
            ]
        );
        assert!(semiwarm_tick(&c, &[inst("a", MIB, MIB)], 0).is_empty());
        assert!(semiwarm_tick(&cfg(SemiWarm::Off, 0), &[inst("a", MIB, MIB)], 1_000).is_empty());
    }

    #[test]
    fn over_the_bandwidth_everyone_slows_down_by_the_same_factor() {
        // Wanted: 4 + 2 + 2 = 8 MiB in one second, the node allows 4 MiB/s: all halve.
        let c = cfg(SemiWarm::PercentPerSec(1.0), 4 * MIB);
        let instances = [
            inst("a", 400 * MIB, 400 * MIB),
            inst("b", 200 * MIB, 200 * MIB),
            inst("c", 200 * MIB, 200 * MIB),
        ];
        let plan = semiwarm_tick(&c, &instances, 1_000);
        assert_eq!(
            plan,
            [
                ("a".to_string(), 2 * MIB),
                ("b".to_string(), MIB),
                ("c".to_string(), MIB)
            ]
        );
        // Under the cap nothing changes.
        let roomy = cfg(SemiWarm::PercentPerSec(1.0), 100 * MIB);
        let total: u64 = semiwarm_tick(&roomy, &instances, 1_000)
            .iter()
            .map(|(_, b)| b)
            .sum();
        assert_eq!(total, 8 * MIB);
        // Odd numbers: the scaled sum never exceeds the cap.
        let tight = cfg(SemiWarm::BytesPerSec(1_000_003), 1_000_001);
        let many: Vec<SemiWarmInstance> = (0..7)
            .map(|k| inst(&k.to_string(), u64::MAX, u64::MAX))
            .collect();
        let plan = semiwarm_tick(&tight, &many, 3_333);
        let sum: u64 = plan.iter().map(|(_, b)| b).sum();
        assert!(sum <= 1_000_001 * 3_333 / 1000, "{sum}");
        assert_eq!(plan.len(), 7);
        assert!(plan.iter().all(|(_, b)| *b == plan[0].1));
    }
}
