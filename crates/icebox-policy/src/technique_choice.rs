//! Which memory techniques apply to an action (`iceboxd --techniques auto`): chosen from what
//! the daemon measured of it. Every rule is a pure function of [`Measurements`] and the
//! node's available techniques, and every answer carries a machine-readable [`Reason`], so
//! the choice can be shown, tested and replayed by the simulator.
//!
//! Before an action has been measured each technique has a documented default (its reason
//! says so); the choice is made again whenever a measurement changes, so it follows the
//! action. docs/techniques.md explains each rule and threshold.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// A technique the pool can apply per action. The names are those of `icebox.techniques`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Technique {
    /// Desiccant: reclaim frozen garbage of idle instances.
    Reclaim,
    /// FaaSMem: segment offload after requests and semi-warm (or TMO, per the node's mode).
    Offload,
    /// Process snapshots (FaaSnap/REAP restores instead of cold starts).
    Snapshot,
    /// Stem cells: runtimes started ahead of demand, taken by a cold start.
    Stemcell,
    /// Concurrent activations in one runtime (shared heap or isolates).
    Sharing,
}

impl Technique {
    pub const ALL: [Technique; 5] = [
        Technique::Reclaim,
        Technique::Offload,
        Technique::Snapshot,
        Technique::Stemcell,
        Technique::Sharing,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Technique::Reclaim => "reclaim",
            Technique::Offload => "offload",
            Technique::Snapshot => "snapshot",
            Technique::Stemcell => "stemcell",
            Technique::Sharing => "sharing",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Technique {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown technique '{0}' (known: reclaim, offload, snapshot, stemcell, sharing)")]
pub struct UnknownTechnique(pub String);

impl FromStr for Technique {
    type Err = UnknownTechnique;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Technique::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| UnknownTechnique(s.to_string()))
    }
}

/// A set of techniques (small and `Copy`: it is read on every hook dispatch).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TechniqueSet(u8);

impl TechniqueSet {
    pub const EMPTY: TechniqueSet = TechniqueSet(0);

    pub fn all() -> TechniqueSet {
        Technique::ALL.into_iter().collect()
    }

    pub fn contains(self, t: Technique) -> bool {
        self.0 & t.bit() != 0
    }

    pub fn insert(&mut self, t: Technique) {
        self.0 |= t.bit();
    }

    pub fn remove(&mut self, t: Technique) {
        self.0 &= !t.bit();
    }

    pub fn intersect(self, other: TechniqueSet) -> TechniqueSet {
        TechniqueSet(self.0 & other.0)
    }

    pub fn iter(self) -> impl Iterator<Item = Technique> {
        Technique::ALL
            .into_iter()
            .filter(move |t| self.contains(*t))
    }

    /// The names, in [`Technique::ALL`] order.
    pub fn names(self) -> Vec<String> {
        self.iter().map(|t| t.as_str().to_string()).collect()
    }

    /// A list of names (the `icebox.techniques` annotation); the first unknown one is the
    /// error.
    pub fn parse_list<'a>(
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<TechniqueSet, UnknownTechnique> {
        names.into_iter().map(str::parse::<Technique>).collect()
    }
}

impl FromIterator<Technique> for TechniqueSet {
    fn from_iter<I: IntoIterator<Item = Technique>>(iter: I) -> Self {
        let mut set = TechniqueSet::EMPTY;
        for t in iter {
            set.insert(t);
        }
        set
    }
}

impl fmt::Display for TechniqueSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == TechniqueSet::EMPTY {
            return f.write_str("none");
        }
        f.write_str(&self.names().join(","))
    }
}

