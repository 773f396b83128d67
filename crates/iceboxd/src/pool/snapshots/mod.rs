//! Snapshots of actions (docs/snapshots.md): the books of which action version has a
//! snapshot, in which state, and whether its first restore is being recorded. Building one
//! (`build.rs`) and restoring from one (`restore.rs`) act through the backend's
//! [`icebox_sandbox::Snapshots`]; this file only decides and remembers, under one private lock
//! taken only inside its methods (never with another pool lock).

mod build;
mod component;
pub mod error;
mod restore;
pub mod settings;
mod store;

use super::backends::Isolation;
use icebox_core::api::{RestoreView, SnapshotView};
use icebox_core::{ActionSpec, LoadingSetInfo, RestoreMode, SnapshotInfo};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use store::{Store, StoredEntry};

pub use component::{ActionSnapshots, RestoredFrom};
pub use settings::{validate, Settings};

/// A snapshot that failed once is rebuilt at once (its files were damaged, say); after a
/// second failure in a row the next build waits this long, each further one twice as long…
const RETRY_FIRST: Duration = Duration::from_secs(10);
/// …up to this.
const RETRY_MAX: Duration = Duration::from_secs(600);

#[derive(Debug, Clone)]
pub struct SnapshotConfig {
    /// Off: no snapshot is built or restored, whatever the actions ask.
    pub enabled: bool,
    /// How restores bring memory in, unless an action says otherwise.
    pub restore: RestoreMode,
    pub state_dir: PathBuf,
}

type Key = (String, Isolation);

enum State {
    Building,
    Ready,
    Failed { reason: String, at: Instant },
}

struct Entry {
    version: String,
    dir: PathBuf,
    state: State,
    stored: Option<StoredEntry>,
    /// The instance whose first activation is recorded; `Some("")` while its restore runs.
    recording: Option<String>,
    restores: u64,
    fallbacks: u64,
    last_restore: Option<RestoreView>,
    /// Builds or restores failed in a row for this version: the next build waits longer.
    failures: u32,
}

/// What a cold start should do with an action's snapshot.
pub struct RestorePlan {
    pub image_dir: PathBuf,
    pub mode: RestoreMode,
    pub version: String,
}

pub struct SnapshotBooks {
    cfg: SnapshotConfig,
    store: Store,
    entries: Mutex<HashMap<Key, Entry>>,
    /// One template at a time: building is background work and must not crowd out activations.
    pub(super) builds: tokio::sync::Semaphore,
}

impl SnapshotBooks {
    pub fn new(cfg: SnapshotConfig) -> SnapshotBooks {
        SnapshotBooks {
            store: Store::new(&cfg.state_dir),
            cfg,
            entries: Mutex::new(HashMap::new()),
            builds: tokio::sync::Semaphore::new(1),
        }
    }

    pub fn enabled(&self) -> bool {
        self.cfg.enabled
    }

    /// Takes over the snapshots an earlier run left, for the actions that still exist in the
    /// same version; the others are deleted.
    pub fn load(&self, current: impl Fn(&str) -> Option<String>) {
        let mut entries = self.entries.lock().unwrap();
        for (dir, stored) in self.store.load_all() {
            let isolation = stored.isolation.parse::<Isolation>();
            match (current(&stored.action), isolation) {
                (Some(version), Ok(isolation)) if version == stored.version && self.cfg.enabled => {
                    entries.insert(
                        (stored.action.clone(), isolation),
                        Entry {
                            version,
                            dir,
                            state: State::Ready,
                            stored: Some(stored),
                            recording: None,
                            restores: 0,
                            fallbacks: 0,
                            last_restore: None,
                            failures: 0,
                        },
                    );
                }
                _ => store::remove(&dir),
            }
        }
    }

    /// Whether a snapshot of this action version should be built now; if so it is marked as
    /// building (the caller must end with [`built`](Self::built) or
    /// [`build_failed`](Self::build_failed)).
    #[cfg(test)]
    pub fn start_build(&self, action: &ActionSpec, isolation: Isolation) -> bool {
        self.start(
            action,
            &settings::settings_of(&action.annotations),
            isolation,
            false,
        )
    }

    /// [`start_build`](Self::start_build) with the settings the pool's technique choice gives
    /// the action (settings::effective).
    pub fn start_build_as(
        &self,
        action: &ActionSpec,
        settings: &Settings,
        isolation: Isolation,
    ) -> bool {
        self.start(action, settings, isolation, false)
    }

