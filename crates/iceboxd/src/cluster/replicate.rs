//! Writes of actions, namespaces and keys to etcd. A write goes to etcd first, in a
//! transaction that checks the revision it read (OpenWhisk's document revisions: of two
//! concurrent updates one wins, the other gets 409), then to the local registry; every node
//! mirrors the shared prefix into its own registry (`cluster_sync::mirror`), which stays its
//! cache for invocations while etcd is away.

use super::{Cluster, ClusterError};
use crate::registry::{KeyRow, NamespaceRow, Quotas};
use etcd_client::{Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp};
use icebox_core::ActionSpec;
use serde::{Deserialize, Serialize};

/// An action as etcd holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SharedAction {
    pub spec: ActionSpec,
    /// The archive's base64 when it is small enough to travel inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The node that stored it (it has the archive when it is not inline).
    pub origin: String,
}

/// What an update reads before it writes: the stored action and the revision to check.
pub struct Read {
    pub existing: Option<SharedAction>,
    pub mod_revision: i64,
}

pub async fn read_action(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
) -> Result<Read, ClusterError> {
    let key = cluster.keys().action(namespace, name);
    let read = cluster
        .etcd(|s| {
            let key = key.clone();
            async move { s.client().get(key, None).await }
        })
        .await?;
    match read.kvs().first() {
        None => Ok(Read {
            existing: None,
            mod_revision: 0,
        }),
        Some(kv) => Ok(Read {
            existing: Some(
                serde_json::from_slice(kv.value())
                    .map_err(|e| ClusterError::Corrupt(e.to_string()))?,
            ),
            mod_revision: kv.mod_revision(),
        }),
    }
}

/// Writes `value` if the key is still at `read`'s revision (absent when it was absent).
pub async fn write_action(
    cluster: &Cluster,
    value: &SharedAction,
    read: &Read,
) -> Result<(), ClusterError> {
    let key = cluster
        .keys()
        .action(&value.spec.namespace, &value.spec.name);
    let bytes = serde_json::to_vec(value).map_err(|e| ClusterError::Corrupt(e.to_string()))?;
    let compare = if read.existing.is_some() {
        Compare::mod_revision(key.clone(), CompareOp::Equal, read.mod_revision)
    } else {
        Compare::create_revision(key.clone(), CompareOp::Equal, 0)
    };
    let txn = Txn::new()
        .when([compare])
        .and_then([TxnOp::put(key, bytes, None)]);
    let done = cluster
        .etcd(|s| {
            let txn = txn.clone();
            async move { s.client().txn(txn).await }
        })
        .await?;
    if done.succeeded() {
        return Ok(());
    }
    // A try that landed but whose answer was lost, retried, fails its own check: the value
    // stored is then ours (it names this node and the millisecond of the write).
    let now = read_action(cluster, &value.spec.namespace, &value.spec.name).await?;
    let ours = now.existing.is_some_and(|stored| {
        stored.origin == value.origin
            && stored.spec.version == value.spec.version
            && stored.spec.updated == value.spec.updated
    });
    if ours {
        Ok(())
    } else {
        Err(ClusterError::Conflict)
    }
}

/// Creates or (with `overwrite`) updates an action in the cluster: version and `updated` are
/// the cluster's, as the registry's are on one node. Returns the spec as stored.
/// `code` is the archive's base64 when it is small enough to travel inline.
pub async fn put_action(
    cluster: &Cluster,
    mut spec: ActionSpec,
    overwrite: bool,
    code: Option<String>,
) -> Result<ActionSpec, ClusterError> {
    let read = read_action(cluster, &spec.namespace, &spec.name).await?;
    spec.version = match &read.existing {
        None => crate::registry::FIRST_VERSION.to_string(),
        Some(_) if !overwrite => {
            return Err(ClusterError::AlreadyExists(format!(
                "action {} already exists",
                spec.fqn()
            )))
        }
        Some(old) => crate::registry::bump_patch(&old.spec.version).ok_or_else(|| {
            ClusterError::Corrupt(format!(
                "action {} has version {:?}",
                spec.fqn(),
                old.spec.version
            ))
        })?,
    };
    spec.updated = crate::now_ms();
    let value = SharedAction {
        spec,
        code,
        origin: cluster.node_id().to_string(),
    };
    write_action(cluster, &value, &read).await?;
    Ok(value.spec)
}