/// Why a technique is on or off for an action (stable names: the API and events carry them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The node does not offer it (its flags).
    NotAvailable,
    /// `--techniques default`: the technique's own flags and annotations decide, as before.
    NodeDefault,
    /// The action's `icebox.techniques` annotation lists it / leaves it out.
    Annotation,
    /// It failed for this action; off until the action is updated.
    Failed,
    /// Reclaim: the runtime has no garbage collector to ask.
    NoGarbageCollector,
    /// Reclaim: a managed runtime not reclaimed yet: on, to measure its garbage.
    GarbageNotMeasured,
    /// Reclaim: the last reclaim freed at least [`MIN_GARBAGE_SHARE`] of the instance.
    GarbageWorthReclaiming,
    /// Reclaim: the last reclaim freed less than [`MIN_GARBAGE_SHARE`].
    LittleGarbage,
    /// Offload: no idle instance measured yet: on.
    IdleMemoryNotMeasured,
    /// Offload: idle instances are large enough to offload.
    IdleMemoryLarge,
    /// Offload: idle instances are under [`MIN_OFFLOAD_USS`].
    IdleMemoryTooSmall,
    /// Offload: its pages gained too little in the compressed pool.
    Incompressible,
    /// Snapshot: start+init is slow and cold starts are frequent.
    SlowStartAndColdOften,
    /// Snapshot: no fresh cold start measured yet: off (a build costs a dump).
    StartNotMeasured,
    /// Snapshot: start+init under [`SLOW_START_MS`].
    StartFast,
    /// Snapshot: too few cold starts to pay for a snapshot.
    ColdStartsRare,
    /// Stem cell: the runtime's start was not measured yet: on.
    RuntimeStartNotMeasured,
    /// Stem cell: the runtime's start is worth skipping.
    RuntimeStartSlow,
    /// Stem cell: the runtime starts in under [`MIN_STEMCELL_SAVING_MS`].
    RuntimeStartFast,
    /// Sharing: concurrency > 1 and `icebox.sharing` asks for it.
    ConcurrentAndAsked,
    /// Sharing: `limits.concurrency` is 1.
    NoConcurrency,
    /// Sharing: the action does not ask (`icebox.sharing` absent or `process`).
    NotAsked,
}

