//! Actions, namespaces and keys shared through etcd. A write goes to etcd first, in a
//! transaction that checks the revision it read (OpenWhisk's document revisions: of two
//! concurrent updates one wins, the other gets 409), then to the local registry; every node
//! follows the shared prefix and mirrors each change into its own registry, which stays its
//! cache for invocations while etcd is away.

use super::store::{follow, Change, Follower, Item, INLINE_CODE_MAX};
use super::{Cluster, ClusterError, Keys};
use crate::registry::{KeyRow, NamespaceRow, Quotas};
use crate::state::AppState;
use etcd_client::{Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp};
use icebox_core::ActionSpec;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

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
pub async fn put_action(
    state: &AppState,
    mut spec: ActionSpec,
    overwrite: bool,
) -> Result<ActionSpec, ClusterError> {
    let cluster = state.cluster.as_ref().expect("cluster mode");
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
    let code = inline_code(state, &spec).await;
    let value = SharedAction {
        spec,
        code,
        origin: cluster.node_id().to_string(),
    };
    write_action(cluster, &value, &read).await?;
    Ok(value.spec)
}

/// The archive's base64 if it is small enough for etcd's request limit.
async fn inline_code(state: &AppState, spec: &ActionSpec) -> Option<String> {
    spec.exec.sha256.as_ref()?;
    let reading = state.clone();
    let exec = spec.exec.clone();
    let code = tokio::task::spawn_blocking(move || reading.code.code_of(&exec))
        .await
        .ok()?
        .ok()?;
    (code.len() <= INLINE_CODE_MAX).then_some(code)
}

