//! Prometheus metrics of offloading (FaaSMem / TMO): what icebox moved to the pool and what
//! came back, the pool's own size, and what the barriers and steps cost.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabel {
    pub step: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BarrierLabel {
    pub barrier: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MeasureLabel {
    pub measure: String,
}

fn step_histogram() -> Histogram {
    // 10 µs … ~5 s: a barrier scans page tables (ms), a step pages out up to a whole heap.
    Histogram::new(exponential_buckets(0.00001, 2.0, 20))
}

pub struct OffloadMetrics {
    pub offloaded_bytes: Family<StepLabel, Counter>,
    pub refaulted_bytes: Counter,
    pub pool_bytes: Family<MeasureLabel, Gauge>,
    pub barrier_seconds: Family<BarrierLabel, Histogram, fn() -> Histogram>,
    pub step_seconds: Family<StepLabel, Histogram, fn() -> Histogram>,
    pub skipped: Family<super::labels::ReasonLabel, Counter>,
    /// Times the pool turned unusable under the daemon (the reason is in health and events).
    pub pool_unusable: Counter,
}

impl OffloadMetrics {
    pub fn register(registry: &mut Registry) -> OffloadMetrics {
        let m = OffloadMetrics {
            offloaded_bytes: Family::default(),
            refaulted_bytes: Counter::default(),
            pool_bytes: Family::default(),
            barrier_seconds: Family::new_with_constructor(step_histogram),
            step_seconds: Family::new_with_constructor(step_histogram),
            skipped: Family::default(),
            pool_unusable: Counter::default(),
        };
        registry.register(
            "offloaded_bytes",
            "Bytes icebox moved from instances to the offload pool, by step",
            m.offloaded_bytes.clone(),
        );
        registry.register(
            "refaulted_bytes",
            "Bytes icebox offloaded that instances touched again (back in local memory)",
            m.refaulted_bytes.clone(),
        );
        registry.register(
            "offload_pool_bytes",
            "The offload pool: capacity, stored (swapped data) and memory (RAM it takes itself)",
            m.pool_bytes.clone(),
        );
        registry.register(
            "offload_barrier_seconds",
            "Time to record a FaaSMem time barrier (runtime, init)",
            m.barrier_seconds.clone(),
        );
        registry.register(
            "offload_step_seconds",
            "Time of one offload step (runtime, probe_init, init_cold, rollback, rollback_cold, semiwarm, tmo)",
            m.step_seconds.clone(),
        );
        registry.register(
            "offload_skipped",
            "Offload steps not taken, by reason (pool_full, pool_unusable)",
            m.skipped.clone(),
        );
        registry.register(
            "offload_pool_unusable",
            "Times the offload pool turned unusable (swapped off or removed by someone else): \
             offloading stopped, the reason in health and in each offloading instance's events",
            m.pool_unusable.clone(),
        );
        m
    }
}
