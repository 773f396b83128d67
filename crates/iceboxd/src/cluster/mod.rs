//! icebox across machines: nodes that share one etcd. Membership and warm instances live under
//! each node's lease (OpenWhisk's FPC scheduler does the same), actions, namespaces and keys
//! under the cluster's prefix, and an invocation is placed by the node that receives it
//! (`icebox_policy::placement`) and forwarded once over HTTP. Without `--cluster` none of this
//! runs and SQLite stays the registry.
//!
//! The local registry stays the node's cache of the shared state: invocations of deployed
//! actions are served from it when etcd has no quorum; writes are refused then (503).

mod forward;
mod index;
mod keys;
mod membership;
mod metrics;
mod replicate;
pub(crate) mod store;
mod warm;

pub use forward::{ForwardOutcome, Outgoing, FORWARDED_BY};
pub use keys::Keys;
pub use metrics::ClusterCollector;
pub use replicate::{
    delete_action, delete_key, delete_namespace, put_action, put_key, put_namespace, read_action,
    SharedAction,
};

use crate::metrics::{OutcomeLabel, ReasonLabel};
use icebox_policy::{NodeView, PlacementPolicy, PlacementReason};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// What `--cluster` and its companion flags say.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// host:port of each etcd member (the `etcd://` scheme stripped).
    pub endpoints: Vec<String>,
    pub node_id: String,
    /// The URL other nodes reach this one's API at.
    pub advertise: String,
    /// Every key of this cluster lives under it; another prefix is another cluster.
    pub prefix: String,
    pub lease: Duration,
    pub placement: PlacementPolicy,
    /// How long activation records are kept (the index keys expire with them).
    pub retention: Duration,
}

impl ClusterConfig {
    /// `etcd://h1:2379,h2:2379` → the endpoints.
    pub fn parse_endpoints(spec: &str) -> Result<Vec<String>, String> {
        let rest = spec
            .strip_prefix("etcd://")
            .ok_or_else(|| format!("--cluster {spec}: expected etcd://HOST:PORT[,HOST:PORT...]"))?;
        let endpoints: Vec<String> = rest
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_string)
            .collect();
        if endpoints.is_empty() || endpoints.iter().any(|e| !e.contains(':')) {
            return Err(format!(
                "--cluster {spec}: every etcd member needs HOST:PORT"
            ));
        }
        Ok(endpoints)
    }
}

/// Why a cluster operation failed, in the words a client gets.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// etcd cannot be reached or has no quorum: the write is refused (503), nothing is lost.
    #[error("the cluster's state store (etcd) cannot be reached or has no quorum, so deploys, updates and deletes are refused until it is back ({0})")]
    Unavailable(String),
    /// Another node changed the same entity between our read and our write (OpenWhisk's 409).
    #[error("Concurrent modification to resource detected.")]
    Conflict,
    #[error("{0}")]
    AlreadyExists(String),
    #[error("the cluster's state store holds a value this node cannot read: {0}")]
    Corrupt(String),
}

/// One node as it advertises itself under its lease.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Member {
    pub id: String,
    pub url: String,
    pub kinds: Vec<String>,
    /// The keep-alive budget (`--pool-memory`).
    pub budget: u64,
    /// What idle and frozen instances are charged now (measured USS by default).
    pub charged: u64,
    /// Local memory of all its instances, by state.
    pub memory_by_state: BTreeMap<String, u64>,
    pub instances: usize,
    /// Idle or frozen instances (warm starts waiting).
    pub warm: usize,
    pub in_flight: u64,
    pub version: String,
}

impl Member {
    pub fn free_keep_alive(&self) -> u64 {
        self.budget.saturating_sub(self.charged)
    }
}

/// Counters for /metrics (`icebox_cluster_*`), prometheus-client families like the node's own.
#[derive(Default)]
pub struct ClusterStats {
    pub placements: Family<ReasonLabel, Counter>,
    pub forwards: Family<OutcomeLabel, Counter>,
    pub etcd_errors: Counter,
}

impl ClusterStats {
    pub fn placed(&self, reason: PlacementReason) {
        self.placements
            .get_or_create(&ReasonLabel {
                reason: reason.as_str().into(),
            })
            .inc();
    }

    pub fn forwarded(&self, outcome: &'static str) {
        self.forwards
            .get_or_create(&OutcomeLabel {
                outcome: outcome.into(),
            })
            .inc();
    }

    /// Adds the counters to the node's metrics registry.
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "cluster_placements",
            "Invocations placed, by reason (warm, home, overflow, round-robin)",
            self.placements.clone(),
        );
        registry.register(
            "cluster_forwards",
            "Invocations forwarded to another node, by outcome (answered, unreachable, lost, unknown-there)",
            self.forwards.clone(),
        );
        registry.register(
            "cluster_etcd_errors",
            "etcd calls that failed (and activation index entries dropped)",
            self.etcd_errors.clone(),
        );
    }
}

