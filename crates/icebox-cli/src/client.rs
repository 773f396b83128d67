//! A small blocking HTTP client for iceboxd that turns every failure into a message saying
//! what went wrong and what to do about it.

use crate::config::Settings;
use crate::error::{CliError, Result};
use base64::Engine;
use icebox_core::units::MIB;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

/// Blocking invocations may legitimately take the daemon's full 60 s wait.
const READ_TIMEOUT: Duration = Duration::from_secs(75);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Generous: the largest answer is an action of the daemon's largest code size (48 MiB by
/// default) as base64 in its JSON, 64 MiB and a little more.
const MAX_BODY: u64 = 96 * MIB;

/// Path prefix of the caller's own namespace in the OpenWhisk API.
pub const NAMESPACE: &str = "/api/v1/namespaces/_";

pub struct Client {
    apihost: String,
    authorization: Option<String>,
    agent: ureq::Agent,
    /// Without a read timeout: a followed event stream may be silent for a long time.
    stream_agent: ureq::Agent,
}

/// An HTTP answer of any status.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

impl Client {
    pub fn new(settings: &Settings) -> Client {
        let authorization = settings.auth.as_ref().map(|a| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(a)
            )
        });
        let user_agent = concat!("icebox/", env!("CARGO_PKG_VERSION"));
        Client {
            apihost: settings.apihost.clone(),
            authorization,
            agent: ureq::AgentBuilder::new()
                .timeout_connect(CONNECT_TIMEOUT)
                .timeout_read(READ_TIMEOUT)
                .user_agent(user_agent)
                .build(),
            stream_agent: ureq::AgentBuilder::new()
                .timeout_connect(CONNECT_TIMEOUT)
                .user_agent(user_agent)
                .build(),
        }
    }

    pub fn apihost(&self) -> &str {
        &self.apihost
    }

    pub fn get(&self, path: impl Into<String>) -> Call<'_> {
        self.call("GET", path)
    }

    pub fn put(&self, path: impl Into<String>) -> Call<'_> {
        self.call("PUT", path)
    }

    pub fn post(&self, path: impl Into<String>) -> Call<'_> {
        self.call("POST", path)
    }

    pub fn delete(&self, path: impl Into<String>) -> Call<'_> {
        self.call("DELETE", path)
    }

    fn call(&self, method: &'static str, path: impl Into<String>) -> Call<'_> {
        Call {
            client: self,
            method,
            path: path.into(),
            query: Vec::new(),
            body: None,
            headers: Vec::new(),
            explain: Vec::new(),
            needs_auth: true,
        }
    }
}

/// One request being built. `explain` attaches the command's own wording to a status (for
/// example which action a 404 is about), since only the command knows what was asked for.
pub struct Call<'a> {
    client: &'a Client,
    method: &'static str,
    path: String,
    query: Vec<(String, String)>,
    body: Option<Value>,
    headers: Vec<(String, String)>,
    explain: Vec<(u16, String)>,
    needs_auth: bool,
}

impl<'a> Call<'a> {
    pub fn query(mut self, key: &str, value: impl ToString) -> Self {
        self.query.push((key.to_string(), value.to_string()));
        self
    }

    pub fn json(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }

    pub fn header(mut self, name: &str, value: impl ToString) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn explain(mut self, status: u16, message: impl Into<String>) -> Self {
        self.explain.push((status, message.into()));
        self
    }

    pub fn without_auth(mut self) -> Self {
        self.needs_auth = false;
        self
    }

    /// Sends and returns the body of a 2xx answer; any other status becomes an error.
    pub fn send(self) -> Result<Value> {
        Ok(self.send_any()?.body)
    }

    /// Sends and returns the answer when its status is 2xx or one of `accept`; only other
    /// statuses and transport failures are errors.
    pub fn send_accepting(self, accept: &[u16]) -> Result<Reply> {
        let apihost = self.client.apihost.clone();
        let explain = self.explain.clone();
        let response = self.dispatch(false)?;
        let status = response.status();
        let retry_after = response.header("Retry-After").map(str::to_string);
        let text = read_body(response)?;
        if (200..300).contains(&status) || accept.contains(&status) {
            let body = parse_json(&text, status)?;
            return Ok(Reply { status, body });
        }
        Err(http_error(
            status,
            &text,
            retry_after.as_deref(),
            &apihost,
            &explain,
        ))
    }

    /// Sends and returns the body of a 2xx answer.
    pub fn send_any(self) -> Result<Reply> {
        self.send_accepting(&[])
    }

