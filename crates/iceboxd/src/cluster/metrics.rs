//! `icebox_cluster_*` on /metrics: live nodes, where invocations were placed and why, what
//! became of forwards, and etcd errors.

use super::Cluster;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub struct ClusterCollector(pub Arc<Cluster>);

impl std::fmt::Debug for ClusterCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClusterCollector({})", self.0.node_id())
    }
}

impl Collector for ClusterCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let cluster = &self.0;
        let nodes = ConstGauge::new(i64::try_from(cluster.members().len()).unwrap_or(i64::MAX));
        nodes.encode(encoder.encode_descriptor(
            "cluster_nodes",
            "Live nodes of the cluster as this node sees them",
            None,
            nodes.metric_type(),
        )?)?;
        let degraded = ConstGauge::new(i64::from(cluster.degraded().is_some()));
        degraded.encode(encoder.encode_descriptor(
            "cluster_degraded",
            "1 while etcd cannot be reached (writes refused, invocations run here)",
            None,
            degraded.metric_type(),
        )?)?;
        let errors = ConstCounter::new(cluster.stats.etcd_errors.load(Ordering::Relaxed));
        errors.encode(encoder.encode_descriptor(
            "cluster_etcd_errors",
            "etcd calls that failed (and activation index entries dropped)",
            None,
            errors.metric_type(),
        )?)?;
        let families = [
            (
                "cluster_placements",
                "Invocations placed, by reason (warm, home, overflow, round-robin)",
                "reason",
                &cluster.stats.placements,
            ),
            (
                "cluster_forwards",
                "Invocations forwarded to another node, by outcome (answered, unreachable, lost)",
                "outcome",
                &cluster.stats.forwards,
            ),
        ];
        for (name, help, label, values) in families {
            let snapshot: Vec<(&'static str, u64)> = {
                let map = values.lock().unwrap();
                let mut v: Vec<_> = map.iter().map(|(k, n)| (*k, *n)).collect();
                v.sort_unstable();
                v
            };
            let mut family = encoder.encode_descriptor(
                name,
                help,
                None,
                prometheus_client::metrics::MetricType::Counter,
            )?;
            for (value, count) in snapshot {
                let labels = [(label, value)];
                ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}