    /// Like [`start_build`](Self::start_build), for an operator's request: a failed snapshot
    /// is rebuilt now, its backoff forgotten.
    #[cfg(test)]
    pub fn request_build(&self, action: &ActionSpec, isolation: Isolation) -> bool {
        self.start(
            action,
            &settings::settings_of(&action.annotations),
            isolation,
            true,
        )
    }

    pub fn request_build_as(
        &self,
        action: &ActionSpec,
        settings: &Settings,
        isolation: Isolation,
    ) -> bool {
        self.start(action, settings, isolation, true)
    }

    fn start(
        &self,
        action: &ActionSpec,
        settings: &Settings,
        isolation: Isolation,
        requested: bool,
    ) -> bool {
        if !self.cfg.enabled || !settings.enabled() {
            return false;
        }
        let key = (action.fqn(), isolation);
        let mut entries = self.entries.lock().unwrap();
        // A rebuild of the same version keeps its history (restores, fallbacks).
        let (failures, restores, fallbacks, last_restore) = match entries.get(&key) {
            Some(e) if e.version == action.version => {
                match &e.state {
                    State::Building | State::Ready => return false,
                    State::Failed { at, .. }
                        if !requested && at.elapsed() < retry_after(e.failures) =>
                    {
                        return false
                    }
                    State::Failed { .. } => {}
                }
                let failures = if requested { 0 } else { e.failures };
                (failures, e.restores, e.fallbacks, e.last_restore.clone())
            }
            _ => (0, 0, 0, None),
        };
        let old = entries.insert(
            key,
            Entry {
                version: action.version.clone(),
                dir: self
                    .store
                    .dir(&action.fqn(), isolation.as_str(), &action.version),
                state: State::Building,
                stored: None,
                recording: None,
                restores,
                fallbacks,
                last_restore,
                failures,
            },
        );
        drop(entries);
        // An older version's files go now.
        if let Some(old) = old.filter(|o| o.version != action.version) {
            store::remove(&old.dir);
        }
        true
    }

    pub(in crate::pool) fn scratch(&self, fqn: &str) -> std::io::Result<PathBuf> {
        self.store.scratch(fqn)
    }

    pub(in crate::pool) fn built(
        &self,
        action: &ActionSpec,
        isolation: Isolation,
        scratch: &Path,
        info: SnapshotInfo,
    ) -> std::io::Result<()> {
        let stored = StoredEntry {
            action: action.fqn(),
            version: action.version.clone(),
            isolation: isolation.as_str().to_string(),
            created_ms: crate::now_ms(),
            snapshot: info,
            loading_set: None,
        };
        let key = (action.fqn(), isolation);
        let mut entries = self.entries.lock().unwrap();
        // Retired (updated, deleted) while building: not wanted any more.
        let wanted = matches!(entries.get(&key), Some(e) if e.version == action.version
            && matches!(e.state, State::Building));
        if !wanted {
            drop(entries);
            store::remove(scratch);
            return Ok(());
        }
        let dir = self.store.commit(scratch, &stored)?;
        let e = entries.get_mut(&key).expect("checked above");
        e.dir = dir;
        e.state = State::Ready;
        e.stored = Some(stored);
        Ok(())
    }

    pub(in crate::pool) fn build_failed(
        &self,
        action: &ActionSpec,
        isolation: Isolation,
        reason: String,
    ) {
        self.fail(&(action.fqn(), isolation), &action.version, reason, false);
    }

    /// Marks an entry failed (its files deleted); `fallback`: a restore failed on it.
    pub(in crate::pool) fn fail(&self, key: &Key, version: &str, reason: String, fallback: bool) {
        let mut entries = self.entries.lock().unwrap();
        let Some(e) = entries.get_mut(key).filter(|e| e.version == version) else {
            return;
        };
        e.state = State::Failed {
            reason,
            at: Instant::now(),
        };
        e.failures += 1;
        e.stored = None;
        e.recording = None;
        if fallback {
            e.fallbacks += 1;
        }
        let dir = e.dir.clone();
        drop(entries);
        store::remove(&dir);
    }

    /// How the next cold start of this action should restore, if it can: the mode asked for,
    /// except that the first restore of a snapshot without a loading set records one, and
    /// restores that need a loading set go lazy until it exists.
    #[cfg(test)]
    pub fn plan(&self, action: &ActionSpec, isolation: Isolation) -> Option<RestorePlan> {
        self.plan_as(
            action,
            &settings::settings_of(&action.annotations),
            isolation,
        )
    }

