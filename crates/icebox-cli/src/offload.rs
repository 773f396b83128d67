//! The offload part of `icebox memory`: the node's offload pool and, per instance that
//! offloads, its local and offloaded memory and FaaSMem segments.

use crate::table::{size, Align, Table};
use icebox_core::api::InstanceView;
use icebox_core::PoolView;

/// One line on the pool: what it holds and the RAM that costs.
pub fn pool_line(pool: &PoolView) -> String {
    let mut line = match pool.kind.as_str() {
        "" | "none" => "none (nothing is offloaded; --offload-pool zram:SIZE or swap)".to_string(),
        kind => format!(
            "{kind}{} holds {} in {} of RAM (ratio {:.1}), capacity {}",
            pool.device
                .as_deref()
                .map(|d| format!(" {d}"))
                .unwrap_or_default(),
            size(pool.stored_bytes),
            size(pool.memory_bytes),
            pool.compression_ratio,
            size(pool.capacity_bytes)
        ),
    };
    if let Some(e) = &pool.error {
        line.push_str(&format!(" - UNUSABLE: {e}"));
    }
    line
}

/// Instances whose memory is offloaded (mode tmo or faasmem); empty when there are none.
pub fn offload_table(list: &[InstanceView]) -> String {
    let offloading: Vec<&InstanceView> = list
        .iter()
        .filter(|i| !i.offload.mode.is_empty() && i.offload.mode != "none")
        .collect();
    if offloading.is_empty() {
        return String::new();
    }
    let mut t = Table::new(&[
        ("OFFLOADING INSTANCE", Align::Left),
        ("ACTION", Align::Left),
        ("MODE", Align::Left),
        ("LOCAL", Align::Right),
        ("OFFLOADED", Align::Right),
        ("MOVED", Align::Right),
        ("REFAULTED", Align::Right),
        // Per FaaSMem segment, what is still resident: 0 beside a large OFFLOADED is an
        // instance whose segments are all out, not a missing measurement.
        ("RESIDENT RUNTIME", Align::Right),
        ("RESIDENT INIT", Align::Right),
        ("RESIDENT EXEC", Align::Right),
        ("RESIDENT HOT", Align::Right),
        ("WINDOW", Align::Right),
        ("SEMI-WARM", Align::Left),
        ("STOPPED", Align::Left),
    ]);
    for i in offloading {
        let o = &i.offload;
        let seg = |f: fn(&icebox_core::SegmentView) -> u64| {
            o.segments
                .as_ref()
                .map(|s| size(f(s)))
                .unwrap_or_else(|| "-".into())
        };
        t.push(vec![
            i.id.clone(),
            i.action.clone(),
            o.mode.clone(),
            size(o.local_bytes),
            size(o.offloaded_bytes),
            size(o.moved_bytes),
            size(o.refaulted_bytes),
            seg(|s| s.runtime),
            seg(|s| s.init),
            seg(|s| s.execution),
            seg(|s| s.hot),
            o.request_window
                .map(|w| w.to_string())
                .unwrap_or_else(|| "-".into()),
            if o.semiwarm { "yes" } else { "no" }.into(),
            // Offloading stopped: its pages compress too poorly for a RAM pool.
            if o.incompressible {
                "incompressible"
            } else {
                "-"
            }
            .into(),
        ]);
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::{InstanceState, MemoryStats, OffloadView, SegmentView};

    use icebox_core::units::MIB;

    fn instance(mode: &str) -> InstanceView {
        InstanceView {
            id: "i-1".into(),
            action: "guest/web".into(),
            kind: "python:3".into(),
            state: InstanceState::Frozen,
            pids: vec![7],
            age_ms: 1,
            idle_ms: Some(1),
            invocations: 3,
            in_flight: 0,
            memory_limit: 256 * MIB,
            memory: MemoryStats::default(),
            charged: 0,
            measured_at_ms: 0,
            reclaimable: None,
            reclaim_mode: "vanilla".into(),
            offload: OffloadView {
                mode: mode.into(),
                local_bytes: 12 * MIB,
                offloaded_bytes: 30 * MIB,
                moved_bytes: 32 * MIB,
                refaulted_bytes: 2 * MIB,
                segments: Some(SegmentView {
                    runtime: MIB,
                    init: 4 * MIB,
                    execution: 5 * MIB,
                    hot: 2 * MIB,
                }),
                request_window: Some(20),
                semiwarm: true,
                incompressible: false,
            },
            sharing_mode: "process".into(),
            sharing: None,
            isolation: "crun".into(),
            restored: None,
            restore_stats: None,
            techniques: None,
        }
    }

    #[test]
    fn only_offloading_instances_are_listed() {
        assert_eq!(offload_table(&[instance("none")]), "");
        let t = offload_table(&[instance("faasmem"), instance("none")]);
        assert_eq!(t.lines().count(), 2, "{t}");
        assert!(
            t.lines().next().unwrap().contains("RESIDENT RUNTIME"),
            "{t}"
        );
        let row = t.lines().nth(1).unwrap();
        for cell in ["faasmem", "12.0 MiB", "30.0 MiB", "4.0 MiB", "20", "yes"] {
            assert!(row.contains(cell), "{cell} missing in {row}");
        }
    }

    #[test]
    fn pool_line_says_what_the_pool_costs_and_when_it_is_unusable() {
        let mut pool = PoolView {
            kind: "zram".into(),
            device: Some("/dev/zram1".into()),
            capacity_bytes: 1024 * MIB,
            stored_bytes: 100 * MIB,
            memory_bytes: 40 * MIB,
            compression_ratio: 2.5,
            error: None,
        };
        assert_eq!(
            pool_line(&pool),
            "zram /dev/zram1 holds 100.0 MiB in 40.0 MiB of RAM (ratio 2.5), capacity 1.00 GiB"
        );
        pool.error = Some("no longer swapped on".into());
        assert!(pool_line(&pool).ends_with("UNUSABLE: no longer swapped on"));
        assert!(pool_line(&PoolView::default()).starts_with("none"));
    }
}
