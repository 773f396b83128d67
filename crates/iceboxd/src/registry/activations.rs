//! Activation records: written once per invocation, listed newest first, pruned in bulk.

use super::{
    decode, effective_limit, encode, to_sql_int, Registry, RegistryError, DEFAULT_LIST_LIMIT,
};
use icebox_core::ActivationRecord;
use rusqlite::{params, OptionalExtension};

/// Query for [`Registry::list_activations`], mirroring `GET /namespaces/{ns}/activations`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivationFilter {
    /// Only activations of this action.
    pub name: Option<String>,
    /// Page size: default 30, capped at 200, 0 meaning 200 (OpenWhisk's rule).
    pub limit: usize,
    pub skip: usize,
    /// Only activations that started at or after this time (ms since the epoch).
    pub since: Option<u64>,
    /// Only activations that started at or before this time (ms since the epoch).
    pub upto: Option<u64>,
}

impl Default for ActivationFilter {
    fn default() -> Self {
        ActivationFilter {
            name: None,
            limit: DEFAULT_LIST_LIMIT,
            skip: 0,
            since: None,
            upto: None,
        }
    }
}

/// An activation record ready to store: its indexed fields and its JSON (encoded once, when
/// the record is taken in, so the writer and the memory bound see the same bytes).
#[derive(Debug, Clone)]
pub struct ActivationRow {
    pub activation_id: String,
    pub namespace: String,
    pub name: String,
    pub start: u64,
    pub json: String,
}

impl ActivationRow {
    pub fn new(rec: &ActivationRecord) -> Result<ActivationRow, RegistryError> {
        Ok(ActivationRow {
            activation_id: rec.activation_id.clone(),
            namespace: rec.namespace.clone(),
            name: rec.name.clone(),
            start: rec.start,
            json: encode(rec)?,
        })
    }

    pub fn record(&self) -> Result<ActivationRecord, RegistryError> {
        decode("activation", &self.json)
    }
}

pub(super) const INSERT: &str =
    "INSERT INTO activations (activation_id, namespace, name, start, record)
     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (activation_id) DO NOTHING";

// Ties on `start` fall back to insertion order (seq), so paging is stable and the latest write
// of a millisecond comes first. The inner query pages over an index alone (namespace, [name,]
// start, and the rowid seq), so a deep `skip` never reads the records it steps over; only the
// page's own rows are fetched.
const LIST_ALL: &str = "SELECT a.record FROM activations a JOIN
       (SELECT seq FROM activations
         WHERE namespace = ?1 AND start BETWEEN ?2 AND ?3
         ORDER BY start DESC, seq DESC LIMIT ?4 OFFSET ?5) page ON a.seq = page.seq
     ORDER BY a.start DESC, a.seq DESC";
const LIST_BY_NAME: &str = "SELECT a.record FROM activations a JOIN
       (SELECT seq FROM activations
         WHERE namespace = ?1 AND name = ?6 AND start BETWEEN ?2 AND ?3
         ORDER BY start DESC, seq DESC LIMIT ?4 OFFSET ?5) page ON a.seq = page.seq
     ORDER BY a.start DESC, a.seq DESC";

/// Whether the row went in (false: a record with its id is already stored).
pub(super) fn insert(
    stmt: &mut rusqlite::CachedStatement<'_>,
    row: &ActivationRow,
) -> rusqlite::Result<bool> {
    let inserted = stmt.execute(params![
        row.activation_id,
        row.namespace,
        row.name,
        to_sql_int(row.start),
        row.json
    ])?;
    Ok(inserted > 0)
}

impl Registry {
    pub fn get_activation(
        &self,
        namespace: &str,
        id: &str,
    ) -> Result<Option<ActivationRecord>, RegistryError> {
        let json: Option<String> = self.read(|conn| {
            conn.prepare_cached(
                "SELECT record FROM activations WHERE activation_id = ?1 AND namespace = ?2",
            )?
            .query_row(params![id, namespace], |r| r.get(0))
            .optional()
        })?;
        json.map(|j| decode("activation", &j)).transpose()
    }

