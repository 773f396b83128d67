//! Stores activation records off the invocation path: a writer thread appends them to the
//! registry in batches, and records not yet written are served from memory, so a client that
//! reads its activation right after the response still finds it.
//!
//! When the registry cannot be written (disk full, read-only file) nothing is dropped: the
//! records stay in memory, the writer retries with backoff until they go in, health reports
//! `degraded`, and past [`MAX_UNWRITTEN`] records (or [`MAX_UNWRITTEN_BYTES`]) new invocations
//! are refused rather than run and lost.

use crate::registry::{ActivationRow, Registry};
use icebox_core::ActivationRecord;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Most records written in one transaction.
const BATCH: usize = 256;
/// Records held in memory, not yet in the registry, beyond which invocations are refused.
pub const MAX_UNWRITTEN: usize = 10_000;
/// The same bound in bytes of record JSON (logs and results make records large).
pub const MAX_UNWRITTEN_BYTES: usize = 256 << 20;
const FIRST_RETRY: Duration = Duration::from_millis(100);
const LAST_RETRY: Duration = Duration::from_secs(5);
/// At shutdown, how long the writer keeps retrying records the registry refuses.
const SHUTDOWN_RETRIES: Duration = Duration::from_secs(3);

/// Metrics the recorder keeps up to date.
#[derive(Clone, Default)]
pub struct RecorderMetrics {
    /// Records held in memory, not yet in the registry.
    pub unwritten: Gauge,
    /// Failed attempts to write records to the registry.
    pub write_failures: Counter,
}

/// Why a new invocation is refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "{records} activation records ({bytes} bytes) are waiting to be written to the registry, \
     the most this node holds in memory; it takes no new invocations until they are written \
     ({reason})"
)]
pub struct Backlogged {
    pub records: usize,
    pub bytes: usize,
    pub reason: String,
}

pub struct Recorder {
    tx: Mutex<Option<Sender<Arc<ActivationRow>>>>,
    shared: Arc<Shared>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

struct Shared {
    unwritten: Mutex<Unwritten>,
    metrics: RecorderMetrics,
    max_records: usize,
    max_bytes: usize,
}

#[derive(Default)]
struct Unwritten {
    rows: HashMap<String, Arc<ActivationRow>>,
    bytes: usize,
    /// The last write error, while records are still waiting because of it.
    failing: Option<String>,
}

impl Recorder {
    pub fn start(registry: Arc<Registry>, metrics: RecorderMetrics) -> Recorder {
        Self::with_bounds(registry, metrics, MAX_UNWRITTEN, MAX_UNWRITTEN_BYTES)
    }

    fn with_bounds(
        registry: Arc<Registry>,
        metrics: RecorderMetrics,
        max_records: usize,
        max_bytes: usize,
    ) -> Recorder {
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared {
            unwritten: Mutex::default(),
            metrics,
            max_records,
            max_bytes,
        });
        let writer_shared = shared.clone();
        let writer = std::thread::Builder::new()
            .name("activation-writer".into())
            .spawn(move || write_loop(&registry, rx, &writer_shared))
            .expect("spawning the activation writer thread");
        Recorder {
            tx: Mutex::new(Some(tx)),
            shared,
            writer: Mutex::new(Some(writer)),
        }
    }

    /// Whether a new invocation may run: not while the records held in memory are at the bound.
    pub fn admit(&self) -> Result<(), Backlogged> {
        let u = self.shared.lock();
        if u.rows.len() < self.shared.max_records && u.bytes < self.shared.max_bytes {
            return Ok(());
        }
        Err(Backlogged {
            records: u.rows.len(),
            bytes: u.bytes,
            reason: u
                .failing
                .clone()
                .unwrap_or_else(|| "the registry is slow to write".into()),
        })
    }

