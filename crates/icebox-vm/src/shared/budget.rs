//! The host memory budget of all N:1 VMs of a backend: bytes plugged (or being plugged) into
//! partitions, of which some are being released. A start reserves its partition here first
//! and waits, boundedly, for releases in flight when the budget is full.

use icebox_core::units::MIB;
use icebox_sandbox_api::MemoryBudget;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    in_use: u64,
    releasing: u64,
}

pub struct Budget {
    limit: Option<u64>,
    counts: Mutex<Counts>,
    freed: Notify,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    #[error(
        "a {need_mib} MiB partition is larger than the whole vm-shared memory budget ({limit_mib} MiB)"
    )]
    TooLarge { need_mib: u64, limit_mib: u64 },
    #[error(
        "no host memory for a {need_mib} MiB partition within {waited:?}: the vm-shared budget is \
         {limit_mib} MiB, {in_use_mib} MiB plugged, {releasing_mib} MiB being released"
    )]
    Timeout {
        need_mib: u64,
        waited: Duration,
        limit_mib: u64,
        in_use_mib: u64,
        releasing_mib: u64,
    },
}

impl Budget {
    pub fn new(limit: Option<u64>) -> Budget {
        Budget {
            limit,
            counts: Mutex::new(Counts::default()),
            freed: Notify::new(),
        }
    }

    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// What the pool sees (`None` without a limit: nothing to make room for).
    pub fn snapshot(&self) -> Option<MemoryBudget> {
        let c = *self.counts.lock().unwrap();
        self.limit.map(|limit| MemoryBudget {
            limit,
            in_use: c.in_use,
            releasing: c.releasing,
        })
    }

    /// Plugged bytes and bytes being released, limit or not (for reports).
    pub fn usage(&self) -> (u64, u64) {
        let c = *self.counts.lock().unwrap();
        (c.in_use, c.releasing)
    }

    fn try_take(&self, bytes: u64) -> bool {
        let mut c = self.counts.lock().unwrap();
        match self.limit {
            Some(limit) if c.in_use + bytes > limit => false,
            _ => {
                c.in_use += bytes;
                true
            }
        }
    }

    /// Take `bytes` for a partition, waiting until `deadline` for releases to make room.
    pub async fn reserve(&self, bytes: u64, deadline: Instant) -> Result<(), BudgetError> {
        let mib = |b: u64| b / MIB;
        if let Some(limit) = self.limit {
            if bytes > limit {
                return Err(BudgetError::TooLarge {
                    need_mib: mib(bytes),
                    limit_mib: mib(limit),
                });
            }
        }
        let started = Instant::now();
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if self.try_take(bytes) {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline.into(), freed)
                .await
                .is_err()
            {
                let c = *self.counts.lock().unwrap();
                return Err(BudgetError::Timeout {
                    need_mib: mib(bytes),
                    waited: started.elapsed(),
                    limit_mib: mib(self.limit.unwrap_or(u64::MAX)),
                    in_use_mib: mib(c.in_use),
                    releasing_mib: mib(c.releasing),
                });
            }
        }
    }

    /// A partition's memory starts going back (an unplug was asked for).
    pub fn begin_release(&self, bytes: u64) {
        self.counts.lock().unwrap().releasing += bytes;
    }

    /// The unplug did not finish in time: no longer counted as coming back soon, still in use.
    pub fn release_stalled(&self, bytes: u64) {
        let mut c = self.counts.lock().unwrap();
        c.releasing = c.releasing.saturating_sub(bytes);
    }

    /// A partition's memory is back (unplugged, or never plugged: a failed start). `was_releasing`:
    /// it was counted in `releasing` until now.
    pub fn give_back(&self, bytes: u64, was_releasing: bool) {
        {
            let mut c = self.counts.lock().unwrap();
            c.in_use = c.in_use.saturating_sub(bytes);
            if was_releasing {
                c.releasing = c.releasing.saturating_sub(bytes);
            }
        }
        self.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::units::GIB;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_reservation_waits_for_a_release_then_proceeds() {
        let b = Arc::new(Budget::new(Some(512 * MIB)));
        let far = Instant::now() + Duration::from_secs(30);
        b.reserve(512 * MIB, far).await.unwrap();
        b.begin_release(512 * MIB);
        assert_eq!(
            b.snapshot().unwrap(),
            MemoryBudget {
                limit: 512 * MIB,
                in_use: 512 * MIB,
                releasing: 512 * MIB
            }
        );
        let waiter = {
            let b = b.clone();
            tokio::spawn(async move { b.reserve(256 * MIB, far).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        b.give_back(512 * MIB, true);
        waiter.await.unwrap().unwrap();
        assert_eq!(b.usage(), (256 * MIB, 0));
    }

    #[tokio::test]
    async fn a_reservation_times_out_with_the_numbers() {
        let b = Budget::new(Some(512 * MIB));
        b.reserve(384 * MIB, Instant::now()).await.unwrap();
        b.begin_release(128 * MIB);
        b.release_stalled(128 * MIB);
        let err = b
            .reserve(256 * MIB, Instant::now() + Duration::from_millis(20))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                BudgetError::Timeout {
                    need_mib: 256,
                    limit_mib: 512,
                    in_use_mib: 384,
                    releasing_mib: 0,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err
            .to_string()
            .contains("no host memory for a 256 MiB partition"));
        assert!(matches!(
            b.reserve(1024 * MIB, Instant::now()).await,
            Err(BudgetError::TooLarge { .. })
        ));
    }

    #[tokio::test]
    async fn without_a_limit_everything_fits_and_is_still_counted() {
        let b = Budget::new(None);
        b.reserve(64 * GIB, Instant::now()).await.unwrap();
        assert_eq!(b.snapshot(), None);
        assert_eq!(b.usage(), (64 * GIB, 0));
    }
}
