//! The final reads: after heal and recovery, read every partition from offset 0 (the broker
//! answers from its log start) until the reads cover every acknowledged offset and the high
//! watermark seen when they began, or until the system says the log settled below an
//! acknowledged offset, or the final time limit passes. Each partition is read by its own
//! fresh process; its ops carry `"final": true`.

use crate::recorder::Recorder;
use crate::runner::workload::{client_op, completion_op};
use crate::system::System;
use serde_json::json;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tidewater_workloads::history::{Key, OpType};
use tidewater_workloads::queue::{poll_key, Consumer, QueueClient};
use tokio::time::Instant;

/// Long-poll bound of one final fetch: short, the data is already there.
const FINAL_FETCH_WAIT_MS: u64 = 50;

/// Pause after a failed final fetch before trying again.
const RETRY_BACKOFF_MS: u64 = 200;

/// How far the final reads got on one key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeyCoverage {
    /// The offset the reads had to reach.
    pub target: u64,
    /// The offset reached (next offset to read).
    pub reached: u64,
    /// Final read ops issued.
    pub reads: u64,
    /// True when the reads stopped short of the target because the log settled below it:
    /// every replica in sync and the leader's high watermark = log end = `reached`. The
    /// acknowledged records at or above `reached` no longer exist anywhere.
    #[serde(default)]
    pub settled: bool,
}

impl KeyCoverage {
    /// True when every offset below the target was read, or everything the log still holds.
    pub fn complete(&self) -> bool {
        self.reached >= self.target || self.settled
    }
}

/// Whether a key's log has settled at an offset: [`System::settled_at`] for a run.
pub trait LogSettled: Send + Sync + 'static {
    /// True when nothing at or above `offset` exists on any replica of `key` and nothing
    /// else can be elected.
    fn settled_at(&self, key: &str, offset: u64) -> impl Future<Output = bool> + Send;
}

impl<S: System> LogSettled for S {
    fn settled_at(&self, key: &str, offset: u64) -> impl Future<Output = bool> + Send {
        System::settled_at(self, key, offset)
    }
}

/// Reads one key to its target. The target is `max(acked + 1, HW at the first answer)`.
async fn read_key<C: QueueClient, L: LogSettled>(
    client: &C,
    log: &L,
    recorder: &Recorder,
    key: &str,
    acked_max: Option<u64>,
    deadline: Instant,
) -> KeyCoverage {
    let process = recorder.new_process();
    let mut consumer = Consumer::default();
    let mut target = acked_max.map(|o| o + 1).unwrap_or(0);
    let mut hw_seen = false;
    let mut settled = false;
    let mut reads = 0;
    loop {
        let position = consumer.positions.get(key).copied().unwrap_or(0);
        if (hw_seen && position >= target) || settled || Instant::now() >= deadline {
            return KeyCoverage {
                target,
                reached: position,
                reads,
                settled,
            };
        }
        recorder.record(final_invoke(process));
        let c = poll_key(client, &mut consumer, key, position, FINAL_FETCH_WAIT_MS).await;
        reads += 1;
        let ok = c.kind == OpType::Ok;
        let advanced = consumer.positions.get(key).copied().unwrap_or(0) > position;
        let read_hw = c.high_watermarks.as_ref().and_then(|h| h.get(key)).copied();
        if ok && !hw_seen {
            if let Some(hw) = read_hw {
                target = target.max(hw);
                hw_seen = true;
            }
        }
        recorder.record(completion_op(process, "poll", c, true));
        // At the end of what is committed but short of an acknowledged offset: either the
        // followers are still catching up (wait) or the log settled below it (stop).
        if ok && !advanced && read_hw.is_some_and(|hw| position >= hw) && position < target {
            settled = log.settled_at(key, position).await;
        }
        // Back off when nothing moved (a failure, or an acknowledged offset the log does not
        // reach yet), so waiting for followers does not flood the history.
        if !ok || !advanced {
            tokio::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
        }
    }
}

/// The invoke line of a final poll.
fn final_invoke(process: u64) -> tidewater_workloads::history::Op {
    let mut op = client_op(process, OpType::Invoke, "poll", json!([["poll"]]));
    op.r#final = true;
    op
}

