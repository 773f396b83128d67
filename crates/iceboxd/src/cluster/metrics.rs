//! `icebox_cluster_nodes` and `icebox_cluster_degraded` on /metrics, read from the cluster's
//! view at scrape time (the counters are `ClusterStats`' families).

use super::Cluster;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
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
        Ok(())
    }
}
