//! The connection counters as Prometheus metrics, read at scrape time.

use super::ConnectionStats;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[derive(Debug)]
pub struct ConnectionCollector(pub Arc<ConnectionStats>);

impl Collector for ConnectionCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = &self.0;
        let open =
            ConstGauge::new(i64::try_from(stats.open.load(Ordering::Relaxed)).unwrap_or(i64::MAX));
        open.encode(encoder.encode_descriptor(
            "http_connections_open",
            "Open client connections",
            None,
            open.metric_type(),
        )?)?;
        let counters = [
            (
                "http_connections_accepted",
                "Client connections accepted",
                &stats.accepted,
            ),
            (
                "http_connections_evicted",
                "Idle client connections closed to make room under --max-connections",
                &stats.evicted,
            ),
            (
                "http_connections_refused",
                "Client connections refused because every open one was busy",
                &stats.refused,
            ),
        ];
        for (name, help, value) in counters {
            let counter = ConstCounter::new(value.load(Ordering::Relaxed));
            counter.encode(encoder.encode_descriptor(
                name,
                help,
                None,
                counter.metric_type(),
            )?)?;
        }
        Ok(())
    }
}
