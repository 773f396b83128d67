//! Writes that span the activations and the unfinished tables in one transaction: the
//! recorder's batches (records, and the marks of invocations answered 202) and, at start, the
//! settling of the marks a crash left. Kept apart from both tables' files, which each know
//! only their own table.

use super::activations::{self, ActivationRow};
use super::unfinished::{self, Unfinished};
use super::{Registry, RegistryError};
#[cfg(test)]
use icebox_core::ActivationRecord;
use std::borrow::Borrow;

impl Registry {
    /// Stores one record. A second record with the same activation id is a conflict. (The
    /// daemon writes in batches: [`Self::insert_activations`].)
    #[cfg(test)]
    pub fn insert_activation(&self, rec: &ActivationRecord) -> Result<(), RegistryError> {
        let row = ActivationRow::new(rec)?;
        match self
            .insert_activations(std::slice::from_ref(&row))?
            .as_slice()
        {
            [] => Ok(()),
            _ => Err(RegistryError::Conflict(format!(
                "activation {} already exists",
                rec.activation_id
            ))),
        }
    }

    /// Stores a batch in one transaction: all of it or, on error, none of it (so the caller
    /// can keep the batch and retry). Returns the ids that were already stored and skipped.
    #[cfg(test)]
    pub fn insert_activations<R: Borrow<ActivationRow>>(
        &self,
        rows: &[R],
    ) -> Result<Vec<String>, RegistryError> {
        self.write_batch(rows, &[])
    }

    /// [`Self::insert_activations`] with the marks of invocations answered 202 in the same
    /// transaction. A record clears its activation's mark whichever was taken in first.
    pub fn write_batch<R: Borrow<ActivationRow>>(
        &self,
        rows: &[R],
        unfinished: &[&Unfinished],
    ) -> Result<Vec<String>, RegistryError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let mut duplicates = Vec::new();
        {
            let mut mark = tx.prepare_cached(unfinished::MARK)?;
            for u in unfinished {
                unfinished::mark(&mut mark, u)?;
            }
            let mut stmt = tx.prepare_cached(activations::INSERT)?;
            let mut clear = tx.prepare_cached(unfinished::CLEAR)?;
            for row in rows.iter().map(Borrow::borrow) {
                if !activations::insert(&mut stmt, row)? {
                    duplicates.push(row.activation_id.clone());
                }
                clear.execute([&row.activation_id])?;
            }
        }
        tx.commit()?;
        Ok(duplicates)
    }

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
                    start: u64::try_from(r.get::<_, i64>(5)?).unwrap_or(0),
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        {
            let mut insert = tx.prepare_cached(activations::INSERT)?;
            for u in &left {
                let row = ended(u)?;
                activations::insert(&mut insert, &row)?;
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
