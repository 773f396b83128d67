//! How a node (or one action, overriding its node) treats the frozen garbage of idle instances.

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
pub enum ReclaimMode {
    /// No reclaim: frozen instances keep whatever their runtime left behind. The default, so a
    /// node behaves as it did before Desiccant until the operator opts in.
    #[default]
    Vanilla,
    /// The paper's baseline: the runtime runs a full collection at the end of every invocation,
    /// paid for on the activation's latency. The daemon never plans reclaims in this mode.
    Eager,
    /// Reclaims chosen by this module's policy, on idle CPU, only under memory pressure.
    Desiccant,
}

impl ReclaimMode {
    pub const ALL: &'static [Self] = <Self as strum::VariantArray>::VARIANTS;

    /// The same spelling as the serde form, for configuration, CLI flags and metric labels.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown reclaim mode '{0}' (expected vanilla, eager or desiccant)")]
pub struct ParseReclaimModeError(pub String);

impl FromStr for ReclaimMode {
    type Err = ParseReclaimModeError;

    /// Case-insensitive, like the other modes operators type on the command line.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ReclaimMode::ALL
            .iter()
            .copied()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParseReclaimModeError(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_and_from_str_agree_on_lowercase_names() {
        for &m in ReclaimMode::ALL {
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{m}\""));
            assert_eq!(
                serde_json::from_str::<ReclaimMode>(&format!("\"{}\"", m.as_str())).unwrap(),
                m
            );
            assert_eq!(m.as_str().parse::<ReclaimMode>(), Ok(m));
        }
        assert_eq!(
            "Desiccant".parse::<ReclaimMode>(),
            Ok(ReclaimMode::Desiccant)
        );
        assert_eq!("EAGER".parse::<ReclaimMode>(), Ok(ReclaimMode::Eager));
        assert_eq!(ReclaimMode::default(), ReclaimMode::Vanilla);
    }

    #[test]
    fn unknown_modes_are_rejected_with_the_choices() {
        let err = "lazy".parse::<ReclaimMode>().unwrap_err();
        assert_eq!(err, ParseReclaimModeError("lazy".into()));
        assert!(err.to_string().contains("vanilla, eager or desiccant"));
        assert!("".parse::<ReclaimMode>().is_err());
        assert!(serde_json::from_str::<ReclaimMode>("\"Eager\"").is_err());
    }
}
