//! The registry's byte budget (`--registry-max-bytes`): when its data outgrows the budget, the
//! oldest records' logs go first, then the oldest records; freed pages are given back to the
//! file system (incremental vacuum) and the WAL is truncated, so the files themselves shrink.

use super::{Registry, RegistryError};
use icebox_core::units::MIB;
use rusqlite::{params, Connection, OptionalExtension};
use std::time::Duration;

/// Most records handled per step; the space they free is measured before the next step.
const MAX_STEP: i64 = 256;
/// What replaces the logs of a record that lost them (after an ISO-8601 time, as log lines).
const LOGS_DROPPED: &str =
    "stderr: [icebox] logs dropped: the registry was over its byte budget (--registry-max-bytes)";

/// What one enforcement removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// Records whose logs were dropped.
    pub logs: u64,
    /// Records deleted.
    pub records: u64,
}

impl Registry {
    /// Bytes of the registry's files on disk: the database and its WAL.
    pub fn file_bytes(&self) -> u64 {
        let Some(db) = &self.path else { return 0 };
        [db.clone(), super::files::wal_path(db, "-wal")]
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum()
    }

    /// Brings the data within `target` bytes (oldest logs first, then oldest records) and
    /// gives freed pages back to the file system. The WAL is left to [`Self::truncate_wal`].
    pub fn shrink_to(&self, target: u64) -> Result<Dropped, RegistryError> {
        let mut conn = self.conn();
        let mut dropped = Dropped::default();
        // Counted only when over: this runs after every batch, and counting walks an index.
        let mut records: Option<i64> = None;
        loop {
            let live = live_bytes(&conn)?;
            if live <= target {
                break;
            }
            let records = match records {
                Some(n) => n,
                None => {
                    let n: i64 =
                        conn.query_row("SELECT count(*) FROM activations", [], |r| r.get(0))?;
                    *records.insert(n)
                }
            };
            // As many records as, at their average size, hold the excess: few large records
            // are not all stripped at once, many small ones not one transaction each.
            let average = live / u64::try_from(records).unwrap_or(0).max(1);
            let step = i64::try_from((live - target) / average.max(1) + 1)
                .unwrap_or(MAX_STEP)
                .min(MAX_STEP);
            let tx = conn.transaction()?;
            let through: i64 = tx
                .query_row(
                    "SELECT value FROM meta WHERE key = 'logs_dropped_through'",
                    [],
                    |r| r.get::<_, String>(0),
                )
                .optional()?
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let last: Option<i64> = tx
                .query_row(
                    "SELECT max(seq) FROM (SELECT seq FROM activations WHERE seq > ?1
                       ORDER BY seq LIMIT ?2)",
                    params![through, step],
                    |r| r.get(0),
                )
                .optional()?
                .flatten();
            match last {
                Some(last) => {
                    dropped.logs += tx
                        .prepare_cached(
                            "UPDATE activations
                                SET record = json_set(record, '$.logs', json_array(
                                      strftime('%Y-%m-%dT%H:%M:%fZ', 'now') || ' ' || ?3))
                              WHERE seq > ?1 AND seq <= ?2
                                AND json_array_length(record, '$.logs') > 0",
                        )?
                        .execute(params![through, last, LOGS_DROPPED])?
                        as u64;
                    tx.execute(
                        "INSERT INTO meta (key, value) VALUES ('logs_dropped_through', ?1)
                           ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        [last.to_string()],
                    )?;
                }
                None => {
                    let deleted = tx
                        .prepare_cached(
                            "DELETE FROM activations WHERE seq IN
                               (SELECT seq FROM activations ORDER BY seq LIMIT ?1)",
                        )?
                        .execute([step])? as u64;
                    if deleted == 0 {
                        // Only actions are left, and they are never dropped.
                        tx.commit()?;
                        break;
                    }
                    dropped.records += deleted;
                }
            }
            tx.commit()?;
        }
        // Also space freed by other deletions (count and age retention), once worth the moves.
        if dropped != Dropped::default() || free_bytes(&conn)? >= VACUUM_AFTER {
            // Each step of the pragma gives back one page: run it to the end.
            let mut vacuum = conn.prepare("PRAGMA incremental_vacuum")?;
            let mut steps = vacuum.query([])?;
            while steps.next()?.is_some() {}
        }
        Ok(dropped)
    }

    /// Folds the WAL into the database and truncates it to nothing. False when a reader's
    /// snapshot still needs the WAL: the caller tries again later (never waiting here, which
    /// would hold up every write behind a slow reader).
    pub fn truncate_wal(&self) -> Result<bool, RegistryError> {
        let conn = self.conn();
        conn.busy_timeout(Duration::ZERO)?;
        let checkpoint = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            r.get::<_, i64>(0)
        });
        conn.busy_timeout(super::schema::BUSY_TIMEOUT)?;
        match checkpoint {
            Ok(busy) => Ok(busy == 0),
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

/// Free pages worth giving back to the file system even when nothing was dropped here.
const VACUUM_AFTER: u64 = MIB;

fn pragma(conn: &Connection, name: &str) -> rusqlite::Result<i64> {
    conn.prepare_cached(&format!("PRAGMA {name}"))?
        .query_row([], |r| r.get(0))
}

fn free_bytes(conn: &Connection) -> rusqlite::Result<u64> {
    let bytes = pragma(conn, "freelist_count")? * pragma(conn, "page_size")?;
    Ok(u64::try_from(bytes).unwrap_or(0))
}

/// Bytes of pages in use (free pages are reused, and given back by the incremental vacuum).
fn live_bytes(conn: &Connection) -> rusqlite::Result<u64> {
    let pages = pragma(conn, "page_count")? - pragma(conn, "freelist_count")?;
    Ok(u64::try_from(pages * pragma(conn, "page_size")?).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::record;
    use super::*;
    use crate::registry::ActivationRow;

    fn big(id: &str, seq: u64) -> ActivationRow {
        let mut rec = record("guest", "a", id, seq);
        rec.logs = vec!["l".repeat(200_000)];
        rec.response.result = serde_json::json!({"r": "r".repeat(100_000)});
        ActivationRow::new(&rec).unwrap()
    }

    /// Logs of the oldest go first, then the oldest records; the file shrinks with the data.
    #[test]
    fn over_budget_the_oldest_logs_go_first_then_the_oldest_records() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::open(&dir.path().join("icebox.db")).unwrap();
        let rows: Vec<_> = (0..20).map(|i| big(&format!("id{i}"), i)).collect();
        reg.insert_activations(&rows).unwrap();
        let full = live_bytes(&reg.conn()).unwrap();
        assert!(full > 6_000_000, "{full}");

        // Within reach by dropping logs alone (each record holds 2/3 of its bytes in logs).
        let dropped = reg.shrink_to(full - 1_500_000).unwrap();
        assert_eq!(dropped.records, 0);
        assert!(dropped.logs >= 7, "{dropped:?}");
        let first = reg.get_activation("guest", "id0").unwrap().unwrap();
        assert_eq!(first.logs.len(), 1);
        assert!(first.logs[0].ends_with(LOGS_DROPPED), "{:?}", first.logs);
        assert_eq!(
            first.response.result["r"].as_str().map(str::len),
            Some(100_000),
            "the result stays"
        );
        let newest = reg.get_activation("guest", "id19").unwrap().unwrap();
        assert_eq!(newest.logs[0].len(), 200_000, "the newest keeps its logs");

        // Beyond that, the oldest records go.
        let dropped = reg.shrink_to(1_000_000).unwrap();
        assert!(dropped.records > 0, "{dropped:?}");
        assert!(reg.get_activation("guest", "id0").unwrap().is_none());
        assert!(reg.get_activation("guest", "id19").unwrap().is_some());
        assert!(live_bytes(&reg.conn()).unwrap() <= 1_000_000);
        assert!(reg.truncate_wal().unwrap());
        assert!(
            reg.file_bytes() <= 1_000_000,
            "the files shrank: {}",
            reg.file_bytes()
        );
    }

    /// A reader's snapshot keeps the WAL; truncation says so and succeeds once it is gone.
    #[test]
    fn truncation_waits_for_no_reader() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::open(&dir.path().join("icebox.db")).unwrap();
        reg.insert_activations(&[big("a", 1)]).unwrap();
        let reader = reg.readers.get().unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader
            .query_row("SELECT count(*) FROM activations", [], |r| r.get(0))
            .unwrap();
        reg.insert_activations(&[big("b", 2)]).unwrap();
        assert!(!reg.truncate_wal().unwrap(), "a reader holds a snapshot");
        reader.execute_batch("COMMIT").unwrap();
        drop(reader);
        assert!(reg.truncate_wal().unwrap());
        let wal = super::super::files::wal_path(&dir.path().join("icebox.db"), "-wal");
        assert_eq!(std::fs::metadata(wal).unwrap().len(), 0);
    }
}
