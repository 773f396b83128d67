//! Mirrors the cluster's actions, namespaces and keys into this node's registry, action cache
//! and code store: all of it at start and after a lost watch, then each change as it comes.

use crate::cluster::store::{follow, read_prefix, Change, Follower, Item, INLINE_CODE_MAX};
use crate::cluster::{read_action, Cluster, Keys, SharedAction};
use crate::registry::{KeyRow, NamespaceRow};
use crate::state::AppState;
use icebox_core::ActionSpec;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The archive's base64 if it is small enough for etcd's request limit.
pub async fn inline_code(state: &AppState, spec: &ActionSpec) -> Option<String> {
    spec.exec.sha256.as_ref()?;
    let reading = state.clone();
    let exec = spec.exec.clone();
    let code = tokio::task::spawn_blocking(move || reading.code.code_of(&exec))
        .await
        .ok()?
        .ok()?;
    (code.len() <= INLINE_CODE_MAX).then_some(code)
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
    let (items, _) = read_prefix(&cluster, &cluster.keys().shared()).await?;
    Mirror(state.clone()).reset(items).await;
    Ok(())
}

pub async fn watch(state: AppState, stop: watch::Receiver<bool>) {
    let cluster = state.cluster.clone().expect("cluster mode");
    let prefix = cluster.keys().shared();
    follow(&cluster, prefix, Mirror(state), stop).await;
}