    /// Sends and hands back the open body of a 2xx answer, for server-sent events.
    pub fn stream(self) -> Result<Box<dyn BufRead + Send>> {
        let apihost = self.client.apihost.clone();
        let explain = self.explain.clone();
        let response = self.dispatch(true)?;
        let status = response.status();
        if (200..300).contains(&status) {
            return Ok(Box::new(BufReader::new(response.into_reader())));
        }
        let retry_after = response.header("Retry-After").map(str::to_string);
        let text = read_body(response)?;
        Err(http_error(
            status,
            &text,
            retry_after.as_deref(),
            &apihost,
            &explain,
        ))
    }

    /// Performs the request; HTTP error statuses come back as responses, not errors.
    fn dispatch(self, streaming: bool) -> Result<ureq::Response> {
        let client = self.client;
        let url = format!("{}{}", client.apihost, self.path);
        let agent = if streaming {
            &client.stream_agent
        } else {
            &client.agent
        };
        let mut request = agent.request(self.method, &url);
        for (k, v) in &self.query {
            request = request.query(k, v);
        }
        for (k, v) in &self.headers {
            request = request.set(k, v);
        }
        if self.needs_auth {
            let Some(authorization) = &client.authorization else {
                return Err(missing_auth());
            };
            request = request.set("Authorization", authorization);
        }
        let result = match &self.body {
            Some(body) => request.send_json(body),
            None => request.call(),
        };
        match result {
            Ok(response) | Err(ureq::Error::Status(_, response)) => Ok(response),
            Err(ureq::Error::Transport(t)) => Err(transport_error(&client.apihost, &t)),
        }
    }
}

fn read_body(response: ureq::Response) -> Result<String> {
    let mut text = String::new();
    response
        .into_reader()
        .take(MAX_BODY)
        .read_to_string(&mut text)
        .map_err(|e| CliError::failed(format!("reading iceboxd's answer failed: {e}")))?;
    Ok(text)
}

fn parse_json(text: &str, status: u16) -> Result<Value> {
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(text).map_err(|e| {
        CliError::failed(format!(
            "iceboxd answered {status} with a body that is not JSON ({e}): {}",
            excerpt(text)
        ))
    })
}

fn excerpt(text: &str) -> String {
    const MAX: usize = 300;
    let text = text.trim();
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

pub fn missing_auth() -> CliError {
    CliError::failed(
        "no API key: set ICEBOX_AUTH=uuid:key or pass --auth uuid:key, or put AUTH=uuid:key in \
         ~/.config/icebox/config.\niceboxd writes its key to <state-dir>/auth; under `make run` that \
         is var/auth: export ICEBOX_AUTH=$(cat var/auth)",
    )
}

fn transport_error(apihost: &str, error: &ureq::Transport) -> CliError {
    use ureq::ErrorKind::*;
    let what = error.to_string();
    let hint = match error.kind() {
        ConnectionFailed | Dns | Io => {
            format!("is iceboxd running at {apihost}? Start it with `make run`, or point --apihost / ICEBOX_APIHOST at it.")
        }
        InvalidUrl | UnknownScheme => {
            "check --apihost / ICEBOX_APIHOST (e.g. http://127.0.0.1:8740).".to_string()
        }
        _ => format!("check that {apihost} is iceboxd's address."),
    };
    CliError::failed(format!(
        "cannot talk to iceboxd at {apihost}: {what}\n{hint}"
    ))
}

/// The daemon's error body (`{"error", "code"}`), or the raw text if it is something else.
fn server_message(text: &str) -> (String, Option<String>) {
    if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) {
        if let Some(Value::String(error)) = map.get("error") {
            let code = map.get("code").and_then(Value::as_str).map(str::to_string);
            return (error.clone(), code);
        }
    }
    let raw = excerpt(text);
    (
        if raw.is_empty() {
            "(no message)".to_string()
        } else {
            raw
        },
        None,
    )
}

