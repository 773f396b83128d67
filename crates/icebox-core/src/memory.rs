//! Memory measurements and how idle instances are charged against the pool budget.

use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// Memory of one instance (sum over all its processes), in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryStats {
    /// Unique set size: Private_Clean + Private_Dirty.
    pub uss: u64,
    pub pss: u64,
    pub rss: u64,
    pub swap: u64,
    /// The instance cgroup's own usage counter (0 when there is no cgroup).
    pub cgroup: u64,
}

impl MemoryStats {
    pub fn add(&mut self, other: &MemoryStats) {
        self.uss += other.uss;
        self.pss += other.pss;
        self.rss += other.rss;
        self.swap += other.swap;
        self.cgroup += other.cgroup;
    }
}

/// What an idle instance costs the keep-alive budget. Charging measured memory rather than
/// the declared limit is what lets reclaimed memory hold more warm instances.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChargeMode {
    #[default]
    Uss,
    Pss,
    Limit,
}

impl ChargeMode {
    pub fn charge(self, measured: &MemoryStats, limit_bytes: u64) -> u64 {
        match self {
            ChargeMode::Uss => measured.uss,
            ChargeMode::Pss => measured.pss,
            ChargeMode::Limit => limit_bytes,
        }
    }
}

impl FromStr for ChargeMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "uss" => Ok(ChargeMode::Uss),
            "pss" => Ok(ChargeMode::Pss),
            "limit" => Ok(ChargeMode::Limit),
            other => Err(format!(
                "unknown charge mode '{other}' (expected uss, pss or limit)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charge_modes() {
        let m = MemoryStats {
            uss: 10,
            pss: 12,
            rss: 30,
            swap: 0,
            cgroup: 40,
        };
        assert_eq!(ChargeMode::Uss.charge(&m, 256), 10);
        assert_eq!(ChargeMode::Pss.charge(&m, 256), 12);
        assert_eq!(ChargeMode::Limit.charge(&m, 256), 256);
        assert_eq!("PSS".parse::<ChargeMode>(), Ok(ChargeMode::Pss));
        assert!("rss".parse::<ChargeMode>().is_err());
    }
}
