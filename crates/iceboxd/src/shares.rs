//! Keeps every namespace's idle and frozen instances within its keep-alive memory share:
//! once a second, what the pool charges each namespace is compared with its share, and the
//! namespace's own longest-idle instances go first (`tenants::share::over_share`). It acts on
//! the pool through the node's state, so it sits above both `tenants` and `pool`.

use crate::pool::EvictReason;
use crate::state::AppState;
use crate::tenants::share::{over_share, KeptAlive};
use std::time::Duration;
use tokio::sync::watch;

const PERIOD: Duration = Duration::from_secs(1);

pub async fn keep_shares(state: AppState, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(PERIOD) => {}
            _ = stop.changed() => return,
        }
        let shares = state.tenants.memory_shares();
        if shares.is_empty() {
            continue;
        }
        let kept: Vec<KeptAlive> = state
            .pool
            .instance_views()
            .into_iter()
            .filter(|v| v.state.is_kept_alive())
            .filter_map(|v| {
                let (namespace, _) = v.action.split_once('/')?;
                Some(KeptAlive {
                    namespace: namespace.to_string(),
                    charged: v.charged,
                    idle_ms: v.idle_ms.unwrap_or(0),
                    id: v.id,
                })
            })
            .collect();
        for id in over_share(&kept, &shares) {
            if state
                .pool
                .evict_idle_for(&id, EvictReason::NamespaceShare)
                .await
            {
                tracing::info!(instance = %id, "evicted: its namespace was over its keep-alive memory share");
            }
        }
    }
}
