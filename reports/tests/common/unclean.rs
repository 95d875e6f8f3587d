//! A run of the unclean-election plan, simulated: three partitions led by n1, replicated on
//! n1, n2, n3, written with acks=1 and `unclean.leader.election.enable=true`.
//!
//! n3 is isolated at 5 s (its logs stop growing), drops out of the ISR at 12 s, is killed
//! at 15 s while stale, and the network heals at 15.5 s. At 20.5 s the whole ISR (n1 and n2)
//! is killed while n3's kill window is still open; at 21.5 s only n3 restarts, and at 27.5 s
//! the controller elects it for every partition (unclean): every write acknowledged since
//! 5 s is truncated away on all three partitions, and later writes reuse those offsets. n1
//! and n2 return at 41.5 s and rejoin the ISR at 44 s. The main phase runs from 2 s to 47 s;
//! the final reads follow at 50 s. The results come from the real checker.

use super::write_json;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use tidewater_workloads::checker::{check_file, CheckSettings};

/// The partitions.
pub const KEYS: [&str; 3] = ["t0/0", "t0/1", "t0/2"];

const MS: u64 = 1_000_000;
const MAIN_START_MS: u64 = 2_000;
const ISOLATE_MS: u64 = 5_000;
const ISR_SHRINK_MS: u64 = 12_000;
const KILL_STALE_MS: u64 = 15_000;
const HEAL_MS: u64 = 15_500;
const KILL_ISR_MS: u64 = 20_500;
const START_STALE_MS: u64 = 21_500;
const ELECTED_MS: u64 = 27_500;
const START_ISR_MS: u64 = 41_500;
const ISR_BACK_MS: u64 = 44_000;
const MAIN_END_MS: u64 = 47_000;
const FINAL_MS: u64 = 50_000;

/// One partition's log on the leader and on the stale replica.
struct Log {
    leader: Vec<i64>,
    /// What n3 holds: the leader's log as of the isolation.
    stale_len: Option<usize>,
}

struct Sim {
    lines: Vec<Value>,
    logs: Vec<Log>,
    /// Consumer position per key.
    positions: Vec<u64>,
    next_value: i64,
    /// Producer process per key (a new one after an indeterminate send).
    producers: Vec<u64>,
    next_process: u64,
}

impl Sim {
    fn push(&mut self, mut op: Value) -> u64 {
        let index = self.lines.len() as u64;
        op["index"] = json!(index);
        self.lines.push(op);
        index
    }

    fn nemesis(&mut self, t_ms: u64, f: &str, value: Value) {
        self.push(json!({"time": t_ms * MS, "process": "nemesis", "type": "info", "f": f, "value": value}));
    }

    /// The leader answers from `ELECTED_MS` on (n3) and before `KILL_ISR_MS` (n1).
    fn led(t_ms: u64) -> bool {
        !(KILL_ISR_MS..ELECTED_MS).contains(&t_ms)
    }

    fn send(&mut self, t_ms: u64, k: usize) {
        let key = KEYS[k];
        let value = self.next_value;
        self.next_value += 1;
        let process = self.producers[k];
        self.push(
            json!({"time": t_ms * MS, "process": process, "type": "invoke", "f": "send",
                         "value": [["send", key, value]]}),
        );
        if t_ms == KILL_ISR_MS {
            // Under way when the leader died: indeterminate; the worker goes on as a new
            // process.
            self.push(
                json!({"time": (t_ms + 900) * MS, "process": process, "type": "info", "f": "send",
                             "value": [["send", key, value]], "error": "REQUEST_TIMED_OUT"}),
            );
            self.producers[k] = self.next_process;
            self.next_process += 1;
            return;
        }
        if !Self::led(t_ms) {
            self.push(
                json!({"time": (t_ms + 2) * MS, "process": process, "type": "fail", "f": "send",
                             "value": [["send", key, value]], "error": "NOT_LEADER_OR_FOLLOWER"}),
            );
            return;
        }
        let log = &mut self.logs[k];
        let offset = log.leader.len() as u64;
        log.leader.push(value);
        let hw = log.leader.len();
        self.push(
            json!({"time": (t_ms + 3) * MS, "process": process, "type": "ok", "f": "send",
                         "value": [["send", key, [offset, value]]], "high_watermarks": {key: hw}}),
        );
    }

