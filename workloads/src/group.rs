//! The consumer-group workload: producers send unique integers as in the queue workload;
//! consumers in groups join through the broker's group coordinator (`docs/groups.md`), poll
//! their assigned partitions from the committed offsets, commit what they processed, and
//! suffer consumer faults: a crash (the process vanishes without leaving), a stall (it keeps
//! heartbeating but stops polling past `max.poll.interval.ms`) and a leave.
//!
//! History (see `docs/history.md`, "Consumer groups"):
//! - `rebalance`: join + sync; ok value `{"group", "generation", "assignment": [keys]}`;
//! - `poll`: as in the queue workload, on the member's assigned keys;
//! - `commit`: `[["commit", key, offset], ...]`, offset = the next offset to read;
//! - `crash`: one `info` line (no invoke): the process is gone, its worker continues as a new
//!   process and a new member;
//! - `stall` and `leave`: ok/fail with value `[]`; the member must rejoin afterwards.
//!
//! Pieces, split like the queue workload's:
//! - [`GroupClient`]: the coordinator calls; [`HttpGroupClient`] over the broker's HTTP API;
//! - [`GroupGenerator`]: the next [`GroupIntent`] from a seeded RNG (pure);
//! - [`Member`]: one process's membership (member id, generation, assignment, positions);
//! - [`execute`]: runs one intent and returns its history lines;
//! - [`group_worker`]: the loop a runner spawns per worker, writing to an [`OpSink`].

use crate::client::{ClientError, ErrorCause, Outcome};
use crate::history::{Key, Op, OpType, Process, Val};
use crate::queue::{self, Completion, Consumer, QueueClient, QueueSettings, ValueSource};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Settings of the group workload.
#[derive(Debug, Clone)]
pub struct GroupSettings {
    /// Every key (`topic/partition`) of the test; the subscribed topics are their topics.
    pub keys: Vec<Key>,
    /// `acks` of the producers.
    pub acks: String,
    /// Group ids; consumer worker `i` belongs to `groups[i % groups.len()]`.
    pub groups: Vec<String>,
    /// The first `producers` workers only send; the others are group members.
    pub producers: usize,
    /// Share of a member's ops that commit (the rest poll), in [0, 1].
    pub commit_fraction: f64,
    /// Share of a member's ops that crash the process.
    pub crash_fraction: f64,
    /// Share of a member's ops that stall it past `max_poll_interval_ms`.
    pub stall_fraction: f64,
    /// Share of a member's ops that leave the group.
    pub leave_fraction: f64,
    /// `session.timeout.ms` of the members.
    pub session_timeout_ms: u64,
    /// `max.poll.interval.ms` of the members (also the rebalance timeout).
    pub max_poll_interval_ms: u64,
    /// `heartbeat.interval.ms` of the members.
    pub heartbeat_interval_ms: u64,
    /// Long-poll bound of the members' fetches.
    pub poll_max_wait_ms: u64,
    /// `range` or `roundrobin`.
    pub assignor: String,
}

impl GroupSettings {
    /// Two producers, one group, rare faults, timeouts short enough for a chaos run.
    pub fn new(keys: Vec<Key>, acks: &str) -> GroupSettings {
        GroupSettings {
            keys,
            acks: acks.to_string(),
            groups: vec!["g0".into()],
            producers: 2,
            commit_fraction: 0.2,
            crash_fraction: 0.002,
            stall_fraction: 0.002,
            leave_fraction: 0.002,
            session_timeout_ms: 6_000,
            max_poll_interval_ms: 10_000,
            heartbeat_interval_ms: 1_000,
            poll_max_wait_ms: 100,
            assignor: "range".into(),
        }
    }

    /// The subscribed topics: the topics of the keys, sorted.
    pub fn topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = self
            .keys
            .iter()
            .filter_map(|k| k.rsplit_once('/').map(|(t, _)| t.to_string()))
            .collect();
        topics.sort();
        topics.dedup();
        topics
    }

    /// Partition counts of the subscribed topics, from the keys.
    pub fn partition_counts(&self) -> BTreeMap<String, u32> {
        let mut counts = BTreeMap::new();
        for key in &self.keys {
            if let Some((topic, p)) = crate::client::split_key(key) {
                let count = counts.entry(topic.to_string()).or_insert(0u32);
                *count = (*count).max(p + 1);
            }
        }
        counts
    }

    fn queue_settings(&self) -> QueueSettings {
        let mut queue = QueueSettings::new(self.keys.clone(), &self.acks);
        queue.poll_max_wait_ms = self.poll_max_wait_ms;
        queue
    }
}

// ---------------------------------------------------------------------------------------------
// Assignors (the client side of Kafka's protocol; the same definitions as the broker's
// `group::assignor`, which the workloads crate reaches only over HTTP).

/// Kafka's `RangeAssignor` over keys: per topic, members in id order get consecutive ranges,
/// the first `partitions % members` one more.
pub fn range(
    subscriptions: &BTreeMap<String, Vec<String>>,
    counts: &BTreeMap<String, u32>,
) -> BTreeMap<String, Vec<Key>> {
    let mut out: BTreeMap<String, Vec<Key>> =
        subscriptions.keys().map(|m| (m.clone(), vec![])).collect();
    let mut by_topic: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (member, topics) in subscriptions {
        for topic in topics {
            by_topic.entry(topic).or_default().push(member);
        }
    }
    for (topic, mut members) in by_topic {
        let Some(&count) = counts.get(topic) else {
            continue;
        };
        members.sort_unstable();
        members.dedup();
        let n = members.len() as u32;
        for (i, member) in members.iter().enumerate() {
            let i = i as u32;
            let start = (count / n) * i + i.min(count % n);
            let len = count / n + u32::from(i < count % n);
            let owned = out.get_mut(*member).expect("member present");
            owned.extend((start..start + len).map(|p| format!("{topic}/{p}")));
        }
    }
    out
}

