//! Prometheus metrics of snapshots (docs/snapshots.md): builds, restores by mode and how long
//! they took, and restores that fell back to a normal start.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModeLabel {
    pub mode: String,
}

fn restore_histogram() -> Histogram {
    // 1 ms … ~16 s: a process restore takes tens of ms, a VM's under TCG seconds.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

pub struct SnapshotMetrics {
    pub builds: Family<ResultLabel, Counter>,
    pub restore_seconds: Family<ModeLabel, Histogram, fn() -> Histogram>,
    pub fallbacks: Family<ModeLabel, Counter>,
}

impl SnapshotMetrics {
    pub fn register(registry: &mut Registry) -> SnapshotMetrics {
        let builds = Family::<ResultLabel, Counter>::default();
        registry.register(
            "snapshot_builds",
            "Snapshots built from template instances, by result (ok, failed)",
            builds.clone(),
        );
        let restore_seconds =
            Family::<ModeLabel, Histogram, fn() -> Histogram>::new_with_constructor(
                restore_histogram,
            );
        registry.register(
            "snapshot_restore_seconds",
            "Restore of an instance from a snapshot until its runtime is reseeded, by restore mode",
            restore_seconds.clone(),
        );
        let fallbacks = Family::<ModeLabel, Counter>::default();
        registry.register(
            "snapshot_fallbacks",
            "Restores that failed, so the instance started normally, by restore mode",
            fallbacks.clone(),
        );
        SnapshotMetrics {
            builds,
            restore_seconds,
            fallbacks,
        }
    }
}
