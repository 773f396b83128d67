//! Read-only views of the pool for the node API.

use super::instance::Slot;
use super::Pool;
use icebox_core::api::{InstanceView, MemoryView, StateMemory};
use icebox_core::{InstanceState, MemoryStats};
use std::collections::BTreeMap;

impl Pool {
    fn view_of(&self, s: &Slot, now: icebox_policy::Millis) -> InstanceView {
        let measured = s.instance.last_measured();
        let mut view = InstanceView {
            id: s.instance.id.clone(),
            action: s.instance.fqn.clone(),
            kind: s.instance.action.exec.kind.clone(),
            state: s.state,
            pids: measured.pids,
            age_ms: u64::try_from(s.instance.created.elapsed().as_millis()).unwrap_or(u64::MAX),
            idle_ms: s
                .state
                .is_kept_alive()
                .then(|| now.saturating_sub(s.idle_since)),
            invocations: s.invocations,
            in_flight: s.in_flight,
            memory_limit: s.instance.action.limits.memory_bytes(),
            memory: measured.memory,
            charged: if s.state.is_kept_alive() {
                self.slots.charge_of(s)
            } else {
                0
            },
            measured_at_ms: measured.at_ms,
            // The components fill in their parts below.
            reclaimable: None,
            reclaim_mode: icebox_policy::ReclaimMode::Vanilla.as_str().to_string(),
            offload: icebox_core::OffloadView {
                mode: icebox_policy::OffloadMode::None.to_string(),
                local_bytes: measured.local,
                offloaded_bytes: measured.memory.swap,
                ..Default::default()
            },
            sharing_mode: s.instance.sharing.as_str().to_string(),
            sharing: None,
            isolation: self
                .backends
                .get(s.instance.isolation)
                .map(|b| b.name())
                .unwrap_or(s.instance.isolation.as_str())
                .to_string(),
            restored: s.instance.origin.restored_mode(),
            restore_stats: s.instance.sandbox.restore_stats(),
            techniques: Some(self.techniques_view(&s.instance.action)),
        };
        for c in self.components.iter() {
            c.view(self, s, &mut view);
        }
        view
    }

    /// Instances the components hold outside the books (stem cells).
    fn extra_views(&self) -> Vec<InstanceView> {
        self.components
            .iter()
            .flat_map(|c| c.extra_views(self))
            .collect()
    }

    /// Oldest first.
    pub fn instance_views(&self) -> Vec<InstanceView> {
        let now = self.clock.now_ms();
        let mut views: Vec<InstanceView> = self
            .slots
            .snapshot()
            .iter()
            .map(|s| self.view_of(s, now))
            .collect();
        views.extend(self.extra_views());
        views.sort_by(|a, b| b.age_ms.cmp(&a.age_ms).then(a.id.cmp(&b.id)));
        views
    }

    /// One instance; with `fresh`, its memory is measured now rather than at the last sample.
    pub async fn instance_view(&self, id: &str, fresh: bool) -> Option<InstanceView> {
        if fresh {
            let instance = self.instance(id)?;
            tokio::task::spawn_blocking(move || instance.measure())
                .await
                .ok()?;
        }
        self.slots
            .get(id)
            .map(|s| self.view_of(&s, self.clock.now_ms()))
    }

    pub fn instance(&self, id: &str) -> Option<std::sync::Arc<super::Instance>> {
        self.slots.instance(id)
    }

    pub fn memory_view(&self) -> MemoryView {
        let mut by_state: BTreeMap<String, StateMemory> = InstanceState::ALL
            .iter()
            .filter(|s| **s != InstanceState::Evicted)
            .map(|s| {
                (
                    s.as_str().to_string(),
                    StateMemory {
                        instances: 0,
                        memory: MemoryStats::default(),
                    },
                )
            })
            .collect();
        let mut total = MemoryStats::default();
        let mut charged = 0;
        let mut local = 0;
        for slot in &self.slots.snapshot() {
            let mem = slot.instance.measured_memory();
            let entry = by_state
                .entry(slot.state.as_str().to_string())
                .or_insert(StateMemory {
                    instances: 0,
                    memory: MemoryStats::default(),
                });
            entry.instances += 1;
            entry.memory.add(&mem);
            total.add(&mem);
            local += slot.instance.measured_local();
            if slot.state.is_kept_alive() {
                charged += self.slots.charge_of(slot);
            }
        }
        for cell in self.extra_views() {
            let entry = by_state
                .entry(cell.state.as_str().to_string())
                .or_insert(StateMemory {
                    instances: 0,
                    memory: MemoryStats::default(),
                });
            entry.instances += 1;
            entry.memory.add(&cell.memory);
            total.add(&cell.memory);
            local += cell.offload.local_bytes;
        }
        MemoryView {
            budget: self.policy.config().budget_bytes,
            charge_mode: self.cfg.charge,
            charged,
            by_state,
            total,
            max_instances: self.policy.config().max_instances,
            local,
            pool: self.cfg.offload_pool.view(),
        }
    }

    /// Why the offload pool is unusable, if it is.
    pub fn offload_pool_error(&self) -> Option<String> {
        self.cfg.offload_pool.error()
    }

    pub fn instance_count(&self) -> usize {
        self.slots.len()
    }
}
