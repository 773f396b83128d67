//! The daemon's persistent state: deployed actions and recent activation records, in SQLite.
//!
//! One writer connection behind a mutex (a single writer is what SQLite wants) and a small pool
//! of read-only connections over the WAL file, so reads, however slow, never hold up a write.
//! The daemon calls in from `spawn_blocking`.

mod actions;
mod activations;
mod budget;
mod files;
mod pool;
mod schema;
mod tenants;
mod unfinished;
mod writes;

pub use actions::{bump_patch, FIRST_VERSION};
pub use activations::{ActivationFilter, ActivationRow};
pub use files::open_in_state_dir;
pub use tenants::{KeyRow, NamespaceRow, Quotas};
pub use unfinished::Unfinished;

use anyhow::{bail, Context};
use icebox_core::now_ms;
use pool::ReadPool;
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// OpenWhisk's list paging: 30 entries by default, at most 200, and 0 meaning the maximum.
pub const DEFAULT_LIST_LIMIT: usize = 30;
pub const MAX_LIST_LIMIT: usize = 200;

/// Enough cached statements for every query this module issues, so none is ever re-prepared.
const STATEMENT_CACHE_CAPACITY: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The entity exists and the caller did not ask to overwrite it.
    #[error("{0}")]
    Conflict(String),
    #[error("registry database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored row that this code cannot decode.
    #[error("corrupt registry entry: {0}")]
    Corrupt(String),
}

pub struct Registry {
    // Dropped before the writer, so the writer is the last connection and folds the WAL back
    // into the database on close (read-only connections cannot).
    readers: ReadPool,
    writer: Mutex<Connection>,
    /// The database file (None in memory), whose size and its WAL's the byte budget bounds.
    path: Option<PathBuf>,
}

impl Registry {
    /// Opens (creating if needed) the registry file and brings its schema up to date. The file
    /// and its WAL are private to the daemon's user: they hold action code and parameters.
    pub fn open(path: &Path) -> anyhow::Result<Registry> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating registry directory {}", dir.display()))?;
        }
        let setup = || -> anyhow::Result<Registry> {
            files::create_private(path)?;
            let mut conn = Connection::open(path)?;
            schema::configure_file(&conn)?;
            if let Some(damage) = schema::damage(&conn)? {
                bail!(
                    "the registry {} is damaged (PRAGMA quick_check: {damage}): refusing to start \
                     on it, a write to a damaged page can lose activation records or actions. \
                     Stop here and restore the file from a backup (with its -wal file, if any); \
                     `sqlite3 {0} .recover` may salvage what it holds. Or move it aside and \
                     start once with --init-registry (ICEBOX_INIT_REGISTRY=true) to begin with \
                     an empty registry on purpose",
                    path.display()
                );
            }
            schema::enable_incremental_vacuum(&conn, path)?;
            schema::migrate(&mut conn)?;
            if let Err(e) = files::make_private(path) {
                // Not fatal: a file owned by another user still works, only its mode stays.
                tracing::warn!("cannot make {} private to this user: {e}", path.display());
            }
            let readers = ReadPool::open(path, pool::READERS, STATEMENT_CACHE_CAPACITY)?;
            let mut registry = Registry::new(conn, readers);
            registry.path = Some(path.to_path_buf());
            Ok(registry)
        };
        // SQLite opens lazily: a file that is not a database only fails at the first statement,
        // so every setup error is reported against the path.
        setup().with_context(|| format!("opening registry {}", path.display()))
    }

    /// A registry without a file (unit tests).
    #[cfg(test)]
    pub fn open_in_memory() -> anyhow::Result<Registry> {
        let mut conn = Connection::open_in_memory()?;
        schema::migrate(&mut conn)?;
        Ok(Registry::new(conn, ReadPool::none()))
    }

    fn new(conn: Connection, readers: ReadPool) -> Registry {
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        Registry {
            writer: Mutex::new(conn),
            readers,
            path: None,
        }
    }

    /// The writer connection.
    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave a half-applied change: rusqlite rolls
        // back an open transaction when it is dropped during unwinding.
        self.writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs a read on a pooled read-only connection (on the writer when there is no pool).
    fn read<R>(&self, f: impl FnOnce(&Connection) -> R) -> R {
        match self.readers.get() {
            Some(reader) => f(&reader),
            None => f(&self.conn()),
        }
    }

    /// This registry's identity, created on first use: the state directory's marker file
    /// names it, so a registry that went missing or was swapped is noticed.
    pub fn id(&self) -> Result<String, RegistryError> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('registry_id', ?1) ON CONFLICT (key) DO NOTHING",
            [icebox_core::ids::random_hex128()],
        )?;
        Ok(conn.query_row(
            "SELECT value FROM meta WHERE key = 'registry_id'",
            [],
            |r| r.get(0),
        )?)
    }
}

