//! Read-only views of the pool for the node API.

use super::Pool;
use icebox_core::api::{InstanceView, MemoryView, StateMemory};
use icebox_core::{InstanceState, MemoryStats};
use std::collections::BTreeMap;

impl Pool {
    pub fn instance_views(&self) -> Vec<InstanceView> {
        let inner = self.inner.lock().unwrap();
        let now = self.clock.now_ms();
        let mut views: Vec<InstanceView> = inner
            .slots
            .values()
            .map(|s| {
                let measured = s.instance.last_measured();
                InstanceView {
                    id: s.instance.id.clone(),
                    action: s.instance.fqn.clone(),
                    kind: s.instance.action.exec.kind.clone(),
                    state: s.state,
                    pids: measured.pids,
                    age_ms: s.instance.created.elapsed().as_millis() as u64,
                    idle_ms: s.state.is_kept_alive().then(|| now.saturating_sub(s.idle_since)),
                    invocations: s.invocations,
                    in_flight: s.in_flight,
                    memory_limit: s.instance.action.limits.memory_bytes(),
                    memory: measured.memory,
                    charged: if s.state.is_kept_alive() { self.charge_of(s) } else { 0 },
                    measured_at_ms: measured.at_ms,
                }
            })
            .collect();
        views.sort_by(|a, b| b.age_ms.cmp(&a.age_ms).then(a.id.cmp(&b.id)));
        views
    }

    pub fn memory_view(&self) -> MemoryView {
        let inner = self.inner.lock().unwrap();
        let mut by_state: BTreeMap<String, StateMemory> = InstanceState::ALL
            .iter()
            .filter(|s| **s != InstanceState::Evicted)
            .map(|s| (s.as_str().to_string(), StateMemory { instances: 0, memory: MemoryStats::default() }))
            .collect();
        let mut total = MemoryStats::default();
        let mut charged = 0;
        for slot in inner.slots.values() {
            let mem = slot.instance.measured_memory();
            let entry = by_state.entry(slot.state.as_str().to_string()).or_insert(StateMemory { instances: 0, memory: MemoryStats::default() });
            entry.instances += 1;
            entry.memory.add(&mem);
            total.add(&mem);
            if slot.state.is_kept_alive() {
                charged += self.charge_of(slot);
            }
        }
        MemoryView {
            budget: self.policy.config().budget_bytes,
            charge_mode: self.cfg.charge,
            charged,
            by_state,
            total,
            max_instances: self.policy.config().max_instances,
        }
    }

    pub fn instance_count(&self) -> usize {
        self.inner.lock().unwrap().slots.len()
    }
}
