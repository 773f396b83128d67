//! The offload component's hooks: FaaSMem's two time barriers at start, the segment steps
//! after each request, semi-warm and TMO from the manager loop, and the reuse intervals that
//! set when semi-warm begins.

use super::faasmem::{book_of, Barrier};
use super::{Offload, OffloadBook};
use crate::pool::component::Component;
use crate::pool::extensions::Extensions;
use crate::pool::instance::{Instance, Origin, Slot};
use crate::pool::Pool;
use async_trait::async_trait;
use icebox_core::api::InstanceView;
use icebox_core::ActionSpec;
use icebox_policy::{Millis, OffloadMode};
use std::sync::Arc;

#[async_trait]
impl Component for Offload {
    fn name(&self) -> &'static str {
        "offload"
    }

    fn technique(&self) -> Option<icebox_policy::Technique> {
        Some(icebox_policy::Technique::Offload)
    }

    fn on_created(&self, action: &ActionSpec, _origin: &Origin, ext: &mut Extensions) {
        ext.insert(OffloadBook::new(self.mode_of(action)));
    }

    async fn on_runtime_ready(&self, pool: &Arc<Pool>, instance: &Arc<Instance>) {
        self.barrier(pool, instance, Barrier::Runtime).await;
    }

    async fn on_init_done(&self, pool: &Arc<Pool>, instance: &Arc<Instance>) {
        self.barrier(pool, instance, Barrier::Init).await;
    }

    fn on_reused(&self, _pool: &Pool, instance: &Instance, idle_ms: Millis) {
        let Some(book) = book_of(instance) else {
            return;
        };
        book.end_semiwarm();
        if book.mode == OffloadMode::Faasmem {
            self.record_reuse(&instance.fqn, idle_ms);
        }
    }

    fn on_release(&self, pool: &Arc<Pool>, instance: &Arc<Instance>) {
        self.after_request(pool, instance);
    }

    /// At most once a second ([`super::ROUND_MS`]); the manager loop's sample interval wakes
    /// it often enough, so it asks for no wake-up of its own.
    fn tick(&self, pool: &Arc<Pool>, now: Millis) -> Option<Millis> {
        self.round(pool, now);
        None
    }

    fn view(&self, _pool: &Pool, slot: &Slot, view: &mut InstanceView) {
        if let Some(book) = book_of(&slot.instance) {
            let measured = slot.instance.last_measured();
            view.offload = book.view(measured.local, measured.memory.swap);
        }
    }
}
