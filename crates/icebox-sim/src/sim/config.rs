//! What one simulation run models: the cluster, and the policies it runs.

use anyhow::{bail, Result};
use icebox_core::units::MIB;
use icebox_policy::placement::PlacementPolicy;
use icebox_policy::{DesiccantConfig, EvictOrder, HybridConfig, SharingMode};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeepAliveSpec {
    /// Fixed TTL after the end of the last activation (icebox-policy's KeepAlivePolicy).
    Ttl(u64),
    /// The hybrid histogram policy (icebox-policy's HybridPolicy).
    Hybrid,
    /// Keep idle instances until memory pressure evicts them (the thesis' lazy keep-alive).
    Infinite,
}

impl FromStr for KeepAliveSpec {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        Ok(match s {
            "hybrid" => KeepAliveSpec::Hybrid,
            "infinite" => KeepAliveSpec::Infinite,
            "ttl" => KeepAliveSpec::Ttl(icebox_policy::KeepAliveConfig::DEFAULT_KEEP_ALIVE_MS),
            _ => match s.strip_prefix("ttl:") {
                Some(d) => KeepAliveSpec::Ttl(crate::units::parse_duration_ms(d)?),
                None => {
                    bail!("unknown keep-alive '{s}' (expected ttl:DURATION, hybrid or infinite)")
                }
            },
        })
    }
}

impl fmt::Display for KeepAliveSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeepAliveSpec::Ttl(ms) if ms % 60_000 == 0 => write!(f, "ttl:{}m", ms / 60_000),
            KeepAliveSpec::Ttl(ms) if ms % 1_000 == 0 => write!(f, "ttl:{}s", ms / 1_000),
            KeepAliveSpec::Ttl(ms) => write!(f, "ttl:{ms}ms"),
            KeepAliveSpec::Hybrid => f.write_str("hybrid"),
            KeepAliveSpec::Infinite => f.write_str("infinite"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Technique {
    None,
    /// Idle instances frozen for Desiccant's timeout shrink to their retained share while the
    /// node is above Desiccant's activation threshold (and before anything is evicted).
    Desiccant,
}

impl FromStr for Technique {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "none" => Ok(Technique::None),
            "desiccant" => Ok(Technique::Desiccant),
            other => bail!("unknown technique '{other}' (expected none or desiccant)"),
        }
    }
}

impl fmt::Display for Technique {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Technique::None => "none",
            Technique::Desiccant => "desiccant",
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SimConfig {
    pub nodes: u32,
    pub node_memory: u64,
    /// What `node_memory` caps: every instance (a machine's memory, the default) or only idle
    /// ones (iceboxd's `--pool-memory`: busy instances are not charged, a release over the
    /// budget evicts the least recently used idle ones).
    pub budget_idle_only: bool,
    /// 0: CPU is not limited (the thesis' assumption).
    pub node_cores: u32,
    /// Which node an activation goes to (`icebox_policy::placement`, as the daemon).
    pub placement: PlacementPolicy,
    pub keepalive: KeepAliveSpec,
    pub evict: EvictOrder,
    pub sharing: SharingMode,
    pub concurrency: u32,
    pub technique: Technique,
    pub desiccant: DesiccantConfig,
    pub hybrid: HybridConfig,
    /// Metrics count from here (simulated ms); earlier events only warm the cluster up.
    pub count_from_ms: u64,
    /// The simulation stops here (simulated ms): later timers are not run.
    pub end_ms: u64,
    pub timeline: bool,
}

impl SimConfig {
    pub fn cluster_memory(&self) -> u64 {
        self.node_memory.saturating_mul(u64::from(self.nodes))
    }

    /// Node sizes below a GiB (or not whole GiB) are named in MiB: sweeps of small nodes
    /// would otherwise all read "0GiB".
    pub fn label(&self) -> String {
        use icebox_core::units::GIB;
        let size = if self.node_memory.is_multiple_of(GIB) {
            format!("{}GiB", self.node_memory / GIB)
        } else {
            format!("{}MiB", self.node_memory / MIB)
        };
        format!(
            "{} {} {} {size}",
            self.sharing, self.technique, self.keepalive
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keepalive_specs_round_trip() {
        assert_eq!(
            "ttl:10m".parse::<KeepAliveSpec>().unwrap(),
            KeepAliveSpec::Ttl(600_000)
        );
        assert_eq!(
            "ttl".parse::<KeepAliveSpec>().unwrap(),
            KeepAliveSpec::Ttl(600_000)
        );
        assert_eq!(
            "ttl:90s".parse::<KeepAliveSpec>().unwrap().to_string(),
            "ttl:90s"
        );
        assert_eq!(
            "hybrid".parse::<KeepAliveSpec>().unwrap().to_string(),
            "hybrid"
        );
        assert_eq!(
            "infinite".parse::<KeepAliveSpec>().unwrap(),
            KeepAliveSpec::Infinite
        );
        assert!("lru".parse::<KeepAliveSpec>().is_err());
        assert!("desiccant".parse::<Technique>().is_ok());
        assert!("eager".parse::<Technique>().is_err());
    }
}
