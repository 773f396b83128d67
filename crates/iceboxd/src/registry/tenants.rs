//! Namespaces and their API keys. A namespace's actions and activations live in their own
//! tables under its name; deleting a namespace takes them too.

use super::{now_ms, to_sql_int, Registry, RegistryError};
use rusqlite::{params, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};

/// A namespace's limits; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Quotas {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocations_per_minute: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent_invocations: Option<u64>,
    /// Bytes its idle and frozen instances may be charged together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_share: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceRow {
    pub name: String,
    pub created: u64,
    pub quotas: Quotas,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRow {
    pub uuid: String,
    pub namespace: String,
    pub salt: String,
    pub hash: String,
    pub admin: bool,
    pub created: u64,
}

fn quota_to_sql(v: Option<u64>) -> Option<i64> {
    v.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

fn namespace_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<NamespaceRow> {
    let q = |i: usize| -> rusqlite::Result<Option<u64>> {
        Ok(r.get::<_, Option<i64>>(i)?
            .map(|n| u64::try_from(n).unwrap_or(0)))
    };
    Ok(NamespaceRow {
        name: r.get(0)?,
        created: u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
        quotas: Quotas {
            invocations_per_minute: q(2)?,
            concurrent_invocations: q(3)?,
            memory_share: q(4)?,
        },
    })
}

impl Registry {
    /// Creates a namespace, or with `overwrite` sets the quotas of an existing one.
    pub fn put_namespace(
        &self,
        name: &str,
        quotas: Quotas,
        overwrite: bool,
    ) -> Result<NamespaceRow, RegistryError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let exists: bool = tx
            .prepare_cached("SELECT 1 FROM namespaces WHERE name = ?1")?
            .query_row([name], |_| Ok(()))
            .optional()?
            .is_some();
        if exists && !overwrite {
            return Err(RegistryError::Conflict(format!(
                "namespace '{name}' already exists"
            )));
        }
        tx.prepare_cached(
            "INSERT INTO namespaces
                (name, created, invocations_per_minute, concurrent_invocations, memory_share)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (name) DO UPDATE SET
                invocations_per_minute = excluded.invocations_per_minute,
                concurrent_invocations = excluded.concurrent_invocations,
                memory_share = excluded.memory_share",
        )?
        .execute(params![
            name,
            to_sql_int(now_ms()),
            quota_to_sql(quotas.invocations_per_minute),
            quota_to_sql(quotas.concurrent_invocations),
            quota_to_sql(quotas.memory_share),
        ])?;
        let row = tx
            .prepare_cached(
                "SELECT name, created, invocations_per_minute, concurrent_invocations, memory_share
                 FROM namespaces WHERE name = ?1",
            )?
            .query_row([name], namespace_from_row)?;
        tx.commit()?;
        Ok(row)
    }

    pub fn namespaces(&self) -> Result<Vec<NamespaceRow>, RegistryError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT name, created, invocations_per_minute, concurrent_invocations, memory_share
             FROM namespaces ORDER BY name",
        )?;
        let rows = stmt.query_map([], namespace_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Removes a namespace with its keys, actions and activation records. False when there
    /// was no such namespace.
    pub fn delete_namespace(&self, name: &str) -> Result<bool, RegistryError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute("DELETE FROM api_keys WHERE namespace = ?1", [name])?;
        tx.execute("DELETE FROM actions WHERE namespace = ?1", [name])?;
        tx.execute("DELETE FROM activations WHERE namespace = ?1", [name])?;
        tx.execute("DELETE FROM unfinished WHERE namespace = ?1", [name])?;
        let gone = tx.execute("DELETE FROM namespaces WHERE name = ?1", [name])? > 0;
        tx.commit()?;
        Ok(gone)
    }

    /// Stores a key. With `admin`, it replaces whatever admin key was stored before: a node
    /// has one, the key it was started with.
    pub fn put_key(&self, key: &KeyRow) -> Result<(), RegistryError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if key.admin {
            tx.execute(
                "DELETE FROM api_keys WHERE admin = 1 AND uuid != ?1",
                [&key.uuid],
            )?;
        }
        tx.prepare_cached(
            "INSERT INTO api_keys (uuid, namespace, salt, hash, admin, created)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (uuid) DO UPDATE SET namespace = excluded.namespace,
                salt = excluded.salt, hash = excluded.hash, admin = excluded.admin",
        )?
        .execute(params![
            key.uuid,
            key.namespace,
            key.salt,
            key.hash,
            key.admin,
            to_sql_int(key.created)
        ])?;
        tx.commit()?;
        Ok(())
    }

    /// False when there was no such key.
    pub fn delete_key(&self, uuid: &str) -> Result<bool, RegistryError> {
        Ok(self
            .conn()
            .execute("DELETE FROM api_keys WHERE uuid = ?1", [uuid])?
            > 0)
    }

    pub fn keys(&self) -> Result<Vec<KeyRow>, RegistryError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT uuid, namespace, salt, hash, admin, created FROM api_keys ORDER BY created",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(KeyRow {
                uuid: r.get(0)?,
                namespace: r.get(1)?,
                salt: r.get(2)?,
                hash: r.get(3)?,
                admin: r.get(4)?,
                created: u64::try_from(r.get::<_, i64>(5)?).unwrap_or(0),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// How many actions a namespace holds.
    pub fn action_count(&self, namespace: &str) -> Result<usize, RegistryError> {
        let n: i64 = self.conn().query_row(
            "SELECT count(*) FROM actions WHERE namespace = ?1",
            [namespace],
            |r| r.get(0),
        )?;
        Ok(usize::try_from(n).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::units::GIB;

    #[test]
    fn namespaces_keys_and_their_deletion() {
        let reg = Registry::open_in_memory().unwrap();
        let quotas = Quotas {
            invocations_per_minute: Some(60),
            concurrent_invocations: None,
            memory_share: Some(GIB),
        };
        let ns = reg.put_namespace("alpha", quotas, false).unwrap();
        assert_eq!(ns.quotas, quotas);
        assert!(matches!(
            reg.put_namespace("alpha", Quotas::default(), false),
            Err(RegistryError::Conflict(_))
        ));
        let updated = reg.put_namespace("alpha", Quotas::default(), true).unwrap();
        assert_eq!(updated.quotas, Quotas::default());
        assert_eq!(updated.created, ns.created);
        let key = KeyRow {
            uuid: "u-1".into(),
            namespace: "alpha".into(),
            salt: "s".into(),
            hash: "h".into(),
            admin: false,
            created: 1,
        };
        reg.put_key(&key).unwrap();
        assert_eq!(reg.keys().unwrap(), vec![key.clone()]);
        assert!(reg.delete_namespace("alpha").unwrap());
        assert!(reg.keys().unwrap().is_empty());
        assert!(reg.namespaces().unwrap().is_empty());
        assert!(!reg.delete_namespace("alpha").unwrap());
    }

    #[test]
    fn one_admin_key_at_a_time() {
        let reg = Registry::open_in_memory().unwrap();
        reg.put_namespace("guest", Quotas::default(), true).unwrap();
        let admin = |uuid: &str| KeyRow {
            uuid: uuid.into(),
            namespace: "guest".into(),
            salt: "s".into(),
            hash: "h".into(),
            admin: true,
            created: 1,
        };
        reg.put_key(&admin("old")).unwrap();
        reg.put_key(&admin("new")).unwrap();
        let uuids: Vec<String> = reg.keys().unwrap().into_iter().map(|k| k.uuid).collect();
        assert_eq!(uuids, ["new"]);
    }
}
