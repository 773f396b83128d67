//! Runtime sharing for actions with `limits.concurrency` > 1: how many concurrent activations
//! one instance takes in each mode, which busy instance a concurrent activation joins, and what
//! an instance with n activations in flight is expected to cost (the simulator's memory model;
//! the daemon charges measured memory instead).
//!
//! The modes follow the isolates thesis (ETH 2021) and its baseline Photons (SoCC '20):
//! `process` gives every concurrent activation its own instance (the classic container model),
//! `shared` runs them in one runtime on one heap with per-activation globals (Photons), and
//! `isolate` runs each in its own isolate (own heap and GC) of one runtime, from a pool of
//! warm isolates.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SharingMode {
    /// One instance per concurrent activation: the default, because an action that keeps
    /// process-global state is only safe alone in its process.
    #[default]
    Process,
    /// One runtime, one heap, per-activation globals (Photons).
    Shared,
    /// One runtime, one isolate (own heap) per concurrent activation.
    Isolate,
}

impl SharingMode {
    pub const ALL: [SharingMode; 3] = [
        SharingMode::Process,
        SharingMode::Shared,
        SharingMode::Isolate,
    ];

    /// The same spelling as the serde form, for flags, annotations, env and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            SharingMode::Process => "process",
            SharingMode::Shared => "shared",
            SharingMode::Isolate => "isolate",
        }
    }

    /// How many activations one instance runs at once, given the action's
    /// `limits.concurrency`. In `process` mode that is always 1, whatever the limit says: the
    /// limit then only says how many may be in flight in the whole node at once.
    pub fn capacity(self, concurrency: u32) -> u32 {
        match self {
            SharingMode::Process => 1,
            SharingMode::Shared | SharingMode::Isolate => concurrency.max(1),
        }
    }
}

impl fmt::Display for SharingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown sharing mode '{0}' (expected process, shared or isolate)")]
pub struct ParseSharingModeError(pub String);

impl FromStr for SharingMode {
    type Err = ParseSharingModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SharingMode::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| ParseSharingModeError(s.to_string()))
    }
}

/// A busy instance of the action, as routing sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy<'a> {
    pub id: &'a str,
    pub in_flight: u32,
}

/// Which busy instance a new concurrent activation joins: the fullest one that still has room,
/// so concurrent activations pack into as few runtimes as possible (each extra runtime costs
/// its whole base memory; packing costs only the increment). Ties go to the smallest id.
/// `None` when every busy instance is at `capacity` (start or thaw another one).
pub fn join_busy<'a>(busy: &[Busy<'a>], capacity: u32) -> Option<&'a str> {
    join_busy_by(busy.iter().map(|b| (b.id, b.in_flight)), capacity)
}

/// [`join_busy`] over `(key, in_flight)` pairs with any ordered key (the simulator's instance
/// numbers), so callers need not build `Busy` values with string ids.
pub fn join_busy_by<K: Ord>(busy: impl IntoIterator<Item = (K, u32)>, capacity: u32) -> Option<K> {
    busy.into_iter()
        .filter(|(_, in_flight)| *in_flight < capacity)
        .max_by(|(ka, a), (kb, b)| a.cmp(b).then_with(|| kb.cmp(ka)))
        .map(|(k, _)| k)
}

/// The memory model of one instance: a base paid once per runtime, plus an increment per
/// activation in flight beyond the `base_activations` the base already holds. icebox's own
/// profiles measure the base idle (`base_activations` 0: memory(n) = base + n × increment);
/// the thesis' Table 4.1 measures it with one activation (1: memory(n) = base + (n − 1) ×
/// increment, its formula), and an idle instance keeps that limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryProfile {
    pub base_bytes: u64,
    pub increment_bytes: u64,
    #[serde(default)]
    pub base_activations: u32,
}

impl MemoryProfile {
    /// Expected memory with `in_flight` activations running.
    pub fn charge(&self, in_flight: u32) -> u64 {
        let extra = u64::from(in_flight.saturating_sub(self.base_activations));
        self.base_bytes
            .saturating_add(self.increment_bytes.saturating_mul(extra))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_mode_case_insensitively_and_rejects_others() {
        for m in SharingMode::ALL {
            assert_eq!(m.as_str().parse::<SharingMode>(), Ok(m));
            assert_eq!(
                m.as_str().to_uppercase().parse::<SharingMode>(),
                Ok(m),
                "{m}"
            );
        }
        let err = "threads".parse::<SharingMode>().unwrap_err();
        assert!(err.to_string().contains("'threads'"), "{err}");
        assert_eq!(SharingMode::default(), SharingMode::Process);
    }

    #[test]
    fn process_mode_runs_one_activation_per_instance() {
        assert_eq!(SharingMode::Process.capacity(8), 1);
        assert_eq!(SharingMode::Shared.capacity(8), 8);
        assert_eq!(SharingMode::Isolate.capacity(8), 8);
        assert_eq!(SharingMode::Isolate.capacity(0), 1);
    }

    #[test]
    fn joins_the_fullest_instance_with_room() {
        let busy = [
            Busy {
                id: "b",
                in_flight: 2,
            },
            Busy {
                id: "a",
                in_flight: 3,
            },
            Busy {
                id: "c",
                in_flight: 4,
            },
        ];
        assert_eq!(join_busy(&busy, 4), Some("a"));
        assert_eq!(join_busy(&busy, 5), Some("c"));
        assert_eq!(join_busy(&busy, 2), None);
        assert_eq!(join_busy(&[], 4), None);
        let tied = [
            Busy {
                id: "y",
                in_flight: 1,
            },
            Busy {
                id: "x",
                in_flight: 1,
            },
        ];
        assert_eq!(join_busy(&tied, 4), Some("x"));
    }

    #[test]
    fn join_busy_by_takes_any_ordered_key() {
        let busy = [(7u32, 1), (3, 2), (5, 2), (9, 4)];
        assert_eq!(join_busy_by(busy, 4), Some(3));
        assert_eq!(join_busy_by(busy, 2), Some(7));
        assert_eq!(join_busy_by(busy, 1), None);
    }

    #[test]
    fn charge_is_base_plus_increment_per_activation() {
        let p = MemoryProfile {
            base_bytes: 100,
            increment_bytes: 10,
            base_activations: 0,
        };
        assert_eq!(p.charge(0), 100);
        assert_eq!(p.charge(3), 130);
        // The thesis' convention: the base already holds one activation.
        let thesis = MemoryProfile {
            base_activations: 1,
            ..p
        };
        assert_eq!(thesis.charge(0), 100);
        assert_eq!(thesis.charge(1), 100);
        assert_eq!(thesis.charge(3), 120);
        let huge = MemoryProfile {
            base_bytes: u64::MAX,
            increment_bytes: 1,
            base_activations: 0,
        };
        assert_eq!(huge.charge(5), u64::MAX);
    }
}