    fn poll(&mut self, t_ms: u64, k: usize) {
        let key = KEYS[k];
        let process = 10 + k as u64;
        self.push(
            json!({"time": t_ms * MS, "process": process, "type": "invoke", "f": "poll",
                         "value": [["poll"]]}),
        );
        if !Self::led(t_ms) {
            self.push(
                json!({"time": (t_ms + 4) * MS, "process": process, "type": "fail", "f": "poll",
                             "value": [["poll"]], "error": "NOT_LEADER_OR_FOLLOWER"}),
            );
            return;
        }
        let log = &self.logs[k].leader;
        let hw = log.len() as u64;
        // Beyond the end of a truncated log: OFFSET_OUT_OF_RANGE, reset to the end.
        if self.positions[k] > hw {
            self.positions[k] = hw;
        }
        let from = self.positions[k];
        let to = (from + 5).min(hw);
        let records: Vec<Value> = (from..to).map(|o| json!([o, log[o as usize]])).collect();
        self.positions[k] = to;
        self.push(
            json!({"time": (t_ms + 5) * MS, "process": process, "type": "ok", "f": "poll",
                         "value": [["poll", {key: records}]], "high_watermarks": {key: hw}}),
        );
    }
}

/// What the assertions compare with, computed while simulating.
pub struct UncleanFixture {
    /// Per key: values acknowledged that the final log no longer holds.
    pub expected_lost: BTreeMap<String, u64>,
}

/// Writes the run into `dir` (history, config, samples, results by the real checker).
pub fn unclean_election_run(dir: &Path, cell: Option<&str>) -> UncleanFixture {
    std::fs::create_dir_all(dir).unwrap();
    let mut sim = Sim {
        lines: Vec::new(),
        logs: (0..3)
            .map(|_| Log {
                leader: Vec::new(),
                stale_len: None,
            })
            .collect(),
        positions: vec![0; 3],
        next_value: 1,
        producers: vec![0, 1, 2],
        next_process: 20,
    };
    let mut acked: Vec<(usize, i64)> = Vec::new();
    let mut t = MAIN_START_MS;
    while t < MAIN_END_MS {
        match t {
            ISOLATE_MS => {
                sim.nemesis(
                    t,
                    "start-partition",
                    json!({"n3": ["n1", "n2"], "n1": ["n3"], "n2": ["n3"]}),
                );
                for log in &mut sim.logs {
                    log.stale_len = Some(log.leader.len());
                }
            }
            KILL_STALE_MS => sim.nemesis(t, "start-kill", json!(["n3"])),
            HEAL_MS => sim.nemesis(t, "stop-partition", json!(null)),
            KILL_ISR_MS => sim.nemesis(t, "start-kill", json!(["n1", "n2"])),
            START_STALE_MS => sim.nemesis(t, "stop-kill", json!(["n3"])),
            ELECTED_MS => {
                for log in &mut sim.logs {
                    let len = log.stale_len.expect("isolated before");
                    log.leader.truncate(len);
                }
            }
            START_ISR_MS => sim.nemesis(t, "stop-kill", json!(["n1", "n2"])),
            _ => {}
        }
        if t.is_multiple_of(100) {
            for k in 0..3 {
                let before = sim.lines.len();
                sim.send(t, k);
                if sim.lines.last().unwrap()["type"] == "ok" && sim.lines.len() > before {
                    let v = sim.lines.last().unwrap()["value"][0][2][1]
                        .as_i64()
                        .unwrap();
                    acked.push((k, v));
                }
            }
        }
        if t.is_multiple_of(250) {
            for k in 0..3 {
                sim.poll(t + 1, k);
            }
        }
        t += 50;
    }
    sim.nemesis(MAIN_END_MS, "heal", json!(null));
    for (k, key) in KEYS.into_iter().enumerate() {
        let process = 100 + k as u64;
        let log = sim.logs[k].leader.clone();
        let records: Vec<Value> = log.iter().enumerate().map(|(o, v)| json!([o, v])).collect();
        let t = FINAL_MS + 10 * k as u64;
        sim.push(
            json!({"time": t * MS, "process": process, "type": "invoke", "f": "poll",
                        "value": [["poll"]], "final": true}),
        );
        sim.push(
            json!({"time": (t + 5) * MS, "process": process, "type": "ok", "f": "poll",
                        "value": [["poll", {key: records}]], "high_watermarks": {key: log.len()},
                        "log_start_offsets": {key: 0}, "final": true}),
        );
    }
    let text: Vec<String> = sim.lines.iter().map(Value::to_string).collect();
    std::fs::write(dir.join("history.jsonl"), text.join("\n") + "\n").unwrap();

    let mut expected_lost = BTreeMap::new();
    for (k, v) in acked {
        if !sim.logs[k].leader.contains(&v) {
            *expected_lost.entry(KEYS[k].to_string()).or_insert(0) += 1;
        }
    }

    write_json(
        &dir.join("config.json"),
        &json!({
            "name": "unclean-election", "seed": 7, "time_limit_s": 45, "nodes": 3,
            "nemesis": ["kill", "pause", "partition"], "nemesis_interval_s": 10.0,
            "plan": "unclean-election", "workload": "queue", "concurrency": 6, "rate": 100.0,
            "acks": "1", "topic": "t0", "partitions": 3, "replication_factor": 3,
            "sets": {"unclean.leader.election.enable": "true", "min.insync.replicas": "2"},
            "recovery_time_limit_s": 60, "final_time_limit_s": 60,
            "schedule": {"name": "unclean-election", "description": "Makes a stale replica the leader", "step": [{}, {}, {}, {}, {}, {}, {}]},
            "matrix_cell": cell,
        }),
    );
    write_samples(dir);
    let mut configs = BTreeMap::new();
    configs.insert(
        "unclean.leader.election.enable".to_string(),
        "true".to_string(),
    );
    configs.insert("min.insync.replicas".to_string(), "2".to_string());
    let mut settings = CheckSettings::from_kafka_configs("1", &configs).unwrap();
    settings.faults_requested = vec!["kill".into(), "partition".into()];
    let results = check_file(dir.join("history.jsonl"), &settings).unwrap();
    write_json(
        &dir.join("results.json"),
        &serde_json::to_value(&results).unwrap(),
    );
    UncleanFixture { expected_lost }
}