/// Kafka's `RoundRobinAssignor` over keys: partitions sorted by topic then number, dealt in
/// turn to the members in id order, skipping members not subscribed to the topic.
pub fn round_robin(
    subscriptions: &BTreeMap<String, Vec<String>>,
    counts: &BTreeMap<String, u32>,
) -> BTreeMap<String, Vec<Key>> {
    let mut out: BTreeMap<String, Vec<Key>> =
        subscriptions.keys().map(|m| (m.clone(), vec![])).collect();
    let members: Vec<&String> = subscriptions.keys().collect();
    let mut topics: Vec<&String> = subscriptions.values().flatten().collect();
    topics.sort_unstable();
    topics.dedup();
    let mut next = 0usize;
    for topic in topics {
        let Some(&count) = counts.get(topic.as_str()) else {
            continue;
        };
        for p in 0..count {
            for _ in 0..members.len() {
                let member = members[next % members.len()];
                next += 1;
                if subscriptions[member].contains(topic) {
                    out.get_mut(member)
                        .expect("member present")
                        .push(format!("{topic}/{p}"));
                    break;
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The coordinator client.

/// A completed join, as the workload needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The generation.
    pub generation: u64,
    /// This member's id.
    pub member_id: String,
    /// Whether this member leads (and so computes the assignment).
    pub leader: bool,
    /// Member id -> subscribed topics (leader only).
    pub members: BTreeMap<String, Vec<String>>,
    /// Partition counts of the subscribed topics (leader only).
    pub partition_counts: BTreeMap<String, u32>,
    /// The node that answered.
    pub node: String,
}

/// The coordinator calls of a group member. Failures come back classified: `Fail` when the
/// call certainly changed nothing, `Info` when it may have (only commits can be `Info`).
pub trait GroupClient: Send + Sync + 'static {
    /// Join (long poll until the round completes).
    fn join(
        &self,
        group: &str,
        member_id: Option<&str>,
        topics: &[String],
        settings: &GroupSettings,
    ) -> impl Future<Output = Outcome<Joined>> + Send;
    /// Sync; the leader passes the assignment. Returns this member's keys.
    fn sync(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        assignment: Option<&BTreeMap<String, Vec<Key>>>,
    ) -> impl Future<Output = Outcome<Vec<Key>>> + Send;
    /// Heartbeat.
    fn heartbeat(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        polled: bool,
    ) -> impl Future<Output = Outcome<()>> + Send;
    /// Leave.
    fn leave(&self, group: &str, member_id: &str) -> impl Future<Output = Outcome<()>> + Send;
    /// Commit `offsets` (key -> next offset to read).
    fn commit(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        offsets: &BTreeMap<Key, u64>,
    ) -> impl Future<Output = Outcome<String>> + Send;
    /// The group's committed offsets.
    fn fetch_offsets(
        &self,
        group: &str,
    ) -> impl Future<Output = Outcome<BTreeMap<Key, u64>>> + Send;
}

/// Broker errors after which a commit certainly stored nothing.
const COMMIT_CERTAIN_ERRORS: &[&str] = &[
    "UNKNOWN_MEMBER_ID",
    "ILLEGAL_GENERATION",
    "REBALANCE_IN_PROGRESS",
    "NOT_COORDINATOR",
    "COORDINATOR_NOT_AVAILABLE",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "NOT_ENOUGH_REPLICAS",
    "INVALID_REQUEST",
    "INVALID_GROUP_ID",
    "OFFSET_METADATA_TOO_LARGE",
    "OFFSET_OUT_OF_RANGE",
    "INVALID_TOPIC_EXCEPTION",
];

/// Whether a failed call to a group's coordinator is retried at a coordinator looked up anew:
/// when it could not be reached or answered that it no longer coordinates the group. After a
/// timeout or a broken connection the call may have taken effect, so it is not retried, but
/// the coordinator is forgotten (`forget`) and the next call looks it up again.
pub(crate) fn coordinator_moved(cause: &ErrorCause, forget: impl FnOnce()) -> bool {
    match cause {
        ErrorCause::Connect | ErrorCause::NoLeader => true,
        ErrorCause::Broker { name, .. } => COORDINATOR_MOVED.contains(&name.as_str()),
        ErrorCause::Timeout | ErrorCause::Transport => {
            forget();
            false
        }
    }
}

/// Errors after which asking for the coordinator again may help.
const COORDINATOR_MOVED: &[&str] = &[
    "NOT_COORDINATOR",
    "COORDINATOR_NOT_AVAILABLE",
    "COORDINATOR_LOAD_IN_PROGRESS",
];

/// The group calls over the broker's HTTP API (`/v1/groups/...`), with coordinator discovery
/// and a bounded number of retries when the coordinator moved.
pub struct HttpGroupClient {
    http: reqwest::Client,
    /// Node name -> base URL.
    nodes: BTreeMap<String, String>,
    /// Group -> the coordinator's node name, as last found.
    coordinators: Mutex<HashMap<String, String>>,
    /// Retries after the coordinator moved or was unreachable.
    retries: u32,
    /// Pause between them.
    retry_backoff_ms: u64,
    /// Bound on heartbeats, leaves, commits and offset fetches.
    request_timeout: Duration,
    /// Bound on joins and syncs, which wait for the rebalance round.
    long_poll_timeout: Duration,
}

impl HttpGroupClient {
    /// A client for `config`'s nodes. Joins and syncs are long polls that the coordinator
    /// bounds by `max_poll_interval_ms` + 5 s, so they get one second more than that; the other
    /// calls get the config's request timeout.
    pub fn new(config: &crate::client::ClientConfig, settings: &GroupSettings) -> HttpGroupClient {
        let long_poll_ms = config
            .request_timeout_ms
            .max(settings.max_poll_interval_ms + 6_000);
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
            .build()
            .expect("reqwest client without TLS builds");
        HttpGroupClient {
            http,
            nodes: config.nodes.clone(),
            coordinators: Mutex::new(HashMap::new()),
            retries: config.retries.min(crate::client::RETRIES_MAX) + 2,
            retry_backoff_ms: config.retry_backoff_ms.max(200),
            request_timeout: Duration::from_millis(config.request_timeout_ms),
            long_poll_timeout: Duration::from_millis(long_poll_ms),
        }
    }

    async fn call(
        &self,
        node: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, ClientError> {
        let err = |cause, message: String| ClientError {
            cause,
            node: Some(node.to_string()),
            message,
        };
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() => return Err(err(ErrorCause::Connect, e.to_string())),
            Err(e) if e.is_timeout() => return Err(err(ErrorCause::Timeout, e.to_string())),
            Err(e) => return Err(err(ErrorCause::Transport, e.to_string())),
        };
        let status = response.status().as_u16();
        let body: Value = match response.json().await {
            Ok(v) => v,
            Err(e) if e.is_timeout() => return Err(err(ErrorCause::Timeout, e.to_string())),
            Err(e) => return Err(err(ErrorCause::Transport, e.to_string())),
        };
        if (200..300).contains(&status) {
            return Ok(body);
        }
        let name = body["error"]
            .as_str()
            .map_or_else(|| format!("HTTP_{status}"), str::to_string);
        let message = body["message"].as_str().unwrap_or_default().to_string();
        Err(err(ErrorCause::Broker { name, status }, message))
    }

    /// The coordinator's node name, asking the nodes in turn when unknown.
    async fn coordinator(&self, group: &str) -> Result<String, ClientError> {
        if let Some(node) = self.coordinators.lock().expect("lock").get(group) {
            return Ok(node.clone());
        }
        let mut last = None;
        for (node, url) in &self.nodes {
            let request = self
                .http
                .get(format!("{url}/v1/groups/{group}/coordinator"));
            match self.call(node, request).await {
                Ok(answer) => {
                    let found = answer["url"].as_str().and_then(|u| self.node_of_url(u));
                    let found = found
                        .or_else(|| crate::client::node_name(&answer["broker_id"]))
                        .filter(|n| self.nodes.contains_key(n));
                    if let Some(found) = found {
                        self.coordinators
                            .lock()
                            .expect("lock")
                            .insert(group.to_string(), found.clone());
                        return Ok(found);
                    }
                    last = Some(ClientError {
                        cause: ErrorCause::NoLeader,
                        node: Some(node.clone()),
                        message: format!("no coordinator for {group} yet: {answer}"),
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(ClientError {
            cause: ErrorCause::NoLeader,
            node: None,
            message: "no nodes configured".into(),
        }))
    }

    fn node_of_url(&self, url: &str) -> Option<String> {
        let url = url.trim_end_matches('/');
        let bare = url.split("://").last().unwrap_or(url);
        self.nodes
            .iter()
            .find(|(_, u)| {
                let u = u.trim_end_matches('/');
                u == url || u.split("://").last() == Some(bare)
            })
            .map(|(n, _)| n.clone())
    }

    /// Sends `method path body` to the group's coordinator, rediscovering it when it moved.
    async fn to_coordinator(
        &self,
        group: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(Value, String), ClientError> {
        let mut tries = 0;
        loop {
            let result = match self.coordinator(group).await {
                Ok(node) => {
                    let url = &self.nodes[&node];
                    let long_poll = path == "/join" || path == "/sync";
                    let timeout = if long_poll {
                        self.long_poll_timeout
                    } else {
                        self.request_timeout
                    };
                    let mut request = self
                        .http
                        .request(method.clone(), format!("{url}/v1/groups/{group}{path}"))
                        .timeout(timeout);
                    if let Some(body) = body {
                        request = request.json(body);
                    }
                    self.call(&node, request).await.map(|v| (v, node))
                }
                Err(e) => Err(e),
            };
            let moved = result.as_ref().err().is_some_and(|e| {
                coordinator_moved(&e.cause, || {
                    self.coordinators.lock().expect("lock").remove(group);
                })
            });
            if !moved || tries >= self.retries {
                return result;
            }
            tries += 1;
            self.coordinators.lock().expect("lock").remove(group);
            tokio::time::sleep(Duration::from_millis(self.retry_backoff_ms)).await;
        }
    }
}

/// A commit's outcome: ok with the coordinator's node, `fail` when the coordinator certainly
/// stored nothing (it refused, or could not be reached), `info` otherwise.
pub(crate) fn commit_outcome(result: Result<String, ClientError>) -> Outcome<String> {
    match result {
        Ok(node) => Outcome::Ok(node),
        Err(e) => {
            let certain = match &e.cause {
                ErrorCause::Connect | ErrorCause::NoLeader => true,
                ErrorCause::Broker { name, .. } => COMMIT_CERTAIN_ERRORS.contains(&name.as_str()),
                ErrorCause::Timeout | ErrorCause::Transport => false,
            };
            if certain {
                Outcome::Fail(e)
            } else {
                Outcome::Info(e)
            }
        }
    }
}

/// Membership calls change nothing that the history records, so their failures are `fail`.
pub(crate) fn certain<T>(result: Result<T, ClientError>) -> Outcome<T> {
    match result {
        Ok(v) => Outcome::Ok(v),
        Err(e) => Outcome::Fail(e),
    }
}

fn keys_of(value: &Value) -> Vec<Key> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|tp| {
                    Some(format!(
                        "{}/{}",
                        tp["topic"].as_str()?,
                        tp["partition"].as_u64()?
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

impl GroupClient for HttpGroupClient {
    async fn join(
        &self,
        group: &str,
        member_id: Option<&str>,
        topics: &[String],
        settings: &GroupSettings,
    ) -> Outcome<Joined> {
        let body = json!({
            "member_id": member_id,
            "client_id": "tidewater",
            "topics": topics,
            "assignors": [settings.assignor],
            "session_timeout_ms": settings.session_timeout_ms,
            "max_poll_interval_ms": settings.max_poll_interval_ms,
            "heartbeat_interval_ms": settings.heartbeat_interval_ms,
        });
        let result = self
            .to_coordinator(group, reqwest::Method::POST, "/join", Some(&body))
            .await
            .map(|(v, node)| Joined {
                generation: v["generation"].as_u64().unwrap_or(0),
                member_id: v["member_id"].as_str().unwrap_or_default().to_string(),
                leader: v["leader_id"] == v["member_id"],
                members: v["members"]
                    .as_array()
                    .map(|ms| {
                        ms.iter()
                            .filter_map(|m| {
                                let topics = serde_json::from_value(m["topics"].clone()).ok()?;
                                Some((m["member_id"].as_str()?.to_string(), topics))
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                partition_counts: serde_json::from_value(v["partition_counts"].clone())
                    .unwrap_or_default(),
                node,
            });
        certain(result)
    }

    async fn sync(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        assignment: Option<&BTreeMap<String, Vec<Key>>>,
    ) -> Outcome<Vec<Key>> {
        let assignment = assignment.map(|a| {
            a.iter()
                .map(|(member, keys)| {
                    let tps: Vec<Value> = keys
                        .iter()
                        .filter_map(|k| crate::client::split_key(k))
                        .map(|(t, p)| json!({"topic": t, "partition": p}))
                        .collect();
                    (member.clone(), Value::Array(tps))
                })
                .collect::<serde_json::Map<String, Value>>()
        });
        let body =
            json!({"member_id": member_id, "generation": generation, "assignment": assignment});
        let result = self
            .to_coordinator(group, reqwest::Method::POST, "/sync", Some(&body))
            .await
            .map(|(v, _)| keys_of(&v["assignment"]));
        certain(result)
    }

    async fn heartbeat(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        polled: bool,
    ) -> Outcome<()> {
        let body = json!({"member_id": member_id, "generation": generation, "polled": polled});
        let result = self
            .to_coordinator(group, reqwest::Method::POST, "/heartbeat", Some(&body))
            .await;
        certain(result.map(|_| ()))
    }

    async fn leave(&self, group: &str, member_id: &str) -> Outcome<()> {
        let body = json!({"member_id": member_id});
        let result = self
            .to_coordinator(group, reqwest::Method::POST, "/leave", Some(&body))
            .await;
        certain(result.map(|_| ()))
    }

    async fn commit(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        offsets: &BTreeMap<Key, u64>,
    ) -> Outcome<String> {
        let entries: Vec<Value> = offsets
            .iter()
            .filter_map(|(k, o)| {
                let (t, p) = crate::client::split_key(k)?;
                Some(json!({"topic": t, "partition": p, "offset": o}))
            })
            .collect();
        let body = json!({"member_id": member_id, "generation": generation, "offsets": entries});
        let result = self
            .to_coordinator(group, reqwest::Method::POST, "/offsets", Some(&body))
            .await;
        commit_outcome(result.map(|(_, node)| node))
    }

    async fn fetch_offsets(&self, group: &str) -> Outcome<BTreeMap<Key, u64>> {
        let result = self
            .to_coordinator(group, reqwest::Method::GET, "/offsets", None)
            .await
            .map(|(v, _)| {
                v["offsets"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|o| {
                                let key = format!(
                                    "{}/{}",
                                    o["topic"].as_str()?,
                                    o["partition"].as_u64()?
                                );
                                Some((key, o["offset"].as_u64()?))
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            });
        certain(result)
    }
}

// ---------------------------------------------------------------------------------------------
// Members, intents, execution.

/// One process's membership.
#[derive(Debug, Clone)]
pub struct Member {
    /// The group.
    pub group: String,
    /// The coordinator's id for this member, once joined.
    pub member_id: Option<String>,
    /// The generation it holds its assignment in; `None` until the next ok rebalance.
    pub generation: Option<u64>,
    /// Set when the coordinator asked it to rejoin; it commits once, then rebalances.
    pub rejoin: bool,
    /// Polled positions of the assigned keys (the queue consumer, reused).
    pub consumer: Consumer,
    /// The positions last committed (or fetched) per key, to commit only progress.
    pub committed: BTreeMap<Key, u64>,
    /// When the last heartbeat went out.
    pub last_heartbeat: Option<Instant>,
    /// Whether it polled since that heartbeat.
    pub polled: bool,
}

impl Member {
    /// A member of `group` that has not joined yet.
    pub fn new(group: &str) -> Member {
        Member {
            group: group.to_string(),
            member_id: None,
            generation: None,
            rejoin: false,
            consumer: Consumer::default(),
            committed: BTreeMap::new(),
            last_heartbeat: None,
            polled: false,
        }
    }

    /// Positions that moved past what was last committed.
    pub fn progress(&self) -> BTreeMap<Key, u64> {
        self.consumer
            .assigned
            .iter()
            .filter_map(|k| {
                let position = *self.consumer.positions.get(k)?;
                (self.committed.get(k) != Some(&position)).then(|| (k.clone(), position))
            })
            .collect()
    }

    /// Forgets the generation and the assignment (eager protocol: everything is revoked).
    fn revoke(&mut self) {
        self.generation = None;
        self.rejoin = false;
        self.consumer = Consumer::default();
        self.committed.clear();
    }

    /// Reacts to a coordinator error: rejoin (without the id when it is unknown).
    fn on_error(&mut self, e: &ClientError) {
        if let ErrorCause::Broker { name, .. } = &e.cause {
            match name.as_str() {
                "UNKNOWN_MEMBER_ID" => {
                    self.member_id = None;
                    self.rejoin = true;
                }
                "ILLEGAL_GENERATION" | "REBALANCE_IN_PROGRESS" => self.rejoin = true,
                _ => {}
            }
        }
    }
}

/// What a worker does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupIntent {
    /// A producer's send.
    Send {
        /// The partition.
        key: Key,
        /// The unique value.
        value: Val,
    },
    /// Join and sync.
    Rebalance,
    /// Poll the next assigned key.
    Poll,
    /// Commit the positions that moved.
    Commit,
    /// The process crashes.
    Crash,
    /// Heartbeat without polling for longer than `max_poll_interval_ms`.
    Stall,
    /// Leave the group.
    Leave,
}

impl GroupIntent {
    /// The history's `f`.
    pub fn f(&self) -> &'static str {
        match self {
            GroupIntent::Send { .. } => "send",
            GroupIntent::Rebalance => "rebalance",
            GroupIntent::Poll => "poll",
            GroupIntent::Commit => "commit",
            GroupIntent::Crash => "crash",
            GroupIntent::Stall => "stall",
            GroupIntent::Leave => "leave",
        }
    }

    /// The invoke line's value, taken before the op runs; `None` for a crash, which is a lone
    /// `info` completion.
    pub fn invoke_value(&self, member: &Member) -> Option<Value> {
        match self {
            GroupIntent::Send { key, value } => Some(
                queue::Intent::Send {
                    key: key.clone(),
                    value: *value,
                }
                .invoke_value(),
            ),
            GroupIntent::Rebalance => Some(Value::Null),
            GroupIntent::Poll => Some(json!([["poll"]])),
            GroupIntent::Commit => Some(commit_value(&member.progress())),
            GroupIntent::Crash => None,
            GroupIntent::Stall | GroupIntent::Leave => Some(json!([])),
        }
    }
}

fn commit_value(offsets: &BTreeMap<Key, u64>) -> Value {
    json!(offsets
        .iter()
        .map(|(k, o)| json!(["commit", k, o]))
        .collect::<Vec<_>>())
}

/// Chooses a worker's operations; seeded by the run's seed and the worker number.
pub struct GroupGenerator {
    rng: StdRng,
    settings: Arc<GroupSettings>,
    values: ValueSource,
    producer: bool,
}

impl GroupGenerator {
    /// The generator of worker `worker`.
    pub fn new(seed: u64, worker: u64, settings: Arc<GroupSettings>, values: ValueSource) -> Self {
        assert!(!settings.keys.is_empty(), "the group workload needs keys");
        assert!(
            !settings.groups.is_empty(),
            "the group workload needs a group"
        );
        let rng = StdRng::seed_from_u64(seed ^ worker.wrapping_mul(0xA24B_AED4_963E_E407));
        let producer = (worker as usize) < settings.producers;
        GroupGenerator {
            rng,
            settings,
            values,
            producer,
        }
    }

    /// Whether this worker only sends.
    pub fn is_producer(&self) -> bool {
        self.producer
    }

    /// The group of consumer worker `worker`.
    pub fn group_of(settings: &GroupSettings, worker: u64) -> String {
        let index = (worker as usize).saturating_sub(settings.producers) % settings.groups.len();
        settings.groups[index].clone()
    }

    /// The next intent for `member` (ignored for producers).
    pub fn next(&mut self, member: &Member) -> GroupIntent {
        if self.producer {
            let key = self
                .settings
                .keys
                .choose(&mut self.rng)
                .expect("keys")
                .clone();
            return GroupIntent::Send {
                key,
                value: self.values.next(),
            };
        }
        if member.rejoin {
            // onPartitionsRevoked: commit the progress first, then rejoin.
            if member.generation.is_some() && !member.progress().is_empty() {
                return GroupIntent::Commit;
            }
            return GroupIntent::Rebalance;
        }
        if member.generation.is_none() {
            return GroupIntent::Rebalance;
        }
        let s = &self.settings;
        let roll: f64 = self.rng.gen();
        let mut edge = s.crash_fraction;
        if roll < edge {
            return GroupIntent::Crash;
        }
        edge += s.stall_fraction;
        if roll < edge {
            return GroupIntent::Stall;
        }
        edge += s.leave_fraction;
        if roll < edge {
            return GroupIntent::Leave;
        }
        edge += s.commit_fraction;
        if roll < edge && !member.progress().is_empty() {
            return GroupIntent::Commit;
        }
        GroupIntent::Poll
    }
}

fn completion(
    kind: OpType,
    value: Value,
    node: Option<String>,
    error: Option<String>,
) -> Completion {
    Completion {
        kind,
        value,
        node,
        high_watermarks: None,
        log_start_offsets: None,
        isr_sizes: None,
        error,
    }
}

fn failed(kind: OpType, value: Value, e: &ClientError) -> Completion {
    completion(kind, value, e.node.clone(), Some(e.cause.name()))
}

/// Sends a heartbeat when `heartbeat_interval_ms` has passed since the last one (Kafka's
/// heartbeat thread, folded into the worker's loop).
pub async fn heartbeat_if_due<G: GroupClient>(
    client: &G,
    settings: &GroupSettings,
    member: &mut Member,
) {
    let (Some(member_id), Some(generation)) = (member.member_id.clone(), member.generation) else {
        return;
    };
    let due = member
        .last_heartbeat
        .is_none_or(|t| t.elapsed() >= Duration::from_millis(settings.heartbeat_interval_ms));
    if !due || member.rejoin {
        return;
    }
    member.last_heartbeat = Some(Instant::now());
    let polled = std::mem::take(&mut member.polled);
    if let Outcome::Fail(e) | Outcome::Info(e) = client
        .heartbeat(&member.group, &member_id, generation, polled)
        .await
    {
        member.on_error(&e);
    }
}

/// Runs one intent of a consumer or producer and returns its completion line.
pub async fn execute<C: QueueClient, G: GroupClient>(
    queue: &C,
    group: &G,
    settings: &GroupSettings,
    member: &mut Member,
    intent: &GroupIntent,
) -> Completion {
    match intent {
        GroupIntent::Send { key, value } => {
            let send = queue::Intent::Send {
                key: key.clone(),
                value: *value,
            };
            let mut scratch = Consumer::default();
            queue::execute(queue, &settings.queue_settings(), &mut scratch, &send).await
        }
        GroupIntent::Rebalance => rebalance(queue, group, settings, member).await,
        GroupIntent::Poll => {
            heartbeat_if_due(group, settings, member).await;
            let invoke = json!([["poll"]]);
            let Some(key) = member.consumer.next_key() else {
                return completion(OpType::Fail, invoke, None, Some("not-assigned".into()));
            };
            let position = member.consumer.positions.get(&key).copied().unwrap_or(0);
            member.polled = true;
            queue::poll_key(
                queue,
                &mut member.consumer,
                &key,
                position,
                settings.poll_max_wait_ms,
            )
            .await
        }
        GroupIntent::Commit => {
            heartbeat_if_due(group, settings, member).await;
            let offsets = member.progress();
            let value = commit_value(&offsets);
            let (Some(member_id), Some(generation)) = (member.member_id.clone(), member.generation)
            else {
                // Removed meanwhile (a stall, an expired session): nothing to commit in.
                member.generation = None;
                return completion(OpType::Fail, value, None, Some("not-a-member".into()));
            };
            match group
                .commit(&member.group, &member_id, generation, &offsets)
                .await
            {
                Outcome::Ok(node) => {
                    member.committed.extend(offsets);
                    member.polled = true;
                    if member.rejoin {
                        // The revocation commit is done: rejoin next.
                        member.generation = None;
                    }
                    completion(OpType::Ok, value, Some(node), None)
                }
                Outcome::Fail(e) => {
                    member.on_error(&e);
                    if member.rejoin {
                        member.generation = None;
                    }
                    failed(OpType::Fail, value, &e)
                }
                Outcome::Info(e) => failed(OpType::Info, value, &e),
            }
        }
        GroupIntent::Crash => completion(
            OpType::Info,
            Value::Null,
            None,
            Some("consumer-crash".into()),
        ),
        GroupIntent::Stall => {
            let stall = Duration::from_millis(
                settings.max_poll_interval_ms + settings.heartbeat_interval_ms,
            );
            let started = Instant::now();
            while started.elapsed() < stall && !member.rejoin {
                tokio::time::sleep(Duration::from_millis(settings.heartbeat_interval_ms)).await;
                member.polled = false;
                heartbeat_if_due(group, settings, member).await;
            }
            member.rejoin = true;
            completion(OpType::Ok, json!([]), None, None)
        }
        GroupIntent::Leave => {
            let Some(member_id) = member.member_id.take() else {
                return completion(OpType::Fail, json!([]), None, Some("not-a-member".into()));
            };
            let done = match group.leave(&member.group, &member_id).await {
                Outcome::Ok(()) => completion(OpType::Ok, json!([]), None, None),
                Outcome::Fail(e) | Outcome::Info(e) => failed(OpType::Fail, json!([]), &e),
            };
            member.revoke();
            done
        }
    }
}

/// Join, sync (computing the assignment when leading), then positions from the committed
/// offsets (the log start for keys without one: `auto.offset.reset=earliest`).
async fn rebalance<C: QueueClient, G: GroupClient>(
    queue: &C,
    group: &G,
    settings: &GroupSettings,
    member: &mut Member,
) -> Completion {
    member.revoke();
    let topics = settings.topics();
    let joined = match group
        .join(
            &member.group,
            member.member_id.as_deref(),
            &topics,
            settings,
        )
        .await
    {
        Outcome::Ok(j) => j,
        Outcome::Fail(e) | Outcome::Info(e) => {
            member.on_error(&e);
            return failed(OpType::Fail, Value::Null, &e);
        }
    };
    member.member_id = Some(joined.member_id.clone());
    let assignment = joined.leader.then(|| match settings.assignor.as_str() {
        "roundrobin" => round_robin(&joined.members, &joined.partition_counts),
        _ => range(&joined.members, &joined.partition_counts),
    });
    let keys = match group
        .sync(
            &member.group,
            &joined.member_id,
            joined.generation,
            assignment.as_ref(),
        )
        .await
    {
        Outcome::Ok(keys) => keys,
        Outcome::Fail(e) | Outcome::Info(e) => {
            member.on_error(&e);
            return failed(OpType::Fail, Value::Null, &e);
        }
    };
    let committed = match group.fetch_offsets(&member.group).await {
        Outcome::Ok(c) => c,
        Outcome::Fail(e) | Outcome::Info(e) => return failed(OpType::Fail, Value::Null, &e),
    };
    for key in &keys {
        let position = match committed.get(key) {
            Some(&offset) => offset,
            None => queue.log_start(key).await.unwrap_or(0),
        };
        member.consumer.positions.insert(key.clone(), position);
        member.committed.insert(key.clone(), position);
    }
    member.consumer.assign(keys.clone());
    member.generation = Some(joined.generation);
    member.last_heartbeat = Some(Instant::now());
    let value = json!({"group": member.group, "generation": joined.generation, "assignment": keys});
    completion(OpType::Ok, value, Some(joined.node), None)
}

// ---------------------------------------------------------------------------------------------
// The worker loop.

/// Where a worker's history lines go (the runner's recorder and rate limit).
pub trait OpSink: Send + Sync + 'static {
    /// A fresh process number.
    fn new_process(&self) -> u64;
    /// Records one line (index and time are the sink's business).
    fn record(&self, op: Op);
    /// Waits for the rate limit before an op.
    fn pace(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// Everything the workers share.
pub struct GroupContext<C, G> {
    /// Produce and fetch.
    pub queue: Arc<C>,
    /// Coordinator calls.
    pub group: Arc<G>,
    /// The workload's settings.
    pub settings: Arc<GroupSettings>,
    /// The run's seed.
    pub seed: u64,
    /// Unique values.
    pub values: ValueSource,
    /// Set to stop after the current op.
    pub stop: Arc<AtomicBool>,
}

impl<C, G> Clone for GroupContext<C, G> {
    fn clone(&self) -> Self {
        GroupContext {
            queue: self.queue.clone(),
            group: self.group.clone(),
            settings: self.settings.clone(),
            seed: self.seed,
            values: self.values.clone(),
            stop: self.stop.clone(),
        }
    }
}

fn line(process: u64, kind: OpType, f: &str, value: Value) -> Op {
    Op {
        index: 0,
        time: 0,
        process: Process::Client(process),
        kind,
        f: f.to_string(),
        value,
        node: None,
        high_watermarks: None,
        log_start_offsets: None,
        isr_sizes: None,
        error: None,
        r#final: false,
    }
}

/// One worker until `stop`: a producer sends; a consumer rebalances, polls, commits and
/// suffers its faults. After an `info` (a crash included) the process retires and the worker
/// continues as a new process and a new member. A member still in the group at the end
/// leaves, so the group settles. Returns the number of ops.
pub async fn group_worker<C: QueueClient, G: GroupClient, S: OpSink>(
    ctx: GroupContext<C, G>,
    sink: Arc<S>,
    worker: u64,
) -> u64 {
    let mut generator =
        GroupGenerator::new(ctx.seed, worker, ctx.settings.clone(), ctx.values.clone());
    let group = GroupGenerator::group_of(&ctx.settings, worker);
    let mut process = sink.new_process();
    let mut member = Member::new(&group);
    let mut ops = 0;
    while !ctx.stop.load(Ordering::Relaxed) {
        tokio::task::yield_now().await;
        sink.pace().await;
        if ctx.stop.load(Ordering::Relaxed) {
            break;
        }
        let intent = generator.next(&member);
        let f = intent.f();
        if let Some(invoke) = intent.invoke_value(&member) {
            sink.record(line(process, OpType::Invoke, f, invoke));
        }
        let c = execute(
            &*ctx.queue,
            &*ctx.group,
            &ctx.settings,
            &mut member,
            &intent,
        )
        .await;
        let retire = c.kind == OpType::Info;
        sink.record(Op {
            node: c.node,
            high_watermarks: c.high_watermarks,
            log_start_offsets: c.log_start_offsets,
            isr_sizes: c.isr_sizes,
            error: c.error,
            ..line(process, c.kind, f, c.value)
        });
        ops += 1;
        if retire {
            process = sink.new_process();
            member = Member::new(&group);
        }
    }
    if let Some(member_id) = &member.member_id {
        let _ = ctx.group.leave(&group, member_id).await;
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{Fetched, Sent};

    fn subs(entries: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        entries
            .iter()
            .map(|(m, ts)| (m.to_string(), ts.iter().map(|t| t.to_string()).collect()))
            .collect()
    }

    #[test]
    fn assignors_match_kafkas() {
        let s = subs(&[("c0", &["t0", "t1"]), ("c1", &["t0", "t1"])]);
        let counts = BTreeMap::from([("t0".to_string(), 3), ("t1".to_string(), 3)]);
        let r = range(&s, &counts);
        assert_eq!(r["c0"], ["t0/0", "t0/1", "t1/0", "t1/1"]);
        assert_eq!(r["c1"], ["t0/2", "t1/2"]);
        let rr = round_robin(&s, &counts);
        assert_eq!(rr["c0"], ["t0/0", "t0/2", "t1/1"]);
        assert_eq!(rr["c1"], ["t0/1", "t1/0", "t1/2"]);
    }

    /// One partition log in memory per key.
    #[derive(Default)]
    struct Logs(Mutex<BTreeMap<Key, Vec<Val>>>);

    impl QueueClient for Logs {
        async fn send(&self, key: &str, value: Val, _acks: &str) -> Outcome<Sent> {
            let mut logs = self.0.lock().unwrap();
            let log = logs.entry(key.to_string()).or_default();
            log.push(value);
            Outcome::Ok(Sent {
                offset: Some(log.len() as u64 - 1),
                high_watermark: Some(log.len() as u64),
                isr_size: None,
                node: "n1".into(),
            })
        }

        async fn fetch(&self, key: &str, offset: u64, _wait: u64) -> Outcome<Fetched> {
            let logs = self.0.lock().unwrap();
            let log = logs.get(key).cloned().unwrap_or_default();
            let records: Vec<(u64, Val)> = log
                .iter()
                .enumerate()
                .skip(offset as usize)
                .map(|(o, v)| (o as u64, *v))
                .collect();
            Outcome::Ok(Fetched {
                next_offset: records.last().map_or(offset, |r| r.0 + 1),
                records,
                high_watermark: Some(log.len() as u64),
                log_start_offset: Some(0),
                foreign_values: 0,
                node: "n1".into(),
            })
        }
    }

    /// A one-member coordinator: every join is generation `generation + 1` with this member
    /// as leader; heartbeats answer `heartbeat_error` when set.
    #[derive(Default)]
    struct OneMember {
        generation: Mutex<u64>,
        committed: Mutex<BTreeMap<Key, u64>>,
        heartbeat_error: Mutex<Option<&'static str>>,
        assignments: Mutex<Vec<BTreeMap<String, Vec<Key>>>>,
    }

    fn broker_error(name: &str) -> ClientError {
        ClientError {
            cause: ErrorCause::Broker {
                name: name.into(),
                status: 409,
            },
            node: Some("n1".into()),
            message: String::new(),
        }
    }

    impl GroupClient for OneMember {
        async fn join(
            &self,
            _group: &str,
            member_id: Option<&str>,
            topics: &[String],
            settings: &GroupSettings,
        ) -> Outcome<Joined> {
            let mut generation = self.generation.lock().unwrap();
            *generation += 1;
            let member_id = member_id.unwrap_or("m-1").to_string();
            Outcome::Ok(Joined {
                generation: *generation,
                members: BTreeMap::from([(member_id.clone(), topics.to_vec())]),
                member_id,
                leader: true,
                partition_counts: settings.partition_counts(),
                node: "n2".into(),
            })
        }

        async fn sync(
            &self,
            _group: &str,
            member_id: &str,
            _generation: u64,
            assignment: Option<&BTreeMap<String, Vec<Key>>>,
        ) -> Outcome<Vec<Key>> {
            let assignment = assignment.expect("the only member leads").clone();
            self.assignments.lock().unwrap().push(assignment.clone());
            Outcome::Ok(assignment[member_id].clone())
        }

        async fn heartbeat(&self, _g: &str, _m: &str, _gen: u64, _polled: bool) -> Outcome<()> {
            match *self.heartbeat_error.lock().unwrap() {
                Some(name) => Outcome::Fail(broker_error(name)),
                None => Outcome::Ok(()),
            }
        }

        async fn leave(&self, _group: &str, _member_id: &str) -> Outcome<()> {
            Outcome::Ok(())
        }

        async fn commit(
            &self,
            _group: &str,
            _member_id: &str,
            generation: u64,
            offsets: &BTreeMap<Key, u64>,
        ) -> Outcome<String> {
            if generation != *self.generation.lock().unwrap() {
                return Outcome::Fail(broker_error("ILLEGAL_GENERATION"));
            }
            self.committed.lock().unwrap().extend(offsets.clone());
            Outcome::Ok("n2".into())
        }

        async fn fetch_offsets(&self, _group: &str) -> Outcome<BTreeMap<Key, u64>> {
            Outcome::Ok(self.committed.lock().unwrap().clone())
        }
    }

    fn settings() -> GroupSettings {
        let mut s = GroupSettings::new(vec!["t0/0".into(), "t0/1".into()], "all");
        s.heartbeat_interval_ms = 0; // every op heartbeats
        s
    }

    #[tokio::test]
    async fn a_member_starts_from_committed_offsets_polls_and_commits_its_progress() {
        let logs = Logs::default();
        for v in [10, 11, 12] {
            logs.send("t0/0", v, "all").await;
        }
        let coordinator = OneMember::default();
        coordinator
            .committed
            .lock()
            .unwrap()
            .insert("t0/0".into(), 1);
        let s = settings();
        let mut member = Member::new("g0");
        let joined = execute(
            &logs,
            &coordinator,
            &s,
            &mut member,
            &GroupIntent::Rebalance,
        )
        .await;
        assert_eq!(joined.kind, OpType::Ok);
        assert_eq!(
            joined.value,
            json!({"group": "g0", "generation": 1, "assignment": ["t0/0", "t0/1"]})
        );
        assert!(member.progress().is_empty(), "nothing polled yet");
        let polled = execute(&logs, &coordinator, &s, &mut member, &GroupIntent::Poll).await;
        assert_eq!(
            polled.value,
            json!([["poll", {"t0/0": [[1, 11], [2, 12]]}]])
        );
        assert_eq!(member.progress(), BTreeMap::from([("t0/0".to_string(), 3)]));
        let invoke = GroupIntent::Commit.invoke_value(&member);
        assert_eq!(invoke, Some(json!([["commit", "t0/0", 3]])));
        let commit = execute(&logs, &coordinator, &s, &mut member, &GroupIntent::Commit).await;
        assert_eq!(
            (commit.kind, commit.value),
            (OpType::Ok, json!([["commit", "t0/0", 3]]))
        );
        assert!(member.progress().is_empty());
        assert_eq!(coordinator.committed.lock().unwrap()["t0/0"], 3);
    }

    #[tokio::test]
    async fn rebalance_in_progress_commits_the_progress_then_rejoins() {
        let logs = Logs::default();
        logs.send("t0/1", 7, "all").await;
        let coordinator = OneMember::default();
        let s = Arc::new(settings());
        let mut generator = GroupGenerator::new(1, 5, s.clone(), ValueSource::default());
        assert!(!generator.is_producer());
        let mut member = Member::new("g0");
        assert_eq!(generator.next(&member), GroupIntent::Rebalance);
        execute(
            &logs,
            &coordinator,
            &s,
            &mut member,
            &GroupIntent::Rebalance,
        )
        .await;
        execute(&logs, &coordinator, &s, &mut member, &GroupIntent::Poll).await;
        execute(&logs, &coordinator, &s, &mut member, &GroupIntent::Poll).await;
        assert_eq!(member.progress().len(), 1);
        *coordinator.heartbeat_error.lock().unwrap() = Some("REBALANCE_IN_PROGRESS");
        let quiet = execute(&logs, &coordinator, &s, &mut member, &GroupIntent::Poll).await;
        assert_eq!(quiet.kind, OpType::Ok, "the poll itself still runs");
        assert!(member.rejoin);
        assert_eq!(
            generator.next(&member),
            GroupIntent::Commit,
            "revocation commit first"
        );
        let commit = execute(&logs, &coordinator, &s, &mut member, &GroupIntent::Commit).await;
        assert_eq!(commit.kind, OpType::Ok);
        assert_eq!(generator.next(&member), GroupIntent::Rebalance);
        *coordinator.heartbeat_error.lock().unwrap() = None;
        let again = execute(
            &logs,
            &coordinator,
            &s,
            &mut member,
            &GroupIntent::Rebalance,
        )
        .await;
        assert_eq!(again.value["generation"], 2);
        assert_eq!(
            member.consumer.positions["t0/1"], 1,
            "restarts from the commit"
        );
    }

    /// Collects lines and stops the worker after `limit` of them.
    struct Lines {
        ops: Mutex<Vec<Op>>,
        processes: Mutex<u64>,
        stop: Arc<AtomicBool>,
        limit: usize,
    }

    impl OpSink for Lines {
        fn new_process(&self) -> u64 {
            let mut p = self.processes.lock().unwrap();
            *p += 1;
            *p
        }

        fn record(&self, op: Op) {
            let mut ops = self.ops.lock().unwrap();
            ops.push(op);
            if ops.len() >= self.limit {
                self.stop.store(true, Ordering::Relaxed);
            }
        }
    }

    #[tokio::test]
    async fn a_crashed_consumer_continues_as_a_new_process_and_member() {
        let mut s = settings();
        s.producers = 0;
        s.crash_fraction = 1.0;
        let stop = Arc::new(AtomicBool::new(false));
        let ctx = GroupContext {
            queue: Arc::new(Logs::default()),
            group: Arc::new(OneMember::default()),
            settings: Arc::new(s),
            seed: 3,
            values: ValueSource::default(),
            stop: stop.clone(),
        };
        let sink = Arc::new(Lines {
            ops: Mutex::new(vec![]),
            processes: Mutex::new(0),
            stop,
            limit: 6,
        });
        let ops = group_worker(ctx, sink.clone(), 0).await;
        assert_eq!(ops, 4);
        let lines = sink.ops.lock().unwrap();
        let summary: Vec<(String, OpType, String)> = lines
            .iter()
            .map(|o| (o.process.to_string(), o.kind, o.f.clone()))
            .collect();
        let expected = [
            ("1", OpType::Invoke, "rebalance"),
            ("1", OpType::Ok, "rebalance"),
            ("1", OpType::Info, "crash"),
            ("2", OpType::Invoke, "rebalance"),
            ("2", OpType::Ok, "rebalance"),
            ("2", OpType::Info, "crash"),
        ]
        .map(|(p, k, f)| (p.to_string(), k, f.to_string()));
        assert_eq!(summary, expected);
        assert_eq!(
            lines[4].value["generation"], 2,
            "the new member joined a new generation"
        );
    }

    /// Serves the answers `answers(url)` makes, in order, one per connection.
    async fn canned_server(answers: impl FnOnce(&str) -> Vec<(u16, Value)>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let responses = answers(&url);
        tokio::spawn(async move {
            for (status, body) in responses {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 64 * 1024];
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

    #[tokio::test]
    async fn http_client_finds_the_coordinator_again_and_classifies_commit_errors() {
        let url = canned_server(|url| {
            let coordinator = json!({"group_id": "g0", "partition": 1, "broker_id": 1, "url": url});
            vec![
                (200, coordinator.clone()),
                (
                    200,
                    json!({"generation": 4, "member_id": "m", "leader_id": "m", "protocol": "range",
                           "members": [{"member_id": "m", "topics": ["t0"]}],
                           "partition_counts": {"t0": 2}, "heartbeat_interval_ms": 500}),
                ),
                (421, json!({"error": "NOT_COORDINATOR", "message": "moved"})),
                (200, coordinator),
                (200, json!({})),
                (504, json!({"error": "REQUEST_TIMED_OUT", "message": "isr"})),
                (
                    409,
                    json!({"error": "ILLEGAL_GENERATION", "message": "old"}),
                ),
            ]
        })
        .await;
        let config = crate::client::ClientConfig::new(BTreeMap::from([("n1".to_string(), url)]));
        let client = HttpGroupClient::new(&config, &settings());
        let Outcome::Ok(joined) = client.join("g0", None, &["t0".into()], &settings()).await else {
            panic!("join failed");
        };
        assert_eq!((joined.generation, joined.leader), (4, true));
        assert_eq!(joined.members["m"], ["t0"]);
        assert_eq!(joined.partition_counts["t0"], 2);
        let offsets = BTreeMap::from([("t0/0".to_string(), 5)]);
        let committed = client.commit("g0", "m", 4, &offsets).await;
        assert_eq!(
            committed,
            Outcome::Ok("n1".to_string()),
            "retried after NOT_COORDINATOR"
        );
        match client.commit("g0", "m", 4, &offsets).await {
            Outcome::Info(e) => assert_eq!(e.cause.name(), "REQUEST_TIMED_OUT"),
            other => panic!("a timed-out commit may be stored: {other:?}"),
        }
        match client.commit("g0", "m", 4, &offsets).await {
            Outcome::Fail(e) => assert_eq!(e.cause.name(), "ILLEGAL_GENERATION"),
            other => panic!("a refused commit stored nothing: {other:?}"),
        }
    }
}