    /// A page of a namespace's activations, newest start first.
    pub fn list_activations(
        &self,
        namespace: &str,
        f: &ActivationFilter,
    ) -> Result<Vec<ActivationRecord>, RegistryError> {
        let since = f.since.map_or(0, to_sql_int);
        let upto = f.upto.map_or(i64::MAX, to_sql_int);
        let limit = to_sql_int(effective_limit(f.limit));
        let skip = to_sql_int(f.skip);
        let rows: Vec<String> = self.read(|conn| -> rusqlite::Result<Vec<String>> {
            match &f.name {
                None => conn
                    .prepare_cached(LIST_ALL)?
                    .query_map(params![namespace, since, upto, limit, skip], |r| r.get(0))?
                    .collect(),
                Some(name) => conn
                    .prepare_cached(LIST_BY_NAME)?
                    .query_map(params![namespace, since, upto, limit, skip, name], |r| {
                        r.get(0)
                    })?
                    .collect(),
            }
        })?;
        rows.iter().map(|json| decode("activation", json)).collect()
    }

    /// Bounded retention across all namespaces: deletes activations that started more than
    /// `max_age_ms` before `now_ms`, then all but the `max_count` newest. Returns how many went.
    pub fn prune_activations(
        &self,
        max_count: usize,
        max_age_ms: u64,
        now_ms: u64,
    ) -> Result<usize, RegistryError> {
        let cutoff = to_sql_int(now_ms.saturating_sub(max_age_ms));
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let by_age = tx
            .prepare_cached("DELETE FROM activations WHERE start < ?1")?
            .execute([cutoff])?;
        let by_count = tx
            .prepare_cached(
                "DELETE FROM activations WHERE seq IN
                   (SELECT seq FROM activations ORDER BY start DESC, seq DESC LIMIT -1 OFFSET ?1)",
            )?
            .execute([to_sql_int(max_count)])?;
        tx.commit()?;
        Ok(by_age + by_count)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::record;
    use super::*;

    fn ids(v: Vec<ActivationRecord>) -> Vec<String> {
        v.into_iter().map(|r| r.activation_id).collect()
    }

    /// guest/a at 100, 300, 500; guest/b at 200, 400; other/a at 250.
    fn seeded() -> Registry {
        let reg = Registry::open_in_memory().unwrap();
        for (ns, name, id, start) in [
            ("guest", "a", "a100", 100),
            ("guest", "b", "b200", 200),
            ("other", "a", "o250", 250),
            ("guest", "a", "a300", 300),
            ("guest", "b", "b400", 400),
            ("guest", "a", "a500", 500),
        ] {
            reg.insert_activation(&record(ns, name, id, start)).unwrap();
        }
        reg
    }

    #[test]
    fn insert_and_get_round_trip_within_namespace() {
        let reg = seeded();
        assert_eq!(
            reg.get_activation("guest", "a300").unwrap(),
            Some(record("guest", "a", "a300", 300))
        );
        assert_eq!(
            reg.get_activation("other", "a300").unwrap(),
            None,
            "ids are namespace-scoped on read"
        );
        assert_eq!(reg.get_activation("guest", "missing").unwrap(), None);
    }

    #[test]
    fn duplicate_id_conflicts() {
        let reg = seeded();
        let err = reg
            .insert_activation(&record("guest", "a", "a100", 999))
            .unwrap_err();
        assert!(matches!(err, RegistryError::Conflict(_)), "{err}");
    }

    #[test]
    fn list_is_newest_first_per_namespace() {
        let reg = seeded();
        let all = reg
            .list_activations("guest", &ActivationFilter::default())
            .unwrap();
        assert_eq!(ids(all), ["a500", "b400", "a300", "b200", "a100"]);
        assert_eq!(
            ids(reg
                .list_activations("other", &ActivationFilter::default())
                .unwrap()),
            ["o250"]
        );
        assert!(reg
            .list_activations("nobody", &ActivationFilter::default())
            .unwrap()
            .is_empty());
    }

    #[test]
    fn same_start_lists_latest_insert_first() {
        let reg = Registry::open_in_memory().unwrap();
        for id in ["x1", "x2", "x3"] {
            reg.insert_activation(&record("guest", "a", id, 42))
                .unwrap();
        }
        let got = reg
            .list_activations("guest", &ActivationFilter::default())
            .unwrap();
        assert_eq!(ids(got), ["x3", "x2", "x1"]);
    }

    #[test]
    fn list_filters_by_name_and_time_inclusive() {
        let reg = seeded();
        let f = |name: Option<&str>, since, upto| ActivationFilter {
            name: name.map(String::from),
            since,
            upto,
            ..Default::default()
        };
        assert_eq!(
            ids(reg
                .list_activations("guest", &f(Some("a"), None, None))
                .unwrap()),
            ["a500", "a300", "a100"]
        );
        assert_eq!(
            ids(reg
                .list_activations("guest", &f(None, Some(200), None))
                .unwrap()),
            ["a500", "b400", "a300", "b200"]
        );
        assert_eq!(
            ids(reg
                .list_activations("guest", &f(None, None, Some(300)))
                .unwrap()),
            ["a300", "b200", "a100"]
        );
        assert_eq!(
            ids(reg
                .list_activations("guest", &f(Some("b"), Some(201), Some(400)))
                .unwrap()),
            ["b400"]
        );
        assert!(reg
            .list_activations("guest", &f(Some("zzz"), None, None))
            .unwrap()
            .is_empty());
        assert!(reg
            .list_activations("guest", &f(None, Some(u64::MAX), None))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn list_pages_with_limit_and_skip() {
        let reg = seeded();
        let page = |name: Option<&str>, limit, skip| {
            let f = ActivationFilter {
                name: name.map(String::from),
                limit,
                skip,
                ..Default::default()
            };
            ids(reg.list_activations("guest", &f).unwrap())
        };
        assert_eq!(page(None, 2, 0), ["a500", "b400"]);
        assert_eq!(page(None, 2, 2), ["a300", "b200"]);
        assert_eq!(page(None, 2, 4), ["a100"]);
        assert!(page(None, 2, 6).is_empty());
        assert_eq!(page(Some("a"), 1, 1), ["a300"]);
        assert_eq!(page(None, 0, 0).len(), 5, "0 means the maximum");
    }

    #[test]
    fn list_limit_defaults_to_30_and_caps_at_200() {
        let reg = Registry::open_in_memory().unwrap();
        for i in 0..250u64 {
            reg.insert_activation(&record("guest", "a", &format!("id{i}"), i))
                .unwrap();
        }
        let got = reg
            .list_activations("guest", &ActivationFilter::default())
            .unwrap();
        assert_eq!(got.len(), 30);
        assert_eq!(got[0].activation_id, "id249");
        let big = ActivationFilter {
            limit: 1000,
            ..Default::default()
        };
        assert_eq!(reg.list_activations("guest", &big).unwrap().len(), 200);
    }

    #[test]
    fn prune_by_count_keeps_the_newest() {
        let reg = seeded();
        assert_eq!(reg.prune_activations(3, u64::MAX, 1_000).unwrap(), 3);
        let left = ids(reg
            .list_activations("guest", &ActivationFilter::default())
            .unwrap());
        assert_eq!(left, ["a500", "b400", "a300"]);
        assert!(reg
            .list_activations("other", &ActivationFilter::default())
            .unwrap()
            .is_empty());
        assert_eq!(
            reg.prune_activations(3, u64::MAX, 1_000).unwrap(),
            0,
            "already within bounds"
        );
    }

    #[test]
    fn prune_by_age_drops_older_than_max_age() {
        let reg = seeded();
        // now 550, max age 250: anything started before 300 goes (100, 200, 250).
        assert_eq!(reg.prune_activations(usize::MAX, 250, 550).unwrap(), 3);
        let left = ids(reg
            .list_activations("guest", &ActivationFilter::default())
            .unwrap());
        assert_eq!(left, ["a500", "b400", "a300"]);
        assert_eq!(reg.get_activation("other", "o250").unwrap(), None);
    }

    #[test]
    fn prune_applies_both_bounds() {
        let reg = seeded();
        // Age removes 100 and 200; count then keeps the 2 newest of the remaining 4.
        assert_eq!(reg.prune_activations(2, 300, 550).unwrap(), 4);
        let left = ids(reg
            .list_activations("guest", &ActivationFilter::default())
            .unwrap());
        assert_eq!(left, ["a500", "b400"]);
    }

    #[test]
    fn a_batch_is_stored_whole_and_skips_duplicates() {
        let reg = seeded();
        let rows: Vec<_> = [("n1", 600), ("a100", 700), ("n2", 800)]
            .iter()
            .map(|(id, start)| ActivationRow::new(&record("guest", "a", id, *start)).unwrap())
            .collect();
        assert_eq!(reg.insert_activations(&rows).unwrap(), ["a100"]);
        assert!(reg.get_activation("guest", "n2").unwrap().is_some());
        assert_eq!(
            reg.get_activation("guest", "a100").unwrap().unwrap().start,
            100,
            "the stored record is kept"
        );
        reg.set_writes_failing(true);
        let more = [ActivationRow::new(&record("guest", "a", "n3", 900)).unwrap()];
        assert!(reg.insert_activations(&more).is_err());
        reg.set_writes_failing(false);
        assert!(reg.get_activation("guest", "n3").unwrap().is_none());
    }

    /// A deep `skip` must step over index entries, not table rows holding whole records.
    #[test]
    fn pages_are_found_through_covering_indexes() {
        let reg = seeded();
        for (sql, index) in [
            (LIST_ALL, "activations_by_namespace"),
            (LIST_BY_NAME, "activations_by_name"),
        ] {
            let conn = reg.conn();
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let args = params!["guest", 0, i64::MAX, 30, 99_000, "a"];
            let plan: Vec<String> = stmt
                .query_map(&args[..stmt.parameter_count()], |r| r.get(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(
                plan.iter()
                    .any(|step| step.contains(&format!("USING COVERING INDEX {index}"))),
                "{plan:#?}"
            );
            // Only the page itself (at most 200 rows) is sorted; the walk is in index order.
            assert_eq!(
                plan.iter()
                    .filter(|step| step.contains("TEMP B-TREE"))
                    .count(),
                1,
                "{plan:#?}"
            );
        }
    }

    /// Issue 8's load: 8 readers paging `skip=99000` while deploys run. Run:
    /// cargo test -p iceboxd --lib --release -- --ignored --nocapture bench_deep_pages
    #[test]
    #[ignore]
    fn bench_deep_pages_with_writes() {
        let dir = tempfile::tempdir().unwrap();
        let reg = std::sync::Arc::new(Registry::open(&dir.path().join("registry.db")).unwrap());
        let mut rec = record("guest", "bench", "", 0);
        rec.logs = vec!["x".repeat(400)];
        let rows: Vec<_> = (0..100_000u64)
            .map(|i| {
                rec.activation_id = format!("{i:032x}");
                rec.start = 1_700_000_000_000 + i;
                ActivationRow::new(&rec).unwrap()
            })
            .collect();
        for chunk in rows.chunks(5_000) {
            reg.insert_activations(chunk).unwrap();
        }
        let deep = ActivationFilter {
            skip: 99_000,
            ..Default::default()
        };
        reg.list_activations("guest", &deep).unwrap();
        let t = std::time::Instant::now();
        for _ in 0..20 {
            assert_eq!(reg.list_activations("guest", &deep).unwrap().len(), 30);
        }
        println!("one page at skip=99000: {:?}", t.elapsed() / 20);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..8)
            .map(|_| {
                let (reg, stop, deep) = (reg.clone(), stop.clone(), deep.clone());
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        reg.list_activations("guest", &deep).unwrap();
                    }
                })
            })
            .collect();
        let mut worst = std::time::Duration::ZERO;
        for i in 0..20 {
            let t = std::time::Instant::now();
            reg.put_action(
                super::super::testutil::spec("guest", &format!("a{i}")),
                false,
            )
            .unwrap();
            worst = worst.max(t.elapsed());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        readers.into_iter().for_each(|r| r.join().unwrap());
        println!("slowest of 20 deploys under 8 deep-paging readers: {worst:?}");
    }

    /// Per-insert cost on a real file (WAL, synchronous=NORMAL), with a record the size of a
    /// typical activation. Run: cargo test -p iceboxd --lib --release -- --ignored --nocapture bench_insert
    #[test]
    #[ignore]
    fn bench_insert_activation() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::open(&dir.path().join("registry.db")).unwrap();
        let mut rec = record("guest", "bench", "", 0);
        rec.logs = (0..10)
            .map(|i| format!("2024-01-01T00:00:00.000Z stdout: log line {i} of the action"))
            .collect();
        let n = 20_000u64;
        let t = std::time::Instant::now();
        for i in 0..n {
            rec.activation_id = format!("{i:032x}");
            rec.start = 1_700_000_000_000 + i;
            reg.insert_activation(&rec).unwrap();
        }
        let per = t.elapsed() / u32::try_from(n).unwrap();
        println!(
            "insert_activation: {per:?} per insert over {n} inserts ({} bytes of JSON each)",
            encode(&rec).unwrap().len()
        );
        let t = std::time::Instant::now();
        let pruned = reg.prune_activations(10_000, u64::MAX, 0).unwrap();
        println!("prune_activations: {pruned} rows in {:?}", t.elapsed());
    }
}
