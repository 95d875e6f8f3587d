//! The queue workload's sends and fetches, and the transactional workload's transactions,
//! through the Java driver. The queue workload's calls carry no process, so they borrow a
//! logical client (`q0`, `q1`, ...) from a pool for one call each: one call per client at a
//! time, and as many clients as calls in flight. The transactional workload names its own
//! clients (`w0`, `w1`, ...: one per worker, each its own `transactional.id`).

use super::driver::ANSWER_TIMEOUT;
use super::settings::MAX_BLOCK_MS;
use super::{Answer, JavaDriver};
use crate::client::{ClientError, ErrorCause, Fetched, Outcome, Sent};
use crate::history::{Key, MicroOp, TxnEnd, Val};
use crate::kafka::KAFKA_NODE;
use crate::queue::QueueClient;
use crate::txn::{BoxFuture, Ending, PollOutcome, TxnClient, TxnLimits, TxnOutcome, TxnReply};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The queue and transactional workloads over the Java client.
pub struct JavaQueueClient {
    /// The driver process.
    driver: Arc<JavaDriver>,
    /// Pool clients not in use; a call takes one (or names a new one) and gives it back.
    idle: Mutex<Vec<String>>,
    /// How many pool clients exist, for the next one's name.
    made: Mutex<u64>,
    /// True when the producers are transactional (the txn workload).
    transactional: bool,
}

/// A failed call as the queue workload's error, the client's exception as its name.
fn client_error(error: String, message: String) -> ClientError {
    ClientError {
        cause: ErrorCause::Broker {
            name: error,
            status: 0,
        },
        node: Some(KAFKA_NODE.into()),
        message,
    }
}

/// `{"t0/1": [[16, 903], ...]}` as records per key; values that are not integers are
/// counted, not kept (the workload never writes them).
fn records_of(v: Option<&Value>) -> (BTreeMap<Key, Vec<(u64, Val)>>, usize) {
    let mut out = BTreeMap::new();
    let mut foreign = 0;
    for (key, pairs) in v.and_then(Value::as_object).into_iter().flatten() {
        let list: &mut Vec<(u64, Val)> = out.entry(key.clone()).or_default();
        for pair in pairs.as_array().into_iter().flatten() {
            match (
                pair.get(0).and_then(Value::as_u64),
                pair.get(1).and_then(Value::as_i64),
            ) {
                (Some(o), Some(x)) => list.push((o, x)),
                _ => foreign += 1,
            }
        }
    }
    (out, foreign)
}

/// `{"t0/1": 17}` as offsets per key.
fn offsets_of(v: Option<&Value>) -> BTreeMap<Key, u64> {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, o)| Some((k.clone(), o.as_u64()?)))
        .collect()
}

/// The committed micro-ops of an ok transaction answer; `None` when they do not parse.
fn committed_micro(answer: &Map<String, Value>) -> Option<Vec<MicroOp>> {
    answer
        .get("micro")?
        .as_array()?
        .iter()
        .map(|m| MicroOp::from_value(m).ok())
        .collect()
}

impl JavaQueueClient {
    /// The workloads over `driver`; `transactional` when its producers have a
    /// `transactional.id` (the txn workload).
    pub fn new(driver: Arc<JavaDriver>, transactional: bool) -> JavaQueueClient {
        JavaQueueClient {
            driver,
            idle: Mutex::new(Vec::new()),
            made: Mutex::new(0),
            transactional,
        }
    }

    /// True when the producers are transactional.
    pub fn transactional(&self) -> bool {
        self.transactional
    }

    /// Makes logical client `client`'s transactional producer and initialises it
    /// (InitProducerId), retrying until `deadline`: the first initialisation of a cluster
    /// creates `__transaction_state` and finds its coordinators, which can take longer than
    /// one `max.block.ms`. The error is the last one the client reported.
    pub async fn init_transactions(
        &self,
        client: &str,
        deadline: tokio::time::Instant,
    ) -> Result<(), String> {
        loop {
            match self.driver.call(client, "init", json!({})).await {
                Answer::Ok(_) => return Ok(()),
                Answer::Fail { error, message, .. } | Answer::Info { error, message, .. } => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(format!("{error}: {message}"));
                    }
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }

    /// The driver, for its shutdown at the end of a run.
    pub fn driver(&self) -> &Arc<JavaDriver> {
        &self.driver
    }

    /// Runs `op` on a pool client.
    async fn pooled(&self, op: &str, fields: Value) -> Answer {
        let client = self
            .idle
            .lock()
            .expect("pool lock")
            .pop()
            .unwrap_or_else(|| {
                let mut made = self.made.lock().expect("pool lock");
                *made += 1;
                format!("q{}", *made - 1)
            });
        let answer = self.driver.call(&client, op, fields).await;
        self.idle.lock().expect("pool lock").push(client);
        answer
    }

    /// One poll of `positions` by `client`, as the driver answers it.
    async fn poll_positions(
        &self,
        client: Option<&str>,
        positions: &BTreeMap<Key, u64>,
        wait_ms: u64,
    ) -> Answer {
        let fields = json!({"positions": positions, "wait_ms": wait_ms});
        match client {
            Some(c) => self.driver.call(c, "poll", fields).await,
            None => self.pooled("poll", fields).await,
        }
    }
}

impl QueueClient for JavaQueueClient {
    async fn send(&self, key: &str, value: Val, _acks: &str) -> Outcome<Sent> {
        // acks is the producer's config (the run's --acks), set when the driver started.
        match self
            .pooled("send", json!({"key": key, "value": value}))
            .await
        {
            Answer::Ok(a) => Outcome::Ok(Sent {
                offset: a.get("offset").and_then(Value::as_u64),
                high_watermark: None,
                isr_size: None,
                node: KAFKA_NODE.into(),
            }),
            Answer::Fail { error, message, .. } => Outcome::Fail(client_error(error, message)),
            Answer::Info { error, message, .. } => Outcome::Info(client_error(error, message)),
        }
    }

