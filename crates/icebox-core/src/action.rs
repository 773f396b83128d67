//! Action (function) specification, as stored in the registry and sent to sandboxes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What to run: OpenWhisk's `exec` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exec {
    /// Canonical runtime kind (aliases such as `python:default` are resolved before storing).
    pub kind: String,
    /// Source text, or base64 of a zip/jar when `binary` is true.
    pub code: String,
    #[serde(default)]
    pub binary: bool,
    /// Entry point; runtimes default to `main` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main: Option<String>,
    /// A zip/jar kept in the daemon's code store under this digest (its decoded bytes);
    /// `code` is then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// OpenWhisk `limits`, in OpenWhisk units (MB, ms, activations per instance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionLimits {
    pub memory: u64,
    pub timeout: u64,
    pub concurrency: u32,
    /// OpenWhisk's log size limit in MB; kept for client compatibility.
    #[serde(default = "default_logs_mb")]
    pub logs: u64,
}

fn default_logs_mb() -> u64 {
    10
}

/// A limit outside its range, worded as OpenWhisk words it ("memory 1 MB below allowed
/// threshold of 32 MB").
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{what} {value}{unit} {side} allowed threshold of {bound}{unit}", unit = self.unit(), side = if self.above { "exceeds" } else { "below" })]
pub struct LimitError {
    pub what: LimitName,
    pub value: u64,
    pub bound: u64,
    /// Above the maximum (else below the minimum).
    pub above: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitName {
    Memory,
    Timeout,
    Logs,
    Concurrency,
}

impl std::fmt::Display for LimitName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LimitName::Memory => "memory",
            LimitName::Timeout => "duration",
            LimitName::Logs => "log size",
            LimitName::Concurrency => "concurrency",
        })
    }
}

impl LimitError {
    fn unit(&self) -> &'static str {
        match self.what {
            LimitName::Memory | LimitName::Logs => " MB",
            LimitName::Timeout => " ms",
            LimitName::Concurrency => "",
        }
    }
}

impl ActionLimits {
    /// icebox's ranges: wider than OpenWhisk's defaults for memory (128..=512) and timeout
    /// (100..=300000), as they always were here, so deployed actions stay valid.
    pub const MEMORY_MB: (u64, u64) = (32, 8192);
    pub const TIMEOUT_MS: (u64, u64) = (100, 600_000);
    /// OpenWhisk's log limit range.
    pub const LOGS_MB: (u64, u64) = (0, 10);
    pub const CONCURRENCY: (u32, u32) = (1, 500);

    pub fn validate(&self) -> Result<(), LimitError> {
        let c = |(lo, hi): (u32, u32)| (u64::from(lo), u64::from(hi));
        for (what, value, (lo, hi)) in [
            (LimitName::Memory, self.memory, Self::MEMORY_MB),
            (LimitName::Timeout, self.timeout, Self::TIMEOUT_MS),
            (LimitName::Logs, self.logs, Self::LOGS_MB),
            (
                LimitName::Concurrency,
                u64::from(self.concurrency),
                c(Self::CONCURRENCY),
            ),
        ] {
            if value < lo {
                return Err(LimitError {
                    what,
                    value,
                    bound: lo,
                    above: false,
                });
            }
            if value > hi {
                return Err(LimitError {
                    what,
                    value,
                    bound: hi,
                    above: true,
                });
            }
        }
        Ok(())
    }

    pub fn memory_bytes(&self) -> u64 {
        self.memory.saturating_mul(crate::units::MIB)
    }

    /// The per-activation log cap in bytes (saturating: a stored limit predating validation
    /// must not wrap to 0).
    pub fn logs_bytes(&self) -> u64 {
        self.logs.saturating_mul(crate::units::MIB)
    }
}

impl Default for ActionLimits {
    /// OpenWhisk's defaults.
    fn default() -> Self {
        ActionLimits {
            memory: 256,
            timeout: 60_000,
            concurrency: 1,
            logs: default_logs_mb(),
        }
    }
}

/// A deployed action: everything needed to start an instance of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionSpec {
    pub namespace: String,
    pub name: String,
    pub exec: Exec,
    pub limits: ActionLimits,
    /// Default parameters merged under the invocation's parameters (OpenWhisk semantics).
    #[serde(default)]
    pub parameters: Vec<KeyValue>,
    #[serde(default)]
    pub annotations: Vec<KeyValue>,
    /// Semantic version bumped on every update (OpenWhisk style "0.0.N").
    pub version: String,
    /// Last update, ms since the Unix epoch.
    pub updated: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyValue {
    pub key: String,
    pub value: Value,
}

