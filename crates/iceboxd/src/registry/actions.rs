//! Deployed actions: one row per (namespace, name), the full spec as JSON.

use super::{decode, effective_limit, encode, now_ms, to_sql_int, Registry, RegistryError};
use icebox_core::ActionSpec;
use rusqlite::{params, OptionalExtension, TransactionBehavior};

pub const FIRST_VERSION: &str = "0.0.1";

impl Registry {
    /// Inserts, or with `overwrite` replaces, an action. The registry owns `version` ("0.0.1"
    /// on create, patch + 1 on every update) and `updated` (now); the caller's values are
    /// ignored. Returns the spec as stored.
    pub fn put_action(
        &self,
        mut spec: ActionSpec,
        overwrite: bool,
    ) -> Result<ActionSpec, RegistryError> {
        let mut conn = self.conn();
        // IMMEDIATE takes the write lock before the read, so the version we bump is the one
        // we replace even if another process shares the file.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let existing: Option<String> = tx
            .prepare_cached("SELECT version FROM actions WHERE namespace = ?1 AND name = ?2")?
            .query_row(params![spec.namespace, spec.name], |r| r.get(0))
            .optional()?;
        spec.version = match existing {
            None => FIRST_VERSION.to_string(),
            Some(_) if !overwrite => {
                return Err(RegistryError::Conflict(format!(
                    "action {} already exists",
                    spec.fqn()
                )));
            }
            Some(old) => bump_patch(&old).ok_or_else(|| {
                RegistryError::Corrupt(format!("action {} has version {old:?}", spec.fqn()))
            })?,
        };
        spec.updated = now_ms();
        upsert(&tx, &spec)?;
        tx.commit()?;
        Ok(spec)
    }

    /// Stores an action exactly as given, version and `updated` included: a cluster node
    /// mirrors what another node wrote (the cluster's store decided the version).
    pub fn store_action(&self, spec: &ActionSpec) -> Result<(), RegistryError> {
        upsert(&self.conn(), spec)
    }

    /// One action straight from SQLite (the daemon serves actions from its cache).
    #[cfg(test)]
    pub fn get_action(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ActionSpec>, RegistryError> {
        let json: Option<String> = self.read(|conn| {
            conn.prepare_cached("SELECT spec FROM actions WHERE namespace = ?1 AND name = ?2")?
                .query_row(params![namespace, name], |r| r.get(0))
                .optional()
        })?;
        json.map(|j| decode("action", &j)).transpose()
    }

    /// A page of a namespace's actions ordered by name; `limit` follows OpenWhisk paging
    /// (0 = the maximum, capped at [`super::MAX_LIST_LIMIT`]).
    pub fn list_actions(
        &self,
        namespace: &str,
        limit: usize,
        skip: usize,
    ) -> Result<Vec<ActionSpec>, RegistryError> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT spec FROM actions WHERE namespace = ?1 ORDER BY name LIMIT ?2 OFFSET ?3",
            )?;
            let rows = stmt.query_map(
                params![
                    namespace,
                    to_sql_int(effective_limit(limit)),
                    to_sql_int(skip)
                ],
                |r| r.get::<_, String>(0),
            )?;
            rows.map(|j| decode("action", &j?)).collect()
        })
    }

    /// Removes an action, returning what was stored.
    pub fn delete_action(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ActionSpec>, RegistryError> {
        let conn = self.conn();
        let json: Option<String> = conn
            .prepare_cached(
                "DELETE FROM actions WHERE namespace = ?1 AND name = ?2 RETURNING spec",
            )?
            .query_row(params![namespace, name], |r| r.get(0))
            .optional()?;
        json.map(|j| decode("action", &j)).transpose()
    }

    /// Every action of every namespace, ordered by namespace then name (for start-up).
    pub fn all_actions(&self) -> Result<Vec<ActionSpec>, RegistryError> {
        self.read(|conn| {
            let mut stmt =
                conn.prepare_cached("SELECT spec FROM actions ORDER BY namespace, name")?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            rows.map(|j| decode("action", &j?)).collect()
        })
    }
}

fn upsert(conn: &rusqlite::Connection, spec: &ActionSpec) -> Result<(), RegistryError> {
    conn.prepare_cached(
        "INSERT INTO actions (namespace, name, kind, version, updated, spec)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (namespace, name) DO UPDATE SET
            kind = excluded.kind, version = excluded.version,
            updated = excluded.updated, spec = excluded.spec",
    )?
    .execute(params![
        spec.namespace,
        spec.name,
        spec.exec.kind,
        spec.version,
        to_sql_int(spec.updated),
        encode(spec)?
    ])?;
    Ok(())
}

