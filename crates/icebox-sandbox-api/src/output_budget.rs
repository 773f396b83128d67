//! The node's budget of activation output (log lines and /run responses) held in the daemon's
//! memory. Every instance's log collector and every response being read take from one
//! budget; what does not fit is cut (logs, with OpenWhisk's marker) or refused (a response),
//! so however many activations print and return at once, what the daemon buffers for them
//! stays bounded. Memory given back is returned to the kernel in batches (malloc_trim), not
//! kept in the allocator's free lists.

use icebox_core::units::MIB;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// After this many bytes given back since the last trim, free heap pages go back to the
/// kernel.
const TRIM_EVERY: u64 = 16 * MIB;
/// When the budget empties, a trim if at least this much was given back since the last one
/// (small outputs of a quiet node are not worth walking the arenas for).
const TRIM_AT_REST: u64 = MIB;

#[derive(Debug)]
pub struct OutputBudget {
    limit: u64,
    held: AtomicU64,
    freed_since_trim: AtomicU64,
}

impl OutputBudget {
    pub fn new(limit: u64) -> Arc<OutputBudget> {
        Arc::new(OutputBudget {
            limit,
            held: AtomicU64::new(0),
            freed_since_trim: AtomicU64::new(0),
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes held now.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// What log lines may take of the budget together: half, so that responses, which cannot
    /// be cut, still find room when every instance prints.
    pub fn logs_limit(&self) -> u64 {
        self.limit / 2
    }

    /// Takes `bytes` into `charge` if they fit in what is left.
    pub fn try_take(self: &Arc<Self>, bytes: u64, charge: &mut Charge) -> bool {
        self.try_take_below(self.limit, bytes, charge)
    }

    /// Takes `bytes` into `charge` if the budget then holds at most `ceiling`.
    pub fn try_take_below(self: &Arc<Self>, ceiling: u64, bytes: u64, charge: &mut Charge) -> bool {
        let taken = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes)
                    .filter(|&sum| sum <= ceiling.min(self.limit))
            })
            .is_ok();
        if taken {
            charge.add(self, bytes);
        }
        taken
    }

    fn give_back(&self, bytes: u64) {
        let held = self.held.fetch_sub(bytes, Ordering::AcqRel) - bytes;
        let freed = self.freed_since_trim.fetch_add(bytes, Ordering::AcqRel) + bytes;
        // Every 16 MiB, and once more when a burst is over (nothing held): what its last
        // activations freed after the previous trim would stay with the allocator otherwise.
        let due = freed >= TRIM_EVERY || (held == 0 && freed >= TRIM_AT_REST);
        if due
            && self
                .freed_since_trim
                .compare_exchange(freed, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            release_free_heap();
        }
    }
}

/// Bytes taken from an [`OutputBudget`], given back when dropped: it goes with the output it
/// pays for until that is stored or answered.
#[derive(Debug, Default)]
pub struct Charge {
    budget: Option<Arc<OutputBudget>>,
    bytes: u64,
}

impl Charge {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    fn add(&mut self, budget: &Arc<OutputBudget>, bytes: u64) {
        if self.budget.is_none() {
            self.budget = Some(budget.clone());
        }
        self.bytes += bytes;
    }

    /// Moves `other`'s bytes into this charge (both of one budget).
    pub fn absorb(&mut self, mut other: Charge) {
        if let Some(budget) = other.budget.take() {
            self.add(&budget, std::mem::take(&mut other.bytes));
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            if self.bytes > 0 {
                budget.give_back(self.bytes);
            }
        }
    }
}

/// A second after the output was given back: the answers and records made of it are freed by
/// then too.
const TRIM_DELAY: std::time::Duration = std::time::Duration::from_secs(1);

/// Gives the allocator's free pages back to the kernel, off the async workers (a trim walks
/// every arena), once for every burst. glibc keeps freed memory of its per-thread arenas
/// otherwise: the daemon's RSS would stay at its peak after a burst of large outputs.
fn release_free_heap() {
    #[cfg(target_env = "gnu")]
    {
        static SCHEDULED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        let trim = || {
            SCHEDULED.store(false, Ordering::Release);
            // SAFETY: malloc_trim only releases free memory; it takes the arenas' locks.
            unsafe { libc::malloc_trim(0) };
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                if !SCHEDULED.swap(true, Ordering::AcqRel) {
                    rt.spawn(async move {
                        tokio::time::sleep(TRIM_DELAY).await;
                        let _ = tokio::task::spawn_blocking(trim).await;
                    });
                }
            }
            Err(_) => trim(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_what_fits_and_gives_it_back_on_drop() {
        let budget = OutputBudget::new(100);
        let mut a = Charge::default();
        assert!(budget.try_take(60, &mut a));
        let mut b = Charge::default();
        assert!(!budget.try_take(41, &mut b), "past the limit");
        assert!(budget.try_take(40, &mut b));
        assert_eq!(budget.held(), 100);
        a.absorb(b);
        assert_eq!((a.bytes(), budget.held()), (100, 100));
        drop(a);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn an_emptied_budget_trims_what_the_last_outputs_gave_back() {
        let budget = OutputBudget::new(64 * MIB);
        let since_trim = |b: &OutputBudget| b.freed_since_trim.load(Ordering::Acquire);
        // Two outputs of 3 MiB: the first given back leaves the other held, no trim yet.
        let (mut a, mut b) = (Charge::default(), Charge::default());
        assert!(budget.try_take(3 * MIB, &mut a));
        assert!(budget.try_take(3 * MIB, &mut b));
        drop(a);
        assert_eq!(since_trim(&budget), 3 * MIB);
        // The last one empties the budget: a trim is due, far below the 16 MiB batch.
        drop(b);
        assert_eq!(since_trim(&budget), 0);
        // A quiet node's small outputs are not worth a trim each.
        let mut small = Charge::default();
        assert!(budget.try_take(4096, &mut small));
        drop(small);
        assert_eq!(since_trim(&budget), 4096);
    }
}
