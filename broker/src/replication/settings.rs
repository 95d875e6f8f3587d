//! The replication settings of a broker in a cluster ([`ReplicationConfig`]), drawn from the
//! broker's [`crate::config::Config`].

/// Replication settings of a broker in a cluster (Kafka's names in the field docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationConfig {
    /// `broker.id`.
    pub broker_id: u32,
    /// `controller.address`, e.g. `http://127.0.0.1:9093`.
    pub controller_url: String,
    /// The URL other brokers and clients reach this broker at.
    pub advertised_url: String,
    /// `HOST:PORT` of its Kafka listener, registered with the controller; `None` when off.
    pub kafka_address: Option<String>,
    /// `broker.heartbeat.interval.ms` (500 here; Kafka's default is 2000).
    pub heartbeat_interval_ms: u64,
    /// `replica.lag.time.max.ms`: a follower not caught up for this long leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// `replica.fetch.wait.max.ms`: long-poll wait of follower fetches.
    pub replica_fetch_wait_max_ms: u64,
    /// `replica.fetch.max.bytes`: size limit of one follower fetch answer.
    pub replica_fetch_max_bytes: u64,
    /// `replica.high.watermark.checkpoint.interval.ms`: how often the HW is checkpointed.
    pub hw_checkpoint_interval_ms: u64,
    /// `tidewater.unsafe.truncate.to.hw.enable`: pre-KIP-101 truncation to the HW (loses
    /// committed records).
    pub unsafe_truncate_to_hw_enable: bool,
    /// `tidewater.unsafe.serve.lagging.hw.enable`: pre-KIP-207, a new leader answers the
    /// latest offset with a HW below its epoch start instead of OFFSET_NOT_AVAILABLE.
    pub unsafe_serve_lagging_hw_enable: bool,
    /// `min.insync.replicas`: the broker default (a topic's override wins).
    pub min_insync_replicas: u16,
    /// `eligible.leader.replicas.enable`: KIP-966 (no HW advance below min ISR, clean-shutdown
    /// marker and previous broker epoch at registration).
    pub eligible_leader_replicas_enable: bool,
    /// `tidewater.bug.*`: deliberate bugs (only in a `deliberate-bugs` build).
    pub bugs: crate::bugs::Bugs,
}

impl ReplicationConfig {
    /// The replication settings of `config`, or `None` for a standalone broker.
    pub fn from_config(config: &crate::config::Config, advertised_url: &str) -> Option<Self> {
        let controller = config.controller_address.as_ref()?;
        let controller_url = if controller.contains("://") {
            controller.trim_end_matches('/').to_string()
        } else {
            format!("http://{controller}")
        };
        Some(Self {
            broker_id: config.broker_id,
            controller_url,
            advertised_url: advertised_url.to_string(),
            kafka_address: None,
            heartbeat_interval_ms: config.broker_heartbeat_interval_ms.max(1),
            replica_lag_time_max_ms: config.replica_lag_time_max_ms,
            replica_fetch_wait_max_ms: config.replica_fetch_wait_max_ms,
            replica_fetch_max_bytes: config.replica_fetch_max_bytes,
            hw_checkpoint_interval_ms: config.replica_high_watermark_checkpoint_interval_ms.max(1),
            unsafe_truncate_to_hw_enable: config.unsafe_truncate_to_hw_enable,
            unsafe_serve_lagging_hw_enable: config.unsafe_serve_lagging_hw_enable,
            min_insync_replicas: config.min_insync_replicas,
            eligible_leader_replicas_enable: config.eligible_leader_replicas_enable,
            bugs: config.bugs,
        })
    }
}
