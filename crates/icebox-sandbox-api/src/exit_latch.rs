//! The one-way "this instance's runtime is gone, and why" every sandbox keeps: set once (the
//! first cause wins), read without waiting, and awaited by the invoker racing a request against
//! the runtime's death.

use crate::ExitCause;
use std::sync::OnceLock;
use tokio::sync::Notify;

#[derive(Default)]
pub struct ExitLatch {
    cause: OnceLock<ExitCause>,
    notify: Notify,
}

impl ExitLatch {
    /// Records the exit; true if this call set it (a later cause is ignored). Wakes every
    /// waiter either way.
    pub fn set(&self, cause: ExitCause) -> bool {
        let first = self.cause.set(cause).is_ok();
        self.notify.notify_waiters();
        first
    }

    pub fn get(&self) -> Option<ExitCause> {
        self.cause.get().copied()
    }

    /// Returns once the exit is set (at once if it already is).
    pub async fn wait(&self) {
        loop {
            // Registered before the check, so a `set` in between still wakes us.
            let notified = self.notify.notified();
            if self.cause.get().is_some() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn waiters_wake_on_the_first_cause_which_stays() {
        let latch = Arc::new(ExitLatch::default());
        assert_eq!(latch.get(), None);
        let waiter = tokio::spawn({
            let latch = latch.clone();
            async move { latch.wait().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished());
        assert!(latch.set(ExitCause::OutOfMemory));
        assert!(!latch.set(ExitCause::Exited));
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .unwrap();
        assert_eq!(latch.get(), Some(ExitCause::OutOfMemory));
        // A late waiter returns at once.
        tokio::time::timeout(Duration::from_secs(5), latch.wait())
            .await
            .expect("already set");
    }
}
