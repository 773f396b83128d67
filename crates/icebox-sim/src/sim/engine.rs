//! The event loop: arrivals from the trace, timers (completions, keep-alive expiries,
//! Desiccant reclaims, hybrid pre-warms) from a heap, placement and eviction in between.

use super::config::{KeepAliveSpec, SimConfig, Technique};
use super::metrics::{Counters, Metrics, TimelineRow};
use super::state::{compact, Func, Inst, Node, Ref};
use crate::profile::Resolved;
use icebox_policy::placement::{self, Candidate, NodeView};
use icebox_policy::{
    join_busy_by, Estimate, EvictOrder, HybridPolicy, KeepAliveConfig, KeepAlivePolicy,
    ReclaimThreshold, Retained,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

/// An invocation to replay: simulated ms, trace function, duration (`PROFILE_DURATION`: the
/// mapped profile's warm time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimEvent {
    pub t: u64,
    pub func: u32,
    pub dur: u32,
}

pub const PROFILE_DURATION: u32 = u32::MAX;

/// Timer kinds, in the order they run at equal times: completions first, so an arrival at
/// the same millisecond sees the memory they free.
const COMPLETE: u8 = 0;
const EXPIRE: u8 = 1;
const RECLAIM: u8 = 2;
const PREWARM: u8 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Timer {
    t: u64,
    kind: u8,
    inst: u32,
    gen: u32,
    aux: u64,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    arrived: u64,
    func: u32,
    dur: u32,
    /// Round robin's turn: the arrival's number, kept while it waits in the queue.
    turn: u64,
}

pub struct RunOutput {
    pub metrics: Metrics,
    pub timeline: Vec<TimelineRow>,
    /// Bytes in use on each node when the run ended.
    pub node_used: Vec<u64>,
}

pub struct Sim<'a> {
    cfg: &'a SimConfig,
    classes: &'a [Resolved],
    func_class: &'a [u32],
    /// What placement hashes for each trace function (the daemon hashes the action's name).
    names: &'a [String],
    /// `n1` … `nN`: the ids a live cluster of N nodes started by the bench recipe has, so
    /// homes agree between the simulation and the cluster.
    node_ids: Vec<String>,
    /// Node indices ordered by id (`n10` sorts before `n2`), and each node's place in it.
    by_id: Vec<u32>,
    id_rank: Vec<u32>,
    arrivals: u64,
    keepalive: KeepAlivePolicy,
    hybrid: HybridPolicy,
    /// Desiccant's estimate without a profile; a function's measured retained share replaces
    /// its `retained`.
    prior: Estimate,
    capacity: u32,
    insts: Vec<Inst>,
    free_slots: Vec<u32>,
    nodes: Vec<Node>,
    funcs: Vec<Func>,
    timers: BinaryHeap<Reverse<Timer>>,
    queue: VecDeque<Pending>,
    now: u64,
    used: u64,
    active: u64,
    live: u32,
    busy_insts: u32,
    c: Counters,
    timeline: Vec<TimelineRow>,
}

impl<'a> Sim<'a> {
    /// `func_class[f]` is the profile of trace function `f`; `names[f]` its name, which
    /// placement hashes for its home node.
    pub fn new(
        cfg: &'a SimConfig,
        classes: &'a [Resolved],
        func_class: &'a [u32],
        names: &'a [String],
    ) -> Self {
        let ttl = match cfg.keepalive {
            KeepAliveSpec::Ttl(ms) => ms,
            KeepAliveSpec::Hybrid | KeepAliveSpec::Infinite => u64::MAX,
        };
        let keepalive = KeepAlivePolicy::new(KeepAliveConfig {
            keep_alive_ms: ttl,
            ..KeepAliveConfig::default()
        });
        let nodes = cfg.nodes.max(1);
        let node_ids: Vec<String> = (1..=nodes).map(|k| format!("n{k}")).collect();
        let mut by_id: Vec<u32> = (0..nodes).collect();
        by_id.sort_by(|&a, &b| node_ids[a as usize].cmp(&node_ids[b as usize]));
        let mut id_rank = vec![0; by_id.len()];
        for (rank, &n) in (0u32..).zip(&by_id) {
            id_rank[n as usize] = rank;
        }
        let threshold = ReclaimThreshold::new(&cfg.desiccant);
        Sim {
            cfg,
            classes,
            func_class,
            names,
            node_ids,
            by_id,
            id_rank,
            arrivals: 0,
            keepalive,
            hybrid: HybridPolicy::new(cfg.hybrid),
            prior: Estimate::prior(&cfg.desiccant),
            capacity: cfg.sharing.capacity(cfg.concurrency),
            insts: Vec::new(),
            free_slots: Vec::new(),
            nodes: (0..nodes)
                .map(|_| Node::new(cfg.node_memory, cfg.budget_idle_only, threshold.clone()))
                .collect(),
            funcs: vec![Func::default(); names.len()],
            timers: BinaryHeap::new(),
            queue: VecDeque::new(),
            now: 0,
            used: 0,
            active: 0,
            live: 0,
            busy_insts: 0,
            c: Counters::for_nodes(nodes as usize),
            timeline: Vec::new(),
        }
    }

