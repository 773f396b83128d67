//! Runs one activation: get an instance, POST /run under the action's time limit, turn what
//! happened into an OpenWhisk activation record, give the instance back, store the record.
//!
//! Which failures leave a stored activation record:
//! * refused at admission (the queue is full, the node is shutting down): none — the caller
//!   gets 429 or 503 at once and no activation id;
//! * admitted but no instance (queue timeout, shutdown while queued, the runtime did not
//!   start): a `whisk internal error` record, so a non-blocking caller polling its id learns
//!   what happened; a blocking caller gets the [`InvokeError`] as its answer;
//! * everything from /init on (init failures, the action's errors, timeouts, crashes): a
//!   record, as in OpenWhisk, and `Ok` — the record says what went wrong.

use crate::error::ApiError;
use crate::metrics::{InvocationLabels, StartLabel};
use crate::pool::{AcquireError, AdmitError, EvictReason, Health, Lease, StartError, Ticket};
use crate::state::AppState;
use axum::http::StatusCode;
use icebox_core::{
    ActionSpec, ActivationRecord, ActivationResponse, ActivationStatus, ErrorKind, KeyValue,
};
use icebox_policy::SharingMode;
use icebox_sandbox::{
    Charge, ExitCause, OutputBudget, RuntimeError, RuntimeReply, MAX_RESPONSE_BYTES,
};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a queued invocation waits for capacity before it fails.
const MIN_QUEUE_WAIT: Duration = Duration::from_secs(60);
/// After /run answers, how long to wait for the sentinel lines that close its logs.
const LOG_DRAIN: Duration = Duration::from_millis(500);

pub struct Invocation {
    pub action: Arc<ActionSpec>,
    pub params: Map<String, Value>,
    pub activation_id: String,
    pub subject: String,
    /// The node's key, for actions that asked for it (`provide-api-key`); None leaves
    /// `__OW_API_KEY` unset in the action.
    pub api_key: Option<String>,
    pub arrived: Instant,
    pub arrived_ms: u64,
}

/// What the activation produced before it is wrapped in a record.
struct RunReport {
    status: ActivationStatus,
    result: Value,
    timed_out: bool,
    logs: Vec<String>,
    /// What the logs and the response take of the node's output budget, given back once the
    /// record is stored.
    held: Charge,
    /// Why it failed, for programs (the record's `icebox.error`); None for a success.
    error: Option<ErrorKind>,
}

/// Why an invocation did not run; see the module docs for which leave a record.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    #[error("too many invocations are waiting for capacity")]
    QueueFull,
    #[error("no capacity became available within {0:?}")]
    QueueTimeout(Duration),
    #[error("the node is shutting down")]
    ShuttingDown,
    #[error(transparent)]
    Start(StartError),
}

impl InvokeError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            InvokeError::QueueFull | InvokeError::QueueTimeout(_) => ErrorKind::QueueTimeout,
            InvokeError::ShuttingDown => ErrorKind::ShuttingDown,
            InvokeError::Start(e) => e.kind(),
        }
    }
}

impl From<AdmitError> for InvokeError {
    fn from(e: AdmitError) -> Self {
        match e {
            AdmitError::QueueFull => InvokeError::QueueFull,
            AdmitError::ShuttingDown => InvokeError::ShuttingDown,
        }
    }
}

/// The one place an invocation failure becomes an HTTP answer.
impl From<InvokeError> for ApiError {
    fn from(e: InvokeError) -> Self {
        match e {
            InvokeError::QueueFull => ApiError::too_many(1),
            InvokeError::QueueTimeout(_) => ApiError {
                retry_after: Some(1),
                ..ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("The invocation could not start: {e}."),
                )
            },
            InvokeError::ShuttingDown => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "The node is shutting down.",
            ),
            InvokeError::Start(e) => {
                ApiError::internal(format!("The action could not be started: {e}."))
            }
        }
    }
}

pub fn new_activation_id() -> String {
    icebox_core::ids::random_hex128()
}

/// Admission, synchronous: the invocation runs now, waits in the queue, or is refused here.
pub fn admit(state: &AppState, action: &Arc<ActionSpec>) -> Result<Ticket, InvokeError> {
    Ok(state.pool.admit(action)?)
}