    /// Takes a record in; it is readable from memory at once and written soon after.
    pub fn record(&self, record: ActivationRecord) {
        let row = match ActivationRow::new(&record) {
            Ok(row) => Arc::new(row),
            Err(e) => {
                tracing::error!(activation = %record.activation_id, "cannot encode the activation record: {e}");
                return;
            }
        };
        {
            let mut u = self.shared.lock();
            u.bytes += row.json.len();
            if let Some(old) = u.rows.insert(row.activation_id.clone(), row.clone()) {
                u.bytes -= old.json.len();
            }
            self.shared.metrics.unwritten.set(u.rows.len() as i64);
        }
        let sent = self.tx.lock().unwrap().as_ref().map(|tx| tx.send(row));
        if !matches!(sent, Some(Ok(()))) {
            tracing::error!(
                activation = %record.activation_id,
                "the activation writer has stopped; the record is kept in memory only"
            );
        }
    }

    /// A record accepted but not yet in the registry.
    pub fn pending(&self, namespace: &str, id: &str) -> Option<ActivationRecord> {
        let row = self
            .shared
            .lock()
            .rows
            .get(id)
            .filter(|r| r.namespace == namespace)
            .cloned()?;
        row.record().ok()
    }

    /// Records of a namespace accepted but not yet in the registry.
    pub fn unwritten_in(&self, namespace: &str) -> usize {
        self.shared
            .lock()
            .rows
            .values()
            .filter(|r| r.namespace == namespace)
            .count()
    }

    /// Why the node is degraded, if it is: records the registry refuses to take.
    pub fn degraded(&self) -> Option<String> {
        let u = self.shared.lock();
        let error = u.failing.as_ref()?;
        let full = u.rows.len() >= self.shared.max_records || u.bytes >= self.shared.max_bytes;
        Some(format!(
            "activation records cannot be written to the registry ({error}); {} record(s) held in \
             memory and retried{}",
            u.rows.len(),
            if full {
                "; new invocations are refused (503) until they are written"
            } else {
                ""
            }
        ))
    }