impl Reason {
    pub const ALL: [Reason; 22] = [
        Reason::NotAvailable,
        Reason::NodeDefault,
        Reason::Annotation,
        Reason::Failed,
        Reason::NoGarbageCollector,
        Reason::GarbageNotMeasured,
        Reason::GarbageWorthReclaiming,
        Reason::LittleGarbage,
        Reason::IdleMemoryNotMeasured,
        Reason::IdleMemoryLarge,
        Reason::IdleMemoryTooSmall,
        Reason::Incompressible,
        Reason::SlowStartAndColdOften,
        Reason::StartNotMeasured,
        Reason::StartFast,
        Reason::ColdStartsRare,
        Reason::RuntimeStartNotMeasured,
        Reason::RuntimeStartSlow,
        Reason::RuntimeStartFast,
        Reason::ConcurrentAndAsked,
        Reason::NoConcurrency,
        Reason::NotAsked,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NotAvailable => "not_available",
            Reason::NodeDefault => "node_default",
            Reason::Annotation => "annotation",
            Reason::Failed => "failed",
            Reason::NoGarbageCollector => "no_garbage_collector",
            Reason::GarbageNotMeasured => "garbage_not_measured",
            Reason::GarbageWorthReclaiming => "garbage_worth_reclaiming",
            Reason::LittleGarbage => "little_garbage",
            Reason::IdleMemoryNotMeasured => "idle_memory_not_measured",
            Reason::IdleMemoryLarge => "idle_memory_large",
            Reason::IdleMemoryTooSmall => "idle_memory_too_small",
            Reason::Incompressible => "incompressible",
            Reason::SlowStartAndColdOften => "slow_start_and_cold_often",
            Reason::StartNotMeasured => "start_not_measured",
            Reason::StartFast => "start_fast",
            Reason::ColdStartsRare => "cold_starts_rare",
            Reason::RuntimeStartNotMeasured => "runtime_start_not_measured",
            Reason::RuntimeStartSlow => "runtime_start_slow",
            Reason::RuntimeStartFast => "runtime_start_fast",
            Reason::ConcurrentAndAsked => "concurrent_and_asked",
            Reason::NoConcurrency => "no_concurrency",
            Reason::NotAsked => "not_asked",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Desiccant: a reclaim thaws the instance and runs a full collection (tens of ms of a core,
/// docs/desiccant.md); when the last one freed under 5 % of the instance, the next ones are
/// expected to free as little, and that CPU is better left to activations.
pub const MIN_GARBAGE_SHARE: f64 = 0.05;
/// FaaSMem: an idle instance under 16 MiB of USS has little to offload once its hot pages
/// stay (a runtime's hot set alone is several MiB), while each step still scans its page
/// tables and its next request pays the faults.
pub const MIN_OFFLOAD_USS: u64 = 16 << 20;
/// Snapshots: a process restore takes ~100 ms here (docs/performance.md: Java 110 ms), so a
/// start+init under 250 ms saves less than 60 % of it, not worth a template's dump, its disk
/// and a build's CPU.
pub const SLOW_START_MS: u64 = 250;
/// Snapshots: "cold-started often" is at least this many cold starts seen…
pub const MIN_COLD_STARTS: u64 = 3;
/// …and at least this share of its activations: an action whose instances stay warm for
/// (almost) every request gains nothing from faster cold starts.
pub const MIN_COLD_START_FRACTION: f64 = 0.05;
/// Stem cells: a cold start from a stem cell skips only the runtime's start; under 20 ms
/// (a native runtime) the saving is smaller than keeping a spare runtime costs.
pub const MIN_STEMCELL_SAVING_MS: u64 = 20;

/// Runtime kinds with a garbage collector the reclaim protocol can ask (docs/desiccant.md).
const MANAGED_KINDS: [&str; 3] = ["python", "nodejs", "java"];

/// What the daemon measured of one action (None/0: not yet).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measurements {
    /// The action's runtime kind (`python:3`, `nodejs:20`, `java:17`…).
    pub kind: String,
    /// Cold starts (fresh, stem cell or restore) and warm starts of its activations.
    pub cold_starts: u64,
    pub warm_starts: u64,
    /// The mean runtime start of its fresh starts (sandbox until the runtime answers) and
    /// the mean /init of its starts that ran one (fresh or stem cell): means, so that one
    /// fast start (a warm page cache) does not flip a choice that many slow ones made.
    pub runtime_start_ms: Option<u64>,
    pub init_ms: Option<u64>,
    /// USS of its last instance as it went idle.
    pub idle_uss: Option<u64>,
    /// Share of the instance the last reclaim freed.
    pub garbage_share: Option<f64>,
    /// The offload component found its pages incompressible.
    pub incompressible: bool,
    /// `limits.concurrency`.
    pub concurrency: u32,
    /// `icebox.sharing` asks for shared or isolate mode.
    pub sharing_asked: bool,
}

impl Measurements {
    /// Start and /init of a fresh cold start, when both were measured.
    pub fn start_init_ms(&self) -> Option<u64> {
        Some(self.runtime_start_ms? + self.init_ms?)
    }

    pub fn cold_start_fraction(&self) -> Option<f64> {
        let total = self.cold_starts + self.warm_starts;
        (total > 0).then(|| self.cold_starts as f64 / total as f64)
    }
}

/// The choice for one action: which techniques apply and, for every technique, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub on: TechniqueSet,
    pub reasons: BTreeMap<Technique, Reason>,
}

impl Choice {
    fn new() -> Choice {
        Choice {
            on: TechniqueSet::EMPTY,
            reasons: BTreeMap::new(),
        }
    }

    fn set(&mut self, t: Technique, on: bool, reason: Reason) {
        if on {
            self.on.insert(t);
        } else {
            self.on.remove(t);
        }
        self.reasons.insert(t, reason);
    }

    pub fn reason(&self, t: Technique) -> Reason {
        self.reasons
            .get(&t)
            .copied()
            .unwrap_or(Reason::NotAvailable)
    }

    /// `--techniques default`: every available technique, its own flags deciding.
    pub fn node_default(available: TechniqueSet) -> Choice {
        Choice::each(available, |_| (true, Reason::NodeDefault))
    }