pub async fn invoke(
    state: &AppState,
    inv: Invocation,
    ticket: Ticket,
) -> Result<ActivationRecord, InvokeError> {
    let action = inv.action.clone();
    let wait_limit = MIN_QUEUE_WAIT.max(Duration::from_millis(action.limits.timeout));
    let mut ticket = ticket;
    let mut redeliveries = 0;
    let (acquired, started) = loop {
        let acquired = ticket.lease(wait_limit).await;
        let started = Instant::now();
        let lease = match acquired {
            Ok(lease) => lease,
            Err(e) => break (Err(e), started),
        };
        let info = LeaseInfo {
            cold: lease.cold,
            init_ms: lease.init_ms,
            instance: lease.instance.id.clone(),
            restored: lease
                .cold
                .then(|| lease.instance.origin.restored_mode())
                .flatten(),
        };
        let outcome = match run(
            &inv,
            lease,
            state.pool.output_budget(),
            state.body.max_payload,
        )
        .await
        {
            Delivery::Ran(outcome) => outcome,
            // The warm instance's runtime was already gone: the action never saw this
            // activation, so another instance may run it.
            Delivery::Undelivered if redeliveries < MAX_REDELIVERIES => {
                if let Ok(next) = state.pool.admit(&action) {
                    redeliveries += 1;
                    ticket = next;
                    continue;
                }
                undelivered_report(&action)
            }
            Delivery::Undelivered => undelivered_report(&action),
        };
        break (Ok((outcome, info)), started);
    };

    let (outcome, lease_info) = match acquired {
        Ok((outcome, info)) => (outcome, Some(info)),
        Err(AcquireError::Init { error, init_ms }) => (
            RunReport {
                status: ActivationStatus::DeveloperError,
                result: json!({"error": error.to_string()}),
                timed_out: false,
                logs: vec![],
                held: Charge::default(),
                error: Some(error.kind()),
            },
            Some(LeaseInfo {
                cold: true,
                init_ms: Some(init_ms),
                instance: String::new(),
                restored: None,
            }),
        ),
        Err(e) => {
            let error = match e {
                AcquireError::QueueTimeout(d) => InvokeError::QueueTimeout(d),
                AcquireError::ShuttingDown => InvokeError::ShuttingDown,
                AcquireError::Start(e) => InvokeError::Start(e),
                AcquireError::Init { .. } => unreachable!("matched above"),
            };
            let outcome = RunReport {
                status: ActivationStatus::InternalError,
                result: json!({"error": error.to_string()}),
                timed_out: false,
                logs: vec![],
                held: Charge::default(),
                error: Some(error.kind()),
            };
            finish(state, &inv, started, outcome, None);
            return Err(error);
        }
    };
    Ok(finish(state, &inv, started, outcome, lease_info))
}

/// What the activation record says of the instance that served it.
#[derive(Default)]
struct LeaseInfo {
    cold: bool,
    /// /init duration, or the restore's for an instance restored from a snapshot.
    init_ms: Option<u64>,
    instance: String,
    /// How the instance's memory came from a snapshot, on the cold start that restored it.
    restored: Option<icebox_core::RestoreMode>,
}

/// The record of an activation that started at `started`, stored and counted.
fn finish(
    state: &AppState,
    inv: &Invocation,
    started: Instant,
    outcome: RunReport,
    lease_info: Option<LeaseInfo>,
) -> ActivationRecord {
    let action = &inv.action;
    let start_ms = inv.arrived_ms
        + u64::try_from(started.duration_since(inv.arrived).as_millis()).unwrap_or(u64::MAX);
    let wait_ms =
        u64::try_from(started.duration_since(inv.arrived).as_millis()).unwrap_or(u64::MAX);
    let end_ms = crate::now_ms().max(start_ms);
    let LeaseInfo {
        cold,
        init_ms,
        instance: instance_id,
        restored,
    } = lease_info.unwrap_or_default();
    let start_kind = if cold { "cold" } else { "warm" };

    let mut annotations = vec![
        kv("path", json!(action.fqn())),
        kv("kind", json!(action.exec.kind)),
        kv(
            "limits",
            serde_json::to_value(action.limits).unwrap_or(Value::Null),
        ),
        kv("waitTime", json!(wait_ms)),
        kv("timeout", json!(outcome.timed_out)),
        kv("icebox.start", json!(start_kind)),
    ];
    if let Some(init) = init_ms {
        annotations.push(kv("initTime", json!(init)));
    }
    if !instance_id.is_empty() {
        annotations.push(kv("icebox.instance", json!(instance_id)));
    }
    if let Some(mode) = restored {
        annotations.push(kv("icebox.restore", json!(mode)));
    }
    if let Some(kind) = outcome.error {
        annotations.push(kv("icebox.error", json!(kind)));
    }
    let record = ActivationRecord {
        namespace: action.namespace.clone(),
        name: action.name.clone(),
        version: action.version.clone(),
        subject: inv.subject.clone(),
        activation_id: inv.activation_id.clone(),
        start: start_ms,
        end: end_ms,
        duration: end_ms - start_ms,
        status_code: outcome.status.code(),
        response: ActivationResponse::new(outcome.status, outcome.result),
        logs: outcome.logs,
        annotations,
        publish: false,
    };

    state
        .metrics
        .invocations
        .get_or_create(&InvocationLabels {
            start: start_kind.into(),
            status: outcome.status.metric_label().into(),
        })
        .inc();
    state
        .metrics
        .invocation_seconds
        .get_or_create(&StartLabel {
            start: start_kind.into(),
        })
        .observe(inv.arrived.elapsed().as_secs_f64());

    state.recorder.record(record.clone());
    drop(outcome.held);
    record
}

