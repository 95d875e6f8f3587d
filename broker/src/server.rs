//! The broker process's entry points: [`run`] opens the logs, builds the shared [`Broker`],
//! starts the replication side, the group coordinator and the retention task, and serves both
//! front doors (the HTTP routes of [`crate::http::routes`] and the Kafka listener of
//! [`crate::kafka`]) until shutdown; [`run_controller`] does the same for the controller role.
//! The binary and the integration tests both start the broker through [`run`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::broker::Broker;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::storage::clean_shutdown;
use crate::topics::{CatalogError, TopicCatalog};

/// Why the broker could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The topic catalog or a partition log could not be opened.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The listener failed.
    #[error("listener: {0}")]
    Io(#[from] std::io::Error),
}

/// Serves the broker on `listener` until `shutdown` resolves, then finishes in-flight requests,
/// flushes every log and returns. Opens (recovers) every partition before accepting requests.
/// Binds `kafka.listeners` itself when it is set; [`run_with_kafka`] takes it bound.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let kafka = match config.kafka_listener {
        Some(address) => Some(TcpListener::bind(address).await?),
        None => None,
    };
    run_with_kafka(listener, kafka, config, shutdown).await
}

/// [`run`] with the Kafka listener (`kafka.listeners`) already bound, or `None` when off.
pub async fn run_with_kafka(
    listener: TcpListener,
    kafka: Option<TcpListener>,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let bound: SocketAddr = listener.local_addr()?;
    let open_config = config.clone();
    let topics = tokio::task::spawn_blocking(move || TopicCatalog::open(&open_config))
        .await
        .expect("catalog opening panicked")?;
    let topics = Arc::new(topics);
    let (stop, stopping) = watch::channel(false);
    let advertised_url = config.advertised_url(bound);
    let kafka_advertised = match &kafka {
        Some(kafka) => Some(config.kafka_advertised(kafka.local_addr()?, &advertised_url)),
        None => None,
    };
    let cluster = match crate::replication::ReplicationConfig::from_config(&config, &advertised_url)
    {
        Some(mut settings) => {
            settings.kafka_address = kafka_advertised.clone();
            // Under the directory locks, before anything is written: a crash from here on
            // must read as an unclean shutdown at the next start.
            let previous_broker_epoch = clean_shutdown::take(&config.log_dirs)?;
            tracing::info!(
                ?previous_broker_epoch,
                "clean-shutdown marker (none: the last stop was not clean)"
            );
            Some(crate::replication::ReplicaManager::new(
                settings,
                previous_broker_epoch,
                topics.clone(),
            ))
        }
        None => None,
    };
    let broker = Arc::new(Broker {
        advertised_url,
        cluster,
        config,
        topics,
        metrics: Metrics::default(),
        shutdown: stopping,
        producer_ids: Default::default(),
    });
    tracing::info!(
        address = %bound,
        broker_id = broker.config.broker_id,
        topics = broker.topics.list().len(),
        "broker started"
    );
    let retention = tokio::spawn(retention_task(broker.clone()));
    let replication = broker.cluster.as_ref().map(|c| c.start());
    let coordinator = crate::group::GroupCoordinator::new(
        broker.clone(),
        crate::group::CoordinatorConfig::default(),
    );
    let transactions = crate::txn::TransactionCoordinator::new(
        broker.clone(),
        crate::txn::TxnCoordinatorConfig::default(),
    );
    let transactions_task = tokio::spawn(transactions.clone().run());
    // One set of limits for both front doors: `max.connections.per.ip` counts them together.
    let limits = crate::http::ConnectionLimits::from_config(&broker.config);
    let kafka_task = kafka.zip(kafka_advertised).map(|(listener, advertised)| {
        let context = crate::kafka::KafkaContext {
            broker: broker.clone(),
            coordinator: coordinator.clone(),
            transactions: transactions.clone(),
            advertised,
        };
        tokio::spawn(crate::kafka::serve(listener, context, limits.clone()))
    });
    let app = crate::http::routes::router(broker.clone(), coordinator, transactions.clone());
    crate::http::serve(listener, app, limits, async move {
        shutdown.await;
        let _ = stop.send(true);
    })
    .await;
    // Wait for the aborted tasks to be dropped, so nothing uses the logs after the flush below.
    if let Some(task) = kafka_task {
        task.abort();
        let _ = task.await;
    }
    retention.abort();
    let _ = retention.await;
    transactions_task.abort();
    let _ = transactions_task.await;
    if let Some(task) = replication {
        task.abort();
        let _ = task.await;
    }
    if let Some(cluster) = &broker.cluster {
        cluster.shutdown();
    }
    flush_all(&broker);
    // Last, once every log is flushed: the next start of this broker is a clean one.
    if let Some(epoch) = broker.cluster.as_ref().and_then(|c| c.broker_epoch()) {
        if let Err(error) = clean_shutdown::write(&broker.config.log_dirs, epoch) {
            tracing::warn!(%error, "could not write the clean-shutdown marker");
        }
    }
    // Unlock the log dirs now rather than when the last `Arc<Broker>` goes, so a caller can
    // start a broker on the same dirs as soon as `run` returns (tests restart in-process).
    broker.topics.release_dir_locks();
    tracing::info!("broker stopped");
    Ok(())
}

/// The controller role's entry point (`--role controller`): serves the cluster metadata of
/// `broker/src/controller/` over HTTP until `shutdown` completes.
pub async fn run_controller(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let controller_config = crate::controller::state::ControllerConfig {
        session_timeout_ms: config.broker_session_timeout_ms,
        num_partitions: config.num_partitions,
        default_replication_factor: u32::from(config.default_replication_factor),
        unclean_leader_election_enable: config.unclean_leader_election_enable,
        min_insync_replicas: config.min_insync_replicas,
        eligible_leader_replicas_enable: config.eligible_leader_replicas_enable,
        bugs: config.bugs,
    };
    tracing::info!(address = %listener.local_addr()?, dir = %config.log_dirs[0].display(), "controller started");
    let limits = crate::http::ConnectionLimits::from_config(&config);
    crate::controller::run(
        listener,
        controller_config,
        limits,
        &config.log_dirs[0],
        shutdown,
    )
    .await?;
    Ok(())
}

/// Every `log.retention.check.interval.ms`, deletes segments past each topic's retention.
async fn retention_task(broker: Arc<Broker>) {
    let period = Duration::from_millis(broker.config.log_retention_check_interval_ms);
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await; // the first tick is immediate; start one period after start-up
    loop {
        ticks.tick().await;
        let task = broker.clone();
        let _ = tokio::task::spawn_blocking(move || apply_retention(&task)).await;
    }
}

fn apply_retention(broker: &Broker) {
    let now_ms = crate::clock::timestamp_ms();
    for topic in broker.topics.list() {
        for partition in &topic.partitions {
            match partition.apply_retention(now_ms) {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(
                    topic = %topic.name,
                    partition = partition.partition,
                    deleted,
                    log_start_offset = partition.offsets().log_start_offset,
                    "retention deleted segments"
                ),
                Err(error) => tracing::warn!(
                    topic = %topic.name, partition = partition.partition, ?error, "retention failed"
                ),
            }
        }
    }
}

fn flush_all(broker: &Broker) {
    for topic in broker.topics.list() {
        for partition in &topic.partitions {
            if let Err(error) = partition.flush() {
                tracing::warn!(topic = %topic.name, partition = partition.partition, ?error, "flush at shutdown failed");
            }
        }
    }
}
