//! Invocations answered 202 whose record is not written yet. Each is stored before its client
//! has the id, so a crash cannot turn an id the client holds into a 404 forever: the next
//! start records what the crash left here as failed.

use super::{to_sql_int, ActivationRow, Registry, RegistryError};
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

impl Registry {
    /// At start, before any invocation: stores the record `ended` makes of every activation a
    /// crash left unfinished, in one transaction (a record already there is kept). Returns
    /// how many there were.
    pub fn settle_unfinished(
        &self,
        ended: impl Fn(&Unfinished) -> Result<ActivationRow, RegistryError>,
    ) -> Result<usize, RegistryError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let left: Vec<Unfinished> = tx
            .prepare(
                "SELECT activation_id, namespace, name, version, subject, start FROM unfinished",
            )?
            .query_map([], |r| {
                Ok(Unfinished {
                    activation_id: r.get(0)?,
                    namespace: r.get(1)?,
                    name: r.get(2)?,
                    version: r.get(3)?,
                    subject: r.get(4)?,
                    start: r.get::<_, i64>(5)?.max(0) as u64,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        {
            let mut insert = tx.prepare_cached(super::activations::INSERT)?;
            for u in &left {
                let row = ended(u)?;
                super::activations::insert(&mut insert, &row)?;
            }
        }
        tx.execute("DELETE FROM unfinished", [])?;
        tx.commit()?;
        Ok(left.len())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::record;
    use super::*;

    fn unfinished(id: &str) -> Unfinished {
        Unfinished {
            activation_id: id.into(),
            namespace: "guest".into(),
            name: "a".into(),
            version: "0.0.1".into(),
            subject: "guest".into(),
            start: 7,
        }
    }

    fn settle(reg: &Registry) -> usize {
        reg.settle_unfinished(|u| {
            let mut rec = record(&u.namespace, &u.name, &u.activation_id, u.start);
            rec.logs = vec!["recovered".into()];
            ActivationRow::new(&rec)
        })
        .unwrap()
    }

    #[test]
    fn what_a_crash_leaves_unfinished_is_recorded_at_the_next_start() {
        let reg = Registry::open_in_memory().unwrap();
        let (a, b) = (unfinished("a"), unfinished("b"));
        reg.write_batch::<ActivationRow>(&[], &[&a, &b]).unwrap();
        assert_eq!(settle(&reg), 2);
        let got = reg.get_activation("guest", "a").unwrap().unwrap();
        assert_eq!((got.start, got.logs), (7, vec!["recovered".to_string()]));
        assert!(reg.get_activation("guest", "b").unwrap().is_some());
        assert_eq!(settle(&reg), 0, "settled once");
    }

    /// The record and the 202's mark can reach the writer in either order, in one batch or
    /// in two: a finished activation is never left unfinished.
    #[test]
    fn a_written_record_clears_its_mark_in_any_order() {
        let reg = Registry::open_in_memory().unwrap();
        let row = |id| ActivationRow::new(&record("guest", "a", id, 1)).unwrap();
        // Mark first, record in a later batch.
        reg.write_batch::<ActivationRow>(&[], &[&unfinished("x")])
            .unwrap();
        reg.write_batch(&[row("x")], &[]).unwrap();
        // Record first, mark in a later batch.
        reg.write_batch(&[row("y")], &[]).unwrap();
        reg.write_batch::<ActivationRow>(&[], &[&unfinished("y")])
            .unwrap();
        // Both in one batch.
        reg.write_batch(&[row("z")], &[&unfinished("z")]).unwrap();
        assert_eq!(settle(&reg), 0);
        for id in ["x", "y", "z"] {
            let got = reg.get_activation("guest", id).unwrap().unwrap();
            assert!(got.logs[0].contains("hello"), "{id} kept its own record");
        }
    }
}
