//! The broker's shared state ([`Broker`]): what every operation, front door and background
//! task of one broker process reads. It knows neither front door: the HTTP routes and the
//! Kafka listener hold an `Arc<Broker>`, never the other way round.

use std::sync::Arc;

use tokio::sync::watch;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::replication::ReplicaManager;
use crate::topics::TopicCatalog;

/// State shared by every request handler and background task.
pub struct Broker {
    /// The settings the broker started with.
    pub config: Config,
    /// The URL this broker advertises in metadata.
    pub advertised_url: String,
    /// Topics and the partitions hosted here; shared with the replication side, which creates
    /// and deletes local topics as the cluster metadata says.
    pub topics: Arc<TopicCatalog>,
    /// Request and byte counters for `/metrics`.
    pub metrics: Metrics,
    /// The replication side (controller registration, leaders, followers), when the broker
    /// runs in a cluster (`controller.address` set); `None` for a standalone broker.
    pub cluster: Option<Arc<ReplicaManager>>,
    /// Flips to `true` when shutdown starts, so long polls end at once instead of delaying it.
    pub shutdown: watch::Receiver<bool>,
    /// The producer ids this broker still has to hand to idempotent producers.
    pub producer_ids: ProducerIds,
}

impl Broker {
    /// Resolves when shutdown has started.
    pub async fn shutdown_started(&self) {
        let mut shutdown = self.shutdown.clone();
        let _ = shutdown.wait_for(|stopping| *stopping).await;
    }
}

/// The ids left in this broker's current block.
#[derive(Debug, Default)]
pub struct ProducerIds {
    /// `next..end` still to hand out; `None` before the first block. An async lock: the
    /// holder may wait for the controller's next block, and the next InitProducerId waits
    /// for that block rather than asking for another.
    pub(crate) block: tokio::sync::Mutex<Option<(i64, i64)>>,
}