/// Applies OpenWhisk's paging rule to a requested limit.
pub fn effective_limit(requested: usize) -> usize {
    if requested == 0 {
        MAX_LIST_LIMIT
    } else {
        requested.min(MAX_LIST_LIMIT)
    }
}

/// SQLite integers are signed; timestamps and counts beyond i64 saturate instead of wrapping.
fn to_sql_int<T: TryInto<i64>>(v: T) -> i64 {
    v.try_into().unwrap_or(i64::MAX)
}

fn decode<T: serde::de::DeserializeOwned>(what: &str, json: &str) -> Result<T, RegistryError> {
    serde_json::from_str(json).map_err(|e| RegistryError::Corrupt(format!("{what}: {e}")))
}

fn encode<T: serde::Serialize>(value: &T) -> Result<String, RegistryError> {
    // The core types serialise infallibly (string keys, no non-finite floats from serde_json
    // values); an error here would be a bug in them, reported rather than unwrapped.
    serde_json::to_string(value).map_err(|e| RegistryError::Corrupt(format!("encoding: {e}")))
}

#[cfg(test)]
impl Registry {
    /// Runs `f` while a reader holds a snapshot taken before it (a slow page of activations):
    /// the WAL cannot be truncated meanwhile.
    pub(crate) fn with_snapshot<R>(&self, f: impl FnOnce() -> R) -> R {
        let reader = self.readers.get().expect("a file-backed registry");
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader
            .query_row("SELECT count(*) FROM activations", [], |r| r.get(0))
            .unwrap();
        let out = f();
        reader.execute_batch("COMMIT").unwrap();
        out
    }

    /// Makes every write fail as on a read-only database (a full disk fails the same way).
    pub(crate) fn set_writes_failing(&self, failing: bool) {
        self.conn()
            .pragma_update(None, "query_only", failing)
            .unwrap();
    }
}

// The daemon shares one Registry across blocking tasks.
const _: fn() = || {
    fn check<T: Send + Sync>() {}
    check::<Registry>();
};

#[cfg(test)]
pub(crate) mod testutil {
    use icebox_core::{
        ActionLimits, ActionSpec, ActivationRecord, ActivationResponse, ActivationStatus, Exec,
    };

    pub fn spec(namespace: &str, name: &str) -> ActionSpec {
        ActionSpec {
            namespace: namespace.into(),
            name: name.into(),
            exec: Exec {
                kind: "python:3".into(),
                code: "def main(args):\n    return args\n".into(),
                binary: false,
                main: None,
                sha256: None,
            },
            limits: ActionLimits::default(),
            parameters: vec![],
            annotations: vec![],
            version: "9.9.9".into(),
            updated: 0,
        }
    }

