//! The HTTP client of the broker's client API (`docs/api.md`): produce, fetch, list offsets,
//! metadata, topic creation and status, with leader discovery and bounded retries.
//!
//! Every call returns an [`Outcome`]: `Ok`, `Fail` (the request certainly had no effect) or
//! `Info` (it may have taken effect). The mapping from broker errors and transport failures to
//! fail/info is in [`send_certainty`] and [`read_certainty`]; the queue workload turns outcomes
//! into history completions unchanged.

use crate::history::Key;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tidewater_kafka_model::ErrorCode;

/// Upper bound on retries of one request after certain failures (leader moved, connection
/// refused), so an op never spins while the cluster has no leader.
pub const RETRIES_MAX: u32 = 3;

/// Settings of a [`BrokerClient`].
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Broker node name (`n1`) -> base URL (`http://10.77.0.11:9092`).
    pub nodes: BTreeMap<String, String>,
    /// Controller node name (`c1`) -> base URL. Asked for metadata before the brokers: it
    /// holds the truth, while a partitioned broker may still believe it leads.
    pub controllers: BTreeMap<String, String>,
    /// Bound on one HTTP request, connect included. A request that exceeds it ends `info`
    /// for sends (it may have been appended) and `fail` for reads. Kept well below the
    /// length of a fault, so a stalled leader costs an op a few seconds, not the fault.
    pub request_timeout_ms: u64,
    /// Bound on one metadata request: a paused controller must not hold every refresh for
    /// the whole request timeout before the brokers are asked.
    pub metadata_timeout_ms: u64,
    /// Bound on establishing the TCP connection: a partitioned node must not stall an op for
    /// the whole request timeout before it can retry elsewhere.
    pub connect_timeout_ms: u64,
    /// `timeout_ms` passed to produce requests with acks=all (the broker's delayed-produce
    /// bound). Below `request_timeout_ms`, so a leader that cannot commit answers
    /// `REQUEST_TIMED_OUT` before the client gives up on it.
    pub produce_timeout_ms: u64,
    /// Retries after certain failures, at most [`RETRIES_MAX`].
    pub retries: u32,
    /// Pause between retries, so a leader election can finish.
    pub retry_backoff_ms: u64,
}

impl ClientConfig {
    /// Defaults suited to a chaos test: timeouts shorter than the faults the harness injects
    /// (its shortest failover fault lasts 1.5 x `broker.session.timeout.ms`, 6 s with the
    /// harness's defaults), so clients time out, look the leader up again and follow the
    /// new leader while the fault still lasts.
    pub fn new(nodes: BTreeMap<String, String>) -> ClientConfig {
        ClientConfig {
            nodes,
            controllers: BTreeMap::new(),
            request_timeout_ms: 3_000,
            metadata_timeout_ms: 1_000,
            connect_timeout_ms: 500,
            produce_timeout_ms: 1_500,
            retries: 2,
            retry_backoff_ms: 100,
        }
    }
}

/// Whether a failed request may have taken effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Certainty {
    /// It certainly had no effect: history type `fail`.
    Fail,
    /// It may have taken effect: history type `info`.
    Info,
}

/// Why a request did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorCause {
    /// The broker answered with a Kafka-style error name (`NOT_ENOUGH_REPLICAS`, ...).
    Broker {
        /// The `error` field of the body.
        name: String,
        /// The HTTP status.
        status: u16,
    },
    /// The TCP connection could not be established: the request was never sent.
    Connect,
    /// The request was sent (or may have been) but no answer came within the timeout.
    Timeout,
    /// The connection broke after the request may have been sent (reset, EOF, bad body).
    Transport,
    /// No leader is known for the partition, even after refreshing metadata.
    NoLeader,
}

impl ErrorCause {
    /// The name written to the history's `error` field.
    pub fn name(&self) -> String {
        match self {
            ErrorCause::Broker { name, .. } => name.clone(),
            ErrorCause::Connect => "connection-refused".into(),
            ErrorCause::Timeout => "timeout".into(),
            ErrorCause::Transport => "connection-reset".into(),
            ErrorCause::NoLeader => "no-leader".into(),
        }
    }
}

/// A failed request: its cause, the node it went to and a human-readable message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientError {
    /// What went wrong.
    pub cause: ErrorCause,
    /// The node the request was sent to, when one was chosen.
    pub node: Option<String>,
    /// Details for logs.
    pub message: String,
}

/// The result of one client call, already classified for the history.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<T> {
    /// Success.
    Ok(T),
    /// Certainly no effect.
    Fail(ClientError),
    /// Maybe an effect.
    Info(ClientError),
}