impl ActionSpec {
    /// Fully qualified name as OpenWhisk prints it: `namespace/name`.
    pub fn fqn(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn annotation(&self, key: &str) -> Option<&Value> {
        self.annotations
            .iter()
            .find(|kv| kv.key == key)
            .map(|kv| &kv.value)
    }

    /// Whether the action asked for the node's API key (`__OW_API_KEY`) with OpenWhisk's
    /// `provide-api-key` annotation. The node key is its admin key, so actions that did not ask
    /// get none: with network access it could list and change everything on the node.
    pub fn provides_api_key(&self) -> bool {
        matches!(self.annotation("provide-api-key"), Some(Value::Bool(true)))
            || matches!(self.annotation("provide-api-key"), Some(Value::String(s)) if s == "true")
    }

    /// Default parameters overlaid by the invocation's own (invocation wins).
    pub fn merged_parameters(
        &self,
        invocation: &serde_json::Map<String, Value>,
    ) -> serde_json::Map<String, Value> {
        let mut merged: serde_json::Map<String, Value> = self
            .parameters
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect();
        for (k, v) in invocation {
            merged.insert(k.clone(), v.clone());
        }
        merged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(l: ActionLimits) -> String {
        l.validate().expect_err("out of range").to_string()
    }

    #[test]
    fn the_api_key_goes_only_to_actions_that_ask_for_it() {
        use serde_json::json;
        let mut spec = ActionSpec {
            namespace: "guest".into(),
            name: "a".into(),
            exec: Exec {
                kind: "python:3".into(),
                code: "x".into(),
                binary: false,
                main: None,
                sha256: None,
            },
            limits: ActionLimits::default(),
            parameters: vec![],
            annotations: vec![],
            version: "0.0.1".into(),
            updated: 0,
        };
        assert!(!spec.provides_api_key());
        for (value, provides) in [
            (json!(true), true),
            (json!("true"), true),
            (json!(false), false),
            (json!(1), false),
        ] {
            spec.annotations = vec![KeyValue {
                key: "provide-api-key".into(),
                value,
            }];
            assert_eq!(spec.provides_api_key(), provides, "{:?}", spec.annotations);
        }
    }

    #[test]
    fn limits_validation_names_the_bad_field() {
        let d = ActionLimits::default();
        assert!(d.validate().is_ok());
        assert_eq!(
            refusal(ActionLimits { memory: 1, ..d }),
            "memory 1 MB below allowed threshold of 32 MB"
        );
        assert_eq!(
            refusal(ActionLimits { memory: 8193, ..d }),
            "memory 8193 MB exceeds allowed threshold of 8192 MB"
        );
        assert_eq!(
            refusal(ActionLimits { timeout: 10, ..d }),
            "duration 10 ms below allowed threshold of 100 ms"
        );
        assert_eq!(
            refusal(ActionLimits {
                timeout: 600_001,
                ..d
            }),
            "duration 600001 ms exceeds allowed threshold of 600000 ms"
        );
        assert_eq!(
            refusal(ActionLimits {
                concurrency: 0,
                ..d
            }),
            "concurrency 0 below allowed threshold of 1"
        );
        assert_eq!(
            refusal(ActionLimits {
                concurrency: 501,
                ..d
            }),
            "concurrency 501 exceeds allowed threshold of 500"
        );
    }

    /// 2^44 MB of logs overflowed to 0 bytes when multiplied out.
    #[test]
    fn log_limit_is_validated() {
        let d = ActionLimits::default();
        assert_eq!(
            refusal(ActionLimits { logs: 1 << 44, ..d }),
            "log size 17592186044416 MB exceeds allowed threshold of 10 MB"
        );
        assert_eq!(
            refusal(ActionLimits { logs: 11, ..d }),
            "log size 11 MB exceeds allowed threshold of 10 MB"
        );
        for ok in [0, 10] {
            assert!(ActionLimits { logs: ok, ..d }.validate().is_ok(), "{ok}");
        }
        assert_eq!(ActionLimits { logs: 1 << 44, ..d }.logs_bytes(), u64::MAX);
    }

    #[test]
    fn edges_of_every_range_are_accepted() {
        let d = ActionLimits::default();
        for l in [
            ActionLimits {
                memory: 32,
                timeout: 100,
                concurrency: 1,
                logs: 0,
            },
            ActionLimits {
                memory: 8192,
                timeout: 600_000,
                concurrency: 500,
                logs: 10,
            },
            d,
        ] {
            assert!(l.validate().is_ok(), "{l:?}");
        }
    }

    #[test]
    fn invocation_parameters_override_defaults() {
        let spec = ActionSpec {
            namespace: "guest".into(),
            name: "a".into(),
            exec: Exec {
                kind: "python:3".into(),
                code: String::new(),
                binary: false,
                main: None,
                sha256: None,
            },
            limits: ActionLimits::default(),
            parameters: vec![
                KeyValue {
                    key: "x".into(),
                    value: 1.into(),
                },
                KeyValue {
                    key: "y".into(),
                    value: 2.into(),
                },
            ],
            annotations: vec![],
            version: "0.0.1".into(),
            updated: 0,
        };
        let mut inv = serde_json::Map::new();
        inv.insert("y".into(), 5.into());
        let m = spec.merged_parameters(&inv);
        assert_eq!(m["x"], 1);
        assert_eq!(m["y"], 5);
    }
}