    pub fn record(namespace: &str, name: &str, id: &str, start: u64) -> ActivationRecord {
        ActivationRecord {
            namespace: namespace.into(),
            name: name.into(),
            version: "0.0.1".into(),
            subject: "guest".into(),
            activation_id: id.into(),
            start,
            end: start + 5,
            duration: 5,
            status_code: 0,
            response: ActivationResponse::new(
                ActivationStatus::Success,
                serde_json::json!({"ok": true}),
            ),
            logs: vec![format!("{start} stdout: hello")],
            annotations: vec![],
            publish: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::{record, spec};
    use super::*;

    #[test]
    fn limit_follows_openwhisk_paging() {
        assert_eq!(effective_limit(0), MAX_LIST_LIMIT);
        assert_eq!(effective_limit(7), 7);
        assert_eq!(effective_limit(10_000), MAX_LIST_LIMIT);
    }

    #[test]
    fn restart_keeps_actions_and_activations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("registry.db");
        {
            let reg = Registry::open(&path).unwrap();
            reg.put_action(spec("guest", "a"), false).unwrap();
            reg.put_action(spec("guest", "b"), false).unwrap();
            reg.put_action(spec("guest", "a"), true).unwrap();
            reg.insert_activation(&record("guest", "a", "id1", 100))
                .unwrap();
        }
        let reg = Registry::open(&path).unwrap();
        let all = reg.all_actions().unwrap();
        assert_eq!(
            all.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(all[0].version, "0.0.2");
        assert_eq!(
            reg.get_activation("guest", "id1").unwrap().unwrap(),
            record("guest", "a", "id1", 100)
        );
    }

    /// A reader inside a long transaction (a deep page, a slow client) must not hold up a
    /// deploy or an activation record: the write completes while the reader is still in it.
    #[test]
    fn writes_complete_while_a_read_is_in_progress() {
        use std::sync::mpsc;
        use std::time::Duration;
        let dir = tempfile::tempdir().unwrap();
        let reg = std::sync::Arc::new(Registry::open(&dir.path().join("icebox.db")).unwrap());
        reg.put_action(spec("guest", "a"), false).unwrap();
        let (reading_tx, reading_rx) = mpsc::channel();
        let (written_tx, written_rx) = mpsc::channel::<()>();
        let r = reg.clone();
        let reader = std::thread::spawn(move || {
            r.read(|conn| {
                conn.execute_batch("BEGIN").unwrap();
                let before: i64 = conn
                    .query_row("SELECT count(*) FROM actions", [], |r| r.get(0))
                    .unwrap();
                reading_tx.send(()).unwrap();
                // Only a deadlock breaker: with the writer blocked behind this reader, the
                // write never reports back and the reader gives up.
                let write_seen = written_rx.recv_timeout(Duration::from_secs(30)).is_ok();
                let inside: i64 = conn
                    .query_row("SELECT count(*) FROM actions", [], |r| r.get(0))
                    .unwrap();
                conn.execute_batch("COMMIT").unwrap();
                (write_seen, before, inside)
            })
        });
        reading_rx.recv().unwrap();
        reg.put_action(spec("guest", "b"), false).unwrap();
        reg.insert_activation(&record("guest", "b", "id1", 100))
            .unwrap();
        let _ = written_tx.send(());
        let (write_seen, before, inside) = reader.join().unwrap();
        assert!(write_seen, "the write waited for the reader to finish");
        assert_eq!((before, inside), (1, 1), "the reader kept its snapshot");
        assert!(
            reg.get_action("guest", "b").unwrap().is_some(),
            "a later read sees the write"
        );
    }

    #[test]
    fn non_sqlite_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.db");
        std::fs::write(&path, vec![b'x'; 8192]).unwrap();
        let err = Registry::open(&path)
            .err()
            .expect("opening garbage must fail");
        let msg = format!("{err:#}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains("not a database"), "{msg}");
    }

    /// Issue 18: garbage in the last page used to go unnoticed until records were lost.
    #[test]
    fn a_damaged_page_is_refused_at_open() {
        use std::io::{Seek, SeekFrom, Write};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.db");
        {
            let reg = Registry::open(&path).unwrap();
            for i in 0..50 {
                reg.insert_activation(&record("guest", "a", &format!("id{i}"), i))
                    .unwrap();
            }
        }
        let len = std::fs::metadata(&path).unwrap().len();
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(SeekFrom::Start(len - 4096)).unwrap();
        f.write_all(&(0..4096).map(|_| rand::random::<u8>()).collect::<Vec<_>>())
            .unwrap();
        drop(f);
        let msg = format!(
            "{:#}",
            Registry::open(&path)
                .err()
                .expect("a damaged file must be refused")
        );
        assert!(msg.contains("is damaged"), "{msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains("--init-registry"), "{msg}");
    }

    #[test]
    fn newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.db");
        drop(Registry::open(&path).unwrap());
        {
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "user_version", schema::CURRENT_VERSION + 1)
                .unwrap();
        }
        let msg = format!(
            "{:#}",
            Registry::open(&path).err().expect("newer schema must fail")
        );
        assert!(msg.contains("newer than this iceboxd supports"), "{msg}");
    }

    #[test]
    fn corrupt_row_is_reported_not_panicked() {
        let reg = Registry::open_in_memory().unwrap();
        reg.put_action(spec("guest", "a"), false).unwrap();
        reg.conn()
            .execute("UPDATE actions SET spec = '{not json'", [])
            .unwrap();
        assert!(matches!(
            reg.get_action("guest", "a"),
            Err(RegistryError::Corrupt(_))
        ));
    }
}