/// Asks `candidates` in turn and returns the first answer; when none answers, the last
/// error, or `NoLeader` with `none_configured` as its message when there was no candidate.
/// The one "first node that answers" loop of the HTTP and the Kafka clients.
pub(crate) async fn first_answer<I, T, F, Fut>(
    candidates: I,
    none_configured: &str,
    mut ask: F,
) -> Result<T, ClientError>
where
    I: IntoIterator,
    F: FnMut(I::Item) -> Fut,
    Fut: Future<Output = Result<T, ClientError>>,
{
    let mut last = None;
    for candidate in candidates {
        match ask(candidate).await {
            Ok(answer) => return Ok(answer),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or(ClientError {
        cause: ErrorCause::NoLeader,
        node: None,
        message: none_configured.into(),
    }))
}

/// Broker errors after which a produce request certainly appended nothing.
const SEND_CERTAIN_ERRORS: &[ErrorCode] = &[
    ErrorCode::NotEnoughReplicas,
    ErrorCode::NotLeaderOrFollower,
    ErrorCode::LeaderNotAvailable,
    ErrorCode::FencedLeaderEpoch,
    ErrorCode::UnknownTopicOrPartition,
    ErrorCode::InvalidTopicException,
    ErrorCode::InvalidRequest,
    ErrorCode::InvalidRequiredAcks,
    ErrorCode::MessageTooLarge,
];

/// Classifies a failed produce. Only errors the broker raises before appending are certain;
/// `NOT_ENOUGH_REPLICAS_AFTER_APPEND`, `REQUEST_TIMED_OUT`, timeouts, resets and any error
/// name we do not know are indeterminate, because the record may already be in the log.
pub fn send_certainty(cause: &ErrorCause) -> Certainty {
    match cause {
        ErrorCause::Connect | ErrorCause::NoLeader => Certainty::Fail,
        ErrorCause::Timeout | ErrorCause::Transport => Certainty::Info,
        ErrorCause::Broker { name, .. } if ErrorCode::named_in(name, SEND_CERTAIN_ERRORS) => {
            Certainty::Fail
        }
        ErrorCause::Broker { .. } => Certainty::Info,
    }
}

/// Classifies a failed read (fetch, list offsets, metadata). Reads change nothing on the
/// broker (the workload assigns partitions and keeps positions itself; it commits nothing),
/// so every failed read is a `fail`; this keeps processes alive through read timeouts.
pub fn read_certainty(_cause: &ErrorCause) -> Certainty {
    Certainty::Fail
}

/// True when retrying elsewhere may help: the request certainly did nothing and the cause
/// is a moved or missing leader or an unreachable node.
fn retryable(cause: &ErrorCause) -> bool {
    match cause {
        ErrorCause::Connect | ErrorCause::NoLeader => true,
        ErrorCause::Broker { name, .. } => ErrorCode::named_in(
            name,
            &[
                ErrorCode::NotLeaderOrFollower,
                ErrorCode::LeaderNotAvailable,
                ErrorCode::FencedLeaderEpoch,
            ],
        ),
        ErrorCause::Timeout | ErrorCause::Transport => false,
    }
}

/// True when the cached leader of a key may be wrong after this failure, so the next request
/// must look it up in the metadata again (Kafka's producer requests a metadata update after
/// a timeout, a disconnect and the invalid-metadata errors). `REQUEST_TIMED_OUT` belongs here:
/// a leader cut off from its followers and the controller keeps answering its clients, but
/// it cannot commit, and by the time it times out the controller may have elected another.
/// `NOT_ENOUGH_REPLICAS` (and its after-append form) does not: the ISR changes only through
/// the controller, so a leader that reports it is one the controller still listens to.
fn stale_leader(cause: &ErrorCause) -> bool {
    match cause {
        ErrorCause::Connect | ErrorCause::NoLeader | ErrorCause::Timeout => true,
        ErrorCause::Transport => true,
        ErrorCause::Broker { name, .. } => ErrorCode::named_in(
            name,
            &[
                ErrorCode::NotLeaderOrFollower,
                ErrorCode::LeaderNotAvailable,
                ErrorCode::FencedLeaderEpoch,
                ErrorCode::UnknownLeaderEpoch,
                ErrorCode::UnknownTopicOrPartition,
                ErrorCode::RequestTimedOut,
            ],
        ),
    }
}

/// A successful produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The offset of the record (the first of the batch).
    pub offset: Option<u64>,
    /// The leader's high watermark after the append, when reported.
    pub high_watermark: Option<u64>,
    /// The ISR size the leader counted for an acks=all acknowledgement, when reported.
    pub isr_size: Option<u64>,
    /// The node that answered.
    pub node: String,
}

/// A successful fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// (offset, value) of each record whose value is an integer.
    pub records: Vec<(u64, i64)>,
    /// The offset of the next record to fetch: one past the last returned record, or the
    /// requested offset when nothing came back.
    pub next_offset: u64,
    /// The leader's high watermark.
    pub high_watermark: Option<u64>,
    /// The leader's log start offset.
    pub log_start_offset: Option<u64>,
    /// Records whose value was not an integer (the workload never writes them).
    pub foreign_values: usize,
    /// The node that answered.
    pub node: String,
}

