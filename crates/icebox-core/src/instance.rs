//! The instance lifecycle state machine.

use serde::{Deserialize, Serialize};
use std::fmt;

pub type InstanceId = String;

/// ```text
/// creating ─► initializing ─► running ⇄ idle ─► frozen ─► (thawed) running
///                 any state ─► evicted
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceState {
    /// A runtime started ahead of demand, not yet given an action (a "stem cell").
    Prewarmed,
    Creating,
    Initializing,
    Running,
    Idle,
    Frozen,
    Evicted,
}

impl InstanceState {
    pub const ALL: [InstanceState; 7] = [
        InstanceState::Prewarmed,
        InstanceState::Creating,
        InstanceState::Initializing,
        InstanceState::Running,
        InstanceState::Idle,
        InstanceState::Frozen,
        InstanceState::Evicted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InstanceState::Prewarmed => "prewarmed",
            InstanceState::Creating => "creating",
            InstanceState::Initializing => "initializing",
            InstanceState::Running => "running",
            InstanceState::Idle => "idle",
            InstanceState::Frozen => "frozen",
            InstanceState::Evicted => "evicted",
        }
    }

    /// Idle and frozen instances form the keep-alive pool charged against the budget.
    pub fn is_kept_alive(self) -> bool {
        matches!(self, InstanceState::Idle | InstanceState::Frozen)
    }

    /// Whether the lifecycle allows going from `self` to `next`.
    pub fn can_become(self, next: InstanceState) -> bool {
        use InstanceState::*;
        match (self, next) {
            (Evicted, _) => false,
            (_, Evicted) => true,
            (Prewarmed, Initializing) => true,
            (Creating, Initializing) => true,
            (Initializing, Running) => true,
            (Running, Idle) | (Running, Running) => true,
            (Idle, Running) | (Idle, Frozen) => true,
            (Frozen, Running) | (Frozen, Idle) => true,
            _ => false,
        }
    }
}

impl fmt::Display for InstanceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::InstanceState::*;

    #[test]
    fn lifecycle_transitions() {
        assert!(Creating.can_become(Initializing));
        assert!(Initializing.can_become(Running));
        assert!(Running.can_become(Idle));
        assert!(Idle.can_become(Frozen));
        assert!(Frozen.can_become(Running));
        assert!(Frozen.can_become(Evicted));
        assert!(!Evicted.can_become(Running));
        assert!(!Creating.can_become(Frozen));
        assert!(!Frozen.can_become(Initializing));
        assert!(Frozen.is_kept_alive() && Idle.is_kept_alive() && !Running.is_kept_alive());
    }
}
