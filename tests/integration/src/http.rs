//! A small HTTP layer over ureq that returns every status as a value (ureq reports 4xx/5xx
//! as errors), so tests can assert on error answers as easily as on successes.

use base64::Engine;
use serde_json::Value;
use std::time::Duration;

/// What the daemon answered.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    pub retry_after: Option<String>,
    pub content_type: Option<String>,
}

impl Reply {
    /// The body as JSON; panics with the body when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("answer {} is not JSON ({e}): {}", self.status, self.body))
    }

    /// `error` of an OpenWhisk error body.
    pub fn error_message(&self) -> String {
        self.json()["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error message in {}", self.body))
            .to_string()
    }

    /// Panics unless the status is `expected`, showing the body.
    #[track_caller]
    pub fn expect(self, expected: u16) -> Reply {
        assert_eq!(
            self.status, expected,
            "expected HTTP {expected}, got {}: {}",
            self.status, self.body
        );
        self
    }
}

/// Which credentials a request carries.
#[derive(Debug, Clone, Copy)]
pub enum Auth<'a> {
    /// `uuid:key`.
    Key(&'a str),
    None,
}

pub fn basic(key: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

pub struct Http {
    agent: ureq::Agent,
    base: String,
}

impl Http {
    pub fn new(base: String) -> Http {
        // Generous: a blocking invoke may queue behind a slow action or a JVM cold start.
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(5))
            .timeout(Duration::from_secs(180))
            .build();
        Http { agent, base }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// One request; `Err` only when no HTTP answer came back at all.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        auth: Auth<'_>,
        body: Option<&[u8]>,
    ) -> Result<Reply, String> {
        let mut req = self
            .agent
            .request(method, &format!("{}{}", self.base, path));
        if let Auth::Key(key) = auth {
            req = req.set("Authorization", &basic(key));
        }
        let result = match body {
            Some(bytes) => req
                .set("Content-Type", "application/json")
                .send_bytes(bytes),
            None => req.call(),
        };
        let resp = match result {
            Ok(resp) => resp,
            Err(ureq::Error::Status(_, resp)) => resp,
            Err(ureq::Error::Transport(t)) => {
                return Err(format!("{method} {path}: no answer: {t}"))
            }
        };
        let status = resp.status();
        let retry_after = resp.header("Retry-After").map(str::to_string);
        let content_type = resp.header("Content-Type").map(str::to_string);
        // Not `into_string`: it refuses answers over 10 MB, and an activation record may hold
        // 10 MiB of logs beside its result.
        let mut body = String::new();
        std::io::Read::read_to_string(&mut resp.into_reader(), &mut body)
            .map_err(|e| format!("{method} {path}: reading the answer failed: {e}"))?;
        Ok(Reply {
            status,
            body,
            retry_after,
            content_type,
        })
    }
}
