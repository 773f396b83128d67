//! The etcd connection, with the timeouts that make a lost quorum an error in seconds (not a
//! request that hangs), and the one loop every follower of a key prefix shares: read it all,
//! then watch from the next revision, and start over after any failure.

use super::Cluster;
use etcd_client::{Client, ConnectOptions, EventType, GetOptions, WatchOptions};
use icebox_core::units::MIB_USIZE;
use std::time::Duration;
use tokio::sync::watch;

/// etcd's default request limit is 1.5 MiB: an archive up to this much travels inline with its
/// action; larger ones are fetched by hash from a node that has them.
pub const INLINE_CODE_MAX: usize = MIB_USIZE;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
const RETRY_PAUSE: Duration = Duration::from_secs(1);
/// How long one call keeps trying past a member's death or a leader change (an election
/// takes about a second with etcd's defaults).
pub const RETRY_WITHIN: Duration = Duration::from_secs(4);
pub const RETRY_PAUSE_SHORT: Duration = Duration::from_millis(200);

/// Errors that say nothing was done and another try may succeed: the member reached is gone,
/// or the cluster is electing a leader.
pub fn retryable(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        etcd_client::Error::GRpcStatus(status) => matches!(
            status.code(),
            tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::DeadlineExceeded
        ),
        _ => false,
    }
}

#[derive(Clone)]
pub struct Store {
    client: Client,
    endpoints: Vec<String>,
}

impl Store {
    pub async fn connect(endpoints: &[String]) -> anyhow::Result<Store> {
        let options = ConnectOptions::new()
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_timeout(REQUEST_TIMEOUT)
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
            .with_keep_alive_while_idle(true);
        let client = Client::connect(endpoints, Some(options))
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach etcd at {}: {e}", endpoints.join(",")))?;
        Ok(Store {
            client,
            endpoints: endpoints.to_vec(),
        })
    }

    pub fn endpoints(&self) -> String {
        self.endpoints.join(",")
    }

    /// A handle for one call (the client's methods take `&mut`; clones share the channel).
    pub fn client(&self) -> Client {
        self.client.clone()
    }
}

/// One key as read or watched.
pub struct Item {
    pub key: String,
    pub value: Vec<u8>,
}

pub enum Change {
    Put(Item),
    Delete(String),
}

/// Something kept in step with a key prefix.
#[async_trait::async_trait]
pub trait Follower: Send {
    /// Everything under the prefix now (after a start or a lost watch).
    async fn reset(&mut self, items: Vec<Item>);
    async fn change(&mut self, change: Change);
}

/// Keeps `follower` in step with `prefix` until `stop`.
pub async fn follow(
    cluster: &Cluster,
    prefix: String,
    mut follower: impl Follower,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            return;
        }
        if let Err(why) = follow_once(cluster, &prefix, &mut follower, &mut stop).await {
            tracing::debug!(%prefix, "following etcd again after: {why}");
        }
        tokio::select! {
            _ = stop.changed() => return,
            () = tokio::time::sleep(RETRY_PAUSE) => {}
        }
    }
}

/// Everything under `prefix` now, and the revision it was read at.
pub async fn read_prefix(
    cluster: &Cluster,
    prefix: &str,
) -> Result<(Vec<Item>, i64), super::ClusterError> {
    let mut read = cluster
        .etcd(|s| async move {
            s.client()
                .get(prefix, Some(GetOptions::new().with_prefix()))
                .await
        })
        .await?;
    let revision = read.header().map_or(0, |h| h.revision());
    let items = read
        .take_kvs()
        .into_iter()
        .map(|kv| Item {
            key: String::from_utf8_lossy(kv.key()).into_owned(),
            value: kv.value().to_vec(),
        })
        .collect();
    Ok((items, revision))
}

async fn follow_once(
    cluster: &Cluster,
    prefix: &str,
    follower: &mut impl Follower,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), String> {
    let (items, revision) = read_prefix(cluster, prefix)
        .await
        .map_err(|e| e.to_string())?;
    follower.reset(items).await;
    let mut stream = cluster
        .etcd(|s| async move {
            s.client()
                .watch(
                    prefix,
                    Some(
                        WatchOptions::new()
                            .with_prefix()
                            .with_start_revision(revision + 1),
                    ),
                )
                .await
        })
        .await
        .map_err(|e| e.to_string())?;
    loop {
        let message = tokio::select! {
            _ = stop.changed() => return Ok(()),
            m = stream.message() => m,
        };
        let response = match message {
            Ok(Some(r)) => r,
            Ok(None) => return Err("the watch ended".into()),
            Err(e) => return Err(e.to_string()),
        };
        if response.canceled() {
            return Err(format!(
                "the watch was cancelled: {}",
                response.cancel_reason()
            ));
        }
        for event in response.events() {
            let Some(kv) = event.kv() else { continue };
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            let change = match event.event_type() {
                EventType::Put => Change::Put(Item {
                    key,
                    value: kv.value().to_vec(),
                }),
                EventType::Delete => Change::Delete(key),
            };
            follower.change(change).await;
        }
    }
}