    async fn fetch(&self, key: &str, offset: u64, max_wait_ms: u64) -> Outcome<Fetched> {
        let positions = BTreeMap::from([(key.to_string(), offset)]);
        match self.poll_positions(None, &positions, max_wait_ms).await {
            Answer::Ok(a) => {
                let (mut records, foreign_values) = records_of(a.get("records"));
                let next = offsets_of(a.get("positions"));
                Outcome::Ok(Fetched {
                    records: records.remove(key).unwrap_or_default(),
                    next_offset: next.get(key).copied().unwrap_or(offset),
                    // The end the consumer's fetch reported: the high watermark, or under
                    // read_committed the last stable offset (docs/real-kafka.md).
                    high_watermark: offsets_of(a.get("ends")).get(key).copied(),
                    log_start_offset: None,
                    foreign_values,
                    node: KAFKA_NODE.into(),
                })
            }
            // A poll has no effect: whatever went wrong, it is a failure.
            Answer::Fail { error, message, .. } | Answer::Info { error, message, .. } => {
                Outcome::Fail(client_error(error, message))
            }
        }
    }
}

impl TxnClient for JavaQueueClient {
    fn txn<'a>(
        &'a self,
        client: &'a str,
        micro: &'a [MicroOp],
        positions: &'a BTreeMap<Key, u64>,
        ending: Ending,
        limits: TxnLimits,
    ) -> BoxFuture<'a, TxnReply> {
        Box::pin(async move {
            let invoke: Vec<Value> = micro.iter().map(MicroOp::to_invoke_value).collect();
            let fields = json!({
                "micro": invoke, "positions": positions, "end": ending.name(),
                "wait_ms": limits.poll_max_wait_ms, "end_attempts_max": limits.end_attempts_max,
            });
            // Each call of the end after the first may block another max.block.ms.
            let retries = u64::from(limits.end_attempts_max.saturating_sub(1));
            let bound = ANSWER_TIMEOUT + Duration::from_millis(retries * MAX_BLOCK_MS);
            let answer = self.driver.call_within(client, "txn", fields, bound).await;
            let details = match &answer {
                Answer::Ok(a) => a,
                Answer::Fail { details, .. } | Answer::Info { details, .. } => details,
            };
            // The driver's account of the calls; one it cannot read is left out, never guessed.
            let end = details
                .get("txn_end")
                .and_then(|v| serde_json::from_value::<TxnEnd>(v.clone()).ok());
            let outcome = match answer {
                Answer::Ok(a) => match committed_micro(&a) {
                    Some(micro) => TxnOutcome::Committed {
                        micro,
                        positions: offsets_of(a.get("positions")),
                    },
                    // Committed, but the driver's account of it is unreadable.
                    None => TxnOutcome::Unknown {
                        error: "driver-protocol".into(),
                    },
                },
                Answer::Fail { error, .. } => TxnOutcome::Aborted { error },
                Answer::Info { error, .. } => TxnOutcome::Unknown { error },
            };
            TxnReply { outcome, end }
        })
    }

    fn poll<'a>(
        &'a self,
        client: &'a str,
        positions: &'a BTreeMap<Key, u64>,
        wait_ms: u64,
    ) -> BoxFuture<'a, PollOutcome> {
        Box::pin(async move {
            match self.poll_positions(Some(client), positions, wait_ms).await {
                Answer::Ok(a) => PollOutcome::Ok {
                    records: records_of(a.get("records")).0,
                    positions: offsets_of(a.get("positions")),
                },
                Answer::Fail { error, .. } | Answer::Info { error, .. } => {
                    PollOutcome::Fail { error }
                }
            }
        })
    }

    fn close<'a>(&'a self, client: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let _ = self.driver.call(client, "close", json!({})).await;
        })
    }
}
