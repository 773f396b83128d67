//! Which techniques apply to each action (`--techniques`, annotation `icebox.techniques`):
//! the books of what was measured of each action and the choice made from it by
//! icebox_policy::technique_choice. The core consults the choice where it dispatches a hook
//! that starts a technique's work on an instance (environment, provide, on_created, deploy),
//! so a component never sees an action the choice leaves it out of; the few components that
//! act on instances already running (Desiccant's planner, semi-warm) ask [`Pool::allows`].
//!
//! A technique that fails for an action (a snapshot build, a reclaim that times out) is off
//! for that action from then on, in every mode, until the action is updated.
//!
//! Lock: `books` is taken only inside this file's methods, never with another pool lock.

use super::Pool;
use icebox_core::api::TechniquesView;
use icebox_core::{ActionSpec, EventKind};
use icebox_policy::{
    Technique, TechniqueChoice, TechniqueMeasurements, TechniqueReason, TechniqueSet,
    UnknownTechnique,
};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

/// The annotation that lists an action's techniques (overrides the node's choice).
pub const ANNOTATION: &str = "icebox.techniques";

/// `--techniques`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TechniquesMode {
    /// Every technique's own flags and annotations decide, as before this choice existed.
    #[default]
    Default,
    /// The node's flags say which techniques are available; the policy picks per action.
    Auto,
}

impl FromStr for TechniquesMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "default" => Ok(TechniquesMode::Default),
            "auto" => Ok(TechniquesMode::Auto),
            other => Err(format!(
                "'{other}' is not a techniques mode (default, auto)"
            )),
        }
    }
}

impl fmt::Display for TechniquesMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TechniquesMode::Default => "default",
            TechniquesMode::Auto => "auto",
        })
    }
}

/// The `icebox.techniques` list of an action, checked at deployment: a list of known names.
pub fn validate(annotations: &[icebox_core::action::KeyValue]) -> Result<(), String> {
    match annotations.iter().find(|kv| kv.key == ANNOTATION) {
        None => Ok(()),
        Some(kv) => listed(&kv.value).map(|_| ()),
    }
}

fn listed(value: &Value) -> Result<TechniqueSet, String> {
    let bad = || {
        format!(
            "The annotation '{ANNOTATION}' must be a list of technique names \
             (reclaim, offload, snapshot, stemcell, sharing), got {value}."
        )
    };
    let Value::Array(items) = value else {
        return Err(bad());
    };
    let names: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
    TechniqueSet::parse_list(names.ok_or_else(bad)?).map_err(|UnknownTechnique(name)| {
        format!(
            "The annotation '{ANNOTATION}' names an unknown technique '{name}' \
             (known: reclaim, offload, snapshot, stemcell, sharing)."
        )
    })
}

/// The action's own list, when it has a valid one (deployment validated it: an unreadable
/// value in a hand-edited registry counts as none).
fn listed_of(action: &ActionSpec) -> Option<TechniqueSet> {
    action.annotation(ANNOTATION).and_then(|v| listed(v).ok())
}

struct ActionBook {
    version: String,
    measured: TechniqueMeasurements,
    /// Sums and counts behind the measured means of runtime start and /init.
    start: Mean,
    init: Mean,
    /// Techniques that failed for this version, and why.
    failed: BTreeMap<Technique, String>,
    choice: TechniqueChoice,
}

pub struct TechniqueChoices {
    mode: TechniquesMode,
    available: TechniqueSet,
    books: Mutex<HashMap<String, ActionBook>>,
}

#[derive(Default)]
struct Mean {
    sum: u64,
    n: u64,
}

impl Mean {
    fn add(&mut self, v: u64) -> u64 {
        self.sum = self.sum.saturating_add(v);
        self.n += 1;
        self.sum / self.n
    }
}

/// A choice that changed, to be told as an event.
struct Changed {
    fqn: String,
    detail: String,
}

impl TechniqueChoices {
    pub fn new(mode: TechniquesMode, available: TechniqueSet) -> TechniqueChoices {
        TechniqueChoices {
            mode,
            available,
            books: Mutex::new(HashMap::new()),
        }
    }

    fn decide(&self, action: &ActionSpec, book: &ActionBook) -> TechniqueChoice {
        let failed: TechniqueSet = book.failed.keys().copied().collect();
        let choice = match (listed_of(action), self.mode) {
            (Some(list), _) => TechniqueChoice::annotated(self.available, list),
            (None, TechniquesMode::Auto) => TechniqueChoice::auto(self.available, &book.measured),
            (None, TechniquesMode::Default) => TechniqueChoice::node_default(self.available),
        };
        choice.without_failed(failed)
    }

