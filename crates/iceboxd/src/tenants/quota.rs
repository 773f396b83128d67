//! OpenWhisk's two invocation throttles for a namespace, as pure books with the time passed
//! in: invocations per minute (counted in the current clock minute, as OpenWhisk's rate
//! throttler does) and invocations in flight.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Why an invocation is refused; the texts are OpenWhisk's 429 messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Throttled {
    #[error("Too many requests in the last minute (count: {count}, allowed: {allowed}).")]
    PerMinute { count: u64, allowed: u64 },
    #[error("Too many concurrent requests in flight (count: {count}, allowed: {allowed}).")]
    Concurrent { count: u64, allowed: u64 },
}

#[derive(Default)]
pub struct Throttle {
    minute: Mutex<(u64, u64)>,
    in_flight: Arc<AtomicU64>,
}

/// Held for as long as an admitted invocation runs.
pub struct InFlight(Arc<AtomicU64>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Throttle {
    /// Admits one invocation at `now_ms` under the given limits (None = unlimited). A refused
    /// invocation counts against neither limit.
    pub fn admit(
        &self,
        now_ms: u64,
        per_minute: Option<u64>,
        concurrent: Option<u64>,
    ) -> Result<InFlight, Throttled> {
        let running = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        let guard = InFlight(self.in_flight.clone());
        if let Some(allowed) = concurrent {
            if running > allowed {
                return Err(Throttled::Concurrent {
                    count: running,
                    allowed,
                });
            }
        }
        let mut minute = self.minute.lock().unwrap();
        let this_minute = now_ms / 60_000;
        if minute.0 != this_minute {
            *minute = (this_minute, 0);
        }
        if let Some(allowed) = per_minute {
            if minute.1 >= allowed {
                return Err(Throttled::PerMinute {
                    count: minute.1 + 1,
                    allowed,
                });
            }
        }
        minute.1 += 1;
        Ok(guard)
    }

    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_minute_counts_the_clock_minute_and_refusals_do_not_count() {
        let t = Throttle::default();
        let base = 10 * 60_000;
        for i in 0..3 {
            drop(t.admit(base + i, Some(3), None).unwrap());
        }
        assert_eq!(
            t.admit(base + 59_999, Some(3), None).err(),
            Some(Throttled::PerMinute {
                count: 4,
                allowed: 3
            })
        );
        assert_eq!(t.in_flight(), 0, "a refusal holds no slot");
        // The next minute starts afresh.
        drop(t.admit(base + 60_000, Some(3), None).unwrap());
    }

    #[test]
    fn concurrency_is_what_is_held_now() {
        let t = Throttle::default();
        let a = t.admit(0, None, Some(2)).unwrap();
        let _b = t.admit(0, None, Some(2)).unwrap();
        let refused = t.admit(0, None, Some(2)).err().unwrap();
        assert_eq!(
            refused.to_string(),
            "Too many concurrent requests in flight (count: 3, allowed: 2)."
        );
        drop(a);
        assert!(t.admit(0, None, Some(2)).is_ok());
    }

    #[test]
    fn openwhisk_texts() {
        let e = Throttled::PerMinute {
            count: 61,
            allowed: 60,
        };
        assert_eq!(
            e.to_string(),
            "Too many requests in the last minute (count: 61, allowed: 60)."
        );
    }
}
