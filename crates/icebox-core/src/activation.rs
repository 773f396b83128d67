//! OpenWhisk activation records, as stored in the registry and returned by the API.

use crate::action::KeyValue;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// OpenWhisk's four outcome classes; the number is `response.statusCode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ActivationStatus {
    #[serde(rename = "success")]
    Success,
    /// The action returned `{error: ...}` or threw.
    #[serde(rename = "application error")]
    ApplicationError,
    /// Init failed, timeout, memory limit exceeded, bad result.
    #[serde(rename = "action developer error")]
    DeveloperError,
    #[serde(rename = "whisk internal error")]
    InternalError,
}

impl ActivationStatus {
    pub fn code(self) -> u8 {
        match self {
            ActivationStatus::Success => 0,
            ActivationStatus::ApplicationError => 1,
            ActivationStatus::DeveloperError => 2,
            ActivationStatus::InternalError => 3,
        }
    }

    /// Label value used in metrics.
    pub fn metric_label(self) -> &'static str {
        match self {
            ActivationStatus::Success => "success",
            ActivationStatus::ApplicationError => "application_error",
            ActivationStatus::DeveloperError => "developer_error",
            ActivationStatus::InternalError => "internal_error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivationResponse {
    pub status: ActivationStatus,
    #[serde(rename = "statusCode")]
    pub status_code: u8,
    pub success: bool,
    pub result: Value,
}

impl ActivationResponse {
    pub fn new(status: ActivationStatus, result: Value) -> Self {
        ActivationResponse {
            status,
            status_code: status.code(),
            success: status == ActivationStatus::Success,
            result,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivationRecord {
    pub namespace: String,
    pub name: String,
    pub version: String,
    pub subject: String,
    #[serde(rename = "activationId")]
    pub activation_id: String,
    /// ms since the Unix epoch.
    pub start: u64,
    pub end: u64,
    pub duration: u64,
    #[serde(rename = "statusCode")]
    pub status_code: u8,
    pub response: ActivationResponse,
    pub logs: Vec<String>,
    pub annotations: Vec<KeyValue>,
    #[serde(default)]
    pub publish: bool,
}

impl ActivationRecord {
    pub fn annotation(&self, key: &str) -> Option<&Value> {
        self.annotations
            .iter()
            .find(|kv| kv.key == key)
            .map(|kv| &kv.value)
    }
}
