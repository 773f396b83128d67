//! Reading OpenWhisk activation records in assertions.

use serde_json::Value;

/// An activation record as the API returns it.
#[derive(Debug, Clone)]
pub struct Activation {
    pub record: Value,
    /// HTTP status of the blocking invoke that returned it (0 when fetched later).
    pub http_status: u16,
}

impl Activation {
    pub fn id(&self) -> &str {
        self.record["activationId"].as_str().expect("activationId")
    }

    /// `success`, `application error`, `action developer error` or `whisk internal error`.
    pub fn status(&self) -> &str {
        self.record["response"]["status"].as_str().unwrap_or("")
    }

    pub fn succeeded(&self) -> bool {
        self.record["response"]["success"].as_bool() == Some(true)
    }

    pub fn result(&self) -> &Value {
        &self.record["response"]["result"]
    }

    /// `result.error` as text ("" when there is none).
    pub fn error(&self) -> String {
        match &self.result()["error"] {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        }
    }

    pub fn annotation(&self, key: &str) -> Option<&Value> {
        self.record["annotations"]
            .as_array()?
            .iter()
            .find(|kv| kv["key"] == key)
            .map(|kv| &kv["value"])
    }

    /// `cold` or `warm`.
    pub fn start_kind(&self) -> &str {
        self.annotation("icebox.start")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The instance that ran it ("" when none did, e.g. a failed init).
    pub fn instance(&self) -> &str {
        self.annotation("icebox.instance")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    pub fn timed_out(&self) -> bool {
        self.annotation("timeout").and_then(Value::as_bool) == Some(true)
    }

    pub fn logs(&self) -> Vec<String> {
        self.record["logs"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Panics with the whole record unless the activation succeeded.
    #[track_caller]
    pub fn expect_success(self) -> Activation {
        assert!(
            self.succeeded() && self.http_status != 502,
            "activation failed (HTTP {}): {:#}",
            self.http_status,
            self.record
        );
        self
    }
}