/// How many times an activation that never reached a (dead) warm runtime is given to another
/// instance.
const MAX_REDELIVERIES: u32 = 2;

enum Delivery {
    Ran(RunReport),
    /// The runtime could not be reached at all (it had exited): the action did not run.
    Undelivered,
}

fn undelivered_report(action: &ActionSpec) -> RunReport {
    RunReport {
        status: ActivationStatus::DeveloperError,
        result: json!({"error": died_message(None, action)}),
        timed_out: false,
        logs: vec![],
        held: Charge::default(),
        error: Some(ErrorKind::Exited),
    }
}

/// `max_result`: the largest response the action may give (OpenWhisk limits results by its
/// payload limit, `--max-payload`).
async fn run(
    inv: &Invocation,
    lease: Lease,
    budget: &Arc<OutputBudget>,
    max_result: usize,
) -> Delivery {
    let action = &inv.action;
    let sandbox = lease.instance.sandbox.clone();
    let deadline_ms = crate::now_ms() + action.limits.timeout;
    let mut body = json!({
        "value": Value::Object(inv.params.clone()),
        "namespace": action.namespace,
        "action_name": format!("/{}", action.fqn()),
        "activation_id": inv.activation_id,
        "transaction_id": inv.activation_id,
        "deadline": deadline_ms.to_string(),
        "action_version": action.version,
    });
    if let Some(key) = &inv.api_key {
        body["api_key"] = json!(key);
    }
    if !lease.cold && sandbox.exit_cause().is_some() {
        // Died after admission chose it and before anything was sent.
        lease.release(Health::Broken(EvictReason::Exited)).await;
        return Delivery::Undelivered;
    }
    let marks = sandbox.logs().marks();
    // A runtime that runs activations side by side ends one past its deadline itself (504),
    // so its neighbours live on; the daemon only gives up on the instance if it does not.
    let timeout = Duration::from_millis(action.limits.timeout)
        + if lease.instance.sharing == SharingMode::Process {
            Duration::ZERO
        } else {
            crate::pool::sharing::ISOLATE_TIMEOUT_GRACE
        };
    enum Ran {
        Reply(Result<(RuntimeReply, Charge), RuntimeError>),
        TimedOut,
        Died,
    }
    let ran = tokio::select! {
        r = tokio::time::timeout(timeout, sandbox.client().post_json_within("/run", &body, budget)) => match r {
            Ok(reply) => Ran::Reply(reply),
            Err(_) => Ran::TimedOut,
        },
        _ = sandbox.exited() => Ran::Died,
    };
    if let Ran::Reply(Err(RuntimeError::Connect(e))) = &ran {
        if !lease.cold {
            tracing::warn!(instance = %lease.instance.id, "the runtime cannot be reached ({e}): the activation goes to another instance");
            lease.release(Health::Broken(EvictReason::Exited)).await;
            return Delivery::Undelivered;
        }
    }
    let mut held = Charge::default();
    let mut error = None;
    let (status, result, timed_out, health) = match ran {
        // The runtime ended it itself and lives on; otherwise the instance is in an unknown
        // state.
        Ran::TimedOut => timed_out(action, Health::Broken(EvictReason::Error)),
        Ran::Reply(Ok((reply, _))) if reply.status == RUNTIME_TIMED_OUT => {
            timed_out(action, Health::Reusable)
        }
        // OpenWhisk's answer to a result over the payload limit; the runtime is fine.
        Ran::Reply(Ok((reply, charge))) if reply.body.len() > max_result => {
            held = charge;
            error = Some(ErrorKind::ResponseTooLarge);
            (
                ActivationStatus::DeveloperError,
                json!({"error": too_long(&reply.body.len().to_string(), max_result)}),
                false,
                Health::Reusable,
            )
        }
        Ran::Reply(Ok((reply, charge))) => {
            held = charge;
            let (status, result) = classify_reply(&reply);
            error = match status {
                ActivationStatus::Success => None,
                ActivationStatus::ApplicationError => Some(ErrorKind::ApplicationError),
                _ => Some(ErrorKind::BadResponse),
            };
            (status, result, false, Health::Reusable)
        }
        // The node holds its most output for other activations: not this action's fault, and
        // its runtime is fine (the unread rest of the response goes with the connection).
        Ran::Reply(Err(RuntimeError::NoRoom(limit))) => {
            error = Some(ErrorKind::OutputBudget);
            (
                ActivationStatus::InternalError,
                json!({"error": format!("The node already holds its most activation output ({limit} bytes, --output-budget): the action's response could not be taken. Retry later.")}),
                false,
                Health::Reusable,
            )
        }
        Ran::Reply(Err(RuntimeError::TooLarge)) => {
            error = Some(ErrorKind::ResponseTooLarge);
            (
                ActivationStatus::DeveloperError,
                json!({"error": too_long(&format!("more than {MAX_RESPONSE_BYTES}"), max_result)}),
                false,
                Health::Broken(EvictReason::Error),
            )
        }
        Ran::Died | Ran::Reply(Err(_)) => {
            // A broken connection usually means the runtime is dying: give the exit a moment to be seen.
            let _ = tokio::time::timeout(Duration::from_millis(500), sandbox.exited()).await;
            // An OOM kill during this activation is the cause even when the runtime's exit is
            // not seen yet (a cgroup full of tmpfs pages is slow to die) or was another one.
            let kills = sandbox.oom_kills();
            let seen = lease
                .instance
                .oom_kills_seen
                .swap(kills, std::sync::atomic::Ordering::Relaxed);
            let cause = if kills > seen {
                Some(ExitCause::OutOfMemory)
            } else {
                sandbox.exit_cause()
            };
            error = Some(match cause {
                Some(ExitCause::OutOfMemory) => ErrorKind::OutOfMemory,
                Some(ExitCause::PidsLimit) => ErrorKind::PidsLimit,
                _ => ErrorKind::Exited,
            });
            (
                ActivationStatus::DeveloperError,
                json!({"error": died_message(cause, action)}),
                false,
                Health::Broken(EvictReason::Error),
            )
        }
    };
    let wait = if health == Health::Reusable {
        LOG_DRAIN
    } else {
        Duration::from_millis(50)
    };
    let (mut logs, logs_held) = sandbox.logs().take_after_charged(marks, wait).await;
    held.absorb(logs_held);
    truncate_logs(&mut logs, action.limits.logs_bytes());
    lease.release(health).await;
    Delivery::Ran(RunReport {
        status,
        result,
        timed_out,
        logs,
        held,
        error: if timed_out {
            Some(ErrorKind::Timeout)
        } else {
            error
        },
    })
}

