//! The books of every instance the pool owns (stem cells have their own): one mutex, taken
//! only inside these methods. Nothing here calls into another part of the pool, so this lock
//! is never held together with another pool lock (the lock order in mod.rs).

use super::instance::{Instance, Slot};
use super::{EvictReason, Health};
use icebox_core::{ActionSpec, ChargeMode, InstanceState};
use icebox_policy::{
    join_busy, Admission, Busy, EvictionReason, KeepAlivePolicy, Millis, PoolEntry,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub(super) struct Slots {
    charge: ChargeMode,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    slots: HashMap<String, Slot>,
    /// Instances being created (each holds a place under max_instances).
    starting: usize,
    /// The same, per action (`namespace/name`), for backends with a per-action limit.
    starting_of: HashMap<String, usize>,
    /// Per action version whose instances take several activations: the room on its instances
    /// being started, and the activations waiting to take it.
    joinable: HashMap<String, Joinable>,
    shutting_down: bool,
}

#[derive(Default)]
struct Joinable {
    /// Instances of it being started.
    starting: u32,
    /// Activations each of them takes beyond the one that started it.
    room_each: u32,
    /// Activations waiting for one of them (`Claim::Join`).
    joiners: u32,
}

impl Joinable {
    fn free(&self) -> u32 {
        (self.starting * self.room_each).saturating_sub(self.joiners)
    }
}

/// The `joinable` key: instances serve one action version.
fn version_key(fqn: &str, version: &str) -> String {
    format!("{fqn}@{version}")
}

impl Table {
    fn started(&mut self, fqn: &str, version: &str) {
        if let Some(n) = self.starting_of.get_mut(fqn) {
            *n -= 1;
            if *n == 0 {
                self.starting_of.remove(fqn);
            }
        }
        let key = version_key(fqn, version);
        if let Some(j) = self.joinable.get_mut(&key) {
            j.starting = j.starting.saturating_sub(1);
            if j.starting == 0 && j.joiners == 0 {
                self.joinable.remove(&key);
            }
        }
    }

    /// A waiting activation looks again: it gives up the room it held (and takes it again if
    /// the instance is still starting).
    fn stop_waiting(&mut self, key: &str) {
        if let Some(j) = self.joinable.get_mut(key) {
            j.joiners = j.joiners.saturating_sub(1);
            if j.starting == 0 && j.joiners == 0 {
                self.joinable.remove(key);
            }
        }
    }
}

/// What the books decided for one invocation.
pub(super) enum Claim {
    /// This warm instance now counts the invocation as running on it; `idle_since`: it was
    /// taken from the keep-alive pool, idle since then (policy clock).
    Warm(Arc<Instance>, Option<Millis>),
    /// A place under max_instances is reserved (`starting`); evict these first.
    Cold { evict: Vec<String> },
    /// An instance of the action being started has room for this invocation too: wait for it
    /// (then claim again, with `joining`).
    Join,
    /// No capacity now.
    Wait,
}

/// What the keep-alive policy wants done now.
pub(super) struct KeepAlivePlan {
    pub evictions: Vec<(String, EvictionReason)>,
    pub freezes: Vec<String>,
    /// When the answer next changes by itself.
    pub deadline: Option<Millis>,
}

pub(super) struct ShuttingDown;

impl Slots {
    pub fn new(charge: ChargeMode) -> Self {
        Slots {
            charge,
            table: Mutex::new(Table::default()),
        }
    }

    /// What an idle instance is charged against the budget.
    pub fn charge_of(&self, slot: &Slot) -> u64 {
        match self.charge {
            // Offloaded memory is room for more warm instances, but a compressed pool's own
            // RAM is not: charge local memory.
            ChargeMode::Uss => slot.instance.measured_local(),
            mode => mode.charge(
                &slot.instance.measured_memory(),
                slot.instance.action.limits.memory_bytes(),
            ),
        }
    }

    /// The keep-alive pool (idle and frozen) as the policy sees it.
    fn entries(&self, t: &Table) -> Vec<PoolEntry> {
        t.slots
            .values()
            .filter(|s| s.state.is_kept_alive())
            .map(|s| PoolEntry {
                id: s.instance.id.clone(),
                action: s.instance.fqn.clone(),
                idle_since: s.idle_since,
                charged: self.charge_of(s),
                frozen: s.state == InstanceState::Frozen,
                keep_alive_ms: s.keep_alive_ms,
            })
            .collect()
    }

    /// A running instance with room, a warm one, room on one being started, a place for a new
    /// one, or nothing. `per_action`: how many instances of the action its backend can host at
    /// once; `capacity`: concurrent activations one instance takes; `joining`: the invocation was told to wait for an instance being started
    /// ([`Claim::Join`]) and looks again.
    pub fn claim(
        &self,
        action: &ActionSpec,
        capacity: u32,
        policy: &KeepAlivePolicy,
        per_action: Option<usize>,
        joining: bool,
    ) -> Result<Claim, ShuttingDown> {
        let mut t = self.table.lock().unwrap();
        let fqn = action.fqn();
        let key = version_key(&fqn, &action.version);
        if joining {
            t.stop_waiting(&key);
        }
        if t.shutting_down {
            return Err(ShuttingDown);
        }
        // A dead runtime is never handed out (its exit watcher is about to evict it).
        let current = |s: &Slot| {
            s.instance.fqn == fqn
                && !s.stale
                && s.instance.action.version == action.version
                && s.instance.sandbox.exit_cause().is_none()
        };
        // A running instance with spare intra-instance concurrency first (no thaw needed).
        let busy: Vec<Busy> = t
            .slots
            .values()
            .filter(|s| current(s) && s.state == InstanceState::Running)
            .map(|s| Busy {
                id: &s.instance.id,
                in_flight: s.in_flight,
            })
            .collect();
        let busy_with_room = join_busy(&busy, capacity).map(str::to_string);
        let chosen = busy_with_room.or_else(|| {
            let candidates: Vec<PoolEntry> = self
                .entries(&t)
                .into_iter()
                .filter(|e| e.action == fqn && current(&t.slots[&e.id]))
                .collect();
            // An instance being reclaimed would make this invocation wait for the reclaim:
            // take another one when there is one.
            let free: Vec<PoolEntry> = candidates
                .iter()
                .filter(|e| !t.slots[&e.id].reclaiming)
                .cloned()
                .collect();
            let candidates = if free.is_empty() { candidates } else { free };
            policy.choose_warm(&candidates).map(|e| e.id.clone())
        });
        if let Some(id) = chosen {
            let slot = t.slots.get_mut(&id).expect("chosen from the map");
            let idle_since = slot.state.is_kept_alive().then_some(slot.idle_since);
            slot.state = InstanceState::Running;
            slot.in_flight += 1;
            slot.frozen_since = None;
            slot.reclaimed_since_last_run = false;
            return Ok(Claim::Warm(slot.instance.clone(), idle_since));
        }
        // A burst that arrives while its first instance starts is absorbed by it (and the
        // next ones started), not by one new instance per activation.
        if let Some(j) = t.joinable.get_mut(&key) {
            if j.free() > 0 {
                j.joiners += 1;
                return Ok(Claim::Join);
            }
        }
        if let Some(limit) = per_action {
            // Instances of the action that still hold their place in the backend (an old
            // version's too, until it is evicted), and those being started.
            let held = t
                .slots
                .values()
                .filter(|s| s.instance.fqn == fqn && s.state != InstanceState::Evicted)
                .count()
                + t.starting_of.get(&fqn).copied().unwrap_or(0);
            if held >= limit {
                return Ok(Claim::Wait);
            }
        }
        let pool = self.entries(&t);
        let running = t.slots.len() - pool.len() + t.starting;
        match policy.admit_new_instance(&pool, running) {
            Admission::Queue => Ok(Claim::Wait),
            Admission::Start { evict } => {
                for id in &evict {
                    // Taken out of the keep-alive pool now so nobody else picks it.
                    if let Some(slot) = t.slots.get_mut(id) {
                        slot.stale = true;
                        slot.state = InstanceState::Evicted;
                    }
                }
                t.starting += 1;
                *t.starting_of.entry(fqn).or_default() += 1;
                if capacity > 1 {
                    let j = t.joinable.entry(key).or_default();
                    j.starting += 1;
                    j.room_each = capacity - 1;
                }
                Ok(Claim::Cold { evict })
            }
        }
    }

    /// A started instance joins the books (its place was reserved by [`Self::claim`]); after
    /// a shutdown it is handed back to be destroyed, its place still held.
    pub fn add_started(&self, slot: Slot) -> Result<(), Slot> {
        let mut t = self.table.lock().unwrap();
        if t.shutting_down {
            return Err(slot);
        }
        t.starting -= 1;
        t.started(&slot.instance.fqn, &slot.instance.action.version);
        t.slots.insert(slot.instance.id.clone(), slot);
        Ok(())
    }

    /// A reserved place is given up (the start failed, or its ticket was dropped).
    pub fn abandon_start(&self, fqn: &str, version: &str) {
        let mut t = self.table.lock().unwrap();
        t.starting -= 1;
        t.started(fqn, version);
    }

    /// Whether an instance of this action version is in the books or being started.
    pub fn has_live_instance(&self, action: &ActionSpec) -> bool {
        let t = self.table.lock().unwrap();
        let fqn = action.fqn();
        t.starting_of.get(&fqn).is_some_and(|n| *n > 0)
            || t.slots.values().any(|s| {
                s.instance.fqn == fqn && s.instance.action.version == action.version && !s.stale
            })
    }

    /// An invocation waiting for an instance being started gave up (its ticket was dropped).
    pub fn stop_joining(&self, action: &ActionSpec) {
        self.table
            .lock()
            .unwrap()
            .stop_waiting(&version_key(&action.fqn(), &action.version));
    }

    pub fn starting(&self) -> usize {
        self.table.lock().unwrap().starting
    }

    /// An activation ended (`ran`) or a claim went unused; Some: evict the instance now.
    /// `keep_alive_ms`: its own keep-alive if it goes idle now (else the TTL).
    pub fn put_back(
        &self,
        id: &str,
        health: Health,
        ran: bool,
        now: Millis,
        keep_alive_ms: Option<Millis>,
    ) -> Option<EvictReason> {
        let mut t = self.table.lock().unwrap();
        let slot = t.slots.get_mut(id)?;
        slot.in_flight = slot.in_flight.saturating_sub(1);
        if ran {
            slot.invocations += 1;
        }
        match health {
            Health::Broken(reason) => Some(reason),
            Health::Reusable if slot.stale && slot.in_flight == 0 => Some(EvictReason::Stale),
            Health::Reusable => {
                if slot.in_flight == 0 && slot.state == InstanceState::Running {
                    slot.state = InstanceState::Idle;
                    slot.idle_since = now;
                    slot.keep_alive_ms = keep_alive_ms;
                }
                None
            }
        }
    }

    /// Whether the keep-alive round must run before `planned` (the manager loop's next
    /// wake-up) now that `id` was given back: it has something due sooner, or the pool it
    /// joined is over the budget. An instance still busy changes nothing the round sees.
    pub fn due_before(
        &self,
        id: &str,
        policy: &KeepAlivePolicy,
        now: Millis,
        planned: Millis,
    ) -> bool {
        if planned <= now {
            return true;
        }
        let t = self.table.lock().unwrap();
        let Some(slot) = t.slots.get(id).filter(|s| s.state.is_kept_alive()) else {
            return false;
        };
        let entry = PoolEntry {
            id: String::new(),
            action: String::new(),
            idle_since: slot.idle_since,
            charged: self.charge_of(slot),
            frozen: slot.state == InstanceState::Frozen,
            keep_alive_ms: slot.keep_alive_ms,
        };
        // None: already due (a keep-alive of 0).
        if policy
            .next_deadline(std::slice::from_ref(&entry), now)
            .is_none_or(|at| at < planned)
        {
            return true;
        }
        let total: u64 = t
            .slots
            .values()
            .filter(|s| s.state.is_kept_alive())
            .map(|s| self.charge_of(s))
            .sum();
        policy.over_budget(total)
    }

    pub fn remove(&self, id: &str) -> Option<Slot> {
        self.table.lock().unwrap().slots.remove(id)
    }

    /// Remove an instance only if it is still idle or frozen: the policy decided on a
    /// snapshot, and an invocation may have taken the instance since.
    pub fn remove_kept_alive(&self, id: &str) -> Option<Slot> {
        let mut t = self.table.lock().unwrap();
        match t.slots.get(id) {
            Some(s) if s.state.is_kept_alive() && !s.reclaiming => t.slots.remove(id),
            _ => None,
        }
    }

    /// The action changed or was deleted: its instances are never reused; the idle ones are
    /// returned to be evicted now.
    pub fn retire(&self, fqn: &str) -> Vec<String> {
        let mut t = self.table.lock().unwrap();
        let mut idle = Vec::new();
        for slot in t.slots.values_mut().filter(|s| s.instance.fqn == fqn) {
            slot.stale = true;
            if slot.state.is_kept_alive() {
                idle.push(slot.instance.id.clone());
            }
        }
        idle
    }

    /// No more claims or new instances; returns every instance.
    pub fn shut_down(&self) -> Vec<String> {
        let mut t = self.table.lock().unwrap();
        t.shutting_down = true;
        t.slots.keys().cloned().collect()
    }

    pub fn instance(&self, id: &str) -> Option<Arc<Instance>> {
        self.table
            .lock()
            .unwrap()
            .slots
            .get(id)
            .map(|s| s.instance.clone())
    }

    /// Activations the instance runs now; `None` once it is gone.
    pub fn in_flight(&self, id: &str) -> Option<u32> {
        self.table
            .lock()
            .unwrap()
            .slots
            .get(id)
            .map(|s| s.in_flight)
    }

    pub fn get(&self, id: &str) -> Option<Slot> {
        self.table.lock().unwrap().slots.get(id).cloned()
    }

    /// A copy of the books, for reading without the lock.
    pub fn snapshot(&self) -> Vec<Slot> {
        self.table.lock().unwrap().slots.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.table.lock().unwrap().slots.len()
    }

    pub fn keep_alive_plan(&self, policy: &KeepAlivePolicy, now: Millis) -> KeepAlivePlan {
        let t = self.table.lock().unwrap();
        let entries = self.entries(&t);
        let evictions = policy.evictions(&entries, now);
        let remaining: Vec<_> = entries
            .into_iter()
            .filter(|e| !evictions.iter().any(|(id, _)| *id == e.id))
            .collect();
        KeepAlivePlan {
            freezes: policy.to_freeze(&remaining, now),
            deadline: policy.next_deadline(&remaining, now),
            evictions,
        }
    }

    /// Mark an idle instance frozen; false if it is no longer idle.
    pub fn mark_frozen(&self, id: &str, now: Millis) -> bool {
        let mut t = self.table.lock().unwrap();
        match t.slots.get_mut(id) {
            Some(slot) if slot.state == InstanceState::Idle && slot.in_flight == 0 => {
                slot.state = InstanceState::Frozen;
                slot.frozen_since = Some(now);
                true
            }
            _ => false,
        }
    }

    /// Mark an idle instance as being reclaimed (so it is planned once).
    pub fn begin_reclaim(&self, id: &str) -> Option<Arc<Instance>> {
        let mut t = self.table.lock().unwrap();
        let slot = t.slots.get_mut(id)?;
        if !slot.state.is_kept_alive() || slot.reclaiming || slot.stale {
            return None;
        }
        slot.reclaiming = true;
        Some(slot.instance.clone())
    }

    pub fn end_reclaim(&self, id: &str, reclaimed: bool) {
        if let Some(slot) = self.table.lock().unwrap().slots.get_mut(id) {
            slot.reclaiming = false;
            slot.reclaimed_since_last_run |= reclaimed;
        }
    }
}
