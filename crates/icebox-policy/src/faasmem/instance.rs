//! One instance's way through FaaSMem's Puckets (§5): the runtime segment after the first
//! request, the init segment after its request window, then periodic rollbacks of the hot pool.
//! The daemon calls [`InstanceOffload::after_request`] after every completed request with the
//! probe counts its scan just observed, and carries out the steps it returns, in order.

use super::config::FaasmemConfig;
use super::window::RequestWindow;
use crate::clock::Millis;
use serde::{Deserialize, Serialize};

/// A mechanism call for icebox-mem's `Puckets`, named after it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum OffloadStep {
    /// Offload the runtime segment's pages not seen again (§5.1, reactive).
    Runtime,
    /// Offload the init segment's probe pages and start watching them.
    ProbeInit,
    /// The init window closed: offload every init group whose probe is still swapped.
    InitCold,
    /// Probe the hot pool: offload its probe pages and start watching them (§5.3).
    Rollback,
    /// A request window after a rollback: hot groups whose probe stayed swapped are offloaded.
    RollbackCold,
}

impl OffloadStep {
    pub const ALL: &'static [Self] = <Self as strum::VariantArray>::VARIANTS;

    /// The serde spelling, for event details and metric labels.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Where an instance stands, for status output.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum OffloadPhase {
    /// No request completed yet.
    Fresh,
    /// Watching the init segment's probes.
    InitWindow,
    /// Init window closed; waiting for the next rollback to be due.
    Steady,
    /// Watching the hot pool's probes after a rollback.
    RollingBack,
}

