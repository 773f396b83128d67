//! What the vm-shared backend (Squeezy's N:1 VMs, docs/vm.md) does with partitions, made
//! visible: its partition events become lifecycle events of the instances they belong to, and
//! Prometheus metrics (plug and reclaim times by memory mode, migrations, plugged memory).

use crate::events::EventBus;
use icebox_core::EventKind;
use icebox_vm::shared::{PartitionEvent, ReclaimOutcome};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModeLabel {
    pub mode: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModeOutcomeLabel {
    pub mode: String,
    pub outcome: String,
}

fn resize_histogram() -> Histogram {
    // 1 ms … ~32 s: Squeezy unplugs 2 GiB in ~0.1 s on KVM; a balloon under TCG takes seconds.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

pub struct PartitionMetrics {
    pub plug_seconds: Family<ModeLabel, Histogram, fn() -> Histogram>,
    pub reclaim_seconds: Family<ModeLabel, Histogram, fn() -> Histogram>,
    pub reclaims: Family<ModeOutcomeLabel, Counter>,
    pub pages_migrated: Family<ModeLabel, Counter>,
    pub plugged_bytes: Gauge,
    pub releasing_bytes: Gauge,
    pub vms: Gauge,
}

impl PartitionMetrics {
    pub fn register(registry: &mut Registry) -> PartitionMetrics {
        let plug_seconds = Family::<ModeLabel, Histogram, fn() -> Histogram>::new_with_constructor(
            resize_histogram,
        );
        registry.register(
            "partition_plug_seconds",
            "vm-shared: plugging an instance's partition until the guest has its memory online, by memory mode",
            plug_seconds.clone(),
        );
        let reclaim_seconds =
            Family::<ModeLabel, Histogram, fn() -> Histogram>::new_with_constructor(
                resize_histogram,
            );
        registry.register(
            "partition_reclaim_seconds",
            "vm-shared: unplugging an evicted instance's partition until the host has its memory back, by memory mode",
            reclaim_seconds.clone(),
        );
        let reclaims = Family::<ModeOutcomeLabel, Counter>::default();
        registry.register(
            "partition_reclaims",
            "vm-shared: partition unplugs by memory mode and outcome (released, timed_out, vm_gone)",
            reclaims.clone(),
        );
        let pages_migrated = Family::<ModeLabel, Counter>::default();
        registry.register(
            "partition_pages_migrated",
            "vm-shared: guest pages migrated while unplugging partitions (Squeezy: none)",
            pages_migrated.clone(),
        );
        let plugged_bytes = Gauge::default();
        registry.register(
            "partition_plugged_bytes",
            "vm-shared: memory plugged into partitions of all N:1 VMs",
            plugged_bytes.clone(),
        );
        let releasing_bytes = Gauge::default();
        registry.register(
            "partition_releasing_bytes",
            "vm-shared: plugged memory whose unplug is under way",
            releasing_bytes.clone(),
        );
        let vms = Gauge::default();
        registry.register("shared_vms", "vm-shared: N:1 VMs running", vms.clone());
        PartitionMetrics {
            plug_seconds,
            reclaim_seconds,
            reclaims,
            pages_migrated,
            plugged_bytes,
            releasing_bytes,
            vms,
        }
    }
}

/// One partition event into its metrics and onto the instance's event stream.
pub(super) fn record(event: &PartitionEvent, bus: &EventBus, m: &PartitionMetrics) {
    let detail = serde_json::to_string(event).ok();
    match event {
        PartitionEvent::VmBooted { .. } => {
            m.vms.inc();
        }
        PartitionEvent::VmEnded { .. } => {
            m.vms.dec();
        }
        PartitionEvent::Plugged(r) => {
            m.plug_seconds
                .get_or_create(&ModeLabel {
                    mode: r.mode.to_string(),
                })
                .observe(r.plug_ms / 1e3);
            bus.emit(
                &r.instance,
                &r.action,
                EventKind::PartitionPlugged,
                None,
                detail,
            );
        }
        PartitionEvent::Reclaimed(r) => {
            let mode = ModeLabel {
                mode: r.mode.to_string(),
            };
            let outcome = serde_json::to_value(r.outcome)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            m.reclaims
                .get_or_create(&ModeOutcomeLabel {
                    mode: mode.mode.clone(),
                    outcome,
                })
                .inc();
            m.pages_migrated
                .get_or_create(&mode)
                .inc_by(r.pages_migrated);
            let kind = match r.outcome {
                ReclaimOutcome::Released => {
                    m.reclaim_seconds
                        .get_or_create(&mode)
                        .observe(r.unplug_ms / 1e3);
                    EventKind::PartitionReclaimed
                }
                ReclaimOutcome::VmGone => EventKind::PartitionReclaimed,
                ReclaimOutcome::TimedOut => EventKind::PartitionStuck,
            };
            bus.emit(&r.instance, &r.action, kind, None, detail);
        }
        PartitionEvent::Recovered { instance, .. } => {
            bus.emit(instance, "", EventKind::PartitionRecovered, None, detail);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::units::MIB;
    use icebox_vm::shared::{Mode, PlugReport, ReclaimReport};

    fn reclaim(outcome: ReclaimOutcome) -> ReclaimReport {
        ReclaimReport {
            vm: "s1".into(),
            action: "ns/f".into(),
            instance: "i1".into(),
            mode: Mode::Squeezy,
            partition: 2,
            bytes: 256 * MIB,
            outcome,
            stop_ms: 40.0,
            drain_ms: 60.0,
            unplug_ms: 110.0,
            pages_migrated: 3,
            migrate_failures: 0,
            residue_bytes: Some(0),
            neighbours: 1,
        }
    }

    #[test]
    fn events_reach_the_instance_stream_and_the_metrics() {
        let bus = EventBus::new();
        let mut registry = Registry::default();
        let m = PartitionMetrics::register(&mut registry);
        record(
            &PartitionEvent::Plugged(PlugReport {
                vm: "s1".into(),
                action: "ns/f".into(),
                instance: "i1".into(),
                mode: Mode::Squeezy,
                partition: 2,
                bytes: 256 * MIB,
                waited_ms: 0.0,
                plug_ms: 90.0,
                booted_vm: true,
            }),
            &bus,
            &m,
        );
        record(
            &PartitionEvent::Reclaimed(reclaim(ReclaimOutcome::Released)),
            &bus,
            &m,
        );
        record(
            &PartitionEvent::Reclaimed(reclaim(ReclaimOutcome::TimedOut)),
            &bus,
            &m,
        );
        let (events, _) = bus.subscribe(0);
        let kinds: Vec<_> = events.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                EventKind::PartitionPlugged,
                EventKind::PartitionReclaimed,
                EventKind::PartitionStuck
            ]
        );
        assert!(events
            .iter()
            .all(|e| e.instance == "i1" && e.action == "ns/f"));
        let detail: serde_json::Value =
            serde_json::from_str(events[2].detail.as_deref().unwrap()).unwrap();
        assert_eq!(detail["event"], "reclaimed");
        assert_eq!(detail["outcome"], "timed_out");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(r#"partition_reclaims_total{mode="squeezy",outcome="released"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"partition_reclaims_total{mode="squeezy",outcome="timed_out"} 1"#));
        assert!(text.contains(r#"partition_pages_migrated_total{mode="squeezy"} 6"#));
        assert!(text.contains(r#"partition_reclaim_seconds_count{mode="squeezy"} 1"#));
    }
}