    /// Replays `events` (sorted by time) and returns the metrics.
    pub fn run(mut self, events: &[SimEvent]) -> RunOutput {
        let started = Instant::now();
        self.c.latencies_ms.reserve(events.len());
        for ev in events {
            if ev.t > self.cfg.end_ms {
                break;
            }
            self.run_timers(ev.t);
            self.advance(ev.t);
            self.c.events += 1;
            self.arrive(*ev);
        }
        self.run_timers(self.cfg.end_ms);
        self.advance(self.cfg.end_ms);
        let counted = self.cfg.end_ms.saturating_sub(self.cfg.count_from_ms);
        let wall = started.elapsed().as_secs_f64();
        RunOutput {
            metrics: Metrics::from_counters(
                self.c,
                &self.node_ids,
                counted,
                self.queue.len() as u64,
                wall,
            ),
            timeline: self.timeline,
            node_used: self.nodes.iter().map(|n| n.used).collect(),
        }
    }

    fn class(&self, func: u32) -> &'a Resolved {
        &self.classes[self.func_class[func as usize] as usize]
    }

    fn counting(&self) -> bool {
        self.now >= self.cfg.count_from_ms
    }

    fn push_timer(&mut self, t: u64, kind: u8, inst: u32, gen: u32, aux: u64) {
        // Past the end nothing is observed, so the timer would only cost heap space.
        if t <= self.cfg.end_ms {
            self.push_timer_always(t, kind, inst, gen, aux);
        }
    }

    fn run_timers(&mut self, until: u64) {
        while let Some(&Reverse(t)) = self.timers.peek() {
            if t.t > until {
                break;
            }
            self.timers.pop();
            self.advance(t.t);
            self.c.events += 1;
            match t.kind {
                COMPLETE => self.complete(t.inst),
                EXPIRE => {
                    if self.idle_valid((t.inst, t.gen)) {
                        self.kill(t.inst);
                        if self.counting() {
                            self.c.expirations += 1;
                        }
                        self.drain_queue();
                    }
                }
                RECLAIM => self.reclaim_due((t.inst, t.gen)),
                _ => self.prewarm(t.inst, t.aux),
            }
        }
    }

    /// Moves the clock to `t`, integrating memory over the counted period and sampling the
    /// timeline at every whole simulated second passed.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "indices and counts of a simulated cluster (functions, instances, nodes, queued calls) stay far below 2^32"
    )]
    fn advance(&mut self, t: u64) {
        if t <= self.now {
            return;
        }
        let (from, end) = (self.cfg.count_from_ms, self.cfg.end_ms);
        let lo = self.now.max(from);
        let hi = t.min(end);
        if hi > lo {
            let dt = u128::from(hi - lo);
            self.c.memory_byte_ms += u128::from(self.used) * dt;
            for (sum, node) in self.c.node_memory_byte_ms.iter_mut().zip(&self.nodes) {
                *sum += u128::from(node.used) * dt;
            }
            self.c.active_byte_ms += u128::from(self.active) * dt;
            self.c.peak_memory = self.c.peak_memory.max(self.used);
            self.c.peak_active = self.c.peak_active.max(self.active);
        }
        if self.cfg.timeline && hi >= from {
            // One row per whole simulated second of the counted period in (now, hi], with the
            // state that held until `t`.
            let first = if self.now < from {
                1
            } else {
                (self.now - from) / 1_000 + 1
            };
            for s in first..=(hi - from) / 1_000 {
                self.timeline.push(TimelineRow {
                    second: s,
                    memory_mib: self.used as f64 / 1_048_576.0,
                    active_mib: self.active as f64 / 1_048_576.0,
                    instances: self.live,
                    busy_instances: self.busy_insts,
                    queued: self.queue.len() as u32,
                });
            }
        }
        self.now = t;
    }

    fn arrive(&mut self, ev: SimEvent) {
        self.funcs[ev.func as usize].invocations += 1;
        if self.class(ev.func).memory.charge(1) > self.cfg.node_memory {
            // Larger than a node: it could never start, and queued it would block the queue.
            if self.counting() {
                self.c.rejected += 1;
            }
            return;
        }
        if self.cfg.keepalive == KeepAliveSpec::Hybrid {
            let now = self.now;
            self.funcs[ev.func as usize]
                .hist
                .on_start(&self.cfg.hybrid, now);
        }
        let p = Pending {
            arrived: ev.t,
            func: ev.func,
            dur: ev.dur,
            turn: self.arrivals,
        };
        self.arrivals += 1;
        if !self.try_start(p) {
            if self.counting() {
                self.c.queued += 1;
            }
            self.queue.push_back(p);
        }
    }

    /// Places the activation now, if the cluster has room, and records it.
    fn try_start(&mut self, p: Pending) -> bool {
        let class = *self.class(p.func);
        let Some((inst, cold, exec_start)) = self.place(p.func, &class, p.turn) else {
            return false;
        };
        let dur = if p.dur == PROFILE_DURATION {
            class.warm_ms
        } else {
            u64::from(p.dur)
        };
        let done = exec_start + dur;
        let gen = self.insts[inst as usize].gen;
        self.push_timer_always(done, COMPLETE, inst, gen, 0);
        if p.arrived >= self.cfg.count_from_ms {
            let node = self.insts[inst as usize].node as usize;
            let c = &mut self.c;
            c.invocations += 1;
            c.node_invocations[node] += 1;
            if cold {
                c.cold_starts += 1;
                c.node_cold_starts[node] += 1;
            }
            let delay = self.now - p.arrived;
            if delay > 0 {
                c.queue_delay_ms_sum += delay;
                c.queue_delay_ms_max = c.queue_delay_ms_max.max(delay);
            }
            c.latencies_ms.push((done - p.arrived) as f32);
        }
        true
    }

    /// Completions must run even past the end: they free what later arrivals need. (They are
    /// only past the end for activations that started before it.)
    fn push_timer_always(&mut self, t: u64, kind: u8, inst: u32, gen: u32, aux: u64) {
        self.timers.push(Reverse(Timer {
            t,
            kind,
            inst,
            gen,
            aux,
        }));
    }

    /// Where the activation runs: (instance, cold start?, when it starts executing). The
    /// placement policy orders the nodes; the first that can take the activation (after
    /// evicting idle instances) runs it, else it queues.
    fn place(&mut self, func: u32, class: &Resolved, turn: u64) -> Option<(u32, bool, u64)> {
        if self.nodes.len() == 1 {
            return self.start_on(0, func, class);
        }
        let need = class
            .placement_need
            .unwrap_or_else(|| class.memory.charge(1));
        self.candidates(func, need, turn)
            .into_iter()
            .find_map(|c| self.start_on(self.by_id[c.node], func, class))
    }

    /// The nodes in the order `icebox_policy::placement` gives them: the daemon's code, with
    /// a node `warm` when the activation would not cold-start there (an idle instance, or a
    /// busy one with room in the sharing modes) and `free_bytes` its memory not held by idle
    /// instances (the daemon's free keep-alive memory: its budget less what idle and frozen
    /// instances are charged; busy ones are not).
    /// Candidates index `by_id`: the views are given in id order, so placement's own sort by id
    /// finds them sorted.
    fn candidates(&self, func: u32, need: u64, turn: u64) -> Vec<Candidate> {
        let mut views: Vec<NodeView<'_>> = self
            .by_id
            .iter()
            .map(|&n| NodeView {
                id: &self.node_ids[n as usize],
                warm: false,
                free_bytes: self.nodes[n as usize].free_keep_alive(),
            })
            .collect();
        let f = &self.funcs[func as usize];
        for on in f.idle.iter().filter(|on| on.count > 0) {
            views[self.id_rank[on.node as usize] as usize].warm = true;
        }
        if self.capacity > 1 {
            for &i in &f.busy {
                let inst = &self.insts[i as usize];
                if inst.in_flight < self.capacity {
                    views[self.id_rank[inst.node as usize] as usize].warm = true;
                }
            }
        }
        placement::candidates(
            self.cfg.placement,
            &self.names[func as usize],
            &views,
            need,
            turn,
        )
    }

    /// Runs the activation on `node` if it can: joining a busy instance, else reusing an idle
    /// one, else a cold start, evicting idle instances there as needed.
    fn start_on(&mut self, node: u32, func: u32, class: &Resolved) -> Option<(u32, bool, u64)> {
        let now = self.now;
        let inc = class.memory.increment_bytes;
        let cores = self.cfg.node_cores;
        let cpu_ok = |n: &Node| cores == 0 || n.cores_used + class.cpu <= cores;
        // 1. Join a busy instance with room (shared / isolate modes).
        if self.capacity > 1 {
            let insts = &self.insts;
            let host = &self.nodes[node as usize];
            let joined = if cpu_ok(host) && host.reachable(0) >= inc {
                join_busy_by(
                    self.funcs[func as usize].busy.iter().filter_map(|&i| {
                        let inst = &insts[i as usize];
                        (inst.node == node).then_some((i, inst.in_flight))
                    }),
                    self.capacity,
                )
            } else {
                None
            };
            if let Some(i) = joined {
                self.make_room(node, inc, None);
                let n = self.insts[i as usize].in_flight + 1;
                self.insts[i as usize].in_flight = n;
                self.recharge(i, class.memory.charge(n));
                self.nodes[node as usize].cores_used += class.cpu;
                self.after_alloc(node);
                if self.counting() {
                    self.c.joined += 1;
                }
                return Some((i, false, self.insts[i as usize].ready_at.max(now)));
            }
        }
        // 2. A warm idle instance on the node, most recently used first
        //    (KeepAlivePolicy::choose_warm's order; the simulator does not model freezing).
        if let Some(i) = self.pop_idle(func, node) {
            let inst = &self.insts[i as usize];
            let host = &self.nodes[node as usize];
            let need = class.memory.charge(1).saturating_sub(inst.charge);
            if cpu_ok(host) && host.reachable(inst.charge) >= need {
                self.make_room(node, need, Some(i));
                self.take_idle(i);
                self.insts[i as usize].in_flight = 1;
                self.recharge(i, class.memory.charge(1));
                self.nodes[node as usize].cores_used += class.cpu;
                self.after_alloc(node);
                if self.counting() {
                    self.c.warm_starts += 1;
                }
                return Some((i, false, now));
            }
            // It cannot grow back where it is: leave it for later, start elsewhere.
            let gen = self.insts[i as usize].gen;
            self.funcs[func as usize]
                .idle_on_mut(node)
                .stack
                .push((i, gen));
        }
        // 3. A new instance: a cold start.
        let need = class.memory.charge(1);
        let host = &self.nodes[node as usize];
        if !cpu_ok(host) || host.reachable(0) < need {
            return None;
        }
        self.make_room(node, need, None);
        let i = self.create(func, node, need);
        let inst = &mut self.insts[i as usize];
        inst.in_flight = 1;
        inst.ready_at = now + class.cold_start_ms;
        self.mark_busy(i);
        self.nodes[node as usize].cores_used += class.cpu;
        self.after_alloc(node);
        Some((i, true, now + class.cold_start_ms))
    }

    /// Frees `need` bytes on `node`: Desiccant reclaims first (cheaper than losing a warm
    /// instance), then evictions in the configured order, never `keep`. The caller checked
    /// that `reachable` suffices.
    fn make_room(&mut self, node: u32, need: u64, keep: Option<u32>) {
        let n = node as usize;
        if self.nodes[n].idle_only || self.nodes[n].free() >= need {
            return;
        }
        if self.cfg.technique == Technique::Desiccant {
            while self.nodes[n].free() < need {
                let Some(r) = self.nodes[n].eligible.pop_front() else {
                    break;
                };
                if Some(r.0) != keep && self.idle_valid(r) && !self.insts[r.0 as usize].reclaimed {
                    self.reclaim(r.0);
                }
            }
        }
        // `keep`'s own LRU entry may be dropped: the caller takes it out of the idle set at
        // once, which makes that entry stale anyway.
        while self.nodes[n].free() < need {
            let victim = match self.cfg.evict {
                EvictOrder::Lru => match self.nodes[n].lru.pop_front() {
                    Some(r) if !self.idle_valid(r) || Some(r.0) == keep => continue,
                    Some(r) => r.0,
                    None => break,
                },
                EvictOrder::Frequency => {
                    let mut next = self.nodes[n].by_key.iter().map(|&(_, i)| i);
                    match next.find(|&i| Some(i) != keep) {
                        Some(i) => i,
                        None => break,
                    }
                }
            };
            self.kill(victim);
            self.nodes[n].threshold.on_eviction(self.now);
            if self.counting() {
                self.c.evictions += 1;
            }
        }
        debug_assert!(
            self.nodes[n].free() >= need,
            "make_room without enough reachable memory"
        );
    }

    /// After memory was allocated on `node`: Desiccant reclaims eligible instances while the
    /// node is above its activation threshold.
    fn after_alloc(&mut self, node: u32) {
        if self.cfg.technique != Technique::Desiccant {
            return;
        }
        let n = node as usize;
        while self.nodes[n].threshold.should_reclaim(
            self.nodes[n].used,
            self.nodes[n].cap,
            self.now,
        ) {
            let Some(r) = self.nodes[n].eligible.pop_front() else {
                break;
            };
            if self.idle_valid(r) && !self.insts[r.0 as usize].reclaimed {
                self.reclaim(r.0);
            }
        }
    }

    fn reclaim_due(&mut self, r: Ref) {
        if !self.idle_valid(r) || self.insts[r.0 as usize].reclaimed {
            return;
        }
        let n = self.insts[r.0 as usize].node as usize;
        let node = &self.nodes[n];
        if node.threshold.should_reclaim(node.used, node.cap, self.now) {
            self.reclaim(r.0);
        } else {
            self.nodes[n].eligible.push_back(r);
            let live = self.nodes[n].idle_count;
            let insts = &self.insts;
            compact(&mut self.nodes[n].eligible, live, |&r| idle_valid(insts, r));
        }
    }

    fn reclaim(&mut self, i: u32) {
        let inst = &self.insts[i as usize];
        let estimate = Estimate {
            retained: Retained::Fraction(self.class(inst.func).retained),
            ..self.prior
        };
        let new = estimate.retained_bytes(inst.charge);
        self.recharge(i, new);
        self.insts[i as usize].reclaimed = true;
        if self.counting() {
            self.c.reclaims += 1;
        }
    }

    fn complete(&mut self, i: u32) {
        let func = self.insts[i as usize].func;
        let class = *self.class(func);
        let node = self.insts[i as usize].node as usize;
        self.nodes[node].cores_used -= class.cpu;
        let n = self.insts[i as usize].in_flight - 1;
        self.insts[i as usize].in_flight = n;
        if self.cfg.keepalive == KeepAliveSpec::Hybrid {
            self.funcs[func as usize].hist.on_end(self.now);
        }
        if n > 0 {
            self.recharge(i, class.memory.charge(n));
        } else {
            self.go_idle(i, &class);
        }
        self.drain_queue();
    }

    fn drain_queue(&mut self) {
        while let Some(&p) = self.queue.front() {
            if !self.try_start(p) {
                break;
            }
            self.queue.pop_front();
        }
    }

    /// The last activation ended: the instance joins its node's pool, and the keep-alive
    /// policy decides when it goes.
    fn go_idle(&mut self, i: u32, class: &Resolved) {
        let now = self.now;
        let func = self.insts[i as usize].func;
        let mut expiry = self.keepalive.expires_at(now);
        if self.cfg.keepalive == KeepAliveSpec::Hybrid {
            let w = self.hybrid.windows(&self.funcs[func as usize].hist);
            if let Some(at) = w.prewarm_at(now) {
                // Unload now, load again just before the next call is expected.
                self.unmark_busy(i);
                self.kill(i);
                if self.counting() {
                    self.c.unloads += 1;
                }
                self.push_timer(at, PREWARM, func, 0, w.expires_at(now).unwrap_or(u64::MAX));
                return;
            }
            expiry = w.expires_at(now);
        }
        self.unmark_busy(i);
        self.recharge(i, class.memory.charge(0));
        self.add_idle(i, expiry);
        self.evict_over_budget(self.insts[i as usize].node);
    }

    /// With a budget of idle instances only: a release that takes the node's idle instances
    /// over it evicts the least recently used ones, as iceboxd's pool does.
    fn evict_over_budget(&mut self, node: u32) {
        let n = node as usize;
        if !self.nodes[n].idle_only {
            return;
        }
        while self.nodes[n].idle_mem > self.nodes[n].cap {
            let victim = match self.cfg.evict {
                EvictOrder::Lru => match self.nodes[n].lru.pop_front() {
                    Some(r) if !self.idle_valid(r) => continue,
                    Some(r) => r.0,
                    None => break,
                },
                EvictOrder::Frequency => match self.nodes[n].by_key.iter().next() {
                    Some(&(_, i)) => i,
                    None => break,
                },
            };
            self.kill(victim);
            if self.counting() {
                self.c.evictions += 1;
            }
        }
    }

    fn add_idle(&mut self, i: u32, expiry: Option<u64>) {
        let now = self.now;
        let inst = &mut self.insts[i as usize];
        inst.idle = true;
        inst.reclaimed = false;
        inst.gen = inst.gen.wrapping_add(1);
        let (gen, func, host, charge) = (inst.gen, inst.func, inst.node, inst.charge);
        let node = host as usize;
        let key = self
            .cfg
            .evict
            .key(now, self.funcs[func as usize].invocations);
        self.insts[i as usize].evict_key = key;
        let on = self.funcs[func as usize].idle_on_mut(host);
        on.stack.push((i, gen));
        on.count += 1;
        let live_f = on.count;
        let nd = &mut self.nodes[node];
        nd.idle_mem += charge;
        nd.idle_count += 1;
        match self.cfg.evict {
            EvictOrder::Lru => nd.lru.push_back((i, gen)),
            EvictOrder::Frequency => {
                nd.by_key.insert((key, i));
            }
        }
        let live_n = self.nodes[node].idle_count;
        let insts = &self.insts;
        let valid = |&r: &Ref| idle_valid(insts, r);
        compact(
            &mut self.funcs[func as usize].idle_on_mut(host).stack,
            live_f,
            valid,
        );
        compact(&mut self.nodes[node].lru, live_n, valid);
        if let Some(at) = expiry {
            self.push_timer(at, EXPIRE, i, gen, 0);
        }
        if self.cfg.technique == Technique::Desiccant {
            self.push_timer(
                now.saturating_add(self.cfg.desiccant.frozen_timeout_ms),
                RECLAIM,
                i,
                gen,
                0,
            );
        }
    }

    /// The hybrid policy's pre-warm: a new idle instance, placed without evicting anything.
    fn prewarm(&mut self, func: u32, expires: u64) {
        let class = *self.class(func);
        let need = class.memory.charge(0);
        // Placed like an activation of the function, but never evicting for it.
        let Some(node) = self
            .candidates(func, need, self.arrivals)
            .into_iter()
            .map(|c| self.by_id[c.node])
            .find(|&n| self.nodes[n as usize].free() >= need)
        else {
            return;
        };
        let i = self.create(func, node, need);
        if self.counting() {
            self.c.prewarms += 1;
        }
        self.add_idle(i, Some(expires));
        self.after_alloc(node);
    }

    /// The most recently idle valid instance of `func` on `node`, removed from its stack.
    fn pop_idle(&mut self, func: u32, node: u32) -> Option<u32> {
        while let Some(r) = self.funcs[func as usize].idle_on_mut(node).stack.pop() {
            if self.idle_valid(r) {
                return Some(r.0);
            }
        }
        None
    }

    /// An idle instance becomes busy: it leaves the pool.
    fn take_idle(&mut self, i: u32) {
        self.leave_pool(i);
        self.mark_busy(i);
    }

    fn leave_pool(&mut self, i: u32) {
        let inst = &mut self.insts[i as usize];
        debug_assert!(inst.idle);
        inst.idle = false;
        inst.gen = inst.gen.wrapping_add(1);
        let (func, host, charge, key) = (inst.func, inst.node, inst.charge, inst.evict_key);
        let node = host as usize;
        self.funcs[func as usize].idle_on_mut(host).count -= 1;
        let nd = &mut self.nodes[node];
        nd.idle_mem -= charge;
        nd.idle_count -= 1;
        if self.cfg.evict == EvictOrder::Frequency {
            nd.by_key.remove(&(key, i));
        }
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "indices and counts of a simulated cluster (functions, instances, nodes, queued calls) stay far below 2^32"
    )]
    fn mark_busy(&mut self, i: u32) {
        let func = self.insts[i as usize].func as usize;
        let pos = self.funcs[func].busy.len() as u32;
        self.funcs[func].busy.push(i);
        self.insts[i as usize].busy_pos = pos;
        self.active += self.insts[i as usize].charge;
        self.busy_insts += 1;
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "indices and counts of a simulated cluster (functions, instances, nodes, queued calls) stay far below 2^32"
    )]
    fn unmark_busy(&mut self, i: u32) {
        let (func, pos, charge) = {
            let x = &self.insts[i as usize];
            (x.func as usize, x.busy_pos as usize, x.charge)
        };
        let busy = &mut self.funcs[func].busy;
        busy.swap_remove(pos);
        if let Some(&moved) = busy.get(pos) {
            self.insts[moved as usize].busy_pos = pos as u32;
        }
        self.active -= charge;
        self.busy_insts -= 1;
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "indices and counts of a simulated cluster (functions, instances, nodes, queued calls) stay far below 2^32"
    )]
    fn create(&mut self, func: u32, node: u32, charge: u64) -> u32 {
        let i = match self.free_slots.pop() {
            Some(i) => i,
            None => {
                self.insts.push(Inst::default());
                (self.insts.len() - 1) as u32
            }
        };
        let inst = &mut self.insts[i as usize];
        let gen = inst.gen.wrapping_add(1);
        *inst = Inst {
            func,
            node,
            gen,
            alive: true,
            charge,
            ..Inst::default()
        };
        self.nodes[node as usize].used += charge;
        self.used += charge;
        self.live += 1;
        if self.counting() {
            self.c.instances_created += 1;
        }
        i
    }

    /// Removes an idle (or just unmarked) instance and frees its memory.
    fn kill(&mut self, i: u32) {
        if self.insts[i as usize].idle {
            self.leave_pool(i);
        }
        let inst = &mut self.insts[i as usize];
        inst.alive = false;
        inst.gen = inst.gen.wrapping_add(1);
        let (node, charge) = (inst.node as usize, inst.charge);
        self.nodes[node].used -= charge;
        self.used -= charge;
        self.live -= 1;
        self.free_slots.push(i);
    }

    /// Sets an instance's charge, keeping node, cluster and pool totals in step.
    fn recharge(&mut self, i: u32, new: u64) {
        let inst = &mut self.insts[i as usize];
        let old = inst.charge;
        inst.charge = new;
        let (node, idle, busy) = (
            inst.node as usize,
            inst.idle,
            inst.in_flight > 0 && !inst.idle,
        );
        let nd = &mut self.nodes[node];
        nd.used = nd.used - old + new;
        self.used = self.used - old + new;
        if idle {
            nd.idle_mem = nd.idle_mem - old + new;
        }
        if busy {
            self.active = self.active - old + new;
        }
    }

    fn idle_valid(&self, r: Ref) -> bool {
        idle_valid(&self.insts, r)
    }
}

/// Whether an entry of an idle list still names the same idle period of a live instance
/// (entries are left behind lazily when an instance is taken or evicted).
fn idle_valid(insts: &[Inst], (i, g): Ref) -> bool {
    let x = &insts[i as usize];
    x.alive && x.idle && x.gen == g
}
