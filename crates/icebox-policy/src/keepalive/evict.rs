//! Which idle instance goes first when a node must make room for a new one: the least recently
//! used (the daemon's budget eviction), or the one whose function is invoked least often (the
//! isolates thesis' simulator, after Photons' lazy keep-alive).

use crate::clock::Millis;
use serde::{Deserialize, Serialize};
use std::str::FromStr;

#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum EvictOrder {
    #[default]
    Lru,
    Frequency,
}

impl EvictOrder {
    pub const ALL: &'static [Self] = <Self as strum::VariantArray>::VARIANTS;

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Sort key of one idle instance: smallest is evicted first. `invocations` is how often
    /// its function has been invoked so far; ties (and LRU) go to the longest idle. Callers
    /// break remaining ties by instance id, as [`crate::pool::lru_order`] does.
    pub fn key(self, idle_since: Millis, invocations: u64) -> (u64, Millis) {
        match self {
            EvictOrder::Lru => (0, idle_since),
            EvictOrder::Frequency => (invocations, idle_since),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown eviction order '{0}' (expected lru or frequency)")]
pub struct ParseEvictOrderError(pub String);

impl FromStr for EvictOrder {
    type Err = ParseEvictOrderError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EvictOrder::ALL
            .iter()
            .copied()
            .find(|m| m.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| ParseEvictOrderError(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_ignores_frequency_and_frequency_breaks_ties_by_age() {
        let lru = EvictOrder::Lru;
        assert!(lru.key(10, 1_000) < lru.key(20, 1));
        let freq = EvictOrder::Frequency;
        assert!(freq.key(20, 1) < freq.key(10, 1_000));
        assert!(freq.key(10, 5) < freq.key(20, 5));
    }

    #[test]
    fn parses_its_names() {
        for &o in EvictOrder::ALL {
            assert_eq!(o.as_str().parse::<EvictOrder>(), Ok(o));
        }
        assert_eq!("LRU".parse::<EvictOrder>(), Ok(EvictOrder::Lru));
        assert!("fifo"
            .parse::<EvictOrder>()
            .unwrap_err()
            .to_string()
            .contains("lru or frequency"));
    }
}
