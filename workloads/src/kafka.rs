//! The queue workload over Kafka's binary protocol (`tidewater run --client kafka`), with
//! rskafka, a Kafka client nobody here wrote.
//!
//! rskafka is configured so that every operation is one request: its retry loop gets a zero
//! deadline (no retry after a failure, whatever the cause), and each call is bounded by the
//! same request timeout as the HTTP client. A failure classifies as the HTTP client's do
//! ([`crate::client::send_certainty`]): only errors raised before the append are `fail`,
//! except `NOT_LEADER_OR_FOLLOWER`, which Kafka also answers after the append
//! ([`kafka_send_certainty`]).
//! After any failure the partition's rskafka client is dropped, so the next operation looks
//! the leader up again, as Kafka's producer requests a metadata update after a timeout or a
//! leadership error.
//!
//! What rskafka cannot do, and the harness therefore refuses with `--client kafka`: acks
//! other than `all` (its produce always sends acks=-1). It has no consumer groups: the group
//! workload's coordinator calls go through [`crate::kafka_group`]. Its fetches are Fetch v4, without KIP-320 leader epochs. It does not say
//! which broker answered, so the history's `node` of these operations is `kafka`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rskafka::client::error::{Error as KafkaError, ProtocolError};
use rskafka::client::partition::{Compression, OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record;
use tidewater_kafka_model::ErrorCode;
use tokio::sync::Mutex;

use crate::client::{
    read_certainty, send_certainty, split_key, Certainty, ClientError, ErrorCause, Fetched,
    Outcome, Sent,
};
use crate::queue::QueueClient;

/// The `node` of operations over the Kafka client (rskafka does not say which broker answered).
pub const KAFKA_NODE: &str = "kafka";

/// Settings of a [`KafkaQueueClient`].
#[derive(Debug, Clone)]
pub struct KafkaClientConfig {
    /// `HOST:PORT` of the brokers' Kafka listeners.
    pub bootstrap: Vec<String>,
    /// Bound on one operation (a produce, a fetch), as the HTTP client's.
    pub request_timeout_ms: u64,
    /// Bound on looking a partition's leader up (rskafka's metadata requests and its
    /// connection to the leader), as the HTTP client's metadata bound: a paused broker that
    /// accepts connections but never answers must not hold an op for the whole request
    /// timeout before the next lookup.
    pub metadata_timeout_ms: u64,
}

/// The queue workload's client over Kafka's protocol.
pub struct KafkaQueueClient {
    config: KafkaClientConfig,
    /// The rskafka client, built on first use and again after a connection failure.
    client: Mutex<Option<Arc<Client>>>,
    /// Clients built so far: where the next build starts in the bootstrap list.
    builds: AtomicUsize,
    /// One rskafka partition client per key, dropped after any failure.
    partitions: Mutex<HashMap<String, Arc<PartitionClient>>>,
}

/// Kafka's name for an rskafka protocol error: `NotEnoughReplicas` -> `NOT_ENOUGH_REPLICAS`.
pub fn kafka_error_name(error: &ProtocolError) -> String {
    screaming_snake(&format!("{error:?}"))
}

/// Kafka's error name from a Rust variant name: `NotEnoughReplicas` -> `NOT_ENOUGH_REPLICAS`
/// (anything from a `(` on, as in `Unknown(99)`, is dropped).
pub fn screaming_snake(camel: &str) -> String {
    let name = camel.split('(').next().unwrap_or(camel);
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// The cause of an rskafka failure in the HTTP client's terms.
pub fn cause_of(error: &KafkaError) -> ErrorCause {
    match error {
        KafkaError::ServerError { protocol_error, .. } => ErrorCause::Broker {
            name: kafka_error_name(protocol_error),
            status: 0,
        },
        // The connection could not be made: nothing was sent.
        KafkaError::Connection(_) => ErrorCause::Connect,
        KafkaError::Timeout => ErrorCause::Timeout,
        // With a zero deadline the retry loop gives up after its first attempt; its source is
        // that attempt's error, which only the message still carries.
        KafkaError::RetryFailed(failed) => {
            let message = failed.to_string();
            if message.contains("Connection error") {
                ErrorCause::Connect
            } else if let Some(name) = server_error_name(&message) {
                ErrorCause::Broker { name, status: 0 }
            } else {
                ErrorCause::Transport
            }
        }
        KafkaError::Request(_) | KafkaError::InvalidResponse(_) => ErrorCause::Transport,
        #[allow(unreachable_patterns)]
        _ => ErrorCause::Transport,
    }
}

/// The protocol error named in a rendered rskafka server error ("Server error NotLeaderOrFollower
/// with message ...").
fn server_error_name(message: &str) -> Option<String> {
    let rest = message.split("Server error ").nth(1)?;
    Some(screaming_snake(rest.split_whitespace().next()?))
}

/// The wall clock as rskafka's timestamp type.
fn now() -> rskafka::chrono::DateTime<rskafka::chrono::Utc> {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    rskafka::chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

fn error(cause: ErrorCause, message: String) -> ClientError {
    ClientError {
        cause,
        node: Some(KAFKA_NODE.into()),
        message,
    }
}

impl KafkaQueueClient {
    /// A client for `config`.
    pub fn new(config: KafkaClientConfig) -> KafkaQueueClient {
        KafkaQueueClient {
            config,
            client: Mutex::new(None),
            builds: AtomicUsize::new(0),
            partitions: Mutex::new(HashMap::new()),
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.config.request_timeout_ms)
    }

    /// Runs `f` within the request timeout; a timeout is [`ErrorCause::Timeout`].
    async fn bounded<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, KafkaError>>,
    ) -> Result<T, ClientError> {
        self.within(self.timeout(), f).await
    }

    /// Runs `f` within `limit`; a timeout is [`ErrorCause::Timeout`].
    async fn within<T>(
        &self,
        limit: Duration,
        f: impl std::future::Future<Output = Result<T, KafkaError>>,
    ) -> Result<T, ClientError> {
        match tokio::time::timeout(limit, f).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(error(cause_of(&e), e.to_string())),
            Err(_) => Err(error(
                ErrorCause::Timeout,
                format!("no answer within {} ms", limit.as_millis()),
            )),
        }
    }

    async fn client(&self) -> Result<Arc<Client>, ClientError> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref() {
            return Ok(client.clone());
        }
        let backoff = rskafka::BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(100),
            base: 2.0,
            // No retry inside rskafka: one request per operation.
            deadline: Some(Duration::ZERO),
        };
        // Start at another broker each time, so one that is paused or cut off does not
        // stall every rebuild.
        let mut bootstrap = self.config.bootstrap.clone();
        if !bootstrap.is_empty() {
            let first = self.builds.fetch_add(1, Ordering::Relaxed) % bootstrap.len();
            bootstrap.rotate_left(first);
        }
        let lookup = Duration::from_millis(self.config.metadata_timeout_ms);
        let built = self
            .within(
                lookup,
                ClientBuilder::new(bootstrap)
                    .client_id("tidewater")
                    .backoff_config(backoff)
                    .build(),
            )
            .await
            .map_err(|e| ClientError {
                // No broker could be reached to start: nothing was sent.
                cause: match e.cause {
                    ErrorCause::Broker { .. } => e.cause,
                    _ => ErrorCause::Connect,
                },
                ..e
            })?;
        let client = Arc::new(built);
        *slot = Some(client.clone());
        Ok(client)
    }

    async fn partition(&self, key: &str) -> Result<Arc<PartitionClient>, ClientError> {
        if let Some(found) = self.partitions.lock().await.get(key) {
            return Ok(found.clone());
        }
        let (topic, partition) =
            split_key(key).ok_or_else(|| error(ErrorCause::NoLeader, format!("bad key {key}")))?;
        let client = self.client().await?;
        let lookup = Duration::from_millis(self.config.metadata_timeout_ms);
        let made = self
            .within(
                lookup,
                client.partition_client(topic, partition as i32, UnknownTopicHandling::Error),
            )
            .await
            .map_err(|e| ClientError {
                // Looking the leader up sends nothing to the partition.
                cause: match e.cause {
                    ErrorCause::Broker { .. } | ErrorCause::Connect => e.cause,
                    _ => ErrorCause::NoLeader,
                },
                ..e
            });
        let made = match made {
            Ok(made) => Arc::new(made),
            Err(e) => {
                self.forget_client().await;
                return Err(e);
            }
        };
        self.partitions
            .lock()
            .await
            .insert(key.to_string(), made.clone());
        Ok(made)
    }

    /// After a failure: the next operation on `key` looks the leader up again.
    async fn forget(&self, key: &str, cause: &ErrorCause) {
        self.partitions.lock().await.remove(key);
        // A broken or silent connection may be the client's metadata broker too: start over
        // (Kafka's clients close a connection whose request timed out).
        if matches!(
            cause,
            ErrorCause::Connect | ErrorCause::Transport | ErrorCause::Timeout
        ) {
            self.forget_client().await;
        }
    }

    async fn forget_client(&self) {
        *self.client.lock().await = None;
    }

    /// Produces one record (the value as text) with acks=all; the offset rskafka reports.
    pub async fn produce(&self, key: &str, value: i64) -> Result<Sent, ClientError> {
        let partition = self.partition(key).await?;
        let record = Record {
            key: None,
            value: Some(value.to_string().into_bytes()),
            headers: Default::default(),
            timestamp: now(),
        };
        let result = self
            .bounded(partition.produce(vec![record], Compression::NoCompression))
            .await;
        match result {
            Ok(offsets) => Ok(Sent {
                offset: offsets.first().and_then(|&o| u64::try_from(o).ok()),
                high_watermark: None,
                isr_size: None,
                node: KAFKA_NODE.into(),
            }),
            Err(e) => {
                self.forget(key, &e.cause).await;
                Err(e)
            }
        }
    }

    /// Fetches committed records of `key` from `offset`.
    pub async fn read(
        &self,
        key: &str,
        offset: u64,
        max_wait_ms: u64,
    ) -> Result<Fetched, ClientError> {
        let partition = self.partition(key).await?;
        let wait = i32::try_from(max_wait_ms.min(self.config.request_timeout_ms / 2)).unwrap_or(0);
        let result = self
            .bounded(partition.fetch_records(offset as i64, 1..1_048_576, wait))
            .await;
        match result {
            Ok((records, high_watermark)) => {
                let mut fetched = Fetched {
                    records: Vec::with_capacity(records.len()),
                    next_offset: offset,
                    high_watermark: u64::try_from(high_watermark).ok(),
                    log_start_offset: None,
                    foreign_values: 0,
                    node: KAFKA_NODE.into(),
                };
                for r in records {
                    let Ok(at) = u64::try_from(r.offset) else {
                        continue;
                    };
                    if at < offset {
                        continue;
                    }
                    fetched.next_offset = at + 1;
                    let value = r
                        .record
                        .value
                        .as_deref()
                        .and_then(|v| std::str::from_utf8(v).ok())
                        .and_then(|v| v.parse::<i64>().ok());
                    match value {
                        Some(v) => fetched.records.push((at, v)),
                        None => fetched.foreign_values += 1,
                    }
                }
                Ok(fetched)
            }
            Err(e) => {
                self.forget(key, &e.cause).await;
                Err(e)
            }
        }
    }

    /// The log start offset of `key` (ListOffsets earliest).
    pub async fn earliest(&self, key: &str) -> Result<u64, ClientError> {
        self.offset_at(key, OffsetAt::Earliest).await
    }

    /// The high watermark of `key` (ListOffsets latest, read_uncommitted).
    pub async fn latest(&self, key: &str) -> Result<u64, ClientError> {
        self.offset_at(key, OffsetAt::Latest).await
    }

    /// ListOffsets of `key` at `at`, from the partition's leader.
    async fn offset_at(&self, key: &str, at: OffsetAt) -> Result<u64, ClientError> {
        let partition = self.partition(key).await?;
        match self.bounded(partition.get_offset(at)).await {
            Ok(offset) => u64::try_from(offset)
                .map_err(|_| error(ErrorCause::Transport, format!("negative offset {offset}"))),
            Err(e) => {
                self.forget(key, &e.cause).await;
                Err(e)
            }
        }
    }
}

