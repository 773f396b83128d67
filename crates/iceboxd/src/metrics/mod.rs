//! Prometheus metrics (prometheus-client encodes them). Counters and histograms are updated
//! where things happen; gauges of instances and memory by state are filled at scrape time
//! from the pool's snapshot.

pub mod forward;
mod labels;
pub mod offload;
pub mod partitions;
pub mod snapshots;

pub use labels::{
    InvocationLabels, KindLabel, MemoryLabels, OutcomeLabel, ReasonLabel, StartLabel, StateLabel,
};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

fn latency_histogram() -> Histogram {
    // 100 µs … ~100 s
    Histogram::new(exponential_buckets(0.0001, 2.0, 21))
}

fn fast_histogram() -> Histogram {
    // 10 µs … ~160 ms: freeze and thaw are sub-millisecond when healthy.
    Histogram::new(exponential_buckets(0.00001, 2.0, 15))
}

pub struct Metrics {
    pub registry: Registry,
    pub invocations: Family<InvocationLabels, Counter>,
    pub invocation_seconds: Family<StartLabel, Histogram, fn() -> Histogram>,
    pub cold_start_seconds: Family<KindLabel, Histogram, fn() -> Histogram>,
    pub instances: Family<StateLabel, Gauge>,
    pub memory_bytes: Family<MemoryLabels, Gauge>,
    pub pool_charged: Gauge,
    pub pool_budget: Gauge,
    pub evictions: Family<ReasonLabel, Counter>,
    pub freeze_seconds: Histogram,
    pub thaw_seconds: Histogram,
    pub queue_length: Gauge,
    pub rejected: Counter,
    pub reclaims: Family<OutcomeLabel, Counter>,
    pub reclaimed_bytes: Counter,
    pub reclaim_cpu_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
    pub recorder: crate::recorder::RecorderMetrics,
    pub offload: offload::OffloadMetrics,
    pub snapshots: snapshots::SnapshotMetrics,
    pub partitions: partitions::PartitionMetrics,
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("icebox");
        let invocations = Family::<InvocationLabels, Counter>::default();
        registry.register(
            "invocations",
            "Invocations by start kind and outcome",
            invocations.clone(),
        );
        let invocation_seconds =
            Family::<StartLabel, Histogram, fn() -> Histogram>::new_with_constructor(
                latency_histogram,
            );
        registry.register(
            "invocation_duration_seconds",
            "End-to-end invocation latency inside the daemon",
            invocation_seconds.clone(),
        );
        let cold_start_seconds =
            Family::<KindLabel, Histogram, fn() -> Histogram>::new_with_constructor(
                latency_histogram,
            );
        registry.register(
            "cold_start_seconds",
            "Sandbox start + runtime ready + /init",
            cold_start_seconds.clone(),
        );
        let instances = Family::<StateLabel, Gauge>::default();
        registry.register(
            "instances",
            "Instances by lifecycle state",
            instances.clone(),
        );
        let memory_bytes = Family::<MemoryLabels, Gauge>::default();
        registry.register(
            "memory_bytes",
            "Measured instance memory by state",
            memory_bytes.clone(),
        );
        let pool_charged = Gauge::default();
        registry.register(
            "pool_charged_bytes",
            "Memory charged by idle and frozen instances",
            pool_charged.clone(),
        );
        let pool_budget = Gauge::default();
        registry.register(
            "pool_budget_bytes",
            "Memory budget of the keep-alive pool",
            pool_budget.clone(),
        );
        let evictions = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "evictions",
            "Evicted instances by reason",
            evictions.clone(),
        );
        let freeze_seconds = fast_histogram();
        registry.register(
            "freeze_seconds",
            "Time to freeze an instance",
            freeze_seconds.clone(),
        );
        let thaw_seconds = fast_histogram();
        registry.register(
            "thaw_seconds",
            "Time to thaw an instance",
            thaw_seconds.clone(),
        );
        let queue_length = Gauge::default();
        registry.register(
            "queue_length",
            "Invocations waiting for capacity",
            queue_length.clone(),
        );
        let rejected = Counter::default();
        registry.register(
            "rejected",
            "Invocations rejected with 429 (queue full)",
            rejected.clone(),
        );
        let reclaims = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "reclaims",
            "Reclaims of idle instances by outcome (ok, failed, evicted)",
            reclaims.clone(),
        );
        let reclaimed_bytes = Counter::default();
        registry.register(
            "reclaimed_bytes",
            "Memory freed by reclaims (daemon-measured)",
            reclaimed_bytes.clone(),
        );
        let reclaim_cpu_seconds = Counter::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            "reclaim_cpu_seconds",
            "CPU time runtimes spent reclaiming",
            reclaim_cpu_seconds.clone(),
        );
        let recorder = crate::recorder::RecorderMetrics::default();
        registry.register(
            "activations_unwritten",
            "Activation records held in memory because the registry has not taken them yet",
            recorder.unwritten.clone(),
        );
        registry.register(
            "registry_write_failures",
            "Failed attempts to write activation records to the registry",
            recorder.write_failures.clone(),
        );
        registry.register(
            "registry_bytes",
            "Bytes of the registry's files (database and WAL), as of the last write",
            recorder.registry_bytes.clone(),
        );
        registry.register(
            "registry_max_bytes",
            "The byte budget of the registry's files (--registry-max-bytes)",
            recorder.registry_max_bytes.clone(),
        );
        registry.register(
            "registry_logs_dropped",
            "Activation records whose logs were dropped to keep the registry within its byte budget",
            recorder.logs_dropped.clone(),
        );
        registry.register(
            "registry_records_dropped",
            "Activation records deleted to keep the registry within its byte budget",
            recorder.records_dropped.clone(),
        );
        let offload = offload::OffloadMetrics::register(&mut registry);
        let snapshots = snapshots::SnapshotMetrics::register(&mut registry);
        let partitions = partitions::PartitionMetrics::register(&mut registry);
        Metrics {
            partitions,
            snapshots,
            registry,
            recorder,
            offload,
            reclaims,
            reclaimed_bytes,
            reclaim_cpu_seconds,
            invocations,
            invocation_seconds,
            cold_start_seconds,
            instances,
            memory_bytes,
            pool_charged,
            pool_budget,
            evictions,
            freeze_seconds,
            thaw_seconds,
            queue_length,
            rejected,
        }
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
