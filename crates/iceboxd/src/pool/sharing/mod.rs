//! Runtime sharing (annotation `icebox.sharing`): how many concurrent activations one instance
//! of an action takes, what its runtime is told at start-up, and the runtime's own account of
//! its isolates or contexts, shown per instance.

mod scan;

use super::component::Component;
use super::extensions::Extensions;
use super::instance::{Origin, Slot};
use super::{Instance, Pool};
use async_trait::async_trait;
use icebox_core::action::KeyValue;
use icebox_core::api::InstanceView;
use icebox_core::ActionSpec;
use icebox_policy::SharingMode;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ANNOTATION: &str = "icebox.sharing";
/// Isolate-mode settings and their environment variables (docs/isolates.md).
const ISOLATE_MEMORY: (&str, &str) = ("icebox.isolate_memory", "ICEBOX_ISOLATE_MEMORY_MB");
const ISOLATE_POOL: (&str, &str) = ("icebox.isolate_pool", "ICEBOX_ISOLATE_POOL");
const ISOLATE_IDLE: (&str, &str) = ("icebox.isolate_idle_ms", "ICEBOX_ISOLATE_IDLE_MS");
/// What an isolate is (docs/isolates.md): a V8 isolate of isolated-vm (`v8`, the default) or a
/// worker_threads Worker (`worker`, for actions that need Node's host built-ins).
const ISOLATE_ENGINE: (&str, &str) = ("icebox.isolate_engine", "ICEBOX_ISOLATE_ENGINE");
const ISOLATE_ENGINES: [&str; 2] = ["v8", "worker"];
const DEFAULT_ISOLATE_POOL: u64 = 1;
const DEFAULT_ISOLATE_IDLE_MS: u64 = 10_000;
/// V8 cannot run a useful isolate in a smaller heap than this.
const MIN_ISOLATE_MEMORY_MB: u64 = 16;
/// What an isolate-mode instance needs before any isolate: the Node.js main thread with the
/// action loaded (measured: 50 MiB RSS, tools/isolate-costs.js).
const RUNTIME_RESERVE_MB: u64 = 64;
/// What each isolate costs beyond its heap: its thread, V8's code space and buffers (measured:
/// 72 MiB more RSS for an isolate holding 64 MiB).
const ISOLATE_OVERHEAD_MB: u64 = 8;
/// The runtime terminates an isolate past the activation's deadline and answers for it; the
/// daemon waits this much longer before it gives up on the whole instance.
pub const ISOLATE_TIMEOUT_GRACE: Duration = Duration::from_secs(2);
/// A stats request to a runtime that is being frozen must not hang a task forever.
const STATS_TIMEOUT: Duration = Duration::from_millis(500);
/// A busy sharing instance's account is refreshed at most this often.
const STATS_INTERVAL: Duration = Duration::from_secs(1);

/// The action's mode. Deployment rejects values that do not parse, so an unreadable one (only
/// possible in a registry written by hand) falls back to the safe default.
pub fn sharing_of(action: &ActionSpec) -> SharingMode {
    action
        .annotation(ANNOTATION)
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or_default()
}

impl Pool {
    /// The action's sharing mode, unless the per-action choice leaves sharing out of it
    /// (then one activation per instance, as without the annotation).
    pub fn sharing_of(&self, action: &ActionSpec) -> SharingMode {
        if self.allows(action, icebox_policy::Technique::Sharing) {
            sharing_of(action)
        } else {
            SharingMode::Process
        }
    }

    /// Concurrent activations one instance of the action takes, under the same choice.
    pub fn capacity_of(&self, action: &ActionSpec) -> u32 {
        if self.allows(action, icebox_policy::Technique::Sharing) {
            capacity_of(action)
        } else {
            SharingMode::Process.capacity(action.limits.concurrency)
        }
    }
}

/// The action's isolate engine; deployment rejects anything else, so an unreadable value
/// falls back to the default.
fn isolate_engine(action: &ActionSpec) -> &'static str {
    let named = action.annotation(ISOLATE_ENGINE.0).and_then(Value::as_str);
    ISOLATE_ENGINES
        .into_iter()
        .find(|e| Some(*e) == named)
        .unwrap_or(ISOLATE_ENGINES[0])
}

