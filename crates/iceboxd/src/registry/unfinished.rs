//! Invocations answered 202 whose record is not written yet. Each is stored before its client
//! has the id, so a crash cannot turn an id the client holds into a 404 forever: the next
//! start records what the crash left here as failed.

use super::to_sql_int;
use rusqlite::params;

/// An activation whose id was handed out and whose record is not written yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    pub activation_id: String,
    pub namespace: String,
    pub name: String,
    pub version: String,
    pub subject: String,
    pub start: u64,
}

/// Skipped when the record is already in (a fast activation can end before its 202 leaves).
pub(super) const MARK: &str = "INSERT OR IGNORE INTO unfinished
       (activation_id, namespace, name, version, subject, start)
     SELECT ?1, ?2, ?3, ?4, ?5, ?6
      WHERE NOT EXISTS (SELECT 1 FROM activations WHERE activation_id = ?1)";

/// Run with every record written: its activation is finished.
pub(super) const CLEAR: &str = "DELETE FROM unfinished WHERE activation_id = ?1";

pub(super) fn mark(
    stmt: &mut rusqlite::CachedStatement<'_>,
    u: &Unfinished,
) -> rusqlite::Result<()> {
    stmt.execute(params![
        u.activation_id,
        u.namespace,
        u.name,
        u.version,
        u.subject,
        to_sql_int(u.start)
    ])?;
    Ok(())
}
