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

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LimitError {
    #[error("memory limit {0} MB is outside the allowed range {1}..={2} MB")]
    Memory(u64, u64, u64),
    #[error("timeout {0} ms is outside the allowed range {1}..={2} ms")]
    Timeout(u64, u64, u64),
    #[error("concurrency {0} is outside the allowed range {1}..={2}")]
    Concurrency(u32, u32, u32),
}

impl ActionLimits {
    pub const MEMORY_MB: (u64, u64) = (32, 8192);
    pub const TIMEOUT_MS: (u64, u64) = (100, 600_000);
    pub const CONCURRENCY: (u32, u32) = (1, 500);

    pub fn validate(&self) -> Result<(), LimitError> {
        let (lo, hi) = Self::MEMORY_MB;
        if !(lo..=hi).contains(&self.memory) {
            return Err(LimitError::Memory(self.memory, lo, hi));
        }
        let (lo, hi) = Self::TIMEOUT_MS;
        if !(lo..=hi).contains(&self.timeout) {
            return Err(LimitError::Timeout(self.timeout, lo, hi));
        }
        let (lo, hi) = Self::CONCURRENCY;
        if !(lo..=hi).contains(&self.concurrency) {
            return Err(LimitError::Concurrency(self.concurrency, lo, hi));
        }
        Ok(())
    }

    pub fn memory_bytes(&self) -> u64 {
        self.memory * 1024 * 1024
    }
}

impl Default for ActionLimits {
    /// OpenWhisk's defaults.
    fn default() -> Self {
        ActionLimits { memory: 256, timeout: 60_000, concurrency: 1, logs: default_logs_mb() }
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
        self.annotations.iter().find(|kv| kv.key == key).map(|kv| &kv.value)
    }

    /// Default parameters overlaid by the invocation's own (invocation wins).
    pub fn merged_parameters(&self, invocation: &serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
        let mut merged: serde_json::Map<String, Value> =
            self.parameters.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect();
        for (k, v) in invocation {
            merged.insert(k.clone(), v.clone());
        }
        merged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_validation_names_the_bad_field() {
        let mut l = ActionLimits::default();
        assert!(l.validate().is_ok());
        l.memory = 1;
        assert_eq!(l.validate(), Err(LimitError::Memory(1, 32, 8192)));
        l = ActionLimits { timeout: 10, ..Default::default() };
        assert!(matches!(l.validate(), Err(LimitError::Timeout(10, _, _))));
        l = ActionLimits { concurrency: 0, ..Default::default() };
        assert!(matches!(l.validate(), Err(LimitError::Concurrency(0, _, _))));
    }

    #[test]
    fn invocation_parameters_override_defaults() {
        let spec = ActionSpec {
            namespace: "guest".into(),
            name: "a".into(),
            exec: Exec { kind: "python:3".into(), code: String::new(), binary: false, main: None },
            limits: ActionLimits::default(),
            parameters: vec![
                KeyValue { key: "x".into(), value: 1.into() },
                KeyValue { key: "y".into(), value: 2.into() },
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