fn timed_out(action: &ActionSpec, health: Health) -> (ActivationStatus, Value, bool, Health) {
    let message = format!(
        "The action exceeded its time limits of {} milliseconds.",
        action.limits.timeout
    );
    (
        ActivationStatus::DeveloperError,
        json!({ "error": message }),
        true,
        health,
    )
}

/// The runtime's answer when it ended an activation at its deadline and is itself fine
/// (docs/runtime-protocol.md).
const RUNTIME_TIMED_OUT: u16 = 504;

/// The proxies' answer (502 `{error}`) when the action's result is not a JSON object
/// (docs/runtime-protocol.md): Python and Java, then Node.js.
const NOT_AN_OBJECT: [&str; 2] = [
    "The action did not return a dictionary.",
    "The action did not return an object.",
];

/// OpenWhisk's rules: 200 with a JSON object is success; an `{error}` object from the proxy is
/// an application error, unless it is the proxy saying the result was not an object; anything
/// else is the developer's fault.
fn classify_reply(reply: &RuntimeReply) -> (ActivationStatus, Value) {
    match (reply.status, reply.json()) {
        (200, Some(v @ Value::Object(_))) => (ActivationStatus::Success, v),
        (_, Some(Value::Object(o)))
            if o.get("error")
                .and_then(Value::as_str)
                .is_some_and(|e| NOT_AN_OBJECT.contains(&e)) =>
        {
            (ActivationStatus::DeveloperError, Value::Object(o))
        }
        (_, Some(Value::Object(o))) if o.contains_key("error") => {
            (ActivationStatus::ApplicationError, Value::Object(o))
        }
        (200, _) => (
            ActivationStatus::DeveloperError,
            json!({"error": "The action did not return a dictionary."}),
        ),
        (code, _) => (
            ActivationStatus::DeveloperError,
            json!({"error": format!("The action did not produce a valid response (runtime status {code}).")}),
        ),
    }
}