/// The name under which a runtime.json's `sharing_env` gives this action's instances more
/// environment: the mode, and for isolate mode its engine (`isolate:v8`).
pub fn profile(action: &ActionSpec) -> String {
    let mode = sharing_of(action);
    if mode == SharingMode::Isolate {
        format!("{}:{}", mode.as_str(), isolate_engine(action))
    } else {
        mode.as_str().to_string()
    }
}

/// Concurrent activations one instance of the action runs. In isolate mode no more than fit
/// the memory limit with each isolate's heap and overhead: isolates that together outgrow the
/// limit would get the whole instance OOM-killed, every activation with it.
pub fn capacity_of(action: &ActionSpec) -> u32 {
    let mode = sharing_of(action);
    let capacity = mode.capacity(action.limits.concurrency);
    if mode != SharingMode::Isolate {
        return capacity;
    }
    let per_isolate = isolate_memory_mb(action) + ISOLATE_OVERHEAD_MB;
    let fit = action.limits.memory.saturating_sub(RUNTIME_RESERVE_MB) / per_isolate;
    capacity.min(u32::try_from(fit).unwrap_or(u32::MAX).max(1))
}

/// Each isolate's heap budget: the annotation, else an equal share of what the limit leaves
/// after the runtime and the isolates' overheads, never below what V8 needs.
fn isolate_memory_mb(action: &ActionSpec) -> u64 {
    action
        .annotation(ISOLATE_MEMORY.0)
        .and_then(number)
        .unwrap_or_else(|| {
            let share = action.limits.memory.saturating_sub(RUNTIME_RESERVE_MB)
                / u64::from(action.limits.concurrency.max(1));
            share
                .saturating_sub(ISOLATE_OVERHEAD_MB)
                .max(MIN_ISOLATE_MEMORY_MB)
        })
}

/// What the runtime is started with for the action's mode (docs/runtime-protocol.md); with
/// no action (a stem cell), the default mode's.
pub fn sharing_env(action: Option<&ActionSpec>) -> Vec<(String, String)> {
    let Some(action) = action else {
        return vec![(
            "ICEBOX_SHARING".to_string(),
            SharingMode::default().as_str().to_string(),
        )];
    };
    let mode = sharing_of(action);
    let mut env = vec![("ICEBOX_SHARING".to_string(), mode.as_str().to_string())];
    if mode == SharingMode::Isolate {
        env.push((
            ISOLATE_MEMORY.1.to_string(),
            isolate_memory_mb(action).to_string(),
        ));
        let setting = |(key, var): (&str, &str), default: u64| {
            let value = action.annotation(key).and_then(number).unwrap_or(default);
            (var.to_string(), value.to_string())
        };
        env.push(setting(ISOLATE_POOL, DEFAULT_ISOLATE_POOL));
        env.push(setting(ISOLATE_IDLE, DEFAULT_ISOLATE_IDLE_MS));
        env.push((
            ISOLATE_ENGINE.1.to_string(),
            isolate_engine(action).to_string(),
        ));
    }
    env
}

