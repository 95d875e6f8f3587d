//! The history writer: every operation is appended to `history.jsonl` as it happens.
//!
//! Callers (workers, the nemesis, final reads) call [`Recorder::record`], which under one
//! short lock assigns the dense `index` and the `time` (ns since the test started) and hands
//! the op to a writer thread through a bounded channel. Taking index and time under the same
//! lock keeps both in the same order as the channel, so `index` order is also time order.
//! The writer serialises into a `BufWriter`; nothing but counters stays in memory, so long
//! runs use constant memory. When the disk cannot keep up, the bounded channel makes callers
//! wait (back-pressure) instead of growing a queue.
//!
//! The recorder also keeps what the runner needs during the run without reading the file
//! back: op counts for the progress display, the highest acknowledged offset per key for the
//! final reads, and the last process number.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;
use tidewater_workloads::history::{Key, MicroOp, Op, OpType, Process};
use tidewater_workloads::nemesis::{NemesisOp, OpName};

/// Ops buffered between callers and the writer thread before callers wait.
pub const CHANNEL_OPS_MAX: usize = 65_536;

/// The writer flushes when no op arrived for this long (besides the flushes at phase ends).
const IDLE_FLUSH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(200);

/// ... and at least this often under load, so a harness killed by a signal loses at most
/// about a second of history.
const FLUSH_INTERVAL_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// Counts of completed client ops, for the progress display and the summary.
#[derive(Debug, Default)]
pub struct OpCounts {
    /// Client ops that completed ok.
    pub ok: AtomicU64,
    /// Client ops that certainly failed.
    pub fail: AtomicU64,
    /// Client ops with an indeterminate outcome.
    pub info: AtomicU64,
    /// Nemesis ops.
    pub nemesis: AtomicU64,
}

impl OpCounts {
    /// (ok, fail, info) now.
    pub fn snapshot(&self) -> (u64, u64, u64) {
        (
            self.ok.load(Ordering::Relaxed),
            self.fail.load(Ordering::Relaxed),
            self.info.load(Ordering::Relaxed),
        )
    }
}

enum Message {
    Op(Box<Op>),
    /// Flush the BufWriter and answer on the channel (sent at phase ends).
    Flush(SyncSender<std::io::Result<()>>),
}

struct Shared {
    next_index: u64,
    tx: Option<SyncSender<Message>>,
}

/// Appends ops to a history file. Cheap to share behind an `Arc`.
pub struct Recorder {
    /// Index assignment and the channel, under one lock so index order is channel order.
    shared: Mutex<Shared>,
    /// The instant `time` 0 refers to.
    start: Instant,
    /// Live counters for progress.
    counts: OpCounts,
    /// Highest acknowledged send offset per key: the final reads must reach past it.
    acked_offsets_max: Mutex<BTreeMap<Key, u64>>,
    /// Next fresh client process number.
    next_process: AtomicU64,
    /// Faults started and not yet stopped, from the nemesis ops (`start-kill` .. `stop-kill`).
    faults_active: Mutex<std::collections::BTreeSet<String>>,
    /// The writer thread, joined by [`Recorder::close`].
    writer: Mutex<Option<JoinHandle<std::io::Result<u64>>>>,
}

impl Recorder {
    /// Creates (truncates) `path` and starts the writer; `time` 0 is now.
    pub fn create(path: &Path) -> std::io::Result<Arc<Recorder>> {
        let file = File::create(path)?;
        Ok(Recorder::with_writer(Box::new(file)))
    }