/// [`send_certainty`] for a produce answered over Kafka's protocol. Apache Kafka answers
/// `NOT_LEADER_OR_FOLLOWER` not only before an append but also to an `acks=all` produce that
/// was appended and was waiting for the ISR when the leader stepped down
/// (`Partition.checkEnoughReplicasReachOffset` finds no local leader log): the record may
/// survive on the new leader. Seen against Kafka 4.1.1 (`harness/tests/kafka_local.rs`): a
/// send failed with it after a second, and its value was read at offset 37 later. So it is
/// indeterminate here; the response does not say which of the two happened.
pub fn kafka_send_certainty(cause: &ErrorCause) -> Certainty {
    match cause {
        ErrorCause::Broker { name, .. } if name == ErrorCode::NotLeaderOrFollower.name() => {
            Certainty::Info
        }
        other => send_certainty(other),
    }
}

fn classify<T>(
    result: Result<T, ClientError>,
    certainty: fn(&ErrorCause) -> Certainty,
) -> Outcome<T> {
    match result {
        Ok(value) => Outcome::Ok(value),
        Err(e) => match certainty(&e.cause) {
            Certainty::Fail => Outcome::Fail(e),
            Certainty::Info => Outcome::Info(e),
        },
    }
}

impl QueueClient for KafkaQueueClient {
    async fn send(&self, key: &str, value: i64, acks: &str) -> Outcome<Sent> {
        if acks != "all" && acks != "-1" {
            return Outcome::Fail(error(
                ErrorCause::Broker {
                    name: ErrorCode::InvalidRequiredAcks.name().into(),
                    status: 0,
                },
                format!("the Kafka client sends acks=all only, not acks={acks}"),
            ));
        }
        classify(self.produce(key, value).await, kafka_send_certainty)
    }

