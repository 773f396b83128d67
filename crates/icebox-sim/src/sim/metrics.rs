//! What a run measures.

use serde::Serialize;

const GIB: f64 = icebox_core::units::GIB as f64;

/// Accumulated while the simulation runs.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    pub invocations: u64,
    pub cold_starts: u64,
    pub warm_starts: u64,
    pub joined: u64,
    pub queued: u64,
    pub rejected: u64,
    pub queue_delay_ms_sum: u64,
    pub queue_delay_ms_max: u64,
    pub latencies_ms: Vec<f32>,
    pub instances_created: u64,
    pub evictions: u64,
    pub expirations: u64,
    pub reclaims: u64,
    pub prewarms: u64,
    pub unloads: u64,
    /// Integrals over the counted period, byte-milliseconds.
    pub memory_byte_ms: u128,
    pub active_byte_ms: u128,
    pub peak_memory: u64,
    pub peak_active: u64,
    pub events: u64,
    /// Per node, indexed like the cluster's nodes.
    pub node_invocations: Vec<u64>,
    pub node_cold_starts: Vec<u64>,
    pub node_memory_byte_ms: Vec<u128>,
}

impl Counters {
    pub fn for_nodes(nodes: usize) -> Counters {
        Counters {
            node_invocations: vec![0; nodes],
            node_cold_starts: vec![0; nodes],
            node_memory_byte_ms: vec![0; nodes],
            ..Counters::default()
        }
    }
}

/// One node's share of a run: where placement sent the work and what it kept in memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeMetrics {
    pub node: String,
    pub invocations: u64,
    pub cold_starts: u64,
    pub memory_gib_s: f64,
    pub avg_memory_gib: f64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct TimelineRow {
    pub second: u64,
    pub memory_mib: f64,
    pub active_mib: f64,
    pub instances: u32,
    pub busy_instances: u32,
    pub queued: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct Metrics {
    pub invocations: u64,
    pub cold_starts: u64,
    pub cold_start_fraction: f64,
    pub warm_starts: u64,
    /// Activations that joined a busy instance (sharing modes).
    pub joined: u64,
    pub queued: u64,
    pub still_queued_at_end: u64,
    /// Invocations whose instance is larger than a node: never run, not in the other counts.
    pub rejected: u64,
    pub queue_delay_ms_mean: f64,
    pub queue_delay_ms_max: u64,
    pub latency_ms_p50: f64,
    pub latency_ms_p99: f64,
    pub latency_ms_mean: f64,
    pub memory_gib_s: f64,
    pub avg_memory_gib: f64,
    pub peak_memory_gib: f64,
    pub avg_active_gib: f64,
    pub peak_active_gib: f64,
    pub instances_created: u64,
    pub evictions: u64,
    pub expirations: u64,
    pub reclaims: u64,
    pub prewarms: u64,
    pub unloads: u64,
    pub simulated_s: f64,
    pub events: u64,
    pub wall_s: f64,
    pub events_per_s: f64,
    pub invocations_per_s: f64,
    pub per_node: Vec<NodeMetrics>,
}

impl Metrics {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
    )]
    pub fn from_counters(
        mut c: Counters,
        node_ids: &[String],
        counted_ms: u64,
        still_queued: u64,
        wall_s: f64,
    ) -> Metrics {
        let n = c.latencies_ms.len();
        let pct = |v: &mut Vec<f32>, p: f64| -> f64 {
            if v.is_empty() {
                return 0.0;
            }
            let k = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
            let (_, x, _) = v.select_nth_unstable_by(k, |a, b| a.total_cmp(b));
            f64::from(*x)
        };
        let p50 = pct(&mut c.latencies_ms, 0.50);
        let p99 = pct(&mut c.latencies_ms, 0.99);
        let mean = if n == 0 {
            0.0
        } else {
            c.latencies_ms.iter().map(|&x| f64::from(x)).sum::<f64>() / n as f64
        };
        let secs = counted_ms as f64 / 1_000.0;
        let gib_s = |b: u128| b as f64 / GIB / 1_000.0;
        let per = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
        let rate = |x: u64| if wall_s > 0.0 { x as f64 / wall_s } else { 0.0 };
        let per_node = node_ids
            .iter()
            .enumerate()
            .map(|(n, id)| NodeMetrics {
                node: id.clone(),
                invocations: c.node_invocations[n],
                cold_starts: c.node_cold_starts[n],
                memory_gib_s: gib_s(c.node_memory_byte_ms[n]),
                avg_memory_gib: per(gib_s(c.node_memory_byte_ms[n])),
            })
            .collect();
        Metrics {
            invocations: c.invocations,
            cold_starts: c.cold_starts,
            cold_start_fraction: if c.invocations == 0 {
                0.0
            } else {
                c.cold_starts as f64 / c.invocations as f64
            },
            warm_starts: c.warm_starts,
            joined: c.joined,
            queued: c.queued,
            still_queued_at_end: still_queued,
            rejected: c.rejected,
            queue_delay_ms_mean: if c.queued == 0 {
                0.0
            } else {
                c.queue_delay_ms_sum as f64 / c.queued as f64
            },
            queue_delay_ms_max: c.queue_delay_ms_max,
            latency_ms_p50: p50,
            latency_ms_p99: p99,
            latency_ms_mean: mean,
            memory_gib_s: gib_s(c.memory_byte_ms),
            avg_memory_gib: per(gib_s(c.memory_byte_ms)),
            peak_memory_gib: c.peak_memory as f64 / GIB,
            avg_active_gib: per(gib_s(c.active_byte_ms)),
            peak_active_gib: c.peak_active as f64 / GIB,
            instances_created: c.instances_created,
            evictions: c.evictions,
            expirations: c.expirations,
            reclaims: c.reclaims,
            prewarms: c.prewarms,
            unloads: c.unloads,
            simulated_s: secs,
            events: c.events,
            wall_s,
            events_per_s: rate(c.events),
            invocations_per_s: rate(c.invocations),
            per_node,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // The module's own `GIB` is a float.
    use icebox_core::units;

    #[test]
    fn percentiles_and_averages() {
        let c = Counters {
            invocations: 100,
            cold_starts: 5,
            latencies_ms: (1..=100).map(|x| x as f32).collect(),
            memory_byte_ms: (2 * u128::from(units::GIB)) * 10_000,
            node_invocations: vec![60, 40],
            node_cold_starts: vec![1, 4],
            node_memory_byte_ms: vec![
                u128::from(units::GIB) * 10_000,
                u128::from(units::GIB) * 10_000,
            ],
            ..Counters::default()
        };
        let m = Metrics::from_counters(c, &["n1".into(), "n2".into()], 10_000, 0, 0.5);
        assert_eq!(m.latency_ms_p50, 50.0);
        assert_eq!(m.latency_ms_p99, 99.0);
        assert_eq!(m.cold_start_fraction, 0.05);
        assert_eq!(m.memory_gib_s, 20.0);
        assert_eq!(m.avg_memory_gib, 2.0);
        assert_eq!(m.invocations_per_s, 200.0);
        assert_eq!(
            m.per_node[1],
            NodeMetrics {
                node: "n2".into(),
                invocations: 40,
                cold_starts: 4,
                memory_gib_s: 10.0,
                avg_memory_gib: 1.0,
            }
        );
    }
}