fn died_message(cause: Option<ExitCause>, action: &ActionSpec) -> String {
    match cause {
        Some(ExitCause::OutOfMemory) => format!(
            "memory limit exceeded: the action used more than its {} MB limit and was killed.",
            action.limits.memory
        ),
        Some(ExitCause::PidsLimit) => "process limit exceeded: the action created too many processes or threads and its runtime exited.".into(),
        _ => "The action did not produce a valid response and exited unexpectedly.".into(),
    }
}

fn truncate_logs(logs: &mut Vec<String>, max_bytes: u64) {
    let mut used = 0u64;
    if let Some(cut) = logs.iter().position(|l| {
        used += l.len() as u64;
        used > max_bytes
    }) {
        logs.truncate(cut);
        logs.push(format!("Logs were truncated because the total bytes size exceeds the limit of {max_bytes} bytes."));
    }
}

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value,
    }
}

/// OpenWhisk's message for a response over the limit (`Messages.truncatedResponse`).
fn too_long(length: &str, max_result: usize) -> String {
    format!(
        "The action produced a response that exceeded the allowed length: {length} > {max_result} bytes."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn reply(status: u16, body: &str) -> RuntimeReply {
        RuntimeReply {
            status,
            body: Bytes::from(body.to_string()),
        }
    }

    #[test]
    fn replies_map_to_openwhisk_outcomes() {
        assert_eq!(
            classify_reply(&reply(200, r#"{"a":1}"#)).0,
            ActivationStatus::Success
        );
        let (s, r) = classify_reply(&reply(502, r#"{"error":"boom"}"#));
        assert_eq!(
            (s, r["error"].as_str()),
            (ActivationStatus::ApplicationError, Some("boom"))
        );
        assert_eq!(
            classify_reply(&reply(200, "[1,2]")).0,
            ActivationStatus::DeveloperError
        );
        for proxy_says in NOT_AN_OBJECT {
            let (s, r) = classify_reply(&reply(502, &json!({ "error": proxy_says }).to_string()));
            assert_eq!(
                (s, r["error"].as_str()),
                (ActivationStatus::DeveloperError, Some(proxy_says))
            );
        }
        assert_eq!(
            classify_reply(&reply(500, "not json")).0,
            ActivationStatus::DeveloperError
        );
    }

    #[test]
    fn logs_are_truncated_at_the_limit() {
        let mut logs = vec!["x".repeat(10); 5];
        truncate_logs(&mut logs, 25);
        assert_eq!(logs.len(), 3);
        assert!(logs[2].contains("truncated"));
    }

    #[test]
    fn invoke_errors_map_to_one_answer_each() {
        let status = |e: InvokeError| ApiError::from(e).status;
        assert_eq!(
            status(InvokeError::QueueFull),
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(ApiError::from(InvokeError::QueueFull).retry_after, Some(1));
        assert_eq!(
            status(InvokeError::QueueTimeout(Duration::from_secs(60))),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            status(InvokeError::ShuttingDown),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            status(InvokeError::Start(StartError::NotInstalled(
                "cobol:1".into()
            ))),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(
            InvokeError::from(AdmitError::QueueFull).to_string(),
            "too many invocations are waiting for capacity"
        );
    }

    #[test]
    fn activation_ids_look_like_openwhisk() {
        let id = new_activation_id();
        assert_eq!(id.len(), 32);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