/// Turns an HTTP error answer into a message naming the problem and the remedy.
pub fn http_error(
    status: u16,
    text: &str,
    retry_after: Option<&str>,
    apihost: &str,
    explain: &[(u16, String)],
) -> CliError {
    let (message, code) = server_message(text);
    let transaction = code
        .map(|c| format!(" (transaction {c})"))
        .unwrap_or_default();
    if let Some((_, own)) = explain.iter().find(|(s, _)| *s == status) {
        return CliError::failed(format!("{own}\niceboxd said: {message}"));
    }
    let text = match status {
        400 => format!("iceboxd refused the request: {message}"),
        401 => format!(
            "iceboxd at {apihost} rejected the API key: {message}\n\
             Check ICEBOX_AUTH / --auth / AUTH= in ~/.config/icebox/config against the key in \
             <state-dir>/auth (var/auth under `make run`)."
        ),
        404 => format!("not found: {message}"),
        409 => format!("conflict: {message}"),
        // The message names the limit: the code size, the invocation payload or the body.
        413 => format!("the request is too large for iceboxd: {message}"),
        429 => {
            let when = retry_after
                .map(|s| format!(" in {s} s"))
                .unwrap_or_default();
            format!("iceboxd is at capacity and its queue is full: {message}\nTry again{when}.")
        }
        503 => format!(
            "iceboxd is not available right now: {message}{transaction}\nTry again shortly."
        ),
        _ => format!("iceboxd failed ({status}): {message}{transaction}"),
    };
    CliError::failed(text)
}

/// Percent-encodes one path segment (action names may contain `@`, ids are hex).
pub fn segment(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for byte in raw.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(e: CliError) -> String {
        match e {
            CliError::Failed(m) => m,
            other => panic!("expected Failed, got {other:?}"),
        }
    }

    #[test]
    fn unauthorized_says_where_the_key_is() {
        let m = msg(http_error(
            401,
            r#"{"error":"The supplied authentication is invalid.","code":"ab12"}"#,
            None,
            "http://h:1",
            &[],
        ));
        assert!(m.contains("rejected the API key"), "{m}");
        assert!(
            m.contains("ICEBOX_AUTH") && m.contains("<state-dir>/auth"),
            "{m}"
        );
    }

    #[test]
    fn command_wording_wins_for_its_status() {
        let explain = [(
            404,
            "action 'hello' does not exist; `icebox action list` shows what is deployed"
                .to_string(),
        )];
        let m = msg(http_error(
            404,
            r#"{"error":"The requested resource does not exist.","code":"c"}"#,
            None,
            "h",
            &explain,
        ));
        assert!(m.starts_with("action 'hello' does not exist"), "{m}");
        assert!(m.contains("The requested resource does not exist."), "{m}");
        let m = msg(http_error(
            400,
            r#"{"error":"unknown kind 'python:2'","code":"c"}"#,
            None,
            "h",
            &explain,
        ));
        assert_eq!(m, "iceboxd refused the request: unknown kind 'python:2'");
    }

    #[test]
    fn too_many_requests_carries_retry_after() {
        let m = msg(http_error(
            429,
            r#"{"error":"queue full","code":"c"}"#,
            Some("3"),
            "h",
            &[],
        ));
        assert!(
            m.contains("queue full") && m.contains("Try again in 3 s"),
            "{m}"
        );
    }

    #[test]
    fn internal_errors_show_the_transaction() {
        let m = msg(http_error(
            500,
            r#"{"error":"boom","code":"tx42"}"#,
            None,
            "h",
            &[],
        ));
        assert_eq!(m, "iceboxd failed (500): boom (transaction tx42)");
    }

    #[test]
    fn non_json_error_bodies_are_shown_raw() {
        let m = msg(http_error(502, "Bad Gateway\n", None, "h", &[]));
        assert_eq!(m, "iceboxd failed (502): Bad Gateway");
        let m = msg(http_error(502, "", None, "h", &[]));
        assert!(m.contains("(no message)"));
    }

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("hello_world-1.2"), "hello_world-1.2");
        assert_eq!(segment("a b/c@d"), "a%20b%2Fc%40d");
    }

    #[test]
    fn refused_connection_tells_how_to_start_the_daemon() {
        // Port 1 on loopback is reserved and closed, so the connect fails at once.
        let settings = Settings {
            apihost: "http://127.0.0.1:1".into(),
            auth: Some("u:k".into()),
        };
        let client = Client::new(&settings);
        let m = msg(client
            .get("/icebox/v1/health")
            .without_auth()
            .send()
            .unwrap_err());
        assert!(
            m.contains("is iceboxd running at http://127.0.0.1:1?"),
            "{m}"
        );
        assert!(m.contains("make run"), "{m}");
    }

    #[test]
    fn missing_key_is_reported_before_sending() {
        let settings = Settings {
            apihost: "http://127.0.0.1:1".into(),
            auth: None,
        };
        let m = msg(Client::new(&settings)
            .get("/icebox/v1/instances")
            .send()
            .unwrap_err());
        assert!(m.starts_with("no API key"), "{m}");
    }
}
