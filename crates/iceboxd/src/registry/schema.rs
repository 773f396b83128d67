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

pub(super) const CURRENT_VERSION: i64 = MIGRATIONS.len() as i64;

/// Settings for a file-backed registry: WAL lets readers proceed during a write, and
/// synchronous=NORMAL in WAL mode keeps the database consistent after a crash while skipping
/// the fsync per commit (a power cut may lose the last few activations, never corrupt).
pub(super) fn configure_file(conn: &Connection) -> anyhow::Result<()> {
    conn.busy_timeout(Duration::from_secs(5))?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        bail!("could not switch the registry to WAL journaling (got {mode})");
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
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
    for (from, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)
            .with_context(|| format!("migrating registry schema from v{from}"))?;
        tx.pragma_update(None, "user_version", from as i64 + 1)?;
        tx.commit()?;
    }
    Ok(())
}