    /// [`plan`](Self::plan) with the settings the pool's technique choice gives the action.
    pub fn plan_as(
        &self,
        action: &ActionSpec,
        settings: &Settings,
        isolation: Isolation,
    ) -> Option<RestorePlan> {
        if !self.cfg.enabled {
            return None;
        }
        if !settings.enabled() {
            return None;
        }
        let wanted = settings.restore.unwrap_or(self.cfg.restore);
        let mut entries = self.entries.lock().unwrap();
        let e = entries.get_mut(&(action.fqn(), isolation))?;
        if e.version != action.version || !matches!(e.state, State::Ready) {
            return None;
        }
        let has_loading_set = e.stored.as_ref().is_some_and(|s| s.loading_set.is_some());
        let mode = if has_loading_set || !wanted.needs_loading_set() {
            wanted
        } else if e.recording.is_none() {
            e.recording = Some(String::new());
            RestoreMode::Record
        } else {
            RestoreMode::Lazy
        };
        Some(RestorePlan {
            image_dir: Store::image_dir(&e.dir),
            mode,
            version: e.version.clone(),
        })
    }

    pub(in crate::pool) fn restored(&self, key: &Key, version: &str, view: RestoreView) {
        let mut entries = self.entries.lock().unwrap();
        if let Some(e) = entries.get_mut(key).filter(|e| e.version == version) {
            e.restores += 1;
            e.failures = 0;
            if view.mode == RestoreMode::Record {
                e.recording = Some(view.instance.clone());
            }
            e.last_restore = Some(view);
        }
    }

    /// A record-mode restore that did not happen: another restore may record.
    pub(in crate::pool) fn recording_abandoned(&self, key: &Key, instance: Option<&str>) {
        let mut entries = self.entries.lock().unwrap();
        if let Some(e) = entries.get_mut(key) {
            let ours = match (&e.recording, instance) {
                (Some(r), Some(i)) => r == i,
                (Some(r), None) => r.is_empty(),
                (None, _) => false,
            };
            if ours {
                e.recording = None;
            }
        }
    }

    pub(in crate::pool) fn recorded(
        &self,
        key: &Key,
        version: &str,
        info: LoadingSetInfo,
    ) -> std::io::Result<()> {
        let mut entries = self.entries.lock().unwrap();
        let Some(e) = entries.get_mut(key).filter(|e| e.version == version) else {
            return Ok(());
        };
        e.recording = None;
        let Some(stored) = e.stored.as_mut() else {
            return Ok(());
        };
        stored.loading_set = Some(info);
        let (dir, stored) = (e.dir.clone(), stored.clone());
        drop(entries);
        self.store.update(&dir, &stored)
    }

    /// The action was updated or deleted, or its snapshots discarded: they go. Returns how
    /// many there were.
    pub fn forget(&self, fqn: &str) -> usize {
        let dirs: Vec<PathBuf> = {
            let mut entries = self.entries.lock().unwrap();
            let keys: Vec<Key> = entries.keys().filter(|k| k.0 == fqn).cloned().collect();
            keys.into_iter()
                .filter_map(|k| entries.remove(&k))
                .map(|e| e.dir)
                .collect()
        };
        for dir in &dirs {
            store::remove(dir);
        }
        dirs.len()
    }

    pub fn views(&self) -> Vec<SnapshotView> {
        let entries = self.entries.lock().unwrap();
        let mut views: Vec<SnapshotView> = entries
            .iter()
            .map(|((action, isolation), e)| {
                let (state, reason) = match &e.state {
                    State::Building => ("building", None),
                    State::Ready => ("ready", None),
                    State::Failed { reason, .. } => ("failed", Some(reason.clone())),
                };
                SnapshotView {
                    action: action.clone(),
                    version: e.version.clone(),
                    isolation: isolation.as_str().to_string(),
                    state: state.to_string(),
                    reason,
                    created_ms: e.stored.as_ref().map(|s| s.created_ms),
                    dir: e
                        .stored
                        .as_ref()
                        .map(|_| Store::image_dir(&e.dir).to_string_lossy().into_owned()),
                    snapshot: e.stored.as_ref().map(|s| s.snapshot.clone()),
                    loading_set: e.stored.as_ref().and_then(|s| s.loading_set.clone()),
                    recording: e.recording.clone().filter(|r| !r.is_empty()),
                    restores: e.restores,
                    fallbacks: e.fallbacks,
                    last_restore: e.last_restore.clone(),
                }
            })
            .collect();
        views.sort_by(|a, b| (&a.action, &a.isolation).cmp(&(&b.action, &b.isolation)));
        views
    }
}

fn retry_after(failures: u32) -> Duration {
    if failures <= 1 {
        return Duration::ZERO;
    }
    (RETRY_FIRST * 2u32.saturating_pow(failures - 2)).min(RETRY_MAX)
}

#[cfg(test)]
mod tests;