/// Annotations carry numbers as JSON numbers or strings (the CLI's `-a key value`).
fn number(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// Checked at deployment: an action in isolate mode on the v8 engine whose own code loads a
/// Node.js built-in that reaches the host is refused, naming the module (docs/isolates.md).
/// `archive`: the action's zip as the code store holds it (None for source code).
pub fn validate_code(action: &ActionSpec, archive: Option<std::fs::File>) -> Result<(), String> {
    if sharing_of(action) != SharingMode::Isolate || isolate_engine(action) != "v8" {
        return Ok(());
    }
    let found = match archive {
        Some(file) => scan::in_archive(std::io::BufReader::new(file)),
        None => scan::in_source(&action.exec.code),
    };
    match found {
        None => Ok(()),
        Some((module, file)) => Err(format!(
            "The action requires the Node.js built-in module '{module}' ({file}), which isolate \
             mode's v8 engine does not provide: its isolates reach nothing of the host. Set the \
             annotation '{}' to 'worker', or use '{ANNOTATION}' 'shared' or 'process'.",
            ISOLATE_ENGINE.0
        )),
    }
}

/// Checked at deployment, so a bad setting is a 400 now rather than a failed cold start later.
/// `language` is the runtime language of the action's kind.
pub fn validate(annotations: &[KeyValue], language: &str, memory_mb: u64) -> Result<(), String> {
    let get = |key: &str| {
        annotations
            .iter()
            .find(|kv| kv.key == key)
            .map(|kv| &kv.value)
    };
    let mode = match get(ANNOTATION) {
        None => SharingMode::Process,
        Some(v) => v
            .as_str()
            .ok_or_else(|| format!("The annotation '{ANNOTATION}' must be a string."))?
            .parse::<SharingMode>()
            .map_err(|e| format!("The annotation '{ANNOTATION}': {e}."))?,
    };
    if mode == SharingMode::Isolate && language != "nodejs" {
        return Err(format!(
            "The annotation '{ANNOTATION}' is 'isolate', which only Node.js actions support \
             (this action's runtime is {language}); use 'shared' or 'process'."
        ));
    }
    for (key, _) in [ISOLATE_MEMORY, ISOLATE_POOL, ISOLATE_IDLE, ISOLATE_ENGINE] {
        let Some(v) = get(key) else { continue };
        if mode != SharingMode::Isolate {
            return Err(format!(
                "The annotation '{key}' only applies with '{ANNOTATION}' set to 'isolate'."
            ));
        }
        if key == ISOLATE_ENGINE.0 {
            if !v.as_str().is_some_and(|e| ISOLATE_ENGINES.contains(&e)) {
                return Err(format!(
                    "The annotation '{key}' must be one of {}, got {v}.",
                    ISOLATE_ENGINES.join(", ")
                ));
            }
            continue;
        }
        let n = number(v)
            .ok_or_else(|| format!("The annotation '{key}' must be a non-negative integer."))?;
        if key == ISOLATE_MEMORY.0 && !(MIN_ISOLATE_MEMORY_MB..=memory_mb).contains(&n) {
            return Err(format!(
                "The annotation '{key}' must be between {MIN_ISOLATE_MEMORY_MB} and the action's \
                 memory limit ({memory_mb} MB), got {n}."
            ));
        }
    }
    Ok(())
}

/// The runtime's last `sharing` account, and when the daemon last asked for it.
#[derive(Default)]
pub struct SharingStats(Mutex<(Option<Value>, Option<Instant>)>);

impl SharingStats {
    pub fn last(&self) -> Option<Value> {
        self.0.lock().unwrap().0.clone()
    }

    /// Whether to ask now: always when the instance has just drained (the account it keeps
    /// while idle), else at most every [`STATS_INTERVAL`], so a busy instance is not asked
    /// once per activation. Marks the asking.
    fn due(&self, drained: bool, now: Instant) -> bool {
        let mut g = self.0.lock().unwrap();
        let due = drained
            || g.1
                .is_none_or(|at| now.duration_since(at) >= STATS_INTERVAL);
        if due {
            g.1 = Some(now);
        }
        due
    }

    fn set(&self, account: Value) {
        self.0.lock().unwrap().0 = Some(account);
    }
}

/// The sharing component: the runtime's sharing settings at start, and its account of its
/// isolates or contexts after activations (for the node API).
pub struct Sharing;

#[async_trait]
impl Component for Sharing {
    fn name(&self) -> &'static str {
        "sharing"
    }

    fn technique(&self) -> Option<icebox_policy::Technique> {
        Some(icebox_policy::Technique::Sharing)
    }

    /// The mode's settings, then what the runtime's runtime.json adds for this profile.
    fn instance_env(
        &self,
        pool: &Pool,
        kind: &str,
        action: Option<&ActionSpec>,
    ) -> Vec<(String, String)> {
        let mut env = sharing_env(action);
        let profile = action.map_or_else(|| SharingMode::default().as_str().to_string(), profile);
        if let Some(runtime) = pool.runtimes.resolve(kind) {
            env.extend(runtime.sharing_env_for(&profile));
        }
        env
    }

    fn on_created(&self, action: &ActionSpec, _origin: &Origin, ext: &mut Extensions) {
        if sharing_of(action) != SharingMode::Process {
            ext.insert(SharingStats::default());
        }
    }

    /// After an activation ended on a sharing instance, ask its runtime for its `sharing`
    /// account and keep it for the node API. The instance is still awake (the freeze waits for
    /// the pause grace); a runtime that does not answer in time keeps the previous account.
    fn on_release(&self, pool: &Arc<Pool>, instance: &Arc<Instance>) {
        let Some(stats) = instance.ext::<SharingStats>() else {
            return;
        };
        let Some(in_flight) = pool.slots.in_flight(&instance.id) else {
            return;
        };
        if !stats.due(in_flight == 0, Instant::now()) {
            return;
        }
        let instance = instance.clone();
        tokio::spawn(async move {
            let client = instance.sandbox.client();
            let Ok(Ok(reply)) =
                tokio::time::timeout(STATS_TIMEOUT, client.get("/icebox/stats")).await
            else {
                return;
            };
            if let (Some(account), Some(stats)) = (
                reply.json().and_then(|v| v.get("sharing").cloned()),
                instance.ext::<SharingStats>(),
            ) {
                stats.set(account);
            }
        });
    }

    fn view(&self, _pool: &Pool, slot: &Slot, view: &mut InstanceView) {
        view.sharing = slot.instance.ext::<SharingStats>().and_then(|s| s.last());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kv(key: &str, value: Value) -> KeyValue {
        KeyValue {
            key: key.to_string(),
            value,
        }
    }

    fn action(annotations: Vec<KeyValue>, memory: u64, concurrency: u32) -> ActionSpec {
        let mut spec = crate::registry::testutil::spec("ns", "a");
        spec.annotations = annotations;
        spec.limits.memory = memory;
        spec.limits.concurrency = concurrency;
        spec
    }

    #[test]
    fn a_busy_instance_is_asked_at_most_every_interval_a_drained_one_always() {
        let stats = SharingStats::default();
        let t0 = Instant::now();
        assert!(stats.due(false, t0), "never asked yet");
        assert!(!stats.due(false, t0 + STATS_INTERVAL / 2));
        assert!(stats.due(true, t0 + STATS_INTERVAL / 2), "drained");
        assert!(!stats.due(false, t0 + STATS_INTERVAL));
        assert!(stats.due(false, t0 + STATS_INTERVAL * 2));
        stats.set(serde_json::json!({"mode": "isolate"}));
        assert_eq!(stats.last(), Some(serde_json::json!({"mode": "isolate"})));
    }

    #[test]
    fn default_is_one_activation_per_instance() {
        let a = action(vec![], 256, 8);
        assert_eq!(sharing_of(&a), SharingMode::Process);
        assert_eq!(capacity_of(&a), 1);
        assert_eq!(
            sharing_env(Some(&a)),
            [("ICEBOX_SHARING".into(), "process".into())]
        );
    }

    #[test]
    fn isolate_env_splits_the_memory_limit_unless_told_otherwise() {
        let iso = || kv(ANNOTATION, json!("isolate"));
        let memory_env = |a: &ActionSpec| {
            sharing_env(Some(a))
                .into_iter()
                .find(|(k, _)| k == "ICEBOX_ISOLATE_MEMORY_MB")
                .map(|(_, v)| v)
        };
        // (256 - 64) / 8 = 24 MB per isolate, 8 of which are its overhead.
        let a = action(vec![iso()], 256, 8);
        assert_eq!(capacity_of(&a), 8);
        assert_eq!(memory_env(&a).as_deref(), Some("16"));
        assert_eq!(
            memory_env(&action(vec![iso()], 1024, 8)).as_deref(),
            Some("112")
        );
        let a = action(
            vec![
                iso(),
                kv("icebox.isolate_memory", json!("64")),
                kv("icebox.isolate_pool", json!(3)),
            ],
            1024,
            64,
        );
        assert_eq!(memory_env(&a).as_deref(), Some("64"));
        assert!(sharing_env(Some(&a)).contains(&("ICEBOX_ISOLATE_POOL".into(), "3".into())));
        assert_eq!(capacity_of(&a), 13, "(1024 - 64) / (64 + 8)");
        // 256 MB over 64 isolates would be 3 MB each: raised to what V8 needs, and only as
        // many isolates as then fit run at once.
        let a = action(vec![iso()], 256, 64);
        assert_eq!(memory_env(&a).as_deref(), Some("16"));
        assert_eq!(capacity_of(&a), 8);
        let a = action(vec![iso(), kv("icebox.isolate_memory", json!(120))], 256, 8);
        assert_eq!(capacity_of(&a), 1);
        // Shared mode is not capped: its activations share one heap.
        assert_eq!(
            capacity_of(&action(vec![kv(ANNOTATION, json!("shared"))], 256, 64)),
            64
        );
    }

    #[test]
    fn validation_names_what_is_wrong() {
        assert!(validate(&[], "python", 256).is_ok());
        assert!(validate(&[kv(ANNOTATION, json!("shared"))], "java", 256).is_ok());
        let err = validate(&[kv(ANNOTATION, json!("threads"))], "nodejs", 256).unwrap_err();
        assert!(err.contains("'threads'"), "{err}");
        let err = validate(&[kv(ANNOTATION, json!(true))], "nodejs", 256).unwrap_err();
        assert!(err.contains("must be a string"), "{err}");
        let err = validate(&[kv(ANNOTATION, json!("isolate"))], "python", 256).unwrap_err();
        assert!(err.contains("only Node.js"), "{err}");
        let iso = kv(ANNOTATION, json!("isolate"));
        assert!(validate(
            &[iso.clone(), kv("icebox.isolate_pool", json!(2))],
            "nodejs",
            256
        )
        .is_ok());
        let err = validate(
            &[iso.clone(), kv("icebox.isolate_memory", json!(512))],
            "nodejs",
            256,
        )
        .unwrap_err();
        assert!(err.contains("between 16 and"), "{err}");
        let err = validate(
            &[iso, kv("icebox.isolate_idle_ms", json!("soon"))],
            "nodejs",
            256,
        )
        .unwrap_err();
        assert!(err.contains("non-negative integer"), "{err}");
        let err = validate(&[kv("icebox.isolate_pool", json!(2))], "nodejs", 256).unwrap_err();
        assert!(err.contains("only applies"), "{err}");
        let iso = kv(ANNOTATION, json!("isolate"));
        for engine in ["v8", "worker"] {
            let engine = kv("icebox.isolate_engine", json!(engine));
            assert!(validate(&[iso.clone(), engine], "nodejs", 256).is_ok());
        }
        let err = validate(
            &[iso, kv("icebox.isolate_engine", json!("threads"))],
            "nodejs",
            256,
        )
        .unwrap_err();
        assert!(err.contains("one of v8, worker"), "{err}");
        let err = validate(&[kv("icebox.isolate_engine", json!("v8"))], "nodejs", 256).unwrap_err();
        assert!(err.contains("only applies"), "{err}");
    }

    #[test]
    fn the_isolate_engine_reaches_the_runtime_and_names_the_profile() {
        let iso = || kv(ANNOTATION, json!("isolate"));
        let engine_env = |a: &ActionSpec| {
            sharing_env(Some(a))
                .into_iter()
                .find(|(k, _)| k == "ICEBOX_ISOLATE_ENGINE")
                .map(|(_, v)| v)
        };
        let a = action(vec![iso()], 256, 8);
        assert_eq!(engine_env(&a).as_deref(), Some("v8"));
        assert_eq!(profile(&a), "isolate:v8");
        let a = action(
            vec![iso(), kv("icebox.isolate_engine", json!("worker"))],
            256,
            8,
        );
        assert_eq!(engine_env(&a).as_deref(), Some("worker"));
        assert_eq!(profile(&a), "isolate:worker");
        let a = action(vec![kv(ANNOTATION, json!("shared"))], 256, 8);
        assert_eq!(engine_env(&a), None);
        assert_eq!(profile(&a), "shared");
        assert_eq!(profile(&action(vec![], 256, 8)), "process");
    }
}
