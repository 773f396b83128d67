//! Injected time: policies never read a clock themselves, so the simulator can replay a day of
//! trace in seconds and tests can stand exactly on a deadline.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Monotonic milliseconds since an arbitrary origin chosen by the clock.
pub type Millis = u64;

pub trait Clock: Send + Sync {
    fn now_ms(&self) -> Millis;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_ms(&self) -> Millis {
        (**self).now_ms()
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now_ms(&self) -> Millis {
        (**self).now_ms()
    }
}

/// The daemon's clock: milliseconds elapsed since the clock was created. Immune to wall-clock
/// jumps (NTP, manual changes), which would otherwise expire or resurrect the whole pool.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    pub fn new() -> Self {
        MonotonicClock {
            origin: Instant::now(),
        }
    }

    /// The `Instant` a policy deadline refers to, for `sleep_until`-style waits.
    /// `None` when the deadline lies beyond what `Instant` can represent (sleep forever).
    pub fn instant_at(&self, t: Millis) -> Option<Instant> {
        self.origin.checked_add(Duration::from_millis(t))
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now_ms(&self) -> Millis {
        // u64 milliseconds outlast the process by half a billion years; saturate rather than wrap.
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(Millis::MAX)
    }
}

/// A clock that moves only when told to: for tests and the simulator.
///
/// It stays monotonic like the daemon's clock: moving it backwards is a bug in the driver and
/// panics, instead of letting policies observe time running in reverse.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    pub fn new(start: Millis) -> Self {
        ManualClock {
            now: AtomicU64::new(start),
        }
    }

    /// Jumps to `t` (which may equal the current time).
    ///
    /// # Panics
    /// If `t` is earlier than the current time.
    pub fn set(&self, t: Millis) {
        if let Err(current) = self
            .now
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |cur| {
                (t >= cur).then_some(t)
            })
        {
            panic!("ManualClock cannot go back from {current} ms to {t} ms");
        }
    }

    /// Moves forward by `by` and returns the new time.
    ///
    /// # Panics
    /// If the time would overflow `u64`.
    pub fn advance(&self, by: Millis) -> Millis {
        match self
            .now
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |cur| {
                cur.checked_add(by)
            }) {
            Ok(previous) => previous + by,
            Err(current) => panic!("ManualClock overflows advancing {current} ms by {by} ms"),
        }
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        self.now.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(100);
        assert_eq!(clock.now_ms(), 100);
        assert_eq!(clock.advance(50), 150);
        assert_eq!(clock.now_ms(), 150);
        clock.set(150);
        clock.set(1_000);
        assert_eq!(clock.now_ms(), 1_000);
        assert_eq!(ManualClock::default().now_ms(), 0);
    }

    #[test]
    #[should_panic(expected = "cannot go back")]
    fn manual_clock_refuses_to_go_backwards() {
        let clock = ManualClock::new(10);
        clock.set(9);
    }

    #[test]
    #[should_panic(expected = "overflows")]
    fn manual_clock_refuses_to_overflow() {
        ManualClock::new(Millis::MAX).advance(1);
    }

    #[test]
    fn clocks_are_shareable_as_trait_objects() {
        let manual = Arc::new(ManualClock::new(7));
        let shared: Arc<dyn Clock> = manual.clone();
        manual.advance(3);
        assert_eq!(shared.now_ms(), 10);
        fn read(clock: impl Clock) -> Millis {
            clock.now_ms()
        }
        assert_eq!(read(&*manual), 10);
    }

    #[test]
    fn monotonic_clock_never_goes_backwards() {
        let clock = MonotonicClock::new();
        let a = clock.now_ms();
        let b = clock.now_ms();
        assert!(b >= a);
        assert_eq!(clock.instant_at(0), Some(clock.origin));
        assert_eq!(
            clock.instant_at(1_500),
            Some(clock.origin + Duration::from_millis(1_500))
        );
    }
}
