//! Runs the group workload against running brokers, reads every partition at the end, and
//! checks the history: a smoke test of the coordinator and the workload without the harness.
//!
//! ```text
//! cargo run -p tidewater-workloads --example group_smoke -- n0=http://127.0.0.1:9092 [seconds]
//! ```
//!
//! Creates topic `t0` (4 partitions, replication factor 1 unless `RF` is set), runs 2
//! producers and 4 members of group `g0` with frequent consumer faults, prints the verdict,
//! the anomalies and the op counts, and writes the history to `group-smoke.jsonl`. Name each
//! node `n<broker.id>` (a standalone broker is `n0`): leaders are found through the metadata.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tidewater_workloads::checker::{check, CheckSettings};
use tidewater_workloads::client::{BrokerClient, ClientConfig};
use tidewater_workloads::group::{
    group_worker, GroupContext, GroupSettings, HttpGroupClient, OpSink,
};
use tidewater_workloads::history::{Op, OpType};
use tidewater_workloads::queue::{poll_key, Consumer, ValueSource};

/// Numbers lines and stamps them with nanoseconds since the start.
struct Recorder {
    started: std::time::Instant,
    ops: Mutex<Vec<Op>>,
    processes: Mutex<u64>,
}

impl OpSink for Recorder {
    fn new_process(&self) -> u64 {
        let mut p = self.processes.lock().unwrap();
        *p += 1;
        *p
    }

    fn record(&self, mut op: Op) {
        let mut ops = self.ops.lock().unwrap();
        op.index = ops.len() as u64;
        op.time = self.started.elapsed().as_nanos() as u64;
        ops.push(op);
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let nodes: BTreeMap<String, String> = args
        .iter()
        .filter_map(|a| a.split_once('='))
        .map(|(n, u)| (n.to_string(), u.to_string()))
        .collect();
    assert!(
        !nodes.is_empty(),
        "usage: group_smoke n1=http://HOST:PORT ... [seconds]"
    );
    let seconds: u64 = args.iter().find_map(|a| a.parse().ok()).unwrap_or(20);
    let rf: u32 = std::env::var("RF")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let config = ClientConfig::new(nodes);
    let queue = Arc::new(BrokerClient::new(config.clone()));
    queue
        .create_topic("t0", 4, rf, &BTreeMap::new())
        .await
        .expect("topic t0");
    let keys: Vec<String> = (0..4).map(|p| format!("t0/{p}")).collect();
    let mut settings = GroupSettings::new(keys.clone(), "all");
    settings.crash_fraction = 0.01;
    settings.stall_fraction = 0.003;
    settings.leave_fraction = 0.01;
    settings.session_timeout_ms = 3_000;
    settings.max_poll_interval_ms = 3_000;
    settings.heartbeat_interval_ms = 500;
    let group = Arc::new(HttpGroupClient::new(&config, &settings));
    let stop = Arc::new(AtomicBool::new(false));
    let ctx = GroupContext {
        queue: queue.clone(),
        group,
        settings: Arc::new(settings),
        seed: 42,
        values: ValueSource::default(),
        stop: stop.clone(),
    };
    let sink = Arc::new(Recorder {
        started: std::time::Instant::now(),
        ops: Mutex::new(Vec::new()),
        processes: Mutex::new(0),
    });
    let workers: Vec<_> = (0..6)
        .map(|w| tokio::spawn(group_worker(ctx.clone(), sink.clone(), w)))
        .collect();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    // Final reads: every key from offset 0 up to its high watermark, by a fresh process.
    for key in &keys {
        let process = sink.new_process();
        let mut consumer = Consumer::default();
        let mut position = 0;
        loop {
            let invoke = json_poll();
            sink.record(op(process, OpType::Invoke, invoke));
            let done = poll_key(&*queue, &mut consumer, key, position, 100).await;
            let hw = done
                .high_watermarks
                .as_ref()
                .and_then(|h| h.get(key).copied());
            let empty = done.value[0][1][key]
                .as_array()
                .is_none_or(|r| r.is_empty());
            sink.record(Op {
                r#final: true,
                ..done.clone().into_op(process, "poll")
            });
            position = consumer.positions.get(key).copied().unwrap_or(position);
            if done.kind == OpType::Ok && empty && hw.is_some_and(|hw| position >= hw) {
                break;
            }
        }
    }
    let ops = sink.ops.lock().unwrap();
    let mut file = String::new();
    for o in ops.iter() {
        file.push_str(&serde_json::to_string(o).unwrap());
        file.push('\n');
    }
    std::fs::write("group-smoke.jsonl", file).unwrap();
    let count = |f: &str, kind: OpType| ops.iter().filter(|o| o.f == f && o.kind == kind).count();
    println!(
        "ops={} sends_ok={} polls_ok={} rebalances_ok={} rebalances_failed={} commits_ok={} commits_failed={} crashes={} stalls={} leaves={}",
        ops.len(),
        count("send", OpType::Ok),
        count("poll", OpType::Ok),
        count("rebalance", OpType::Ok),
        count("rebalance", OpType::Fail),
        count("commit", OpType::Ok),
        count("commit", OpType::Fail),
        count("crash", OpType::Info),
        count("stall", OpType::Ok),
        count("leave", OpType::Ok),
    );
    let settings = CheckSettings {
        replication_factor: rf,
        min_insync_replicas: 1,
        ..CheckSettings::default()
    };
    let results = check(&ops, &settings);
    println!("valid={:?}", results.valid);
    let rebalances = &results.stats["rebalances"];
    println!(
        "rebalances={} duration_ms_mean={} duration_ms_max={} redeliveries={}",
        rebalances["count"],
        rebalances["duration_ms_mean"],
        rebalances["duration_ms_max"],
        results.stats["redeliveries"]
    );
    for (name, anomaly) in &results.anomalies {
        println!(
            "anomaly {name}: {}",
            serde_json::to_string(anomaly).unwrap()
        );
    }
}

fn json_poll() -> serde_json::Value {
    serde_json::json!([["poll"]])
}

/// A final poll line of `process`.
fn op(process: u64, kind: OpType, value: serde_json::Value) -> Op {
    Op {
        r#final: true,
        ..Op::client(process, kind, "poll", value)
    }
}
