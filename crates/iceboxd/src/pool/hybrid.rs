//! The hybrid histogram keep-alive (Shahrad et al., "Serverless in the Wild", ATC '20) as a
//! pool component, `--keep-alive-policy hybrid`: each action's idle times (end of its last
//! activation to the start of the next, `icebox_policy::IdleHistogram`) set how long its
//! instances are kept. When the histogram is representative and its head is far off, an
//! instance going idle is unloaded at once and a new one is started (restored from a snapshot
//! when the action has one) shortly before the next invocation is expected, then kept until
//! the histogram's tail; otherwise it is kept for the tail window, or for `--keep-alive` while
//! the action has too little history. The decisions are the pure policy's
//! (`icebox_policy::HybridPolicy`, which the simulator runs too); this file keeps the books.

use super::component::Component;
use super::instance::Instance;
use super::{EvictReason, Pool};
use async_trait::async_trait;
use icebox_core::{ActionSpec, EventKind};
use icebox_policy::{HybridConfig, HybridPolicy, IdleHistogram, Millis, Windows};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub struct HybridKeepAlive {
    policy: HybridPolicy,
    books: Mutex<Books>,
}

#[derive(Default)]
struct Books {
    /// Per action (`namespace/name`).
    histograms: HashMap<String, IdleHistogram>,
    /// Per action: when to pre-warm it again, and which version.
    due: HashMap<String, (Millis, Arc<ActionSpec>)>,
    /// Per action: a pre-warm starting now, and the keep-alive it gets.
    prewarming: HashMap<String, Millis>,
    /// Instances a pre-warm started and no activation has used yet, with their keep-alive.
    prewarmed: HashMap<String, Millis>,
}

impl HybridKeepAlive {
    pub fn new(cfg: HybridConfig) -> HybridKeepAlive {
        HybridKeepAlive {
            policy: HybridPolicy::new(cfg),
            books: Mutex::new(Books::default()),
        }
    }

    fn windows(&self, books: &Books, fqn: &str) -> Windows {
        match books.histograms.get(fqn) {
            Some(h) => self.policy.windows(h),
            None => self.policy.windows(&IdleHistogram::new()),
        }
    }
}

#[async_trait]
impl Component for HybridKeepAlive {
    fn name(&self) -> &'static str {
        "hybrid_keep_alive"
    }

    fn on_action_retired(&self, _pool: &Pool, fqn: &str) {
        // Its old version must not be pre-warmed; its idle times still describe its callers.
        self.books.lock().unwrap().due.remove(fqn);
    }

    fn on_activation_start(&self, pool: &Pool, action: &ActionSpec) {
        let now = pool.clock.now_ms();
        let mut books = self.books.lock().unwrap();
        books.due.remove(&action.fqn());
        books
            .histograms
            .entry(action.fqn())
            .or_default()
            .on_start(self.policy.config(), now);
    }

    fn on_activation_end(&self, pool: &Pool, action: &ActionSpec) {
        let now = pool.clock.now_ms();
        if let Some(h) = self.books.lock().unwrap().histograms.get_mut(&action.fqn()) {
            h.on_end(now);
        }
    }

    /// A pre-warmed instance is kept for the window it was started for; any other is kept
    /// for the tail window, or unloaded at once when a pre-warm will bring the action back.
    fn keep_alive_ms(&self, _pool: &Pool, instance: &Instance) -> Option<Millis> {
        let books = self.books.lock().unwrap();
        if let Some(window) = books
            .prewarmed
            .get(&instance.id)
            .or_else(|| books.prewarming.get(&instance.fqn))
        {
            return Some(*window);
        }
        let w = self.windows(&books, &instance.fqn);
        Some(if w.prewarm_ms > 0 { 0 } else { w.keep_alive_ms })
    }

    /// An instance went idle: when the histogram says to unload it now, the pre-warm that
    /// brings the action back is booked (one per action).
    fn on_release(&self, pool: &Arc<Pool>, instance: &Arc<Instance>) {
        if pool.slots.in_flight(&instance.id) != Some(0) {
            return;
        }
        let now = pool.clock.now_ms();
        let mut books = self.books.lock().unwrap();
        if books.prewarmed.contains_key(&instance.id) {
            return;
        }
        let w = self.windows(&books, &instance.fqn);
        let Some(at) = w.prewarm_at(now) else {
            return;
        };
        books
            .due
            .insert(instance.fqn.clone(), (at, instance.action.clone()));
        drop(books);
        pool.events.emit(
            &instance.id,
            &instance.fqn,
            EventKind::Idle,
            None,
            Some(format!(
                "hybrid keep-alive: unloaded now, pre-warmed in {} ms for {} ms",
                w.prewarm_ms, w.keep_alive_ms
            )),
        );
    }

    /// Used by an activation: from now on an instance like any other.
    fn on_reused(&self, _pool: &Pool, instance: &Instance, _idle_ms: Millis) {
        self.books.lock().unwrap().prewarmed.remove(&instance.id);
    }

    fn on_evict(&self, _pool: &Pool, instance: &Instance, _reason: EvictReason) {
        self.books.lock().unwrap().prewarmed.remove(&instance.id);
    }

    /// Starts the pre-warms that are due; returns when the next one is.
    fn tick(&self, pool: &Arc<Pool>, now: Millis) -> Option<Millis> {
        let mut books = self.books.lock().unwrap();
        let ready: Vec<(String, Arc<ActionSpec>)> = books
            .due
            .iter()
            .filter(|(_, (at, _))| *at <= now)
            .map(|(fqn, (_, action))| (fqn.clone(), action.clone()))
            .collect();
        for (fqn, action) in ready {
            books.due.remove(&fqn);
            let window = self.windows(&books, &fqn).keep_alive_ms;
            books.prewarming.insert(fqn.clone(), window);
            let pool = pool.clone();
            tokio::spawn(async move {
                let started = pool.start_idle(&action).await;
                let Some(me) = pool.component::<HybridKeepAlive>() else {
                    return;
                };
                {
                    let mut books = me.books.lock().unwrap();
                    books.prewarming.remove(&fqn);
                    if let Some(id) = &started {
                        books.prewarmed.insert(id.clone(), window);
                    }
                }
                let Some(id) = started else {
                    return;
                };
                pool.events.emit(
                    &id,
                    &fqn,
                    EventKind::Idle,
                    None,
                    Some(format!("hybrid keep-alive: pre-warmed, kept {window} ms")),
                );
            });
        }
        books.due.values().map(|(at, _)| *at).min()
    }
}