/// One partition in the metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMeta {
    /// `topic/partition`.
    pub key: Key,
    /// The leader's node name, if there is a leader.
    pub leader: Option<String>,
    /// Leader epoch.
    pub leader_epoch: Option<i64>,
    /// Node names of the in-sync replicas.
    pub isr: Vec<String>,
    /// Node names of the replicas.
    pub replicas: Vec<String>,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: String,
    #[serde(default)]
    message: String,
}

/// The broker client. Cheap to share behind an `Arc`; it keeps a leader cache.
pub struct BrokerClient {
    http: reqwest::Client,
    config: ClientConfig,
    /// Last known leader per key, so most requests go straight to the leader; cleared on
    /// NOT_LEADER_OR_FOLLOWER and refreshed from metadata.
    leaders: Mutex<HashMap<Key, String>>,
    /// Which broker metadata requests start at, advanced on every request.
    metadata_rotation: AtomicUsize,
}

/// Maps a broker id or name from metadata to our node name: `3`, `"3"` and `"n3"` all mean
/// node `n3` (the cluster starts node `nK` with `broker.id=K`).
pub fn node_name(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => n.as_i64().filter(|id| *id >= 0).map(|id| format!("n{id}")),
        Value::String(s) if s.parse::<i64>().is_ok() => Some(format!("n{s}")),
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// Parses `GET /v1/metadata` leniently: `{"topics": [{"name", "partitions": [{"partition",
/// "leader", "leader_epoch", "replicas", "isr"}]}]}`; a leader of -1 or null means none.
pub fn parse_metadata(body: &Value) -> Vec<PartitionMeta> {
    let mut out = Vec::new();
    let topics: Vec<&Value> = match body.get("topics") {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(Value::Object(m)) => m.values().collect(),
        _ => Vec::new(),
    };
    for topic in topics {
        let Some(name) = topic
            .get("name")
            .or_else(|| topic.get("topic"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        for p in topic
            .get("partitions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(index) = p.get("partition").and_then(Value::as_u64) else {
                continue;
            };
            let names = |field: &str| -> Vec<String> {
                p.get(field)
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(node_name).collect())
                    .unwrap_or_default()
            };
            out.push(PartitionMeta {
                key: format!("{name}/{index}"),
                leader: p.get("leader").and_then(node_name),
                leader_epoch: p.get("leader_epoch").and_then(Value::as_i64),
                isr: names("isr"),
                replicas: names("replicas"),
            });
        }
    }
    out
}

/// Splits `t0/3` into (`t0`, 3).
pub fn split_key(key: &str) -> Option<(&str, u32)> {
    let (topic, p) = key.rsplit_once('/')?;
    Some((topic, p.parse().ok()?))
}

impl BrokerClient {
    /// A client for the given nodes.
    pub fn new(config: ClientConfig) -> BrokerClient {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.request_timeout_ms))
            .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
            .pool_max_idle_per_host(64)
            .build()
            .expect("reqwest client without TLS builds");
        BrokerClient {
            http,
            config,
            leaders: Mutex::new(HashMap::new()),
            metadata_rotation: AtomicUsize::new(0),
        }
    }

    /// The client's settings.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    fn url(&self, node: &str) -> Result<&str, ClientError> {
        self.config
            .nodes
            .get(node)
            .map(String::as_str)
            .ok_or_else(|| ClientError {
                cause: ErrorCause::NoLeader,
                node: Some(node.to_string()),
                message: format!("metadata names node {node}, which the harness does not know"),
            })
    }

    /// Sends one request to a node and returns the JSON body of a 2xx answer.
    async fn call(&self, node: &str, req: reqwest::RequestBuilder) -> Result<Value, ClientError> {
        let err = |cause, message: String| ClientError {
            cause,
            node: Some(node.to_string()),
            message,
        };
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() => return Err(err(ErrorCause::Connect, e.to_string())),
            Err(e) if e.is_timeout() => return Err(err(ErrorCause::Timeout, e.to_string())),
            Err(e) => return Err(err(ErrorCause::Transport, e.to_string())),
        };
        let status = resp.status().as_u16();
        let bytes = match resp.bytes().await {
            Ok(b) => b,
            Err(e) if e.is_timeout() => return Err(err(ErrorCause::Timeout, e.to_string())),
            Err(e) => return Err(err(ErrorCause::Transport, e.to_string())),
        };
        if (200..300).contains(&status) {
            return serde_json::from_slice(&bytes)
                .map_err(|e| err(ErrorCause::Transport, format!("bad JSON body: {e}")));
        }
        match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(b) => Err(err(
                ErrorCause::Broker {
                    name: b.error,
                    status,
                },
                b.message,
            )),
            // A 5xx without our error body (a proxy, a crash mid-response) may have applied.
            Err(_) => Err(err(
                ErrorCause::Broker {
                    name: format!("HTTP_{status}"),
                    status,
                },
                String::from_utf8_lossy(&bytes).chars().take(200).collect(),
            )),
        }
    }

    /// `GET /v1/metadata` from the first node that answers: the controllers, then the
    /// brokers starting at a rotating one, so that one dead broker does not slow every refresh.
    pub async fn metadata(&self) -> Result<(Vec<PartitionMeta>, Value), ClientError> {
        let brokers: Vec<(&String, &String)> = self.config.nodes.iter().collect();
        let first = self.metadata_rotation.fetch_add(1, Ordering::Relaxed);
        let rotated = (0..brokers.len()).map(|i| brokers[(first + i) % brokers.len()]);
        // Collected: with the lazy chain (its closure borrows `brokers`) in the future's state,
        // the compiler cannot prove the callers' futures `Send`.
        let candidates: Vec<(&String, &String)> =
            self.config.controllers.iter().chain(rotated).collect();
        first_answer(
            candidates,
            "no nodes configured",
            |(node, url)| async move {
                let req = self
                    .http
                    .get(format!("{url}/v1/metadata"))
                    .timeout(Duration::from_millis(self.config.metadata_timeout_ms));
                let body = self.call(node, req).await?;
                Ok((parse_metadata(&body), body))
            },
        )
        .await
    }

    /// Refreshes the leader cache from metadata.
    pub async fn refresh_leaders(&self) -> Result<Vec<PartitionMeta>, ClientError> {
        let (parts, _) = self.metadata().await?;
        let mut leaders = self.leaders.lock().expect("leader cache lock");
        leaders.clear();
        for p in &parts {
            if let Some(l) = &p.leader {
                leaders.insert(p.key.clone(), l.clone());
            }
        }
        Ok(parts)
    }

    fn cached_leader(&self, key: &str) -> Option<String> {
        self.leaders
            .lock()
            .expect("leader cache lock")
            .get(key)
            .cloned()
    }

    fn forget_leader(&self, key: &str) {
        self.leaders.lock().expect("leader cache lock").remove(key);
    }

    async fn leader(&self, key: &str) -> Result<String, ClientError> {
        if let Some(l) = self.cached_leader(key) {
            return Ok(l);
        }
        self.refresh_leaders().await?;
        self.cached_leader(key).ok_or_else(|| ClientError {
            cause: ErrorCause::NoLeader,
            node: None,
            message: format!("metadata has no leader for {key}"),
        })
    }

    /// Runs `attempt` against the leader of `key`, retrying after certain, leader-related
    /// failures at most `config.retries` times.
    async fn with_leader<T, F, Fut>(&self, key: &str, mut attempt: F) -> Result<T, ClientError>
    where
        F: FnMut(String, String) -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        let retries = self.config.retries.min(RETRIES_MAX);
        let mut tries = 0;
        loop {
            let result = match self.leader(key).await {
                Ok(node) => match self.url(&node) {
                    Ok(url) => attempt(node.clone(), url.to_string()).await,
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            match result {
                Err(e) if retryable(&e.cause) && tries < retries => {
                    tries += 1;
                    self.forget_leader(key);
                    tokio::time::sleep(Duration::from_millis(self.config.retry_backoff_ms)).await;
                }
                Err(e) => {
                    // A leader that timed out, broke the connection or could not commit may
                    // be cut off, paused or deposed: ask the metadata again before the next
                    // op of this key goes there.
                    if stale_leader(&e.cause) {
                        self.forget_leader(key);
                    }
                    return Err(e);
                }
                ok => return ok,
            }
        }
    }

    /// Produces one record with an integer value (sent as a JSON string) to `key`.
    pub async fn send(&self, key: &str, value: i64, acks: &str) -> Outcome<Sent> {
        let Some((topic, partition)) = split_key(key) else {
            return Outcome::Fail(ClientError {
                cause: ErrorCause::NoLeader,
                node: None,
                message: format!("bad key {key}"),
            });
        };
        let body = json!({
            "acks": acks,
            "timeout_ms": self.config.produce_timeout_ms,
            "records": [{"key": null, "value": value.to_string()}],
        });
        let result = self
            .with_leader(key, |node, url| {
                let req = self
                    .http
                    .post(format!(
                        "{url}/v1/topics/{topic}/partitions/{partition}/records"
                    ))
                    .json(&body);
                async move {
                    let v = self.call(&node, req).await?;
                    let offset = v
                        .get("offsets")
                        .and_then(|o| o.get(0))
                        .and_then(Value::as_u64)
                        .or_else(|| v.get("base_offset").and_then(Value::as_u64));
                    Ok(Sent {
                        offset,
                        high_watermark: v.get("high_watermark").and_then(Value::as_u64),
                        isr_size: v.get("isr_size").and_then(Value::as_u64),
                        node,
                    })
                }
            })
            .await;
        match result {
            Ok(s) => Outcome::Ok(s),
            Err(e) => match send_certainty(&e.cause) {
                Certainty::Fail => Outcome::Fail(e),
                Certainty::Info => Outcome::Info(e),
            },
        }
    }

    /// Fetches committed records of `key` from `offset` (long-polling up to `max_wait_ms`).
    pub async fn fetch(&self, key: &str, offset: u64, max_wait_ms: u64) -> Outcome<Fetched> {
        let Some((topic, partition)) = split_key(key) else {
            return Outcome::Fail(ClientError {
                cause: ErrorCause::NoLeader,
                node: None,
                message: format!("bad key {key}"),
            });
        };
        let result = self
            .with_leader(key, |node, url| {
                let req = self.http.get(format!(
                    "{url}/v1/topics/{topic}/partitions/{partition}/records\
                     ?offset={offset}&max_wait_ms={max_wait_ms}&max_bytes=1048576&isolation=committed"
                ));
                async move {
                    let v = self.call(&node, req).await?;
                    Ok(parse_fetch(&v, offset, node))
                }
            })
            .await;
        match result {
            Ok(f) => Outcome::Ok(f),
            Err(e) => match read_certainty(&e.cause) {
                Certainty::Fail => Outcome::Fail(e),
                Certainty::Info => Outcome::Info(e),
            },
        }
    }

    /// `GET .../offsets?spec=earliest|latest` from the leader of `key`.
    pub async fn list_offset(&self, key: &str, spec: &str) -> Result<u64, ClientError> {
        let Some((topic, partition)) = split_key(key) else {
            return Err(ClientError {
                cause: ErrorCause::NoLeader,
                node: None,
                message: format!("bad key {key}"),
            });
        };
        self.with_leader(key, |node, url| {
            let req = self.http.get(format!(
                "{url}/v1/topics/{topic}/partitions/{partition}/offsets?spec={spec}"
            ));
            async move {
                let v = self.call(&node, req).await?;
                v.get("offset").and_then(Value::as_u64).ok_or(ClientError {
                    cause: ErrorCause::Transport,
                    node: Some(node),
                    message: format!("list offsets answered without an offset: {v}"),
                })
            }
        })
        .await
    }

    /// `POST /v1/topics` on any node; `TOPIC_ALREADY_EXISTS` counts as success so setup can
    /// be retried.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: u32,
        replication_factor: u32,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), ClientError> {
        let body = json!({
            "name": name,
            "partitions": partitions,
            "replication_factor": replication_factor,
            "configs": configs,
        });
        let body = &body;
        first_answer(
            &self.config.nodes,
            "no nodes configured",
            |(node, url)| async move {
                let req = self.http.post(format!("{url}/v1/topics")).json(body);
                match self.call(node, req).await {
                    Ok(_) => Ok(()),
                    Err(ClientError {
                        cause: ErrorCause::Broker { name, .. },
                        ..
                    }) if name == ErrorCode::TopicAlreadyExists.name() => Ok(()),
                    Err(e) => Err(e),
                }
            },
        )
        .await
    }

    /// True when `key`'s log has settled at `offset`: every replica is in the ISR (so no
    /// other log can be elected) and the leader reports high watermark = log end = `offset`
    /// (so nothing at or above `offset` exists). The final reads stop there even when an
    /// acknowledged offset lies beyond: that record is gone.
    pub async fn settled_at(&self, key: &str, offset: u64) -> bool {
        let Ok(parts) = self.refresh_leaders().await else {
            return false;
        };
        let Some(p) = parts.iter().find(|p| p.key == key) else {
            return false;
        };
        let Some(leader) = &p.leader else {
            return false;
        };
        let mut isr = p.isr.clone();
        let mut replicas = p.replicas.clone();
        isr.sort();
        replicas.sort();
        if replicas.is_empty() || isr != replicas {
            return false;
        }
        let Ok(status) = self.status(leader).await else {
            return false;
        };
        status_settled(&status, key, offset)
    }

    /// `GET /v1/status` of one node, unparsed.
    pub async fn status(&self, node: &str) -> Result<Value, ClientError> {
        let url = self.url(node)?;
        self.call(node, self.http.get(format!("{url}/v1/status")))
            .await
    }

    /// One page of `node`'s own replica of `key` (`GET .../replica-log`, docs/api.md), from
    /// `offset` (`None`: its log start offset), about `max_bytes` of records; unparsed.
    pub async fn replica_log_page(
        &self,
        node: &str,
        key: &str,
        offset: Option<u64>,
        max_bytes: u64,
    ) -> Result<Value, ClientError> {
        let url = self.url(node)?;
        let (topic, partition) = split_key(key).ok_or_else(|| ClientError {
            cause: ErrorCause::Transport,
            node: Some(node.to_string()),
            message: format!("{key} is no topic/partition key"),
        })?;
        let from = offset.map_or(String::new(), |o| format!("&offset={o}"));
        let path = format!(
            "{url}/v1/topics/{topic}/partitions/{partition}/replica-log?max_bytes={max_bytes}{from}"
        );
        self.call(node, self.http.get(path)).await
    }
}