/// Removes an action from the cluster; returns what was stored.
pub async fn delete_action(
    state: &AppState,
    namespace: &str,
    name: &str,
) -> Result<Option<ActionSpec>, ClusterError> {
    let cluster = state.cluster.as_ref().expect("cluster mode");
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
    state: &AppState,
    name: &str,
    quotas: Quotas,
    overwrite: bool,
) -> Result<(), ClusterError> {
    let cluster = state.cluster.as_ref().expect("cluster mode");
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
pub async fn delete_namespace(state: &AppState, name: &str) -> Result<(), ClusterError> {
    let cluster = state.cluster.as_ref().expect("cluster mode");
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

pub async fn put_key(state: &AppState, row: &KeyRow) -> Result<(), ClusterError> {
    let cluster = state.cluster.as_ref().expect("cluster mode");
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

pub async fn delete_key(state: &AppState, uuid: &str) -> Result<(), ClusterError> {
    let cluster = state.cluster.as_ref().expect("cluster mode");
    let key = cluster.keys().api_key(uuid);
    cluster
        .etcd(|s| {
            let key = key.clone();
            async move { s.client().delete(key, None).await }
        })
        .await?;
    Ok(())
}

/// Mirrors the shared prefix into the local registry.
struct Mirror(AppState);

enum Entity<'a> {
    Action(&'a str, &'a str),
    Namespace(&'a str),
    Key(&'a str),
}

fn entity<'a>(keys: &Keys, key: &'a str) -> Option<Entity<'a>> {
    if let Some(rest) = Keys::rest(key, &keys.actions()) {
        let (ns, name) = rest.split_once('/')?;
        return Some(Entity::Action(ns, name));
    }
    if let Some(name) = Keys::rest(key, &keys.namespaces()) {
        return Some(Entity::Namespace(name));
    }
    Keys::rest(key, &keys.api_keys()).map(Entity::Key)
}

impl Mirror {
    fn cluster(&self) -> &Arc<Cluster> {
        self.0.cluster.as_ref().expect("cluster mode")
    }

    async fn put(&self, item: &Item) {
        let keys = self.cluster().keys();
        let applied = match entity(keys, &item.key) {
            Some(Entity::Action(..)) => match serde_json::from_slice::<SharedAction>(&item.value) {
                Ok(action) => apply_action(&self.0, action).await,
                Err(e) => Err(e.to_string()),
            },
            Some(Entity::Namespace(_)) => match serde_json::from_slice::<NamespaceRow>(&item.value)
            {
                Ok(row) => {
                    let state = self.0.clone();
                    blocking(move || {
                        state.registry.put_namespace(&row.name, row.quotas, true)?;
                        state.tenants.reload(&state.registry)
                    })
                    .await
                }
                Err(e) => Err(e.to_string()),
            },
            Some(Entity::Key(_)) => match serde_json::from_slice::<KeyRow>(&item.value) {
                // Each node has its own admin key (the same one): never replaced from here.
                Ok(row) if row.admin => Ok(()),
                Ok(row) => {
                    let state = self.0.clone();
                    blocking(move || {
                        state.registry.put_key(&row)?;
                        state.tenants.reload(&state.registry)
                    })
                    .await
                }
                Err(e) => Err(e.to_string()),
            },
            None => Ok(()),
        };
        if let Err(why) = applied {
            tracing::warn!(key = %item.key, "cannot mirror a cluster change into this node: {why}");
        }
    }

    async fn delete(&self, key: &str) {
        let keys = self.cluster().keys();
        let applied = match entity(keys, key) {
            Some(Entity::Action(ns, name)) => {
                forget_action(&self.0, ns, name).await;
                Ok(())
            }
            Some(Entity::Namespace(name)) => forget_namespace(&self.0, name).await,
            Some(Entity::Key(uuid)) => {
                let state = self.0.clone();
                let uuid = uuid.to_string();
                blocking(move || {
                    if state.tenants.key(&uuid).is_some_and(|(_, admin)| !admin) {
                        state.registry.delete_key(&uuid)?;
                        state.tenants.reload(&state.registry)?;
                    }
                    Ok(())
                })
                .await
            }
            None => Ok(()),
        };
        if let Err(why) = applied {
            tracing::warn!(%key, "cannot mirror a cluster delete into this node: {why}");
        }
    }
}

#[async_trait::async_trait]
impl Follower for Mirror {
    /// Namespaces before keys before actions (keys name namespaces); then whatever this node
    /// has that the cluster no longer has goes.
    async fn reset(&mut self, items: Vec<Item>) {
        let keys = self.cluster().keys();
        let rank = |item: &Item| match entity(keys, &item.key) {
            Some(Entity::Namespace(_)) => 0,
            Some(Entity::Key(_)) => 1,
            _ => 2,
        };
        let mut items = items;
        items.sort_by_key(rank);
        let mut namespaces: HashSet<String> = HashSet::new();
        let mut api_keys: HashSet<String> = HashSet::new();
        let mut actions: HashSet<(String, String)> = HashSet::new();
        for item in &items {
            match entity(keys, &item.key) {
                Some(Entity::Namespace(n)) => {
                    namespaces.insert(n.to_string());
                }
                Some(Entity::Key(k)) => {
                    api_keys.insert(k.to_string());
                }
                Some(Entity::Action(ns, n)) => {
                    actions.insert((ns.to_string(), n.to_string()));
                }
                None => {}
            }
            self.put(item).await;
        }
        let stale_actions: Vec<(String, String)> = self
            .0
            .actions
            .read()
            .unwrap()
            .keys()
            .filter(|k| !actions.contains(*k))
            .cloned()
            .collect();
        for (ns, name) in stale_actions {
            forget_action(&self.0, &ns, &name).await;
        }
        let stale_keys: Vec<String> = self
            .0
            .tenants
            .key_uuids()
            .into_values()
            .flatten()
            .filter(|k| !api_keys.contains(k))
            .collect();
        for uuid in stale_keys {
            self.delete(&keys.api_key(&uuid)).await;
        }
        let admin_ns = self.0.tenants.admin_namespace().to_string();
        let local_namespaces = {
            let registry = self.0.registry.clone();
            blocking(move || registry.namespaces())
                .await
                .unwrap_or_default()
        };
        for row in local_namespaces {
            if row.name != admin_ns && !namespaces.contains(&row.name) {
                if let Err(why) = forget_namespace(&self.0, &row.name).await {
                    tracing::warn!(
                        "cannot remove namespace {} the cluster no longer has: {why}",
                        row.name
                    );
                }
            }
        }
    }

    async fn change(&mut self, change: Change) {
        match change {
            Change::Put(item) => self.put(&item).await,
            Change::Delete(key) => self.delete(&key).await,
        }
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::registry::RegistryError> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// An action this node has not mirrored yet, read from etcd and mirrored now: a deploy on one
/// node is invocable on every node at once, not after the watch delivers it.
pub async fn fetch_action(
    state: &AppState,
    namespace: &str,
    name: &str,
) -> Option<Arc<ActionSpec>> {
    let cluster = state.cluster.as_ref()?;
    let read = read_action(cluster, namespace, name).await.ok()?;
    let action = read.existing?;
    if let Err(why) = apply_action(state, action).await {
        tracing::warn!("cannot mirror action {namespace}/{name} on demand: {why}");
        return None;
    }
    state.action(namespace, name)
}

/// Makes this node serve `action` as the cluster stored it. The same version twice (our own
/// write coming back through the watch) changes nothing, so warm instances stay.
async fn apply_action(state: &AppState, action: SharedAction) -> Result<(), String> {
    let spec = action.spec;
    if let Some(cached) = state.action(&spec.namespace, &spec.name) {
        if cached.version == spec.version && cached.updated == spec.updated {
            return Ok(());
        }
    }
    if let Some(sha256) = spec.exec.sha256.clone() {
        ensure_code(state, &sha256, action.code, &action.origin).await?;
    }
    let naming = state.code.naming.read().await;
    let registry = state.registry.clone();
    let stored = spec.clone();
    blocking(move || registry.store_action(&stored)).await?;
    let cached = state.cache_action(spec);
    drop(naming);
    state.pool.retire_action(&cached.fqn()).await;
    state.pool.action_deployed(&cached);
    Ok(())
}

/// The archive named `sha256` in the local code store: from the inline copy, or fetched from
/// the node that stored it (a few tries: it may still be starting its HTTP server).
async fn ensure_code(
    state: &AppState,
    sha256: &str,
    inline: Option<String>,
    origin: &str,
) -> Result<(), String> {
    if state.code.open_archive(sha256).is_ok() {
        return Ok(());
    }
    let cluster = state.cluster.as_ref().expect("cluster mode");
    let text = match inline {
        Some(text) => text,
        None => {
            let mut last = String::new();
            let mut fetched = None;
            for _ in 0..10 {
                match cluster.fetch_code(origin, sha256).await {
                    Ok(text) => {
                        fetched = Some(text);
                        break;
                    }
                    Err(why) => last = why,
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            fetched
                .ok_or_else(|| format!("cannot fetch code {sha256} from node {origin}: {last}"))?
        }
    };
    let storing = state.clone();
    let stored = tokio::task::spawn_blocking(move || {
        storing
            .code
            .put_base64(&text, u64::MAX, |_| Ok(()))
            .map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())??;
    if stored.sha256 != sha256 {
        return Err(format!(
            "code fetched for {sha256} hashes to {}: refused",
            stored.sha256
        ));
    }
    Ok(())
}

async fn forget_action(state: &AppState, namespace: &str, name: &str) {
    let registry = state.registry.clone();
    let (ns, n) = (namespace.to_string(), name.to_string());
    let _ = blocking(move || registry.delete_action(&ns, &n)).await;
    if let Some(spec) = state.action(namespace, name) {
        state.forget_action(namespace, name);
        state.pool.retire_action(&spec.fqn()).await;
        if spec.exec.sha256.is_some() {
            state.collect_code().await;
        }
    }
}

async fn forget_namespace(state: &AppState, name: &str) -> Result<(), String> {
    if name == state.tenants.admin_namespace() || !state.tenants.exists(name) {
        return Ok(());
    }
    let fqns: Vec<(String, String)> = state
        .actions
        .read()
        .unwrap()
        .keys()
        .filter(|(ns, _)| ns == name)
        .cloned()
        .collect();
    for (ns, n) in fqns {
        forget_action(state, &ns, &n).await;
    }
    let s = state.clone();
    let ns = name.to_string();
    blocking(move || {
        s.registry.delete_namespace(&ns)?;
        s.tenants.reload(&s.registry)
    })
    .await
}

/// Reads the shared state once and mirrors it (before the node serves).
pub async fn resync(state: &AppState) -> anyhow::Result<()> {
    let cluster = state.cluster.clone().expect("cluster mode");
    let prefix = cluster.keys().shared();
    let mut read = cluster
        .etcd(|s| {
            let prefix = prefix.clone();
            async move {
                s.client()
                    .get(prefix, Some(GetOptions::new().with_prefix()))
                    .await
            }
        })
        .await?;
    let items = read
        .take_kvs()
        .into_iter()
        .map(|kv| Item {
            key: String::from_utf8_lossy(kv.key()).into_owned(),
            value: kv.value().to_vec(),
        })
        .collect();
    Mirror(state.clone()).reset(items).await;
    Ok(())
}

pub async fn watch(state: AppState, stop: watch::Receiver<bool>) {
    let cluster = state.cluster.clone().expect("cluster mode");
    let prefix = cluster.keys().shared();
    follow(&cluster, prefix, Mirror(state), stop).await;
}
