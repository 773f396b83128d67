//! Shared daemon state handed to every request handler.

use crate::events::EventBus;
use crate::metrics::Metrics;
use crate::pool::Pool;
use crate::registry::Registry;
use icebox_core::ActionSpec;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Instant;

pub type AppState = Arc<Node>;

/// The node: what every request handler shares. (Not `State`, which is axum's extractor.)
pub struct Node {
    pub registry: Arc<Registry>,
    pub recorder: crate::recorder::Recorder,
    /// Namespaces, their keys and quotas.
    pub tenants: crate::tenants::Tenants,
    pub pool: Arc<Pool>,
    pub events: Arc<EventBus>,
    pub metrics: Arc<Metrics>,
    /// Actions by (namespace, name): the warm path must not read code out of SQLite.
    pub actions: RwLock<HashMap<(String, String), Arc<ActionSpec>>>,
    pub started: Instant,
    /// Request-body limits (size, time, node-wide byte budget).
    pub body: crate::serve::BodyLimits,
    /// Zip and jar code, decoded, one file per content.
    pub code: crate::code_store::CodeStore,
    /// Open/evicted/refused client connections, for /metrics.
    pub connections: Arc<crate::serve::ConnectionStats>,
    /// The cluster this node belongs to (`--cluster`), or none.
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
}

impl Node {
    pub fn action(&self, namespace: &str, name: &str) -> Option<Arc<ActionSpec>> {
        self.actions
            .read()
            .unwrap()
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// [`Self::action`], or on a cluster node one deployed elsewhere that this node's mirror
    /// has not caught up with yet.
    pub async fn find_action(
        self: &Arc<Self>,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<ActionSpec>> {
        if let Some(found) = self.action(namespace, name) {
            return Some(found);
        }
        if self.cluster.is_some() {
            return crate::cluster::fetch_action(self, namespace, name).await;
        }
        None
    }

    pub fn cache_action(&self, spec: ActionSpec) -> Arc<ActionSpec> {
        let spec = Arc::new(spec);
        self.actions
            .write()
            .unwrap()
            .insert((spec.namespace.clone(), spec.name.clone()), spec.clone());
        spec
    }

    /// Removes stored code no action names any more (after a delete or an update).
    pub async fn collect_code(self: &Arc<Self>) {
        let _collecting = self.code.naming.write().await;
        let keep: HashSet<String> = self
            .actions
            .read()
            .unwrap()
            .values()
            .filter_map(|a| a.exec.sha256.clone())
            .collect();
        let node = self.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || node.code.collect(&keep)).await {
            tracing::warn!("collecting unused action code failed: {e}");
        }
    }

    pub fn forget_action(&self, namespace: &str, name: &str) {
        self.actions
            .write()
            .unwrap()
            .remove(&(namespace.to_string(), name.to_string()));
    }
}