    /// A recorder writing to any sink (the benchmark uses `io::sink()`).
    pub fn with_writer(sink: Box<dyn Write + Send>) -> Arc<Recorder> {
        let (tx, rx) = sync_channel(CHANNEL_OPS_MAX);
        let writer = std::thread::Builder::new()
            .name("history-writer".into())
            .spawn(move || write_loop(rx, sink))
            .expect("spawn the history writer thread");
        Arc::new(Recorder {
            shared: Mutex::new(Shared {
                next_index: 0,
                tx: Some(tx),
            }),
            start: Instant::now(),
            counts: OpCounts::default(),
            acked_offsets_max: Mutex::new(BTreeMap::new()),
            next_process: AtomicU64::new(0),
            faults_active: Mutex::new(Default::default()),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// A fresh client process number (processes retire after an `info`).
    pub fn new_process(&self) -> u64 {
        self.next_process.fetch_add(1, Ordering::Relaxed)
    }

    /// Nanoseconds since the recorder started.
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Live op counters.
    pub fn counts(&self) -> &OpCounts {
        &self.counts
    }

    /// Highest acknowledged offset per key so far.
    pub fn acked_offsets_max(&self) -> BTreeMap<Key, u64> {
        self.acked_offsets_max
            .lock()
            .expect("acked offsets lock")
            .clone()
    }

    /// Records an op. `index` and `time` of `op` are overwritten; returns the index given.
    /// After [`Recorder::close`] the op is dropped (returns `None`).
    pub fn record(&self, mut op: Op) -> Option<u64> {
        self.observe(&op);
        let mut shared = self.shared.lock().expect("recorder lock");
        let index = shared.next_index;
        op.index = index;
        op.time = self.now_ns();
        let tx = shared.tx.as_ref()?;
        // A send error means the writer died (disk error); close() reports it.
        tx.send(Message::Op(Box::new(op))).ok()?;
        shared.next_index += 1;
        Some(index)
    }

    /// Faults active now, by kind (`partition`, `kill`, `pause`, ...).
    pub fn faults_active(&self) -> Vec<String> {
        let faults = self.faults_active.lock().expect("faults lock");
        faults.iter().cloned().collect()
    }

    /// Records a nemesis op (process "nemesis", type info) with the error of a fault that
    /// could not be (fully) applied. `start-X` marks fault X active (per node when the value
    /// lists nodes: `kill:n1`) and `stop-X` inactive (those nodes, or every X when the value
    /// lists none), for the progress display.
    pub fn nemesis(&self, op: &NemesisOp, error: Option<String>) {
        let value = op.value();
        {
            let mut faults = self.faults_active.lock().expect("faults lock");
            let nodes: Vec<&str> = value
                .as_array()
                .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
                .unwrap_or_default();
            match op.name() {
                Some(OpName::Start(fault)) => {
                    if nodes.is_empty() {
                        faults.insert(fault.name().to_string());
                    }
                    for n in &nodes {
                        faults.insert(format!("{fault}:{n}"));
                    }
                }
                Some(OpName::Stop(fault)) => {
                    if nodes.is_empty() {
                        let prefix = format!("{fault}:");
                        faults.retain(|f| f != fault.name() && !f.starts_with(&prefix));
                    }
                    for n in &nodes {
                        faults.remove(&format!("{fault}:{n}"));
                    }
                }
                Some(OpName::Wait(_)) | None => {}
            }
        }
        self.record(Op {
            error,
            ..Op::nemesis(&op.f(), value)
        });
    }

    fn observe(&self, op: &Op) {
        let counter = match (op.process, op.kind) {
            (Process::Nemesis, _) => &self.counts.nemesis,
            (_, OpType::Invoke) => return,
            (_, OpType::Ok) => &self.counts.ok,
            (_, OpType::Fail) => &self.counts.fail,
            (_, OpType::Info) => &self.counts.info,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        // A committed transaction's sends are acknowledged writes too.
        if op.kind == OpType::Ok && (op.f == "send" || op.f == "txn") {
            let mut acked = self.acked_offsets_max.lock().expect("acked offsets lock");
            for m in op.micro_ops().unwrap_or_default() {
                if let MicroOp::Send {
                    key,
                    offset: Some(o),
                    ..
                } = m
                {
                    let e = acked.entry(key).or_insert(o);
                    *e = (*e).max(o);
                }
            }
        }
    }

    /// Flushes everything recorded so far to the file (call at phase ends).
    pub fn flush(&self) -> std::io::Result<()> {
        let (ack_tx, ack_rx) = sync_channel(1);
        {
            let shared = self.shared.lock().expect("recorder lock");
            let Some(tx) = shared.tx.as_ref() else {
                return Ok(());
            };
            if tx.send(Message::Flush(ack_tx)).is_err() {
                return Err(std::io::Error::other("history writer stopped"));
            }
        }
        ack_rx
            .recv()
            .map_err(|_| std::io::Error::other("history writer stopped"))?
    }

    /// Stops accepting ops, writes out the rest and returns how many ops were written.
    pub fn close(&self) -> std::io::Result<u64> {
        drop(self.shared.lock().expect("recorder lock").tx.take());
        match self.writer.lock().expect("writer lock").take() {
            Some(handle) => handle
                .join()
                .map_err(|_| std::io::Error::other("history writer panicked"))?,
            None => Ok(0),
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // Make sure buffered ops reach the file even when the runner bails out early.
        let _ = self.close();
    }
}

fn write_loop(rx: Receiver<Message>, sink: Box<dyn Write + Send>) -> std::io::Result<u64> {
    let mut out = BufWriter::with_capacity(1 << 20, sink);
    let mut written = 0u64;
    let mut dirty = false;
    let mut last_flush = Instant::now();
    loop {
        match rx.recv_timeout(IDLE_FLUSH_INTERVAL) {
            Ok(Message::Op(op)) => {
                serde_json::to_writer(&mut out, &op)?;
                out.write_all(b"\n")?;
                written += 1;
                dirty = true;
                // Under steady load the channel is never quiet: flush by age as well.
                if last_flush.elapsed() >= FLUSH_INTERVAL_MAX {
                    out.flush()?;
                    last_flush = Instant::now();
                    dirty = false;
                }
            }
            Ok(Message::Flush(ack)) => {
                let _ = ack.send(out.flush());
                last_flush = Instant::now();
                dirty = false;
            }
            // Quiet for a moment: put what we have on disk.
            Err(RecvTimeoutError::Timeout) if dirty => {
                out.flush()?;
                last_flush = Instant::now();
                dirty = false;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    out.flush()?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tidewater_workloads::history::read_history;

    fn op(process: u64, kind: OpType, f: &str, value: serde_json::Value) -> Op {
        Op {
            index: 99,
            ..Op::client(process, kind, f, value)
        }
    }

    #[test]
    fn writes_dense_indexes_in_time_order_from_many_threads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let rec = Recorder::create(&path).unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let rec = rec.clone();
                s.spawn(move || {
                    for i in 0..1000 {
                        rec.record(op(t, OpType::Invoke, "send", json!([["send", "t0/0", i]])));
                    }
                });
            }
        });
        let nemesis = |f: &str, value| rec.nemesis(&NemesisOp::parse(f, &value), None);
        nemesis("start-partition", json!({"n1": ["n2"]}));
        assert_eq!(rec.close().unwrap(), 4001);
        let ops = read_history(std::io::BufReader::new(File::open(&path).unwrap())).unwrap();
        assert_eq!(ops.len(), 4001);
        for (i, pair) in ops.windows(2).enumerate() {
            assert_eq!(pair[0].index, i as u64);
            assert!(pair[0].time <= pair[1].time, "time goes back at {i}");
        }
        assert_eq!(ops[4000].process, Process::Nemesis);
        assert_eq!(ops[4000].kind, OpType::Info);
        assert_eq!(rec.faults_active(), vec!["partition".to_string()]);
        nemesis("start-kill", json!(["n1", "n2"]));
        nemesis("stop-kill", json!(["n1"]));
        assert_eq!(rec.faults_active(), vec!["kill:n2", "partition"]);
        nemesis("stop-partition", json!(null));
        nemesis("stop-kill", json!(null));
        assert!(rec.faults_active().is_empty());
    }

    #[test]
    fn tracks_counts_and_the_highest_acknowledged_offset() {
        let rec = Recorder::with_writer(Box::new(std::io::sink()));
        rec.record(op(0, OpType::Ok, "send", json!([["send", "t0/0", [5, 1]]])));
        rec.record(op(0, OpType::Ok, "send", json!([["send", "t0/0", [3, 2]]])));
        rec.record(op(1, OpType::Info, "send", json!([["send", "t0/1", 3]])));
        rec.record(op(1, OpType::Fail, "poll", json!([["poll"]])));
        rec.record(op(2, OpType::Invoke, "poll", json!([["poll"]])));
        assert_eq!(rec.counts().snapshot(), (2, 1, 1));
        assert_eq!(
            rec.acked_offsets_max(),
            BTreeMap::from([("t0/0".to_string(), 5)])
        );
    }

    #[test]
    fn ops_reach_the_file_without_an_explicit_flush_once_recording_pauses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let rec = Recorder::create(&path).unwrap();
        rec.record(op(0, OpType::Invoke, "poll", json!([["poll"]])));
        // The writer flushes after IDLE_FLUSH_INTERVAL of quiet; wait for it (bounded).
        let mut lines = 0;
        for _ in 0..100 {
            std::thread::sleep(IDLE_FLUSH_INTERVAL);
            lines = std::fs::read_to_string(&path).unwrap().lines().count();
            if lines == 1 {
                break;
            }
        }
        assert_eq!(lines, 1, "the idle writer flushed the op");
    }

    #[test]
    fn flush_makes_ops_visible_and_close_stops_recording() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let rec = Recorder::create(&path).unwrap();
        rec.record(op(0, OpType::Invoke, "poll", json!([["poll"]])));
        rec.flush().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1);
        rec.close().unwrap();
        assert_eq!(
            rec.record(op(0, OpType::Ok, "poll", json!([["poll", {}]]))),
            None
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
    }
}