    /// The action's `icebox.techniques` list, within what the node offers.
    pub fn annotated(available: TechniqueSet, listed: TechniqueSet) -> Choice {
        Choice::each(available, |t| (listed.contains(t), Reason::Annotation))
    }

    /// `--techniques auto`: the rules below, within what the node offers.
    pub fn auto(available: TechniqueSet, m: &Measurements) -> Choice {
        Choice::each(available, |t| rule(t, m))
    }

    fn each(available: TechniqueSet, decide: impl Fn(Technique) -> (bool, Reason)) -> Choice {
        let mut c = Choice::new();
        for t in Technique::ALL {
            if available.contains(t) {
                let (on, reason) = decide(t);
                c.set(t, on, reason);
            } else {
                c.set(t, false, Reason::NotAvailable);
            }
        }
        c
    }

    /// Techniques that failed for the action are off, whatever chose them.
    pub fn without_failed(mut self, failed: TechniqueSet) -> Choice {
        // Only a technique that ran can fail, so this holds even where the node's flags do
        // not offer it (an action's own annotation turned it on).
        for t in failed.iter() {
            self.set(t, false, Reason::Failed);
        }
        self
    }
}

fn rule(t: Technique, m: &Measurements) -> (bool, Reason) {
    match t {
        Technique::Reclaim => reclaim(m),
        Technique::Offload => offload(m),
        Technique::Snapshot => snapshot(m),
        Technique::Stemcell => stemcell(m),
        Technique::Sharing => sharing(m),
    }
}

fn reclaim(m: &Measurements) -> (bool, Reason) {
    let language = m.kind.split(':').next().unwrap_or("");
    if !MANAGED_KINDS.contains(&language) {
        return (false, Reason::NoGarbageCollector);
    }
    match m.garbage_share {
        None => (true, Reason::GarbageNotMeasured),
        Some(s) if s >= MIN_GARBAGE_SHARE => (true, Reason::GarbageWorthReclaiming),
        Some(_) => (false, Reason::LittleGarbage),
    }
}

fn offload(m: &Measurements) -> (bool, Reason) {
    if m.incompressible {
        return (false, Reason::Incompressible);
    }
    match m.idle_uss {
        None => (true, Reason::IdleMemoryNotMeasured),
        Some(uss) if uss >= MIN_OFFLOAD_USS => (true, Reason::IdleMemoryLarge),
        Some(_) => (false, Reason::IdleMemoryTooSmall),
    }
}

fn snapshot(m: &Measurements) -> (bool, Reason) {
    let Some(start_init) = m.start_init_ms() else {
        return (false, Reason::StartNotMeasured);
    };
    if start_init < SLOW_START_MS {
        return (false, Reason::StartFast);
    }
    let often = m.cold_starts >= MIN_COLD_STARTS
        && m.cold_start_fraction()
            .is_some_and(|f| f >= MIN_COLD_START_FRACTION);
    if often {
        (true, Reason::SlowStartAndColdOften)
    } else {
        (false, Reason::ColdStartsRare)
    }
}

fn stemcell(m: &Measurements) -> (bool, Reason) {
    match m.runtime_start_ms {
        None => (true, Reason::RuntimeStartNotMeasured),
        Some(ms) if ms >= MIN_STEMCELL_SAVING_MS => (true, Reason::RuntimeStartSlow),
        Some(_) => (false, Reason::RuntimeStartFast),
    }
}

fn sharing(m: &Measurements) -> (bool, Reason) {
    if m.concurrency <= 1 {
        (false, Reason::NoConcurrency)
    } else if !m.sharing_asked {
        (false, Reason::NotAsked)
    } else {
        (true, Reason::ConcurrentAndAsked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn python() -> Measurements {
        Measurements {
            kind: "python:3".into(),
            concurrency: 1,
            ..Default::default()
        }
    }

    fn auto(m: &Measurements) -> Choice {
        Choice::auto(TechniqueSet::all(), m)
    }

    /// The API's contract lists every reason and technique (docs/api/openapi.yaml).
    #[test]
    fn the_openapi_file_lists_every_reason_and_technique() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api/openapi.yaml");
        let spec = std::fs::read_to_string(path).unwrap();
        let enum_after = |anchor: &str| -> Vec<String> {
            let from = spec
                .find(anchor)
                .unwrap_or_else(|| panic!("{anchor} in the spec"));
            let line = spec[from..]
                .lines()
                .find(|l| l.trim_start().starts_with("enum: ["))
                .unwrap();
            let inner = line
                .trim()
                .trim_start_matches("enum: [")
                .trim_end_matches(']');
            inner.split(',').map(|s| s.trim().to_string()).collect()
        };
        let reasons: Vec<String> = Reason::ALL.iter().map(|r| r.as_str().to_string()).collect();
        assert_eq!(enum_after("    TechniquesView:"), reasons);
        let techniques: Vec<String> = Technique::ALL
            .iter()
            .map(|t| t.as_str().to_string())
            .collect();
        assert_eq!(enum_after("    Technique:"), techniques);
        // Serde and as_str agree.
        for r in Reason::ALL {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_errors() {
        for t in Technique::ALL {
            assert_eq!(t.as_str().parse::<Technique>(), Ok(t));
        }
        let set = TechniqueSet::parse_list(["snapshot", "reclaim"]).unwrap();
        assert_eq!(set.names(), ["reclaim", "snapshot"]);
        assert_eq!(set.to_string(), "reclaim,snapshot");
        assert_eq!(TechniqueSet::EMPTY.to_string(), "none");
        assert_eq!(
            TechniqueSet::parse_list(["reclaim", "zswap"]),
            Err(UnknownTechnique("zswap".into()))
        );
    }

    #[test]
    fn before_any_measurement_the_documented_defaults_apply() {
        let c = auto(&python());
        assert_eq!(c.on.names(), ["reclaim", "offload", "stemcell"]);
        assert_eq!(c.reason(Technique::Reclaim), Reason::GarbageNotMeasured);
        assert_eq!(c.reason(Technique::Offload), Reason::IdleMemoryNotMeasured);
        assert_eq!(c.reason(Technique::Snapshot), Reason::StartNotMeasured);
        assert_eq!(
            c.reason(Technique::Stemcell),
            Reason::RuntimeStartNotMeasured
        );
        assert_eq!(c.reason(Technique::Sharing), Reason::NoConcurrency);
    }

    #[test]
    fn reclaim_needs_a_garbage_collector_and_enough_garbage() {
        let mut m = python();
        m.kind = "blackbox".into();
        assert_eq!(reclaim(&m), (false, Reason::NoGarbageCollector));
        m.kind = "java:17".into();
        m.garbage_share = Some(0.30);
        assert_eq!(reclaim(&m), (true, Reason::GarbageWorthReclaiming));
        m.garbage_share = Some(MIN_GARBAGE_SHARE);
        assert_eq!(reclaim(&m), (true, Reason::GarbageWorthReclaiming));
        m.garbage_share = Some(0.01);
        assert_eq!(reclaim(&m), (false, Reason::LittleGarbage));
    }

    #[test]
    fn offload_skips_small_and_incompressible_instances() {
        let mut m = python();
        m.idle_uss = Some(40 * MIB);
        assert_eq!(offload(&m), (true, Reason::IdleMemoryLarge));
        m.idle_uss = Some(8 * MIB);
        assert_eq!(offload(&m), (false, Reason::IdleMemoryTooSmall));
        m.idle_uss = Some(40 * MIB);
        m.incompressible = true;
        assert_eq!(offload(&m), (false, Reason::Incompressible));
    }

    #[test]
    fn snapshots_need_a_slow_start_and_frequent_cold_starts() {
        let mut m = python();
        m.runtime_start_ms = Some(150);
        m.init_ms = Some(400);
        m.cold_starts = 1;
        assert_eq!(snapshot(&m), (false, Reason::ColdStartsRare));
        m.cold_starts = 5;
        m.warm_starts = 1000;
        assert_eq!(snapshot(&m), (false, Reason::ColdStartsRare), "0.5 % cold");
        m.warm_starts = 20;
        assert_eq!(snapshot(&m), (true, Reason::SlowStartAndColdOften));
        m.init_ms = Some(10);
        m.runtime_start_ms = Some(100);
        assert_eq!(snapshot(&m), (false, Reason::StartFast));
        m.runtime_start_ms = None;
        assert_eq!(snapshot(&m), (false, Reason::StartNotMeasured));
    }

    #[test]
    fn stem_cells_only_where_the_runtime_start_is_worth_skipping() {
        let mut m = python();
        m.runtime_start_ms = Some(180);
        assert_eq!(stemcell(&m), (true, Reason::RuntimeStartSlow));
        m.runtime_start_ms = Some(5);
        assert_eq!(stemcell(&m), (false, Reason::RuntimeStartFast));
    }

    #[test]
    fn sharing_only_where_concurrency_is_allowed_and_asked_for() {
        let mut m = python();
        m.sharing_asked = true;
        assert_eq!(sharing(&m), (false, Reason::NoConcurrency));
        m.concurrency = 8;
        assert_eq!(sharing(&m), (true, Reason::ConcurrentAndAsked));
        m.sharing_asked = false;
        assert_eq!(sharing(&m), (false, Reason::NotAsked));
    }

    #[test]
    fn the_choice_changes_when_the_measurements_change() {
        let mut m = python();
        let before = auto(&m);
        // A slow Java-like start, cold-started on most requests, with little garbage.
        m.runtime_start_ms = Some(300);
        m.init_ms = Some(700);
        m.cold_starts = 4;
        m.warm_starts = 4;
        m.garbage_share = Some(0.02);
        m.idle_uss = Some(64 * MIB);
        let after = auto(&m);
        assert_ne!(before, after);
        assert_eq!(after.on.names(), ["offload", "snapshot", "stemcell"]);
        assert_eq!(after.reason(Technique::Reclaim), Reason::LittleGarbage);
        // Its pages turn out not to compress: offload goes too.
        m.incompressible = true;
        let later = auto(&m);
        assert_eq!(later.on.names(), ["snapshot", "stemcell"]);
        assert_eq!(later.reason(Technique::Offload), Reason::Incompressible);
    }

    #[test]
    fn only_available_techniques_are_chosen() {
        let available = TechniqueSet::parse_list(["reclaim", "snapshot"]).unwrap();
        let mut m = python();
        m.runtime_start_ms = Some(300);
        m.init_ms = Some(700);
        m.cold_starts = 10;
        let c = Choice::auto(available, &m);
        assert_eq!(c.on.names(), ["reclaim", "snapshot"]);
        assert_eq!(c.reason(Technique::Offload), Reason::NotAvailable);
        assert_eq!(c.reason(Technique::Stemcell), Reason::NotAvailable);
    }

    #[test]
    fn the_annotation_overrides_within_what_the_node_offers() {
        let available = TechniqueSet::parse_list(["reclaim", "offload", "stemcell"]).unwrap();
        let listed = TechniqueSet::parse_list(["offload", "snapshot"]).unwrap();
        let c = Choice::annotated(available, listed);
        assert_eq!(c.on.names(), ["offload"]);
        assert_eq!(c.reason(Technique::Reclaim), Reason::Annotation);
        assert_eq!(c.reason(Technique::Snapshot), Reason::NotAvailable);
    }

    #[test]
    fn default_mode_offers_every_available_technique_and_failures_turn_one_off() {
        let available = TechniqueSet::all();
        let c = Choice::node_default(available);
        assert_eq!(c.on, available);
        assert!(Technique::ALL
            .iter()
            .all(|t| c.reason(*t) == Reason::NodeDefault));
        let failed: TechniqueSet = [Technique::Snapshot].into_iter().collect();
        let c = c.without_failed(failed);
        assert!(!c.on.contains(Technique::Snapshot));
        assert_eq!(c.reason(Technique::Snapshot), Reason::Failed);
        assert!(c.on.contains(Technique::Reclaim));
    }
}