/// Samples every 500 ms from 1 s to the final reads: the leader's view (n1, then n3) and a
/// follower's; nothing while every broker is down, no leader at all until n3 is elected.
fn write_samples(dir: &Path) {
    let mut out = String::new();
    let mut t = 1_000;
    while t <= FINAL_MS {
        let alive = |node: &str| match node {
            "n3" => !(KILL_STALE_MS..START_STALE_MS).contains(&t),
            _ => !(KILL_ISR_MS..START_ISR_MS).contains(&t),
        };
        for key in KEYS {
            let (leader, epoch, isr): (Option<&str>, u64, Vec<&str>) = if t < KILL_ISR_MS {
                let isr = if t < ISR_SHRINK_MS {
                    vec!["n1", "n2", "n3"]
                } else {
                    vec!["n1", "n2"]
                };
                (Some("n1"), 1, isr)
            } else if t < ELECTED_MS {
                (None, 1, vec![])
            } else if t < ISR_BACK_MS {
                (Some("n3"), 2, vec!["n3"])
            } else {
                (Some("n3"), 2, vec!["n1", "n2", "n3"])
            };
            for node in ["n1", "n2", "n3"] {
                if !alive(node) {
                    continue;
                }
                let role = if Some(node) == leader {
                    "leader"
                } else {
                    "follower"
                };
                let line = json!({"time": t * MS, "key": key, "node": node, "role": role,
                                  "isr": if role == "leader" { isr.clone() } else { vec![] },
                                  "leader": leader, "leader_epoch": epoch, "high_watermark": null});
                out.push_str(&line.to_string());
                out.push('\n');
            }
        }
        t += 500;
    }
    std::fs::write(dir.join("samples.jsonl"), out).unwrap();
}