pub struct Cluster {
    pub cfg: ClusterConfig,
    store: store::Store,
    keys: Keys,
    /// The lease this node's membership and warm keys live under (0 before the first grant).
    pub(crate) lease: AtomicI64,
    pub(crate) members: RwLock<BTreeMap<String, Member>>,
    /// Action fqn → ids of the nodes holding an idle instance of it.
    pub(crate) warm: RwLock<HashMap<String, BTreeSet<String>>>,
    /// False while etcd does not answer (health says degraded; placement stays local).
    reachable: AtomicBool,
    last_error: Mutex<Option<String>>,
    turn: AtomicU64,
    peers: forward::Peers,
    index: index::Index,
    pub stats: ClusterStats,
}

impl Cluster {
    /// Connects to etcd and checks this node belongs to the cluster under the prefix (same
    /// admin key, same cluster as its state directory joined before); refuses to start
    /// otherwise, with the reason.
    pub async fn join(
        cfg: ClusterConfig,
        admin_key: &str,
        state_dir: &std::path::Path,
    ) -> anyhow::Result<Cluster> {
        let store = store::Store::connect(&cfg.endpoints).await?;
        let keys = Keys::new(&cfg.prefix);
        membership::check_identity(&store, &keys, &cfg, admin_key, state_dir).await?;
        let admin_basic = crate::auth::basic_header(admin_key);
        Ok(Cluster {
            peers: forward::Peers::new(admin_basic),
            cfg,
            store,
            keys,
            lease: AtomicI64::new(0),
            members: RwLock::new(BTreeMap::new()),
            warm: RwLock::new(HashMap::new()),
            reachable: AtomicBool::new(true),
            last_error: Mutex::new(None),
            turn: AtomicU64::new(0),
            index: index::Index::new(),
            stats: ClusterStats::default(),
        })
    }

    /// Follows the members and their warm instances until `stop`; writes the activation index.
    pub fn follow(self: &Arc<Self>, stop: &tokio::sync::watch::Receiver<bool>) {
        tokio::spawn(membership::watch_members(self.clone(), stop.clone()));
        tokio::spawn(warm::watch(self.clone(), stop.clone()));
        tokio::spawn(index::write(self.clone()));
    }