    async fn fetch(&self, key: &str, offset: u64, max_wait_ms: u64) -> Outcome<Fetched> {
        classify(self.read(key, offset, max_wait_ms).await, read_certainty)
    }

    async fn log_start(&self, key: &str) -> Option<u64> {
        self.earliest(key).await.ok()
    }

    async fn log_end(&self, key: &str) -> Option<u64> {
        self.latest(key).await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_errors_get_kafkas_names() {
        assert_eq!(
            kafka_error_name(&ProtocolError::NotEnoughReplicas),
            "NOT_ENOUGH_REPLICAS"
        );
        assert_eq!(
            kafka_error_name(&ProtocolError::NotLeaderOrFollower),
            "NOT_LEADER_OR_FOLLOWER"
        );
        assert_eq!(
            kafka_error_name(&ProtocolError::NotEnoughReplicasAfterAppend),
            "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
        );
        assert_eq!(
            server_error_name("Server error RequestTimedOut with message \"x\""),
            Some("REQUEST_TIMED_OUT".into())
        );
    }

    #[test]
    fn failures_classify_as_over_http() {
        let named = |name: &str| ErrorCause::Broker {
            name: name.into(),
            status: 0,
        };
        assert_eq!(
            send_certainty(&named("NOT_ENOUGH_REPLICAS")),
            Certainty::Fail
        );
        assert_eq!(
            send_certainty(&named("NOT_ENOUGH_REPLICAS_AFTER_APPEND")),
            Certainty::Info
        );
        assert_eq!(send_certainty(&named("REQUEST_TIMED_OUT")), Certainty::Info);
        assert_eq!(send_certainty(&ErrorCause::Timeout), Certainty::Info);
        assert_eq!(send_certainty(&ErrorCause::Connect), Certainty::Fail);
    }

    #[test]
    fn a_produce_answered_not_leader_may_have_been_appended() {
        let named = |name: &str| ErrorCause::Broker {
            name: name.into(),
            status: 0,
        };
        assert_eq!(
            kafka_send_certainty(&named("NOT_LEADER_OR_FOLLOWER")),
            Certainty::Info
        );
        assert_eq!(
            kafka_send_certainty(&named("NOT_ENOUGH_REPLICAS")),
            Certainty::Fail
        );
        assert_eq!(kafka_send_certainty(&ErrorCause::Connect), Certainty::Fail);
    }
}
