//! Backends that hand instances memory out of a fixed host budget (Squeezy's N:1 VMs plug one
//! partition per instance under `--vm-memory`): before such a start, idle instances of the
//! same backend are evicted, least recently used first, until the memory they release covers
//! what the new one needs (`KeepAlivePolicy::room_for`). The backend's `start` then waits for
//! the release, so how fast a VM gives memory back is what the new instance waits for. When
//! every instance holding the budget is busy, the start waits for one to become idle and
//! evicts it then, rather than letting the backend wait for keep-alive to expire.

use super::backends::Isolation;
use super::component::Component;
use super::{EvictReason, Pool};
use async_trait::async_trait;
use icebox_policy::{EvictionReason, PoolEntry};
use icebox_sandbox::{InstanceSpec, SandboxBackend};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a start looks for idle instances to evict before it leaves the rest to the
/// backend's own (bounded) wait and error.
const ROOM_WAIT: Duration = Duration::from_secs(60);

/// The host-budget component: registered when a backend hands out memory from a fixed budget.
pub struct HostBudget;

#[async_trait]
impl Component for HostBudget {
    fn name(&self) -> &'static str {
        "host_budget"
    }

    async fn before_start(
        &self,
        pool: &Arc<Pool>,
        isolation: Isolation,
        backend: &Arc<dyn SandboxBackend>,
        spec: &InstanceSpec,
    ) {
        pool.make_room(isolation, backend, spec).await;
    }
}

impl Pool {
    async fn make_room(
        &self,
        isolation: Isolation,
        backend: &Arc<dyn SandboxBackend>,
        spec: &InstanceSpec,
    ) {
        if backend.memory_budget().is_none() {
            return;
        }
        let need = backend.instance_charge(spec);
        let deadline = Instant::now() + ROOM_WAIT;
        loop {
            // Before looking, so an instance becoming idle meanwhile is not missed.
            let woken = self.queue.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            self.evict_for_room(isolation, backend, spec, need).await;
            let Some(budget) = backend.memory_budget() else {
                return;
            };
            if budget.free_soon() >= need || Instant::now() >= deadline {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_millis(500), woken).await;
        }
    }

    async fn evict_for_room(
        &self,
        isolation: Isolation,
        backend: &Arc<dyn SandboxBackend>,
        spec: &InstanceSpec,
        need: u64,
    ) {
        let Some(budget) = backend.memory_budget() else {
            return;
        };
        let idle: Vec<PoolEntry> = self
            .slots
            .snapshot()
            .into_iter()
            .filter(|s| {
                s.state.is_kept_alive() && !s.reclaiming && s.instance.isolation == isolation
            })
            .map(|s| PoolEntry {
                id: s.instance.id.clone(),
                action: s.instance.fqn.clone(),
                idle_since: s.idle_since,
                charged: backend.instance_charge(&InstanceSpec {
                    memory_limit_bytes: s.instance.action.limits.memory_bytes(),
                    ..spec.clone()
                }),
                frozen: s.frozen_since.is_some(),
                keep_alive_ms: s.keep_alive_ms,
            })
            .collect();
        for id in self.policy.room_for(&idle, need, budget.free_soon()) {
            if let Some(slot) = self.slots.remove_kept_alive(&id) {
                self.destroy(slot, EvictReason::Policy(EvictionReason::MemoryBudget))
                    .await;
            }
        }
    }
}
