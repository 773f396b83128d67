//! An action's snapshot settings (docs/snapshots.md): annotation `icebox.snapshot` — `true`
//! (snapshot right after `/init`), `"warm"` (after `/init` and one warm-up `/run` with the
//! parameters of `icebox.snapshot_warmup`), `false` / absent (never) — and, for experiments,
//! `icebox.snapshot_restore` choosing how this action's restores bring memory in.

use icebox_core::action::KeyValue;
use icebox_sandbox::RestoreMode;
use serde_json::{Map, Value};

const WHEN: &str = "icebox.snapshot";
const WARMUP: &str = "icebox.snapshot_warmup";
const RESTORE: &str = "icebox.snapshot_restore";

#[derive(Debug, Clone, PartialEq)]
pub enum When {
    Never,
    AfterInit,
    /// After `/init` and one `/run` with these parameters (merged over the action's defaults).
    AfterWarmup(Map<String, Value>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub when: When,
    /// The action's own restore mode, else the node's.
    pub restore: Option<RestoreMode>,
}

impl Settings {
    pub fn enabled(&self) -> bool {
        self.when != When::Never
    }
}

fn get<'a>(annotations: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    annotations
        .iter()
        .find(|kv| kv.key == key)
        .map(|kv| &kv.value)
}

/// Parsed settings; deployment has validated them, so an unreadable value (a registry edited
/// by hand) means no snapshots rather than a failure.
pub fn settings_of(annotations: &[KeyValue]) -> Settings {
    parse(annotations).unwrap_or(Settings {
        when: When::Never,
        restore: None,
    })
}

/// The settings the node applies: the action's own, off when the pool's technique choice
/// leaves snapshots out of it, and a snapshot right after `/init` when the choice (auto, or the
/// action's `icebox.techniques`) turns them on for an action that did not ask itself.
pub fn effective(pool: &crate::pool::Pool, action: &icebox_core::ActionSpec) -> Settings {
    let own = settings_of(&action.annotations);
    let t = icebox_policy::Technique::Snapshot;
    if !pool.allows(action, t) {
        Settings {
            when: When::Never,
            ..own
        }
    } else if !own.enabled() && pool.chooses(action, t) {
        Settings {
            when: When::AfterInit,
            ..own
        }
    } else {
        own
    }
}

/// Checked at deployment: a bad value is a 400 now, not a silent cold start later.
pub fn validate(annotations: &[KeyValue]) -> Result<(), String> {
    parse(annotations).map(|_| ())
}

fn parse(annotations: &[KeyValue]) -> Result<Settings, String> {
    let when = match get(annotations, WHEN) {
        None | Some(Value::Bool(false)) | Some(Value::Null) => When::Never,
        Some(Value::Bool(true)) => When::AfterInit,
        Some(Value::String(s)) if s == "warm" => When::AfterWarmup(Map::new()),
        Some(Value::String(s)) if s == "init" => When::AfterInit,
        Some(Value::String(s)) if s == "off" => When::Never,
        Some(other) => {
            return Err(format!(
                "The annotation '{WHEN}' must be true, false, \"init\" or \"warm\", got {other}."
            ))
        }
    };
    let when = match (when, get(annotations, WARMUP)) {
        (When::AfterWarmup(_), Some(Value::Object(params))) => When::AfterWarmup(params.clone()),
        (When::AfterWarmup(_), Some(other)) => {
            return Err(format!(
                "The annotation '{WARMUP}' must be an object of parameters, got {other}."
            ))
        }
        (when, Some(_)) if !matches!(when, When::AfterWarmup(_)) => {
            return Err(format!(
                "The annotation '{WARMUP}' only applies with '{WHEN}' set to \"warm\"."
            ))
        }
        (when, _) => when,
    };
    let restore = match get(annotations, RESTORE) {
        None => None,
        Some(Value::String(s)) => {
            let mode: RestoreMode = s
                .parse()
                .map_err(|e| format!("The annotation '{RESTORE}': {e}."))?;
            if mode == RestoreMode::Record {
                return Err(format!(
                    "The annotation '{RESTORE}' cannot be 'record': icebox records the first \
                     restore of every snapshot by itself."
                ));
            }
            Some(mode)
        }
        Some(other) => {
            return Err(format!(
                "The annotation '{RESTORE}' must be a string, got {other}."
            ))
        }
    };
    if restore.is_some() && when == When::Never {
        return Err(format!(
            "The annotation '{RESTORE}' only applies with '{WHEN}' on."
        ));
    }
    Ok(Settings { when, restore })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kvs(pairs: &[(&str, Value)]) -> Vec<KeyValue> {
        pairs
            .iter()
            .map(|(k, v)| KeyValue {
                key: k.to_string(),
                value: v.clone(),
            })
            .collect()
    }

    #[test]
    fn off_unless_asked() {
        assert_eq!(settings_of(&[]).when, When::Never);
        assert_eq!(settings_of(&kvs(&[(WHEN, json!(false))])).when, When::Never);
        assert!(!settings_of(&kvs(&[(WHEN, json!("off"))])).enabled());
    }

    #[test]
    fn after_init_or_after_a_warmup() {
        assert_eq!(
            settings_of(&kvs(&[(WHEN, json!(true))])).when,
            When::AfterInit
        );
        let s = settings_of(&kvs(&[(WHEN, json!("warm")), (WARMUP, json!({"n": 3}))]));
        let When::AfterWarmup(params) = s.when else {
            panic!("not warm: {s:?}")
        };
        assert_eq!(params["n"], 3);
        assert_eq!(
            settings_of(&kvs(&[(WHEN, json!("warm"))])).when,
            When::AfterWarmup(Map::new())
        );
    }

    #[test]
    fn bad_values_are_refused_with_the_reason() {
        let err = |pairs: &[(&str, Value)]| validate(&kvs(pairs)).unwrap_err();
        assert!(err(&[(WHEN, json!("always"))]).contains("true, false"));
        assert!(err(&[(WHEN, json!(true)), (WARMUP, json!({}))]).contains("only applies"));
        assert!(err(&[(WHEN, json!("warm")), (WARMUP, json!([1]))]).contains("object"));
        assert!(err(&[(WHEN, json!(true)), (RESTORE, json!("fast"))]).contains("unknown restore"));
        assert!(err(&[(WHEN, json!(true)), (RESTORE, json!("record"))]).contains("records"));
        assert!(err(&[(RESTORE, json!("lazy"))]).contains("only applies"));
    }

    #[test]
    fn an_action_may_choose_its_restore_mode() {
        let s = settings_of(&kvs(&[(WHEN, json!(true)), (RESTORE, json!("reap"))]));
        assert_eq!(s.restore, Some(RestoreMode::Reap));
    }
}
