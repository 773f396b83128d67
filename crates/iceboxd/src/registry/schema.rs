//! Connection settings and the schema, versioned with `PRAGMA user_version`.

use anyhow::{bail, Context};
use rusqlite::Connection;
use std::time::Duration;

/// Each entry upgrades the schema from version `index` to `index + 1`. Append only: a released
/// migration never changes, so any older registry file can be brought forward step by step.
const MIGRATIONS: &[&str] = &[
    // v0 -> v1
    r#"
    -- Ordinary rowid table rather than WITHOUT ROWID: rows hold whole action code (MBs of
    -- base64), and SQLite keeps large rows out of the primary b-tree only for rowid tables.
    CREATE TABLE actions (
        id        INTEGER PRIMARY KEY,
        namespace TEXT    NOT NULL,
        name      TEXT    NOT NULL,
        kind      TEXT    NOT NULL,
        version   TEXT    NOT NULL,
        updated   INTEGER NOT NULL,
        spec      TEXT    NOT NULL,
        UNIQUE (namespace, name)
    );

    CREATE TABLE activations (
        seq           INTEGER PRIMARY KEY,
        activation_id TEXT    NOT NULL UNIQUE,
        namespace     TEXT    NOT NULL,
        name          TEXT    NOT NULL,
        start         INTEGER NOT NULL,
        record        TEXT    NOT NULL
    );
    -- Every index costs time on the invocation hot path, so only two: `start` serves listing a
    -- namespace (nodes usually host one) and age/count pruning; the other serves `--name`.
    CREATE INDEX activations_by_start ON activations (start);
    CREATE INDEX activations_by_name ON activations (namespace, name, start);
    "#,
    // v1 -> v2
    r#"
    -- Small facts about this registry itself (its id, which the state directory's marker names).
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID;
    -- Listing a namespace newest first walks this index alone (seq is the rowid, kept in every
    -- index entry), so a deep `skip` steps over index entries, not over table rows.
    CREATE INDEX activations_by_namespace ON activations (namespace, start);
    "#,
    // v2 -> v3
    r#"
    -- Invocations answered 202 whose record is not written yet: each is in here before its
    -- client has the id, and leaves when its record goes in (same transaction). What a crash
    -- leaves here is recorded as failed at the next start, so no id handed out is ever a 404.
    CREATE TABLE unfinished (
        activation_id TEXT    PRIMARY KEY,
        namespace     TEXT    NOT NULL,
        name          TEXT    NOT NULL,
        version       TEXT    NOT NULL,
        subject       TEXT    NOT NULL,
        start         INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // v3 -> v4
    r#"
    -- Tenants: namespaces with their quotas (NULL = no limit) and their keys, kept as a salted
    -- SHA-256 of the secret part only, so a copy of the registry gives no one a usable key.
    CREATE TABLE namespaces (
        name                    TEXT PRIMARY KEY,
        created                 INTEGER NOT NULL,
        invocations_per_minute  INTEGER,
        concurrent_invocations  INTEGER,
        memory_share            INTEGER
    ) WITHOUT ROWID;
    CREATE TABLE api_keys (
        uuid      TEXT PRIMARY KEY,
        namespace TEXT    NOT NULL REFERENCES namespaces (name),
        salt      TEXT    NOT NULL,
        hash      TEXT    NOT NULL,
        admin     INTEGER NOT NULL DEFAULT 0,
        created   INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
];

pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

#[expect(
    clippy::cast_possible_wrap,
    reason = "a handful of migrations, and a const cannot call try_from"
)]
pub(super) const CURRENT_VERSION: i64 = MIGRATIONS.len() as i64;

/// Settings for a file-backed registry: WAL lets readers proceed during a write, and
/// synchronous=NORMAL in WAL mode keeps the database consistent after a crash while skipping
/// the fsync per commit (a power cut may lose the last few activations, never corrupt).
pub(super) fn configure_file(conn: &Connection) -> anyhow::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Before WAL: only a file without a page yet takes the setting without a VACUUM.
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        bail!("could not switch the registry to WAL journaling (got {mode})");
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(())
}

/// What `PRAGMA quick_check` finds wrong with the file, if anything. A damaged b-tree is
/// otherwise only noticed when a write lands on it, and then records are lost: this reads
/// every page once (a second or so per GiB) so a damaged registry is refused at start.
pub(super) fn damage(conn: &Connection) -> rusqlite::Result<Option<String>> {
    // How many problems to list: enough to tell a torn page from a wrecked file.
    const SHOWN: usize = 5;
    let checked: rusqlite::Result<Vec<String>> = conn
        .prepare(&format!("PRAGMA quick_check({SHOWN})"))
        .and_then(|mut stmt| stmt.query_map([], |r| r.get(0))?.collect());
    match checked {
        Ok(lines) if lines.len() == 1 && lines[0] == "ok" => Ok(None),
        Ok(lines) => Ok(Some(lines.join("; "))),
        // SQLite stops with SQLITE_CORRUPT (or NOTADB) when the damage is too deep to list.
        Err(e)
            if matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
            ) =>
        {
            Ok(Some(e.to_string()))
        }
        Err(e) => Err(e),
    }
}

/// Freed pages must go back to the file system for the byte budget to bound the file, which
/// needs incremental auto-vacuum. A registry created before it is rewritten once (VACUUM: a
/// copy of the file, a few seconds per GiB).
pub(super) fn enable_incremental_vacuum(
    conn: &Connection,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    const INCREMENTAL: i64 = 2;
    let mode: i64 = conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0))?;
    if mode == INCREMENTAL {
        return Ok(());
    }
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    tracing::info!(
        "rewriting the registry {} once so that it can give freed space back (VACUUM)",
        path.display()
    );
    conn.execute_batch("VACUUM")
        .with_context(|| format!("rewriting {} for incremental vacuum", path.display()))?;
    Ok(())
}

pub(super) fn migrate(conn: &mut Connection) -> anyhow::Result<()> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > CURRENT_VERSION {
        bail!(
            "registry schema version {version} is newer than this iceboxd supports \
             ({CURRENT_VERSION}); refusing to touch it"
        );
    }
    if version < 0 {
        bail!("registry schema version {version} is invalid");
    }
    let done = usize::try_from(version).expect("checked non-negative above");
    for (from, sql) in MIGRATIONS.iter().enumerate().skip(done) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)
            .with_context(|| format!("migrating registry schema from v{from}"))?;
        tx.pragma_update(None, "user_version", i64::try_from(from + 1)?)?;
        tx.commit()?;
    }
    Ok(())
}