/// Reads every key concurrently with `client`, asking `log` whether a log settled short of
/// its target; returns the coverage per key.
pub async fn read_all<C: QueueClient, L: LogSettled>(
    client: Arc<C>,
    log: Arc<L>,
    recorder: Arc<Recorder>,
    keys: &[Key],
    time_limit: Duration,
) -> BTreeMap<Key, KeyCoverage> {
    let deadline = Instant::now() + time_limit;
    let acked = recorder.acked_offsets_max();
    let tasks = keys.iter().map(|key| {
        let (client, log, recorder) = (client.clone(), log.clone(), recorder.clone());
        let acked_max = acked.get(key).copied();
        async move {
            let cov = read_key(&*client, &*log, &recorder, key, acked_max, deadline).await;
            (key.clone(), cov)
        }
    });
    futures::future::join_all(tasks).await.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use tidewater_workloads::client::{ClientError, ErrorCause, Fetched, Outcome, Sent};
    use tidewater_workloads::history::read_history;

    /// A log of 5 records with HW 5 that fails the first fetch of each key.
    struct Log {
        calls: AtomicU32,
        /// The offset `settled_at` confirms, if any.
        settle_at: Option<u64>,
    }

    impl QueueClient for Log {
        async fn send(&self, _k: &str, _v: i64, _a: &str) -> Outcome<Sent> {
            unreachable!("final reads never send")
        }
        async fn fetch(&self, _key: &str, offset: u64, _w: u64) -> Outcome<Fetched> {
            if self.calls.fetch_add(1, Ordering::Relaxed) == 0 {
                return Outcome::Fail(ClientError {
                    cause: ErrorCause::Connect,
                    node: Some("n1".into()),
                    message: String::new(),
                });
            }
            let records: Vec<(u64, i64)> =
                (offset..5).take(2).map(|o| (o, 100 + o as i64)).collect();
            Outcome::Ok(Fetched {
                next_offset: records.last().map(|r| r.0 + 1).unwrap_or(offset),
                records,
                high_watermark: Some(5),
                log_start_offset: Some(0),
                foreign_values: 0,
                node: "n1".into(),
            })
        }
    }

    impl LogSettled for Log {
        async fn settled_at(&self, _key: &str, offset: u64) -> bool {
            self.settle_at == Some(offset)
        }
    }

    #[tokio::test]
    async fn reads_to_the_high_watermark_retrying_failures_and_marks_ops_final() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let recorder = Recorder::create(&path).unwrap();
        let client = Arc::new(Log {
            calls: AtomicU32::new(0),
            settle_at: None,
        });
        let cov = read_all(
            client.clone(),
            client,
            recorder.clone(),
            &["t0/0".to_string()],
            Duration::from_secs(30),
        )
        .await;
        assert_eq!(
            cov["t0/0"],
            KeyCoverage {
                target: 5,
                reached: 5,
                reads: 4,
                settled: false,
            }
        );
        assert!(cov["t0/0"].complete());
        recorder.close().unwrap();
        let ops =
            read_history(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
        assert_eq!(ops.len(), 8);
        assert!(ops.iter().all(|o| o.r#final));
        assert_eq!(ops[1].kind, OpType::Fail);
        assert_eq!(
            ops[3].value,
            json!([["poll", {"t0/0": [[0, 100], [1, 101]]}]])
        );
    }

    /// Final reads of `t0/0` (a 5-record log) after an acknowledged send at offset 9.
    async fn read_past_the_log(settle_at: Option<u64>, limit: Duration) -> KeyCoverage {
        let recorder = Recorder::with_writer(Box::new(std::io::sink()));
        recorder.record(completion_op(
            0,
            "send",
            tidewater_workloads::queue::Completion {
                kind: OpType::Ok,
                value: json!([["send", "t0/0", [9, 1]]]),
                node: None,
                high_watermarks: None,
                log_start_offsets: None,
                isr_sizes: None,
                error: None,
            },
            false,
        ));
        let client = Arc::new(Log {
            calls: AtomicU32::new(1),
            settle_at,
        });
        let mut cov = read_all(
            client.clone(),
            client,
            recorder,
            &["t0/0".to_string()],
            limit,
        )
        .await;
        cov.remove("t0/0").unwrap()
    }

    #[tokio::test]
    async fn an_acknowledged_offset_beyond_the_log_keeps_reading_until_the_deadline() {
        let cov = read_past_the_log(None, Duration::from_millis(300)).await;
        assert_eq!((cov.target, cov.reached, cov.settled), (10, 5, false));
        assert!(!cov.complete());
    }

    #[tokio::test]
    async fn a_log_settled_below_an_acknowledged_offset_completes_the_reads() {
        let cov = read_past_the_log(Some(5), Duration::from_secs(30)).await;
        assert_eq!((cov.target, cov.reached, cov.settled), (10, 5, true));
        assert!(cov.complete(), "the record at offset 9 is gone, not unread");
    }
}
