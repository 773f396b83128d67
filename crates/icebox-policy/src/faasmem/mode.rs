//! Which offload policy a node (or one action, overriding its node) applies to its kept-alive
//! instances.

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
pub enum OffloadMode {
    /// Nothing is offloaded: the default, so a node behaves as before until the operator opts in.
    #[default]
    None,
    /// The paper's baseline: a small share of every kept-alive instance every few seconds
    /// through the kernel's own LRU, backing off on memory pressure ([`super::TmoController`]).
    Tmo,
    /// Segment-wise offload after the barriers, then semi-warm ([`super::InstanceOffload`]).
    Faasmem,
}

impl OffloadMode {
    pub const ALL: &'static [Self] = <Self as strum::VariantArray>::VARIANTS;

    /// The same spelling as the serde form, for flags, annotations and metric labels.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown offload mode '{0}' (expected none, tmo or faasmem)")]
pub struct ParseOffloadModeError(pub String);

impl FromStr for OffloadMode {
    type Err = ParseOffloadModeError;

    /// Case-insensitive, like the other modes operators type on the command line.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        OffloadMode::ALL
            .iter()
            .copied()
            .find(|m| m.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| ParseOffloadModeError(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_and_from_str_agree_on_lowercase_names() {
        for &m in OffloadMode::ALL {
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{m}\""));
            assert_eq!(
                serde_json::from_str::<OffloadMode>(&format!("\"{}\"", m.as_str())).unwrap(),
                m
            );
            assert_eq!(m.as_str().parse::<OffloadMode>(), Ok(m));
        }
        assert_eq!("FaaSMem".parse::<OffloadMode>(), Ok(OffloadMode::Faasmem));
        assert_eq!("TMO".parse::<OffloadMode>(), Ok(OffloadMode::Tmo));
        assert_eq!(" none ".parse::<OffloadMode>(), Ok(OffloadMode::None));
        assert_eq!(OffloadMode::default(), OffloadMode::None);
    }

    #[test]
    fn unknown_modes_are_rejected_with_the_choices() {
        let err = "damon".parse::<OffloadMode>().unwrap_err();
        assert_eq!(err, ParseOffloadModeError("damon".into()));
        assert!(err.to_string().contains("none, tmo or faasmem"), "{err}");
        assert!("".parse::<OffloadMode>().is_err());
        assert!(serde_json::from_str::<OffloadMode>("\"Tmo\"").is_err());
    }
}