    /// Runs `f` on the action's book (made or renewed for its version), then decides again;
    /// Some when the set of techniques changed.
    fn with_book(
        &self,
        action: &ActionSpec,
        f: impl FnOnce(&mut ActionBook),
    ) -> (TechniqueChoice, Option<Changed>) {
        let fqn = action.fqn();
        let mut books = self.books.lock().unwrap();
        let fresh = |s: &Self| {
            let mut book = ActionBook {
                version: action.version.clone(),
                measured: TechniqueMeasurements::default(),
                start: Mean::default(),
                init: Mean::default(),
                failed: BTreeMap::new(),
                choice: TechniqueChoice::node_default(TechniqueSet::EMPTY),
            };
            refresh_static(&mut book.measured, action);
            book.choice = s.decide(action, &book);
            book
        };
        let book = books.entry(fqn.clone()).or_insert_with(|| fresh(self));
        if book.version != action.version {
            *book = fresh(self);
        }
        let before = book.choice.on;
        f(book);
        book.choice = self.decide(action, book);
        let changed = (book.choice.on != before).then(|| Changed {
            fqn,
            detail: detail(&book.choice, before, &book.failed),
        });
        (book.choice.clone(), changed)
    }

    /// Reads the action's current choice (its book made or renewed for its version) without
    /// deciding again: what every hook dispatch asks, so it neither allocates nor decides.
    fn read<R>(&self, action: &ActionSpec, f: impl FnOnce(&TechniqueChoice) -> R) -> R {
        {
            let books = self.books.lock().unwrap();
            if let Some(book) = books.get(&action.fqn()) {
                if book.version == action.version {
                    return f(&book.choice);
                }
            }
        }
        let (choice, _) = self.with_book(action, |_| {});
        f(&choice)
    }

    fn forget(&self, fqn: &str) {
        self.books.lock().unwrap().remove(fqn);
    }