impl OffloadPhase {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Fresh,
    InitWindow(RequestWindow),
    /// `since`: the last rollback (or the init window's close), for the time condition;
    /// `requests`: completed since the cycle began, for the request condition.
    Steady {
        since: Millis,
        requests: u32,
    },
    RollingBack {
        started: Millis,
        requests: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceOffload {
    state: State,
    window: Option<u32>,
    rollbacks: u64,
}

impl Default for InstanceOffload {
    fn default() -> Self {
        Self::new()
    }
}

impl InstanceOffload {
    pub fn new() -> Self {
        InstanceOffload {
            state: State::Fresh,
            window: None,
            rollbacks: 0,
        }
    }

    /// After a request completed, with the probe counts the scan that followed it observed:
    /// what to do now, in order (usually nothing).
    ///
    /// - First request: `[Runtime, ProbeInit]` (the counts are ignored: nothing is probed yet).
    /// - In the init window: `[InitCold]` once the [`RequestWindow`] closes.
    /// - Then: `[Rollback]` once at least `rollback_interval_ms` passed since the last
    ///   rollback (or the init window's close) AND a request window of requests completed
    ///   since the cycle began (the close, or the last `RollbackCold`); `[RollbackCold]` after
    ///   the rollback's probes were watched for a request window (at once when it has no
    ///   probes), and the cycle restarts.
    ///
    /// Time going backwards counts as no time passing; `untouched > probes` is clamped.
    pub fn after_request(
        &mut self,
        cfg: &FaasmemConfig,
        now: Millis,
        untouched_probes: u64,
        probes: u64,
    ) -> Vec<OffloadStep> {
        match &mut self.state {
            State::Fresh => {
                self.state = State::InitWindow(RequestWindow::new());
                vec![OffloadStep::Runtime, OffloadStep::ProbeInit]
            }
            State::InitWindow(window) => match window.observe(cfg, untouched_probes, probes) {
                Some(w) => {
                    self.window = Some(w);
                    self.state = State::Steady {
                        since: now,
                        requests: 0,
                    };
                    vec![OffloadStep::InitCold]
                }
                None => Vec::new(),
            },
            State::Steady { since, requests } => {
                *requests = requests.saturating_add(1);
                let window = self.window.unwrap_or(1);
                if now.saturating_sub(*since) >= cfg.rollback_interval_ms && *requests >= window {
                    self.rollbacks += 1;
                    self.state = State::RollingBack {
                        started: now,
                        requests: 0,
                    };
                    vec![OffloadStep::Rollback]
                } else {
                    Vec::new()
                }
            }
            State::RollingBack { started, requests } => {
                *requests = requests.saturating_add(1);
                if probes == 0 || *requests >= self.window.unwrap_or(1) {
                    self.state = State::Steady {
                        since: *started,
                        requests: 0,
                    };
                    vec![OffloadStep::RollbackCold]
                } else {
                    Vec::new()
                }
            }
        }
    }

    /// The init segment's request window, once it closed.
    pub fn request_window(&self) -> Option<u32> {
        self.window
    }

    pub fn phase(&self) -> OffloadPhase {
        match self.state {
            State::Fresh => OffloadPhase::Fresh,
            State::InitWindow(_) => OffloadPhase::InitWindow,
            State::Steady { .. } => OffloadPhase::Steady,
            State::RollingBack { .. } => OffloadPhase::RollingBack,
        }
    }

    /// Rollbacks started so far.
    pub fn rollbacks(&self) -> u64 {
        self.rollbacks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use OffloadStep::*;

    const NONE: [OffloadStep; 0] = [];

    fn cfg() -> FaasmemConfig {
        FaasmemConfig::default()
    }

    /// An instance whose init window closed at 2 requests, at t = 1000.
    fn steady() -> InstanceOffload {
        let mut inst = InstanceOffload::new();
        assert_eq!(inst.after_request(&cfg(), 0, 0, 0), [Runtime, ProbeInit]);
        assert_eq!(inst.after_request(&cfg(), 500, 700, 1000), NONE);
        assert_eq!(inst.after_request(&cfg(), 1000, 700, 1000), [InitCold]);
        assert_eq!(inst.request_window(), Some(2));
        assert_eq!(inst.phase(), OffloadPhase::Steady);
        inst
    }

    #[test]
    fn first_request_offloads_the_runtime_and_starts_probing() {
        let mut inst = InstanceOffload::new();
        assert_eq!(inst.phase(), OffloadPhase::Fresh);
        assert_eq!(inst.request_window(), None);
        // The counts of the first scan are meaningless (nothing probed yet) and ignored.
        assert_eq!(
            inst.after_request(&cfg(), 7, 123, 456),
            [Runtime, ProbeInit]
        );
        assert_eq!(inst.phase(), OffloadPhase::InitWindow);
        assert_eq!(inst.request_window(), None);
    }

    #[test]
    fn an_empty_init_segment_closes_at_the_next_request() {
        let mut inst = InstanceOffload::new();
        inst.after_request(&cfg(), 0, 0, 0);
        assert_eq!(inst.after_request(&cfg(), 10, 0, 0), [InitCold]);
        assert_eq!(inst.request_window(), Some(1));
    }

    #[test]
    fn rollback_needs_both_the_interval_and_a_request_window() {
        let mut inst = steady();
        // Two requests, but only 5 s after the close: too soon.
        assert_eq!(inst.after_request(&cfg(), 3_000, 0, 0), NONE);
        assert_eq!(inst.after_request(&cfg(), 6_000, 0, 0), NONE);
        // Time is up (11 s >= 10 s) and 3 >= 2 requests: roll back.
        assert_eq!(inst.after_request(&cfg(), 11_000, 0, 0), [Rollback]);
        assert_eq!(inst.phase(), OffloadPhase::RollingBack);
        assert_eq!(inst.rollbacks(), 1);

        // The other way round: a long idle gap, then the requests.
        let mut inst = steady();
        assert_eq!(inst.after_request(&cfg(), 60_000, 0, 0), NONE);
        assert_eq!(inst.after_request(&cfg(), 60_001, 0, 0), [Rollback]);
    }

    #[test]
    fn rollback_cold_follows_a_request_window_of_watching() {
        let mut inst = steady();
        inst.after_request(&cfg(), 5_000, 0, 0);
        assert_eq!(inst.after_request(&cfg(), 11_000, 0, 0), [Rollback]);
        assert_eq!(inst.after_request(&cfg(), 11_100, 40, 50), NONE);
        assert_eq!(inst.after_request(&cfg(), 11_200, 38, 50), [RollbackCold]);
        assert_eq!(inst.phase(), OffloadPhase::Steady);

        // The next cycle: the interval counts from the rollback (11 s), the requests from
        // RollbackCold.
        assert_eq!(inst.after_request(&cfg(), 21_000, 0, 0), NONE); // 1 request, 10 s
        assert_eq!(inst.after_request(&cfg(), 21_001, 0, 0), [Rollback]); // 2 requests
        assert_eq!(inst.rollbacks(), 2);
        // A rollback with an empty hot pool has nothing to watch.
        assert_eq!(inst.after_request(&cfg(), 21_002, 0, 0), [RollbackCold]);
        assert_eq!(inst.request_window(), Some(2));
    }

    #[test]
    fn time_going_backwards_is_no_time() {
        let mut inst = steady();
        for _ in 0..5 {
            assert_eq!(inst.after_request(&cfg(), 0, 0, 0), NONE);
        }
        assert_eq!(inst.after_request(&cfg(), 11_000, 0, 0), [Rollback]);
        assert_eq!(inst.after_request(&cfg(), 5, 1, 1), NONE);
        assert_eq!(inst.after_request(&cfg(), 3, 9, 1), [RollbackCold]);
        // The interval still counts from the rollback at 11 s.
        assert_eq!(inst.after_request(&cfg(), 20_000, 0, 0), NONE);
        assert_eq!(inst.after_request(&cfg(), 21_000, 0, 0), [Rollback]);
    }

    #[test]
    fn steps_have_stable_labels() {
        let labels: Vec<String> = OffloadStep::ALL.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            labels,
            [
                "runtime",
                "probe_init",
                "init_cold",
                "rollback",
                "rollback_cold"
            ]
        );
        for &s in OffloadStep::ALL {
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
        }
        assert_eq!(OffloadPhase::RollingBack.to_string(), "rolling_back");
    }
}