    /// Write everything accepted so far and stop the writer (daemon shutdown).
    pub fn flush_and_stop(&self) {
        drop(self.tx.lock().unwrap().take());
        if let Some(writer) = self.writer.lock().unwrap().take() {
            let _ = writer.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Unwritten> {
        self.unwritten.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets rows now in the registry (after their commit, so a reader always finds them).
    fn written(&self, rows: &[Arc<ActivationRow>]) {
        let mut u = self.lock();
        for row in rows {
            // The same id taken in again meanwhile (it cannot be, ids are random) stays.
            if u.rows
                .get(&row.activation_id)
                .is_some_and(|held| Arc::ptr_eq(held, row))
            {
                u.rows.remove(&row.activation_id);
                u.bytes -= row.json.len();
            }
        }
        self.metrics.unwritten.set(u.rows.len() as i64);
    }
}

fn write_loop(registry: &Registry, rx: Receiver<Arc<ActivationRow>>, shared: &Shared) {
    let mut backlog: Vec<Arc<ActivationRow>> = Vec::new();
    let mut retry = FIRST_RETRY;
    let mut stopping: Option<Instant> = None;
    loop {
        if backlog.is_empty() {
            match rx.recv() {
                Ok(row) => backlog.push(row),
                Err(_) => return,
            }
        }
        backlog.extend(rx.try_iter());
        let error = match write_all(registry, &mut backlog, shared) {
            Ok(()) => {
                if shared.lock().failing.take().is_some() {
                    tracing::info!("activation records are written to the registry again");
                }
                retry = FIRST_RETRY;
                continue;
            }
            Err(e) => e,
        };
        shared.metrics.write_failures.inc();
        let first = shared.lock().failing.replace(error.to_string()).is_none();
        if first {
            tracing::error!(
                "cannot write activation records to the registry: {error}; {} kept in memory, retrying",
                backlog.len()
            );
        }
        if stopping.is_some_and(|deadline| Instant::now() >= deadline) {
            tracing::error!(
                "shutting down with {} activation record(s) the registry would not take: they are lost ({error})",
                backlog.len()
            );
            return;
        }
        // Wait before retrying, still taking records in (and noticing shutdown).
        match stopping {
            Some(deadline) => {
                std::thread::sleep(retry.min(deadline.saturating_duration_since(Instant::now())))
            }
            None => match rx.recv_timeout(retry) {
                Ok(row) => backlog.push(row),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    stopping = Some(Instant::now() + SHUTDOWN_RETRIES)
                }
            },
        }
        retry = (retry * 2).min(LAST_RETRY);
    }
}

/// Writes the backlog in batches, oldest first; what was written leaves it, what was not stays.
fn write_all(
    registry: &Registry,
    backlog: &mut Vec<Arc<ActivationRow>>,
    shared: &Shared,
) -> Result<(), crate::registry::RegistryError> {
    while !backlog.is_empty() {
        let n = backlog.len().min(BATCH);
        let duplicates = registry.insert_activations(&backlog[..n])?;
        for id in duplicates {
            tracing::warn!(activation = %id, "an activation record with this id is already stored; kept the stored one");
        }
        let written: Vec<_> = backlog.drain(..n).collect();
        shared.written(&written);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::{ActivationResponse, ActivationStatus};

    fn record(id: &str) -> ActivationRecord {
        ActivationRecord {
            namespace: "guest".into(),
            name: "a".into(),
            version: "0.0.1".into(),
            subject: "guest".into(),
            activation_id: id.into(),
            start: 1,
            end: 2,
            duration: 1,
            status_code: 0,
            response: ActivationResponse::new(ActivationStatus::Success, serde_json::json!({})),
            logs: vec![],
            annotations: vec![],
            publish: false,
        }
    }

    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn every_record_reaches_the_registry() {
        let registry = Arc::new(Registry::open_in_memory().unwrap());
        let recorder = Recorder::start(registry.clone(), RecorderMetrics::default());
        for i in 0..1000 {
            recorder.record(record(&format!("{i:032x}")));
        }
        recorder.flush_and_stop();
        for i in [0, 500, 999] {
            assert!(registry
                .get_activation("guest", &format!("{i:032x}"))
                .unwrap()
                .is_some());
        }
        assert!(recorder.shared.lock().rows.is_empty());
    }

    #[test]
    fn pending_records_are_visible_only_in_their_namespace() {
        let registry = Arc::new(Registry::open_in_memory().unwrap());
        registry.set_writes_failing(true);
        let recorder = Recorder::start(registry, RecorderMetrics::default());
        recorder.record(record("x"));
        assert!(recorder.pending("guest", "x").is_some());
        assert!(recorder.pending("other", "x").is_none());
    }

    /// The registry refuses writes for a while: nothing is lost, health says why, past the
    /// bound invocations are refused, and once it takes writes again everything goes in.
    #[test]
    fn records_the_registry_refuses_are_kept_and_retried() {
        let registry = Arc::new(Registry::open_in_memory().unwrap());
        let metrics = RecorderMetrics::default();
        let recorder = Recorder::with_bounds(registry.clone(), metrics.clone(), 3, usize::MAX);
        registry.set_writes_failing(true);
        for id in ["a", "b", "c"] {
            recorder.admit().unwrap();
            recorder.record(record(id));
        }
        wait_until("the failure is seen", || recorder.degraded().is_some());
        let reason = recorder.degraded().unwrap();
        assert!(
            reason.contains("readonly") && reason.contains("3 record(s)"),
            "{reason}"
        );
        assert!(metrics.write_failures.get() >= 1);
        assert_eq!(metrics.unwritten.get(), 3);
        for id in ["a", "b", "c"] {
            assert_eq!(recorder.pending("guest", id).unwrap().activation_id, id);
        }
        let refused = recorder.admit().unwrap_err();
        assert_eq!(refused.records, 3);
        assert!(refused.to_string().contains("readonly"), "{refused}");

        registry.set_writes_failing(false);
        wait_until("the backlog is written", || recorder.degraded().is_none());
        assert_eq!(metrics.unwritten.get(), 0);
        recorder.admit().unwrap();
        for id in ["a", "b", "c"] {
            assert!(
                registry.get_activation("guest", id).unwrap().is_some(),
                "{id}"
            );
        }
        recorder.flush_and_stop();
    }

    #[test]
    fn the_byte_bound_refuses_too() {
        let registry = Arc::new(Registry::open_in_memory().unwrap());
        registry.set_writes_failing(true);
        let recorder = Recorder::with_bounds(registry, RecorderMetrics::default(), usize::MAX, 10);
        recorder.record(record("big"));
        assert!(recorder.admit().is_err());
    }
}