    fn view(&self, action: &ActionSpec) -> TechniquesView {
        let choice = self.read(action, TechniqueChoice::clone);
        let books = self.books.lock().unwrap();
        let failed = books
            .get(&action.fqn())
            .map(|b| {
                b.failed
                    .iter()
                    .map(|(t, why)| (t.as_str().to_string(), why.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let source = if listed_of(action).is_some() {
            "annotation".to_string()
        } else {
            self.mode.to_string()
        };
        TechniquesView {
            mode: source,
            on: choice.on.names(),
            reasons: choice
                .reasons
                .iter()
                .map(|(t, r)| (t.as_str().to_string(), r.as_str().to_string()))
                .collect(),
            failed,
        }
    }
}

/// What the action's spec says (its kind, concurrency, sharing): read on every decision, so
/// an updated spec is followed.
fn refresh_static(m: &mut TechniqueMeasurements, action: &ActionSpec) {
    m.kind = action.exec.kind.clone();
    m.concurrency = action.limits.concurrency;
    m.sharing_asked = super::sharing::sharing_of(action) != icebox_policy::SharingMode::Process;
}

fn detail(
    choice: &TechniqueChoice,
    before: TechniqueSet,
    failed: &BTreeMap<Technique, String>,
) -> String {
    let changes: Vec<String> = Technique::ALL
        .into_iter()
        .filter(|t| choice.on.contains(*t) != before.contains(*t))
        .map(|t| {
            let sign = if choice.on.contains(t) { "+" } else { "-" };
            let mut s = format!("{sign}{t} ({})", choice.reason(t));
            if let (TechniqueReason::Failed, Some(why)) = (choice.reason(t), failed.get(&t)) {
                s.push_str(&format!(": {why}"));
            }
            s
        })
        .collect();
    format!("techniques {} [{}]", choice.on, changes.join(", "))
}

/// What the pool learns of an action, for the choice.
pub enum Observed {
    /// A cold start that ran /init: `runtime_start_ms` only for a fresh start (a stem cell's
    /// runtime was started earlier, a restore runs no /init).
    ColdStart {
        runtime_start_ms: Option<u64>,
        init_ms: Option<u64>,
    },
    WarmStart,
    IdleUss(u64),
    GarbageShare(f64),
    Incompressible,
}

impl Pool {
    /// Whether technique `t` may act on instances of `action`.
    pub fn allows(&self, action: &ActionSpec, t: Technique) -> bool {
        self.choices.read(action, |choice| {
            match (self.choices.mode, choice.reason(t)) {
                // As before: the technique's own flags decide, even where the node has it off.
                (TechniquesMode::Default, TechniqueReason::NotAvailable) => {
                    listed_of(action).is_none()
                }
                _ => choice.on.contains(t),
            }
        })
    }

    /// Whether the choice (auto or the action's list) turned `t` on for `action`, so the
    /// technique applies even without its own opt-in annotation (a snapshot).
    pub fn chooses(&self, action: &ActionSpec, t: Technique) -> bool {
        self.choices.read(action, |choice| {
            choice.on.contains(t) && choice.reason(t) != TechniqueReason::NodeDefault
        })
    }

    /// A measurement of `action`; the choice is made again, and an event tells a change.
    pub fn observe(&self, action: &ActionSpec, instance: &str, what: Observed) {
        // Only auto's rules read measurements: the default mode and the warm path pay nothing.
        if self.choices.mode == TechniquesMode::Default {
            return;
        }
        let (_, changed) = self.choices.with_book(action, |book| {
            refresh_static(&mut book.measured, action);
            let m = &mut book.measured;
            match what {
                Observed::ColdStart {
                    runtime_start_ms,
                    init_ms,
                } => {
                    m.cold_starts += 1;
                    if let Some(ms) = runtime_start_ms {
                        m.runtime_start_ms = Some(book.start.add(ms));
                    }
                    if let Some(ms) = init_ms {
                        m.init_ms = Some(book.init.add(ms));
                    }
                }
                Observed::WarmStart => m.warm_starts += 1,
                Observed::IdleUss(uss) => m.idle_uss = Some(uss),
                Observed::GarbageShare(share) => m.garbage_share = Some(share),
                Observed::Incompressible => m.incompressible = true,
            }
        });
        self.tell(instance, changed);
    }

    /// Technique `t` failed for `action`: off for it (every mode) until it is updated.
    pub fn technique_failed(&self, action: &ActionSpec, instance: &str, t: Technique, why: String) {
        tracing::warn!(action = %action.fqn(), technique = %t, "technique off for the action: {why}");
        let (_, changed) = self.choices.with_book(action, |book| {
            book.failed.insert(t, why);
        });
        self.tell(instance, changed);
    }

    /// An operator asked for `t` again (a snapshot build): its failure is forgotten.
    pub fn technique_retry(&self, action: &ActionSpec, t: Technique) {
        let (_, changed) = self.choices.with_book(action, |book| {
            book.failed.remove(&t);
        });
        self.tell("", changed);
    }

    fn tell(&self, instance: &str, changed: Option<Changed>) {
        if let Some(c) = changed {
            tracing::info!(action = %c.fqn, "{}", c.detail);
            self.events.emit(
                instance,
                &c.fqn,
                EventKind::TechniquesChanged,
                None,
                Some(c.detail),
            );
        }
    }

    /// The action's choice and its reasons, for the API.
    pub fn techniques_view(&self, action: &ActionSpec) -> TechniquesView {
        self.choices.view(action)
    }

    /// The action was updated or deleted: what was measured of the old version goes.
    pub(super) fn forget_choice(&self, fqn: &str) {
        self.choices.forget(fqn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_annotation_must_list_known_techniques() {
        let kv = |v: Value| {
            vec![icebox_core::action::KeyValue {
                key: ANNOTATION.into(),
                value: v,
            }]
        };
        assert!(validate(&[]).is_ok());
        assert!(validate(&kv(serde_json::json!(["reclaim", "snapshot"]))).is_ok());
        assert!(validate(&kv(serde_json::json!([]))).is_ok());
        let unknown = validate(&kv(serde_json::json!(["reclaim", "zswap"]))).unwrap_err();
        assert!(unknown.contains("unknown technique 'zswap'"), "{unknown}");
        assert!(validate(&kv(serde_json::json!("reclaim"))).is_err());
        assert!(validate(&kv(serde_json::json!([1]))).is_err());
    }

    #[test]
    fn modes_parse() {
        assert_eq!("auto".parse(), Ok(TechniquesMode::Auto));
        assert_eq!("default".parse(), Ok(TechniquesMode::Default));
        assert!("all".parse::<TechniquesMode>().is_err());
    }
}
