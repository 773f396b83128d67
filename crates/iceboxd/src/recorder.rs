//! Stores activation records off the invocation path: a writer thread appends them to the
//! registry in batches, and records not yet written are served from memory, so a client that
//! reads its activation right after the response still finds it.
//!
//! An invocation answered 202 goes through here too, before the answer leaves: the writer
//! stores its id (as unfinished) in its next batch and only then lets the answer go, so a
//! crash cannot lose an id a client holds (see [`Recorder::accept`]).
//!
//! When the registry cannot be written (disk full, read-only file) nothing is dropped: the
//! records stay in memory, the writer retries with backoff until they go in, health reports
//! `degraded`, and past [`MAX_UNWRITTEN`] records (or [`MAX_UNWRITTEN_BYTES`]) new invocations
//! are refused rather than run and lost.

use crate::registry::{ActivationRow, Registry, Unfinished};
use icebox_core::{ActivationRecord, ActivationResponse, ActivationStatus, KeyValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Most records written in one transaction.
const BATCH: usize = 256;
/// And most bytes of records: the WAL holds a whole transaction, and results and logs can be
/// megabytes each. A single larger record still goes in alone.
const BATCH_BYTES: usize = 8 << 20;
/// Records held in memory, not yet in the registry, beyond which invocations are refused.
pub const MAX_UNWRITTEN: usize = 10_000;
/// The same bound in bytes of record JSON (logs and results make records large).
pub const MAX_UNWRITTEN_BYTES: usize = 256 << 20;
/// How long the writer gathers records before a transaction (group commit): a run of
/// activations costs one commit and one wake-up of the writer thread instead of one each.
/// Records are readable from memory meanwhile; a 202 waiting on its id cuts it short.
const GROUP_COMMIT: Duration = Duration::from_millis(5);
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
    /// Bytes of the registry's files (database and WAL), as of the last write.
    pub registry_bytes: Gauge,
    /// The byte budget of those files (`--registry-max-bytes`).
    pub registry_max_bytes: Gauge,
    /// Records whose logs were dropped to stay within the budget.
    pub logs_dropped: Counter,
    /// Records deleted to stay within the budget.
    pub records_dropped: Counter,
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

/// What the writer takes in, in the order it was handed over.
enum Entry {
    Record(Arc<ActivationRow>),
    /// An invocation about to be answered 202; `done` lets the answer go. (Boxed: records
    /// are the common entry, and every channel slot is as large as the largest variant.)
    Accepted(Box<Unfinished>, Option<oneshot::Sender<Result<(), String>>>),
}

impl Entry {
    /// An answer is waiting on it: it is written without gathering others first.
    fn is_urgent(&self) -> bool {
        matches!(self, Entry::Accepted(..))
    }

    fn bytes(&self) -> usize {
        match self {
            Entry::Record(row) => row.json.len(),
            Entry::Accepted(..) => 0,
        }
    }

    /// Lets a waiting 202 go: its id is in the registry, or (Err) only in memory, like the
    /// records the registry refuses.
    fn release(&mut self, outcome: Result<(), String>) {
        if let Entry::Accepted(_, done) = self {
            if let Some(done) = done.take() {
                let _ = done.send(outcome);
            }
        }
    }
}

pub struct Recorder {
    tx: Mutex<Option<Sender<Entry>>>,
    shared: Arc<Shared>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

struct Shared {
    unwritten: Mutex<Unwritten>,
    /// A WAL truncation failed (a reader's snapshot) and is retried while idle.
    wal_owed: std::sync::atomic::AtomicBool,
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
    /// `registry_max_bytes` bounds the registry's files (see [`Budget`]).
    pub fn start(
        registry: Arc<Registry>,
        metrics: RecorderMetrics,
        registry_max_bytes: u64,
    ) -> Recorder {
        Self::with_bounds(
            registry,
            metrics,
            MAX_UNWRITTEN,
            MAX_UNWRITTEN_BYTES,
            registry_max_bytes,
        )
    }

    fn with_bounds(
        registry: Arc<Registry>,
        metrics: RecorderMetrics,
        max_records: usize,
        max_bytes: usize,
        registry_max_bytes: u64,
    ) -> Recorder {
        metrics
            .registry_max_bytes
            .set(i64::try_from(registry_max_bytes).unwrap_or(i64::MAX));
        let budget = Budget::new(registry_max_bytes);
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared {
            unwritten: Mutex::default(),
            wal_owed: Default::default(),
            metrics,
            max_records,
            max_bytes,
        });
        let writer_shared = shared.clone();
        let writer = std::thread::Builder::new()
            .name("activation-writer".into())
            .spawn(move || write_loop(&registry, rx, &writer_shared, budget))
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
            self.shared
                .metrics
                .unwritten
                .set(i64::try_from(u.rows.len()).unwrap_or(i64::MAX));
        }
        let sent = self
            .tx
            .lock()
            .unwrap()
            .as_ref()
            .map(|tx| tx.send(Entry::Record(row)));
        if !matches!(sent, Some(Ok(()))) {
            tracing::error!(
                activation = %record.activation_id,
                "the activation writer has stopped; the record is kept in memory only"
            );
        }
    }

    /// Stores the id of an invocation about to be answered 202, in the writer's next batch;
    /// resolves once it is committed (Ok) or, while the registry refuses writes, kept in
    /// memory with the records (Err, the reason). A commit survives the daemon being killed.
    pub fn accept(
        &self,
        unfinished: Unfinished,
    ) -> impl std::future::Future<Output = Result<(), String>> {
        let (done, stored) = oneshot::channel();
        if let Some(tx) = self.tx.lock().unwrap().as_ref() {
            // On failure the entry, and `done` with it, is dropped: the await below says so.
            let _ = tx.send(Entry::Accepted(Box::new(unfinished), Some(done)));
        }
        self.wake_writer();
        async move {
            stored
                .await
                .unwrap_or_else(|_| Err("the activation writer has stopped".into()))
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

    /// Waits (up to `within`) until the namespace's records already answered are in the
    /// registry, for readers that query it: a list right after a blocking invoke shows it, a
    /// namespace delete takes it. The registry takes them within milliseconds when well; if
    /// it refuses writes, the caller goes on after `within` with what it has.
    pub async fn written_in(&self, namespace: &str, within: std::time::Duration) {
        let deadline = std::time::Instant::now() + within;
        while self.unwritten_in(namespace) > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
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

    /// The registry's files against their byte budget (for the health view).
    pub fn registry_usage(&self, registry: &Registry) -> icebox_core::api::RegistryUsage {
        let m = &self.shared.metrics;
        icebox_core::api::RegistryUsage {
            bytes: registry.file_bytes(),
            max_bytes: u64::try_from(m.registry_max_bytes.get()).unwrap_or(0),
            logs_dropped: m.logs_dropped.get(),
            records_dropped: m.records_dropped.get(),
        }
    }

    /// Ends the writer's gathering of a group commit now.
    fn wake_writer(&self) {
        if let Some(writer) = self.writer.lock().unwrap().as_ref() {
            writer.thread().unpark();
        }
    }

    /// Write everything accepted so far and stop the writer (daemon shutdown).
    pub fn flush_and_stop(&self) {
        drop(self.tx.lock().unwrap().take());
        self.wake_writer();
        if let Some(writer) = self.writer.lock().unwrap().take() {
            let _ = writer.join();
        }
    }
}

/// What an activation a crash left unfinished (see [`Recorder::accept`]) says to its client.
pub const UNFINISHED_ERROR: &str = "The node restarted before the activation ended (it was \
     killed or crashed): its result and logs are lost, and the action may or may not have run \
     to completion.";

/// At start, records every activation an earlier run answered 202 and did not finish as a
/// `whisk internal error`; returns how many.
pub fn settle_unfinished(registry: &Registry) -> Result<usize, crate::registry::RegistryError> {
    registry.settle_unfinished(|u| {
        ActivationRow::new(&ActivationRecord {
            namespace: u.namespace.clone(),
            name: u.name.clone(),
            version: u.version.clone(),
            subject: u.subject.clone(),
            activation_id: u.activation_id.clone(),
            start: u.start,
            // When it ended is not known; the record claims no duration.
            end: u.start,
            duration: 0,
            status_code: ActivationStatus::InternalError.code(),
            response: ActivationResponse::new(
                ActivationStatus::InternalError,
                serde_json::json!({ "error": UNFINISHED_ERROR }),
            ),
            logs: vec![],
            annotations: vec![
                KeyValue {
                    key: "path".into(),
                    value: serde_json::json!(format!("{}/{}", u.namespace, u.name)),
                },
                KeyValue {
                    key: "icebox.error".into(),
                    value: serde_json::json!(icebox_core::ErrorKind::Unfinished),
                },
            ],
            publish: false,
        })
    })
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Unwritten> {
        self.unwritten.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets rows now in the registry (after their commit, so a reader always finds them).
    fn written<'a>(&self, rows: impl Iterator<Item = &'a Arc<ActivationRow>>) {
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
        self.metrics
            .unwritten
            .set(i64::try_from(u.rows.len()).unwrap_or(i64::MAX));
    }
}

fn write_loop(registry: &Registry, rx: Receiver<Entry>, shared: &Shared, mut budget: Budget) {
    let mut backlog: Vec<Entry> = Vec::new();
    let mut retry = FIRST_RETRY;
    let mut stopping: Option<Instant> = None;
    // A budget lowered since the last run applies at once.
    budget.enforce(registry, shared);
    loop {
        if backlog.is_empty() {
            // While a WAL truncation is owed, idle time is spent retrying it.
            let next = if budget.wal_owed {
                match rx.recv_timeout(WAL_RETRY) {
                    Ok(entry) => Ok(entry),
                    Err(RecvTimeoutError::Timeout) => {
                        budget.truncate_wal(registry, shared);
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => Err(()),
                }
            } else {
                rx.recv().map_err(|_| ())
            };
            match next {
                Ok(entry) => backlog.push(entry),
                Err(()) => return,
            }
        }
        gather(&rx, &mut backlog);
        let error = match write_all(registry, &mut backlog, shared) {
            Ok(()) => {
                if shared.lock().failing.take().is_some() {
                    tracing::info!("activation records are written to the registry again");
                }
                retry = FIRST_RETRY;
                budget.enforce(registry, shared);
                continue;
            }
            Err(e) => e,
        };
        shared.metrics.write_failures.inc();
        // The 202s waiting on this backlog go now rather than after the registry recovers.
        let reason = error.to_string();
        backlog
            .iter_mut()
            .for_each(|e| e.release(Err(reason.clone())));
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

/// Takes in what arrives within [`GROUP_COMMIT`] of the first entry, parked meanwhile (a
/// sender does not wake a parked thread: that is the point), until a batch is full or an
/// urgent entry comes ([`Recorder::accept`] unparks the writer for it).
fn gather(rx: &Receiver<Entry>, backlog: &mut Vec<Entry>) {
    let until = Instant::now() + GROUP_COMMIT;
    loop {
        backlog.extend(rx.try_iter());
        let now = Instant::now();
        if now >= until || backlog.len() >= BATCH || backlog.iter().any(Entry::is_urgent) {
            return;
        }
        std::thread::park_timeout(until - now);
    }
}

/// How often an owed WAL truncation is retried while the writer is idle.
const WAL_RETRY: Duration = Duration::from_millis(50);

/// Keeps the registry's files (database and WAL) within `--registry-max-bytes`: after every
/// batch, data beyond the target goes (oldest logs, then oldest records) and the WAL is
/// truncated when the files are over the budget. A truncation that a reader's snapshot
/// blocks is owed, and retried while idle until it succeeds: nothing else would shrink the
/// WAL, and the files would stay over the budget.
struct Budget {
    max_bytes: u64,
    wal_owed: bool,
}

impl Budget {
    fn new(max_bytes: u64) -> Budget {
        Budget {
            max_bytes,
            wal_owed: false,
        }
    }

    /// The data's share of the budget; the rest is room for the WAL between truncations (a
    /// batch, and SQLite's auto-checkpoint interval of about 4 MiB).
    fn target(&self) -> u64 {
        let wal_room = (self.max_bytes / 4).min(8 * BATCH_BYTES as u64);
        self.max_bytes - wal_room
    }

    fn enforce(&mut self, registry: &Registry, shared: &Shared) {
        match registry.shrink_to(self.target()) {
            Ok(dropped) if dropped.logs > 0 || dropped.records > 0 => {
                tracing::info!(
                    logs = dropped.logs,
                    records = dropped.records,
                    "the registry is over its byte budget of {} bytes: dropped the logs of the \
                     oldest records, then the oldest records",
                    self.max_bytes
                );
                shared.metrics.logs_dropped.inc_by(dropped.logs);
                shared.metrics.records_dropped.inc_by(dropped.records);
                self.wal_owed = true;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("cannot bring the registry within its byte budget: {e}"),
        }
        if registry.file_bytes() > self.max_bytes {
            self.wal_owed = true;
        }
        if self.wal_owed {
            self.truncate_wal(registry, shared);
        }
        shared
            .metrics
            .registry_bytes
            .set(i64::try_from(registry.file_bytes()).unwrap_or(i64::MAX));
    }

    fn truncate_wal(&mut self, registry: &Registry, shared: &Shared) {
        match registry.truncate_wal() {
            Ok(done) => self.wal_owed = !done,
            Err(e) => {
                tracing::warn!("cannot truncate the registry's WAL: {e}");
                self.wal_owed = false;
            }
        }
        shared
            .wal_owed
            .store(self.wal_owed, std::sync::atomic::Ordering::Relaxed);
        shared
            .metrics
            .registry_bytes
            .set(i64::try_from(registry.file_bytes()).unwrap_or(i64::MAX));
    }
}

/// Writes the backlog in batches, oldest first; what was written leaves it, what was not stays.
fn write_all(
    registry: &Registry,
    backlog: &mut Vec<Entry>,
    shared: &Shared,
) -> Result<(), crate::registry::RegistryError> {
    while !backlog.is_empty() {
        let n = batch_len(backlog);
        let mut rows = Vec::new();
        let mut marks = Vec::new();
        for entry in &backlog[..n] {
            match entry {
                Entry::Record(row) => rows.push(row.clone()),
                Entry::Accepted(unfinished, _) => marks.push(&**unfinished),
            }
        }
        let duplicates = registry.write_batch(&rows, &marks)?;
        for id in duplicates {
            tracing::warn!(activation = %id, "an activation record with this id is already stored; kept the stored one");
        }
        shared.written(rows.iter());
        backlog.drain(..n).for_each(|mut e| e.release(Ok(())));
    }
    Ok(())
}

/// How many entries of the backlog go in the next transaction.
fn batch_len(backlog: &[Entry]) -> usize {
    let mut bytes = 0;
    let n = backlog
        .iter()
        .take(BATCH)
        .take_while(|e| {
            let room = bytes == 0 || bytes + e.bytes() <= BATCH_BYTES;
            bytes += e.bytes();
            room
        })
        .count();
    n.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let recorder = Recorder::start(registry.clone(), RecorderMetrics::default(), u64::MAX);
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
        let recorder = Recorder::start(registry, RecorderMetrics::default(), u64::MAX);
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
        let recorder =
            Recorder::with_bounds(registry.clone(), metrics.clone(), 3, usize::MAX, u64::MAX);
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

    fn unfinished(id: &str) -> Unfinished {
        Unfinished {
            activation_id: id.into(),
            namespace: "guest".into(),
            name: "a".into(),
            version: "0.0.1".into(),
            subject: "guest".into(),
            start: 1,
        }
    }

    /// A 202 goes once its id is committed: a crash after it leaves a record at the next start.
    #[test]
    fn an_accepted_id_is_committed_before_its_answer_goes() {
        let registry = Arc::new(Registry::open_in_memory().unwrap());
        let recorder = Recorder::start(registry.clone(), RecorderMetrics::default(), u64::MAX);
        futures::executor::block_on(recorder.accept(unfinished("u"))).unwrap();
        let settled = registry
            .settle_unfinished(|u| {
                let mut rec = record(&u.activation_id);
                rec.logs = vec!["settled".into()];
                ActivationRow::new(&rec)
            })
            .unwrap();
        assert_eq!(
            settled, 1,
            "the id was in the registry when accept resolved"
        );
        recorder.flush_and_stop();
    }

    /// While the registry refuses writes a 202 is not held back: its id stays in memory with
    /// the records, and goes in when the registry takes writes again.
    #[test]
    fn an_accepted_id_waits_in_memory_while_the_registry_refuses() {
        let registry = Arc::new(Registry::open_in_memory().unwrap());
        registry.set_writes_failing(true);
        let recorder = Recorder::start(registry.clone(), RecorderMetrics::default(), u64::MAX);
        let outcome = futures::executor::block_on(recorder.accept(unfinished("u")));
        assert!(outcome.unwrap_err().contains("readonly"));
        registry.set_writes_failing(false);
        recorder.flush_and_stop();
        let settled = registry
            .settle_unfinished(|u| ActivationRow::new(&record(&u.activation_id)))
            .unwrap();
        assert_eq!(settled, 1, "the id went in once the registry took writes");
    }

    #[test]
    fn large_records_are_written_a_few_at_a_time() {
        let mut big = record("big");
        big.logs = vec!["x".repeat(BATCH_BYTES / 3)];
        let row = Arc::new(ActivationRow::new(&big).unwrap());
        let backlog: Vec<_> = (0..10).map(|_| Entry::Record(row.clone())).collect();
        assert_eq!(batch_len(&backlog), 2);
        let mut huge = record("huge");
        huge.logs = vec!["x".repeat(BATCH_BYTES * 2)];
        let huge = Entry::Record(Arc::new(ActivationRow::new(&huge).unwrap()));
        assert_eq!(
            batch_len(&[huge]),
            1,
            "a record larger than a batch goes alone"
        );
    }

    /// Issue 18's flake: a truncation a reader blocked was never retried, and the files
    /// stayed over the budget. Once the reader is gone the idle writer truncates by itself.
    #[test]
    fn a_truncation_a_reader_blocked_is_retried_while_idle() {
        const BUDGET: u64 = 4 << 20;
        let dir = tempfile::tempdir().unwrap();
        let registry = Arc::new(Registry::open(&dir.path().join("icebox.db")).unwrap());
        let metrics = RecorderMetrics::default();
        let recorder = Recorder::start(registry.clone(), metrics.clone(), BUDGET);
        registry.with_snapshot(|| {
            for i in 0..8 {
                let mut big = record(&format!("{i:032x}"));
                big.logs = vec!["l".repeat(1 << 20)];
                recorder.record(big);
            }
            wait_until("the records are written", || metrics.unwritten.get() == 0);
            wait_until("a truncation to fail", || {
                recorder
                    .shared
                    .wal_owed
                    .load(std::sync::atomic::Ordering::Relaxed)
            });
            assert!(metrics.logs_dropped.get() > 0);
            assert!(
                registry.file_bytes() > BUDGET,
                "the reader's snapshot keeps the WAL: {}",
                registry.file_bytes()
            );
        });
        // No write comes after the reader: only the idle retry can truncate.
        wait_until("the files are within the budget", || {
            registry.file_bytes() <= BUDGET
        });
        recorder.flush_and_stop();
    }

    #[test]
    fn the_byte_bound_refuses_too() {
        let registry = Arc::new(Registry::open_in_memory().unwrap());
        registry.set_writes_failing(true);
        let recorder = Recorder::with_bounds(
            registry,
            RecorderMetrics::default(),
            usize::MAX,
            10,
            u64::MAX,
        );
        recorder.record(record("big"));
        assert!(recorder.admit().is_err());
    }
}