/// Removes an action from the cluster; returns what was stored.
pub async fn delete_action(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
) -> Result<Option<ActionSpec>, ClusterError> {
    let key = cluster.keys().action(namespace, name);
    let deleted = cluster
        .etcd(|s| {
            let key = key.clone();
            async move {
                s.client()
                    .delete(key, Some(DeleteOptions::new().with_prev_key()))
                    .await
            }
        })
        .await?;
    deleted
        .prev_kvs()
        .first()
        .map(|kv| {
            serde_json::from_slice::<SharedAction>(kv.value())
                .map(|a| a.spec)
                .map_err(|e| ClusterError::Corrupt(e.to_string()))
        })
        .transpose()
}

pub async fn put_namespace(
    cluster: &Cluster,
    name: &str,
    quotas: Quotas,
    overwrite: bool,
) -> Result<(), ClusterError> {
    let key = cluster.keys().namespace(name);
    let row = NamespaceRow {
        name: name.to_string(),
        created: crate::now_ms(),
        quotas,
    };
    let bytes = serde_json::to_vec(&row).map_err(|e| ClusterError::Corrupt(e.to_string()))?;
    let txn = if overwrite {
        Txn::new().and_then([TxnOp::put(key, bytes, None)])
    } else {
        Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, bytes, None)])
    };
    let done = cluster
        .etcd(|s| {
            let txn = txn.clone();
            async move { s.client().txn(txn).await }
        })
        .await?;
    if done.succeeded() {
        Ok(())
    } else {
        Err(ClusterError::AlreadyExists(format!(
            "namespace '{name}' already exists"
        )))
    }
}

/// Removes a namespace with its keys and actions from the cluster, in one transaction.
pub async fn delete_namespace(cluster: &Cluster, name: &str) -> Result<(), ClusterError> {
    let keys_prefix = cluster.keys().api_keys();
    let read = cluster
        .etcd(|s| {
            let keys_prefix = keys_prefix.clone();
            async move {
                s.client()
                    .get(keys_prefix, Some(GetOptions::new().with_prefix()))
                    .await
            }
        })
        .await?;
    let mut ops = vec![
        TxnOp::delete(cluster.keys().namespace(name), None),
        TxnOp::delete(
            format!("{}{name}/", cluster.keys().actions()),
            Some(DeleteOptions::new().with_prefix()),
        ),
    ];
    for kv in read.kvs() {
        if let Ok(row) = serde_json::from_slice::<KeyRow>(kv.value()) {
            if row.namespace == name {
                ops.push(TxnOp::delete(kv.key().to_vec(), None));
            }
        }
    }
    cluster
        .etcd(|s| {
            let ops = ops.clone();
            async move { s.client().txn(Txn::new().and_then(ops)).await }
        })
        .await?;
    Ok(())
}

pub async fn put_key(cluster: &Cluster, row: &KeyRow) -> Result<(), ClusterError> {
    let key = cluster.keys().api_key(&row.uuid);
    let bytes = serde_json::to_vec(row).map_err(|e| ClusterError::Corrupt(e.to_string()))?;
    cluster
        .etcd(|s| {
            let (key, bytes) = (key.clone(), bytes.clone());
            async move { s.client().put(key, bytes, None).await }
        })
        .await?;
    Ok(())
}

pub async fn delete_key(cluster: &Cluster, uuid: &str) -> Result<(), ClusterError> {
    let key = cluster.keys().api_key(uuid);
    cluster
        .etcd(|s| {
            let key = key.clone();
            async move { s.client().delete(key, None).await }
        })
        .await?;
    Ok(())
}