    /// Leaves at once instead of after the lease: placement stops sending here.
    pub async fn leave(&self) {
        let lease = self.lease.swap(0, Ordering::SeqCst);
        if lease != 0 {
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                self.store.client().lease_revoke(lease).await
            })
            .await;
        }
    }

    pub fn node_id(&self) -> &str {
        &self.cfg.node_id
    }

    /// `None` when etcd answers; the reason otherwise (health turns `degraded`).
    pub fn degraded(&self) -> Option<String> {
        (!self.reachable.load(Ordering::Relaxed)).then(|| {
            let why = self.last_error.lock().unwrap().clone().unwrap_or_default();
            format!("cluster state store (etcd) unreachable: {why}; deployed actions still run here, writes are refused")
        })
    }

    pub(crate) fn etcd_ok(&self) {
        self.reachable.store(true, Ordering::Relaxed);
    }

    pub(crate) fn etcd_failed(&self, why: &str) {
        self.stats.etcd_errors.inc();
        self.reachable.store(false, Ordering::Relaxed);
        *self.last_error.lock().unwrap() = Some(why.to_string());
    }

    pub fn members(&self) -> Vec<Member> {
        self.members.read().unwrap().values().cloned().collect()
    }

    pub fn member(&self, id: &str) -> Option<Member> {
        self.members.read().unwrap().get(id).cloned()
    }

    pub fn warm_nodes(&self, fqn: &str) -> BTreeSet<String> {
        self.warm
            .read()
            .unwrap()
            .get(fqn)
            .cloned()
            .unwrap_or_default()
    }

    /// Where an invocation of `fqn` (a new instance taking `need_bytes`) should run: live
    /// nodes, best first. Only this node while etcd is unreachable (the others' leases and
    /// warm instances are unknown then).
    pub fn place(&self, fqn: &str, need_bytes: u64) -> Vec<(Member, PlacementReason)> {
        let members = self.members.read().unwrap();
        let local_only =
            !self.reachable.load(Ordering::Relaxed) || !members.contains_key(&self.cfg.node_id);
        if local_only {
            return Vec::new();
        }
        let warm = self.warm_nodes(fqn);
        let list: Vec<&Member> = members.values().collect();
        let views: Vec<NodeView<'_>> = list
            .iter()
            .map(|m| NodeView {
                id: &m.id,
                warm: warm.contains(&m.id),
                free_bytes: m.free_keep_alive(),
            })
            .collect();
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        icebox_policy::placement::candidates(self.cfg.placement, fqn, &views, need_bytes, turn)
            .into_iter()
            .map(|c| (list[c.node].clone(), c.reason))
            .collect()
    }

    /// Sends the request to `member` once; see [`forward::Peers::send`].
    pub async fn forward(&self, member: &Member, request: forward::Outgoing<'_>) -> ForwardOutcome {
        self.peers
            .send(&member.url, &self.cfg.node_id, request)
            .await
    }

    /// Records that this node holds activation `id` (best effort; the record itself is local).
    pub fn index_activation(&self, id: &str) {
        index::record(self, id);
    }

    /// The node that holds activation `id`, if the index knows it.
    pub async fn activation_owner(&self, id: &str) -> Option<Member> {
        let node = index::owner(self, id).await?;
        self.member(&node)
    }

    /// A stored archive's base64 from a peer that has it.
    pub async fn fetch_code(&self, node: &str, sha256: &str) -> Result<String, String> {
        let member = self
            .member(node)
            .ok_or_else(|| format!("node {node}, which holds the code, is not a live member"))?;
        self.peers.fetch_code(&member.url, sha256).await
    }

    pub fn view(&self) -> serde_json::Value {
        let members = self.members();
        let reason = self.degraded();
        let warm = self.warm.read().unwrap();
        let mut warm_actions: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (fqn, nodes) in warm.iter() {
            for n in nodes {
                warm_actions
                    .entry(n.as_str())
                    .or_default()
                    .push(fqn.as_str());
            }
        }
        serde_json::json!({
            "node": self.cfg.node_id,
            "prefix": self.cfg.prefix,
            "placement": self.cfg.placement,
            "state": if reason.is_some() { "degraded" } else { "ok" },
            "reason": reason,
            "lease_ms": u64::try_from(self.cfg.lease.as_millis()).unwrap_or(u64::MAX),
            "nodes": members.iter().map(|m| {
                let mut actions = warm_actions.get(m.id.as_str()).cloned().unwrap_or_default();
                actions.sort_unstable();
                serde_json::json!({
                    "id": m.id,
                    "url": m.url,
                    "kinds": m.kinds,
                    "budget": m.budget,
                    "charged": m.charged,
                    "free": m.free_keep_alive(),
                    "memory_by_state": m.memory_by_state,
                    "instances": m.instances,
                    "warm": m.warm,
                    "warm_actions": actions,
                    "in_flight": m.in_flight,
                    "version": m.version,
                })
            }).collect::<Vec<_>>(),
        })
    }

    pub(crate) fn store(&self) -> &store::Store {
        &self.store
    }

    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Runs an etcd call, keeping `reachable` current. A call that failed because the member
    /// it reached is gone or its leader changed is tried again (briefly: a lost quorum must
    /// answer 503 within seconds); writes guarded by a revision stay correct when a retried
    /// one had in fact landed (see `replicate::write_action`).
    pub(crate) async fn etcd<T, F, Fut>(&self, call: F) -> Result<T, ClusterError>
    where
        F: Fn(store::Store) -> Fut,
        Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = std::time::Instant::now() + store::RETRY_WITHIN;
        loop {
            match call(self.store.clone()).await {
                Ok(v) => {
                    self.etcd_ok();
                    return Ok(v);
                }
                Err(e) if store::retryable(&e) && std::time::Instant::now() < deadline => {
                    tracing::debug!("etcd call failed, trying again: {e}");
                    tokio::time::sleep(store::RETRY_PAUSE_SHORT).await;
                }
                Err(e) => {
                    let why = e.to_string();
                    self.etcd_failed(&why);
                    return Err(ClusterError::Unavailable(why));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_need_the_scheme_and_a_port_each() {
        assert_eq!(
            ClusterConfig::parse_endpoints("etcd://h1:2379, h2:2379,").unwrap(),
            ["h1:2379", "h2:2379"]
        );
        assert!(ClusterConfig::parse_endpoints("http://h1:2379").is_err());
        assert!(ClusterConfig::parse_endpoints("etcd://h1").is_err());
        assert!(ClusterConfig::parse_endpoints("etcd://").is_err());
    }

    #[test]
    fn free_keep_alive_memory_is_the_budget_left_and_never_negative() {
        let mut m = Member {
            id: "n1".into(),
            url: "http://a".into(),
            kinds: vec![],
            budget: 100,
            charged: 30,
            memory_by_state: BTreeMap::new(),
            instances: 0,
            warm: 0,
            in_flight: 0,
            version: String::new(),
        };
        assert_eq!(m.free_keep_alive(), 70);
        m.charged = 130;
        assert_eq!(m.free_keep_alive(), 0);
    }
}
