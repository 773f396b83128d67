//! Which node holds which activation record: a key per activation naming the node, under a
//! lease as long as records are kept (`--activation-max-age`), so any node can answer
//! `GET /activations/{id}` by asking the holder. Written in the background in batches, off the
//! invocation path; while etcd is away the ids are dropped (the record itself stays on the node
//! that ran it, readable there).

use super::Cluster;
use etcd_client::{PutOptions, Txn, TxnOp};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Ids waiting to be written; more are dropped (counted as etcd errors) rather than grow.
const QUEUE: usize = 16_384;
/// etcd's default limit of operations in one transaction.
const BATCH: usize = 128;
/// One lease per this much time: the index keys of its activations expire together.
const LEASE_SPAN: Duration = Duration::from_secs(60);

pub struct Index {
    sender: mpsc::Sender<String>,
    receiver: Mutex<Option<mpsc::Receiver<String>>>,
}

impl Index {
    pub fn new() -> Index {
        let (sender, receiver) = mpsc::channel(QUEUE);
        Index {
            sender,
            receiver: Mutex::new(Some(receiver)),
        }
    }
}

pub fn record(cluster: &Cluster, id: &str) {
    if cluster.index.sender.try_send(id.to_string()).is_err() {
        cluster.stats.etcd_errors.inc();
    }
}

pub async fn owner(cluster: &Cluster, id: &str) -> Option<String> {
    let key = cluster.keys().activation(id);
    let read = cluster
        .etcd(|s| {
            let key = key.clone();
            async move { s.client().get(key, None).await }
        })
        .await
        .ok()?;
    read.kvs()
        .first()
        .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
}

/// Writes queued ids until the queue closes (the node stops).
pub async fn write(cluster: std::sync::Arc<Cluster>) {
    let Some(mut receiver) = cluster.index.receiver.lock().unwrap().take() else {
        return;
    };
    let ttl = i64::try_from((cluster.cfg.retention + LEASE_SPAN).as_secs()).unwrap_or(i64::MAX);
    let mut lease: Option<(i64, Instant)> = None;
    let mut batch: Vec<String> = Vec::with_capacity(BATCH);
    while receiver.recv_many(&mut batch, BATCH).await > 0 {
        let fresh = lease.filter(|(_, at)| at.elapsed() < LEASE_SPAN);
        let id = match fresh {
            Some((id, _)) => id,
            None => match cluster
                .etcd(|s| async move { s.client().lease_grant(ttl, None).await })
                .await
            {
                Ok(granted) => {
                    lease = Some((granted.id(), Instant::now()));
                    granted.id()
                }
                Err(_) => {
                    batch.clear();
                    continue;
                }
            },
        };
        let node = cluster.node_id().to_string();
        let ops: Vec<TxnOp> = batch
            .drain(..)
            .map(|activation| {
                TxnOp::put(
                    cluster.keys().activation(&activation),
                    node.clone(),
                    Some(PutOptions::new().with_lease(id)),
                )
            })
            .collect();
        let _ = cluster
            .etcd(|s| {
                let ops = ops.clone();
                async move { s.client().txn(Txn::new().and_then(ops)).await }
            })
            .await;
    }
}
