//! This node's record under its lease: registered at start, kept alive every third of the
//! lease with what placement needs (budget, measured charge, warm instances, load), and
//! registered again under a new lease after a lapse (etcd unreachable for longer than it).

use crate::cluster::{Cluster, ClusterError, Member};
use crate::state::AppState;
use etcd_client::PutOptions;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long one keep-alive answer may take before the lease is treated as in doubt.
const KEEP_ALIVE_ANSWER: Duration = Duration::from_secs(2);

/// What this node tells the others about itself now.
fn record(state: &AppState) -> Member {
    let cluster = state.cluster.as_ref().expect("cluster mode");
    let memory = state.pool.memory_view();
    let views = state.pool.instance_views();
    let warm = views.iter().filter(|v| v.state.is_kept_alive()).count();
    let in_flight = views.iter().map(|v| u64::from(v.in_flight)).sum();
    Member {
        id: cluster.cfg.node_id.clone(),
        url: cluster.cfg.advertise.clone(),
        kinds: state.pool.runtimes().kinds(),
        budget: memory.budget,
        charged: memory.charged,
        memory_by_state: memory
            .by_state
            .iter()
            .map(|(s, m)| (s.clone(), m.memory.uss))
            .collect(),
        instances: state.pool.instance_count(),
        warm,
        in_flight,
        version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// A new lease and the record under it.
pub async fn register(state: &AppState) -> anyhow::Result<()> {
    let cluster = state.cluster.as_ref().expect("cluster mode");
    let ttl = i64::try_from(cluster.cfg.lease.as_secs().max(1)).unwrap_or(i64::MAX);
    let lease = cluster
        .etcd(|s| async move { s.client().lease_grant(ttl, None).await })
        .await?
        .id();
    cluster.lease.store(lease, Ordering::SeqCst);
    put_record(state, lease).await?;
    Ok(())
}

async fn put_record(state: &AppState, lease: i64) -> Result<(), ClusterError> {
    let cluster = state.cluster.as_ref().expect("cluster mode");
    let me = record(state);
    let value = serde_json::to_vec(&me).unwrap_or_default();
    let key = cluster.keys().node(&me.id);
    cluster
        .etcd(|s| {
            let (key, value) = (key.clone(), value.clone());
            async move {
                s.client()
                    .put(key, value, Some(PutOptions::new().with_lease(lease)))
                    .await
            }
        })
        .await?;
    // Our own record counts at once: placement must not wait for the watch to see us.
    cluster.members.write().unwrap().insert(me.id.clone(), me);
    Ok(())
}

/// Keeps the lease alive and the record fresh until `stop`; after a lapse (etcd unreachable for
/// longer than the lease) registers again.
pub async fn keep(state: AppState, mut stop: watch::Receiver<bool>) {
    let cluster = state.cluster.clone().expect("cluster mode");
    let period = (cluster.cfg.lease / 3).max(Duration::from_millis(200));
    let mut keeper: Option<(etcd_client::LeaseKeeper, etcd_client::LeaseKeepAliveStream)> = None;
    let mut last_kept = Instant::now();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            () = tokio::time::sleep(period) => {}
        }
        let lease = cluster.lease.load(Ordering::SeqCst);
        if lease == 0 {
            if let Err(e) = register(&state).await {
                tracing::debug!("cannot register with the cluster yet: {e:#}");
            }
            continue;
        }
        match keep_alive_once(&cluster, lease, &mut keeper).await {
            Ok(true) => {
                last_kept = Instant::now();
                if let Err(e) = put_record(&state, lease).await {
                    tracing::debug!("cannot refresh this node's record: {e}");
                }
            }
            Ok(false) => {
                tracing::warn!("this node's cluster lease lapsed: registering again");
                keeper = None;
                cluster.lease.store(0, Ordering::SeqCst);
            }
            // Unanswered for longer than the lease: etcd has let it lapse if it is up at all,
            // so register again rather than keep asking about a lease that is gone (a node
            // whose keep-alive stream kept failing after etcd's quorum came back stayed
            // degraded until the test gave up).
            Err(why) if last_kept.elapsed() > cluster.cfg.lease => {
                tracing::warn!("no lease keep-alive answered for longer than the lease ({why}): registering again");
                keeper = None;
                cluster.etcd_failed(&why);
                cluster.lease.store(0, Ordering::SeqCst);
                last_kept = Instant::now();
            }
            Err(why) => {
                tracing::debug!("lease keep-alive failed: {why}");
                keeper = None;
                cluster.etcd_failed(&why);
            }
        }
    }
}

/// Ok(false) when etcd says the lease is gone.
async fn keep_alive_once(
    cluster: &Cluster,
    lease: i64,
    keeper: &mut Option<(etcd_client::LeaseKeeper, etcd_client::LeaseKeepAliveStream)>,
) -> Result<bool, String> {
    if keeper.is_none() {
        let pair = tokio::time::timeout(
            KEEP_ALIVE_ANSWER,
            cluster.store().client().lease_keep_alive(lease),
        )
        .await
        .map_err(|_| "no answer to a lease keep-alive".to_string())?
        .map_err(|e| e.to_string())?;
        *keeper = Some(pair);
    }
    let (k, stream) = keeper.as_mut().expect("set above");
    k.keep_alive().await.map_err(|e| e.to_string())?;
    let answer = tokio::time::timeout(KEEP_ALIVE_ANSWER, stream.message())
        .await
        .map_err(|_| "no answer to a lease keep-alive".to_string())?
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "the lease keep-alive stream ended".to_string())?;
    cluster.etcd_ok();
    Ok(answer.ttl() > 0)
}