/// Whether a `/v1/status` answer shows `key` led here with high watermark = log end = `offset`.
pub fn status_settled(status: &Value, key: &str, offset: u64) -> bool {
    let Some((topic, partition)) = split_key(key) else {
        return false;
    };
    status
        .get("replicas")
        .or_else(|| status.get("partitions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| {
            r.get("topic").and_then(Value::as_str) == Some(topic)
                && r.get("partition").and_then(Value::as_u64) == Some(u64::from(partition))
        })
        .any(|r| {
            r.get("role").and_then(Value::as_str) == Some("leader")
                && r.get("high_watermark").and_then(Value::as_u64) == Some(offset)
                && r.get("log_end_offset").and_then(Value::as_u64) == Some(offset)
        })
}

/// Parses a fetch answer; `requested` is the offset asked for.
pub fn parse_fetch(v: &Value, requested: u64, node: String) -> Fetched {
    let mut records = Vec::new();
    let mut foreign_values = 0;
    let mut next_offset = requested;
    for r in v
        .get("records")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(offset) = r.get("offset").and_then(Value::as_u64) else {
            foreign_values += 1;
            continue;
        };
        next_offset = next_offset.max(offset + 1);
        let value = match r.get("value") {
            Some(Value::String(s)) => s.parse::<i64>().ok(),
            Some(Value::Number(n)) => n.as_i64(),
            _ => None,
        };
        match value {
            Some(x) => records.push((offset, x)),
            None => foreign_values += 1,
        }
    }
    Fetched {
        records,
        next_offset,
        high_watermark: v.get("high_watermark").and_then(Value::as_u64),
        log_start_offset: v.get("log_start_offset").and_then(Value::as_u64),
        foreign_values,
        node,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn broker(name: &str) -> ErrorCause {
        ErrorCause::Broker {
            name: name.into(),
            status: 503,
        }
    }

    #[test]
    fn send_errors_before_append_are_certain() {
        assert_eq!(
            send_certainty(&broker("NOT_ENOUGH_REPLICAS")),
            Certainty::Fail
        );
        assert_eq!(
            send_certainty(&broker("NOT_LEADER_OR_FOLLOWER")),
            Certainty::Fail
        );
        assert_eq!(send_certainty(&ErrorCause::Connect), Certainty::Fail);
        assert_eq!(send_certainty(&ErrorCause::NoLeader), Certainty::Fail);
    }

    #[test]
    fn send_errors_after_a_possible_append_are_indeterminate() {
        assert_eq!(
            send_certainty(&broker("NOT_ENOUGH_REPLICAS_AFTER_APPEND")),
            Certainty::Info
        );
        assert_eq!(
            send_certainty(&broker("REQUEST_TIMED_OUT")),
            Certainty::Info
        );
        assert_eq!(send_certainty(&broker("SOMETHING_NEW")), Certainty::Info);
        assert_eq!(send_certainty(&ErrorCause::Timeout), Certainty::Info);
        assert_eq!(send_certainty(&ErrorCause::Transport), Certainty::Info);
    }

    #[test]
    fn failed_reads_are_always_fail() {
        assert_eq!(read_certainty(&ErrorCause::Timeout), Certainty::Fail);
        assert_eq!(
            read_certainty(&broker("OFFSET_OUT_OF_RANGE")),
            Certainty::Fail
        );
    }

    #[test]
    fn only_leader_and_connect_failures_are_retried() {
        assert!(retryable(&broker("NOT_LEADER_OR_FOLLOWER")));
        assert!(retryable(&ErrorCause::Connect));
        assert!(!retryable(&broker("NOT_ENOUGH_REPLICAS")));
        assert!(!retryable(&ErrorCause::Timeout));
    }

    #[test]
    fn metadata_maps_broker_ids_to_node_names() {
        let body = json!({"topics": [{"name": "t0", "partitions": [
            {"partition": 0, "leader": 2, "leader_epoch": 4, "replicas": [1, 2, 3], "isr": [2, 3]},
            {"partition": 1, "leader": -1, "leader_epoch": 1, "replicas": ["n1"], "isr": []},
        ]}]});
        let parts = parse_metadata(&body);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].key, "t0/0");
        assert_eq!(parts[0].leader.as_deref(), Some("n2"));
        assert_eq!(parts[0].isr, vec!["n2", "n3"]);
        assert_eq!(parts[0].leader_epoch, Some(4));
        assert_eq!(parts[1].leader, None);
        assert_eq!(parts[1].replicas, vec!["n1"]);
    }

    #[test]
    fn a_log_is_settled_only_where_its_leader_has_committed_everything() {
        let status = json!({"replicas": [
            {"topic": "t0", "partition": 0, "role": "leader", "high_watermark": 7, "log_end_offset": 7},
            {"topic": "t0", "partition": 1, "role": "leader", "high_watermark": 5, "log_end_offset": 9},
            {"topic": "t0", "partition": 2, "role": "follower", "high_watermark": 4, "log_end_offset": 4},
        ]});
        assert!(status_settled(&status, "t0/0", 7));
        assert!(
            !status_settled(&status, "t0/0", 6),
            "not at the offset asked about"
        );
        assert!(
            !status_settled(&status, "t0/1", 5),
            "uncommitted records above the HW"
        );
        assert!(!status_settled(&status, "t0/2", 4), "only the leader knows");
        assert!(!status_settled(&status, "t0/3", 0));
    }

    #[test]
    fn fetch_parses_integer_values_and_advances_past_the_last_record() {
        let body = json!({"records": [
            {"offset": 16, "key": null, "value": "903"},
            {"offset": 17, "key": null, "value": "hello"},
        ], "high_watermark": 18, "log_start_offset": 0});
        let f = parse_fetch(&body, 16, "n1".into());
        assert_eq!(f.records, vec![(16, 903)]);
        assert_eq!(f.foreign_values, 1);
        assert_eq!(f.next_offset, 18);
        assert_eq!(f.high_watermark, Some(18));
        let empty = parse_fetch(&json!({"records": []}), 5, "n1".into());
        assert_eq!(empty.next_offset, 5);
    }

    /// Serves `responses` in order, one per connection, as raw HTTP/1.1 answers.
    async fn canned_server(responses: Vec<(u16, Value)>) -> String {
        canned_server_with(|_| responses).await
    }

    /// Serves the answers `answers(url)` makes (`url` is the server's own), in order, one per
    /// connection, as raw HTTP/1.1 answers.
    pub(crate) async fn canned_server_with(
        answers: impl FnOnce(&str) -> Vec<(u16, Value)>,
    ) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let responses = answers(&url);
        tokio::spawn(async move {
            for (status, body) in responses {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 64 * 1024];
                // One read holds the small requests of these tests.
                let _ = socket.read(&mut buf).await;
                let body = body.to_string();
                let answer = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                socket.write_all(answer.as_bytes()).await.unwrap();
            }
        });
        url
    }

    fn client_for(url: String) -> BrokerClient {
        let client = BrokerClient::new(ClientConfig {
            retry_backoff_ms: 1,
            ..ClientConfig::new(BTreeMap::from([("n1".to_string(), url)]))
        });
        client
            .leaders
            .lock()
            .unwrap()
            .insert("t0/0".into(), "n1".into());
        client
    }

    #[tokio::test]
    async fn broker_error_bodies_map_to_fail_or_info() {
        let url = canned_server(vec![
            (
                503,
                json!({"error": "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "message": "isr shrank"}),
            ),
            (
                503,
                json!({"error": "NOT_ENOUGH_REPLICAS", "message": "isr too small"}),
            ),
            (
                200,
                json!({"base_offset": 7, "offsets": [7], "high_watermark": 8}),
            ),
        ])
        .await;
        let client = client_for(url);
        match client.send("t0/0", 1, "all").await {
            Outcome::Info(e) => {
                assert_eq!(e.cause.name(), "NOT_ENOUGH_REPLICAS_AFTER_APPEND");
                assert_eq!(e.message, "isr shrank");
            }
            other => panic!("expected info, got {other:?}"),
        }
        match client.send("t0/0", 2, "all").await {
            Outcome::Fail(e) => assert_eq!(e.cause.name(), "NOT_ENOUGH_REPLICAS"),
            other => panic!("expected fail, got {other:?}"),
        }
        match client.send("t0/0", 3, "all").await {
            Outcome::Ok(sent) => {
                assert_eq!((sent.offset, sent.high_watermark), (Some(7), Some(8)));
                assert_eq!(sent.node, "n1");
            }
            other => panic!("expected ok, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn metadata_comes_from_the_controller_before_any_broker() {
        let controller = canned_server(vec![(
            200,
            json!({"topics": [{"name": "t0", "partitions": [
                {"partition": 0, "leader": 2, "leader_epoch": 5, "replicas": [1, 2], "isr": [2]}]}]}),
        )])
        .await;
        let client = BrokerClient::new(ClientConfig {
            controllers: BTreeMap::from([("c1".to_string(), controller)]),
            // Nothing listens on port 1: asking this broker first would fail.
            ..ClientConfig::new(BTreeMap::from([(
                "n1".to_string(),
                "http://127.0.0.1:1".to_string(),
            )]))
        });
        let parts = client.refresh_leaders().await.unwrap();
        assert_eq!(parts[0].leader.as_deref(), Some("n2"));
        assert_eq!(client.cached_leader("t0/0").as_deref(), Some("n2"));
    }

    #[tokio::test]
    async fn a_moved_leader_is_looked_up_again_and_the_send_retried() {
        let url = canned_server(vec![
            (
                421,
                json!({"error": "NOT_LEADER_OR_FOLLOWER", "message": "not me"}),
            ),
            (
                200,
                json!({"topics": [{"name": "t0", "partitions": [
                {"partition": 0, "leader": 1, "leader_epoch": 2, "replicas": [1], "isr": [1]}]}]}),
            ),
            (200, json!({"offsets": [0], "high_watermark": 1})),
        ])
        .await;
        let client = client_for(url);
        match client.send("t0/0", 5, "1").await {
            Outcome::Ok(sent) => assert_eq!(sent.offset, Some(0)),
            other => panic!("expected ok after one retry, got {other:?}"),
        }
    }

    #[test]
    fn timeouts_and_leadership_errors_make_the_leader_stale() {
        for name in [
            "REQUEST_TIMED_OUT",
            "NOT_LEADER_OR_FOLLOWER",
            "FENCED_LEADER_EPOCH",
        ] {
            assert!(stale_leader(&broker(name)), "{name}");
        }
        assert!(!stale_leader(&broker("NOT_ENOUGH_REPLICAS")));
        assert!(stale_leader(&ErrorCause::Timeout));
        assert!(stale_leader(&ErrorCause::Transport));
        assert!(!stale_leader(&broker("OFFSET_OUT_OF_RANGE")));
        assert!(!stale_leader(&broker("MESSAGE_TOO_LARGE")));
    }

    #[tokio::test]
    async fn a_leader_that_times_out_is_looked_up_again_before_the_next_send() {
        // n1 still believes it leads but cannot commit: it answers REQUEST_TIMED_OUT. The
        // controller meanwhile has elected n2, and the next send must go there.
        let old = canned_server(vec![(
            408,
            json!({"error": "REQUEST_TIMED_OUT", "message": "not committed in time"}),
        )])
        .await;
        let controller = canned_server(vec![(
            200,
            json!({"topics": [{"name": "t0", "partitions": [
                {"partition": 0, "leader": 2, "leader_epoch": 3, "replicas": [1, 2, 3], "isr": [2, 3]}]}]}),
        )])
        .await;
        let new = canned_server(vec![(200, json!({"offsets": [4], "high_watermark": 5}))]).await;
        let client = BrokerClient::new(ClientConfig {
            controllers: BTreeMap::from([("c1".to_string(), controller)]),
            retry_backoff_ms: 1,
            ..ClientConfig::new(BTreeMap::from([
                ("n1".to_string(), old),
                ("n2".to_string(), new),
            ]))
        });
        client
            .leaders
            .lock()
            .unwrap()
            .insert("t0/0".into(), "n1".into());
        match client.send("t0/0", 1, "all").await {
            Outcome::Info(e) => {
                assert_eq!(e.cause.name(), "REQUEST_TIMED_OUT");
                assert_eq!(e.node.as_deref(), Some("n1"));
            }
            other => panic!("expected info from the old leader, got {other:?}"),
        }
        assert_eq!(
            client.cached_leader("t0/0"),
            None,
            "the old leader is forgotten"
        );
        match client.send("t0/0", 2, "all").await {
            Outcome::Ok(sent) => {
                assert_eq!(sent.node, "n2");
                assert_eq!(sent.offset, Some(4));
            }
            other => panic!("expected ok from the new leader, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn refused_connection_is_a_certain_failure_naming_the_node() {
        // Bind then drop a listener so the port is (very likely) closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut nodes = BTreeMap::new();
        nodes.insert("n1".to_string(), format!("http://127.0.0.1:{port}"));
        let client = BrokerClient::new(ClientConfig {
            retries: 0,
            ..ClientConfig::new(nodes)
        });
        client
            .leaders
            .lock()
            .unwrap()
            .insert("t0/0".into(), "n1".into());
        match client.send("t0/0", 1, "all").await {
            Outcome::Fail(e) => {
                assert_eq!(e.cause, ErrorCause::Connect);
                assert_eq!(e.node.as_deref(), Some("n1"));
            }
            other => panic!("expected fail, got {other:?}"),
        }
    }
}
