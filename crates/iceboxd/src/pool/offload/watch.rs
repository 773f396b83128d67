//! The pool as offloading sees it, once a round: re-read, and when it turns unusable (swapped
//! off or removed by someone else) or usable again, every instance icebox offloads gets an
//! `offloaded` event saying so and why — its pages in the pool came back to RAM through the
//! swapoff, and no step runs until the pool is back — and the node counts the fault.

use super::faasmem::book_of;
use super::Offload;
use crate::pool::Pool;
use icebox_core::EventKind;
use icebox_policy::OffloadMode;

impl Offload {
    pub(super) fn watch_pool(&self, pool: &Pool) {
        self.offload_pool.refresh(Some(&pool.metrics.offload));
        let after = self.offload_pool.error();
        // Compared with what was last announced, not with the last refresh: a step's own
        // refresh may be the one that saw the change.
        {
            let mut announced = self.pool_announced.lock().unwrap();
            if *announced == after {
                return;
            }
            announced.clone_from(&after);
        }
        let detail = match &after {
            Some(why) => {
                pool.metrics.offload.pool_unusable.inc();
                format!("offloading stopped: {why}")
            }
            None => "offloading resumed: the offload pool is usable again".to_string(),
        };
        for slot in pool.slots.snapshot() {
            let offloads = book_of(&slot.instance).is_some_and(|b| b.mode != OffloadMode::None);
            if offloads {
                pool.events.emit(
                    &slot.instance.id,
                    &slot.instance.fqn,
                    EventKind::Offloaded,
                    None,
                    Some(detail.clone()),
                );
            }
        }
    }
}