/// "a.b.c" -> "a.b.(c+1)"; None when the stored text is not three numbers.
pub fn bump_patch(version: &str) -> Option<String> {
    let mut parts = version.split('.');
    let (major, minor, patch) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let major: u64 = major.parse().ok()?;
    let minor: u64 = minor.parse().ok()?;
    let patch: u64 = patch.parse().ok()?;
    Some(format!("{major}.{minor}.{}", patch.checked_add(1)?))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::spec;
    use super::*;

    #[test]
    fn create_get_list_delete() {
        let reg = Registry::open_in_memory().unwrap();
        let before = now_ms();
        let stored = reg.put_action(spec("guest", "hello"), false).unwrap();
        assert_eq!(stored.version, FIRST_VERSION, "caller's version is ignored");
        assert!(stored.updated >= before);
        assert_eq!(
            reg.get_action("guest", "hello").unwrap(),
            Some(stored.clone())
        );
        assert_eq!(reg.get_action("other", "hello").unwrap(), None);
        assert_eq!(reg.get_action("guest", "nope").unwrap(), None);

        assert_eq!(
            reg.list_actions("guest", 30, 0).unwrap(),
            vec![stored.clone()]
        );
        assert!(reg.list_actions("other", 30, 0).unwrap().is_empty());

        assert_eq!(reg.delete_action("guest", "hello").unwrap(), Some(stored));
        assert_eq!(reg.get_action("guest", "hello").unwrap(), None);
        assert_eq!(reg.delete_action("guest", "hello").unwrap(), None);
    }

    #[test]
    fn overwrite_bumps_patch_and_replaces_content() {
        let reg = Registry::open_in_memory().unwrap();
        reg.put_action(spec("guest", "a"), false).unwrap();
        let mut changed = spec("guest", "a");
        changed.exec.kind = "nodejs:20".into();
        changed.exec.code = "function main() {}".into();
        let v2 = reg.put_action(changed.clone(), true).unwrap();
        assert_eq!(v2.version, "0.0.2");
        let v3 = reg.put_action(changed, true).unwrap();
        assert_eq!(v3.version, "0.0.3");
        let got = reg.get_action("guest", "a").unwrap().unwrap();
        assert_eq!(got, v3);
        assert_eq!(got.exec.kind, "nodejs:20");
        assert_eq!(reg.all_actions().unwrap().len(), 1);
    }

    #[test]
    fn overwrite_of_missing_action_creates_it() {
        let reg = Registry::open_in_memory().unwrap();
        assert_eq!(
            reg.put_action(spec("guest", "a"), true).unwrap().version,
            FIRST_VERSION
        );
    }

    #[test]
    fn existing_action_without_overwrite_conflicts_and_is_untouched() {
        let reg = Registry::open_in_memory().unwrap();
        let first = reg.put_action(spec("guest", "a"), false).unwrap();
        let mut other = spec("guest", "a");
        other.exec.code = "different".into();
        let err = reg.put_action(other, false).unwrap_err();
        assert!(
            matches!(&err, RegistryError::Conflict(m) if m.contains("guest/a")),
            "{err}"
        );
        assert_eq!(reg.get_action("guest", "a").unwrap(), Some(first));
    }

    #[test]
    fn large_code_round_trips() {
        let reg = Registry::open_in_memory().unwrap();
        let mut big = spec("guest", "zip");
        big.exec.binary = true;
        big.exec.code = "QUJD".repeat(2 * 1024 * 1024); // 8 MiB of base64
        reg.put_action(big.clone(), false).unwrap();
        assert_eq!(
            reg.get_action("guest", "zip").unwrap().unwrap().exec.code,
            big.exec.code
        );
    }

    #[test]
    fn list_is_by_name_and_pages() {
        let reg = Registry::open_in_memory().unwrap();
        for name in ["c", "a", "e", "b", "d"] {
            reg.put_action(spec("guest", name), false).unwrap();
        }
        reg.put_action(spec("other", "0"), false).unwrap();
        let names = |v: Vec<ActionSpec>| v.into_iter().map(|s| s.name).collect::<Vec<_>>();
        assert_eq!(
            names(reg.list_actions("guest", 0, 0).unwrap()),
            ["a", "b", "c", "d", "e"]
        );
        assert_eq!(names(reg.list_actions("guest", 2, 1).unwrap()), ["b", "c"]);
        assert_eq!(names(reg.list_actions("guest", 30, 4).unwrap()), ["e"]);
        assert!(reg.list_actions("guest", 30, 5).unwrap().is_empty());
        let all = reg.all_actions().unwrap();
        assert_eq!(all.len(), 6);
        assert_eq!(all[0].namespace, "guest");
        assert_eq!(all[5].namespace, "other");
    }

    #[test]
    fn list_limit_is_capped() {
        let reg = Registry::open_in_memory().unwrap();
        for i in 0..(crate::registry::MAX_LIST_LIMIT + 5) {
            reg.put_action(spec("guest", &format!("a{i:04}")), false)
                .unwrap();
        }
        assert_eq!(
            reg.list_actions("guest", 1000, 0).unwrap().len(),
            crate::registry::MAX_LIST_LIMIT
        );
    }

    #[test]
    fn patch_bump() {
        assert_eq!(bump_patch("0.0.1").as_deref(), Some("0.0.2"));
        assert_eq!(bump_patch("1.2.9").as_deref(), Some("1.2.10"));
        assert_eq!(bump_patch("1.2"), None);
        assert_eq!(bump_patch("1.2.3.4"), None);
        assert_eq!(bump_patch("a.b.c"), None);
    }
}
