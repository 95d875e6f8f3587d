//! A fixed run directory shared by the integration tests.

#![allow(dead_code)] // each test file uses a part

pub mod txn;
pub mod unclean;

use serde_json::{json, Value};
use std::path::Path;

/// Builds history lines with dense indexes.
pub struct History {
    lines: Vec<Value>,
}

impl History {
    fn push(&mut self, mut op: Value) -> u64 {
        let index = self.lines.len() as u64;
        op["index"] = json!(index);
        self.lines.push(op);
        index
    }

    fn op(&mut self, t_ms: u64, process: Value, kind: &str, f: &str, value: Value) -> u64 {
        self.push(json!({"time": t_ms * 1_000_000, "process": process, "type": kind, "f": f, "value": value}))
    }

    fn nemesis(&mut self, t_ms: u64, f: &str, value: Value) -> u64 {
        self.op(t_ms, json!("nemesis"), "info", f, value)
    }

    fn send(
        &mut self,
        t_ms: u64,
        process: u64,
        key: &str,
        offset: u64,
        value: i64,
        hw: u64,
    ) -> u64 {
        self.op(
            t_ms,
            json!(process),
            "invoke",
            "send",
            json!([["send", key, value]]),
        );
        let i = self.op(
            t_ms + 3,
            json!(process),
            "ok",
            "send",
            json!([["send", key, [offset, value]]]),
        );
        self.lines[i as usize]["high_watermarks"] = json!({ key: hw });
        i
    }

    fn poll(&mut self, t_ms: u64, process: u64, key: &str, records: Value, hw: u64) -> u64 {
        self.op(t_ms, json!(process), "invoke", "poll", json!([["poll"]]));
        let i = self.op(
            t_ms + 5,
            json!(process),
            "ok",
            "poll",
            json!([["poll", { key: records }]]),
        );
        self.lines[i as usize]["high_watermarks"] = json!({ key: hw });
        i
    }

    fn write(&self, path: &Path) {
        let text: Vec<String> = self.lines.iter().map(Value::to_string).collect();
        std::fs::write(path, text.join("\n") + "\n").unwrap();
    }
}

/// Indexes the examples refer to, for the assertions.
pub struct Fixture {
    pub lost_ack: u64,
    pub lost_read: u64,
    pub regression: u64,
    pub regression_prior: u64,
}

pub fn write_json(path: &Path, v: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

/// A run of 20 s with every kind of fault, a lost write, a high-watermark regression, a
/// failed and an indeterminate send, and ISR samples.
pub fn fixture_run(dir: &Path, cell: &str, valid: bool) -> Fixture {
    std::fs::create_dir_all(dir).unwrap();
    let mut h = History { lines: Vec::new() };
    h.send(100, 1, "t0/0", 0, 100, 1);
    h.send(200, 1, "t0/0", 1, 101, 2);
    h.nemesis(1_000, "start-kill", json!(["n1"]));
    let lost_ack = h.send(1_500, 1, "t0/0", 2, 102, 3);
    h.send(1_600, 1, "t0/1", 0, 200, 1);
    h.nemesis(3_000, "stop-kill", json!(["n1"]));
    h.nemesis(4_000, "start-pause", json!(["n2"]));
    // A send that failed and one that timed out.
    h.op(
        4_100,
        json!(1),
        "invoke",
        "send",
        json!([["send", "t0/1", 201]]),
    );
    h.push(
        json!({"time": 4_150_000_000u64, "process": 1, "type": "fail", "f": "send",
                  "value": [["send", "t0/1", 201]], "error": "NOT_ENOUGH_REPLICAS"}),
    );
    h.op(
        4_200,
        json!(1),
        "invoke",
        "send",
        json!([["send", "t0/1", 202]]),
    );
    h.op(
        9_200,
        json!(1),
        "info",
        "send",
        json!([["send", "t0/1", 202]]),
    );
    h.nemesis(6_000, "stop-pause", json!(["n2"]));
    let regression_prior = h.poll(7_000, 2, "t0/0", json!([[0, 100], [1, 101], [2, 102]]), 3);
    h.nemesis(8_000, "start-partition", json!({"n1": ["n2", "n3"]}));
    let regression = h.poll(9_000, 2, "t0/0", json!([]), 2);
    h.nemesis(12_000, "stop-partition", json!({}));
    h.nemesis(12_500, "compact-logs", json!(null));
    h.send(13_000, 3, "t0/0", 2, 103, 3);
    let lost_read = h.poll(19_000, 2, "t0/0", json!([[0, 100], [1, 101], [2, 103]]), 3);
    h.write(&dir.join("history.jsonl"));

    write_json(
        &dir.join("config.json"),
        &json!({
            "name": "fixture", "seed": 42, "time_limit_s": 20, "acks": "all",
            "nemesis": "kill,pause,partition", "nodes": ["n1", "n2", "n3"],
            "settings": {"min.insync.replicas": 2, "unclean.leader.election.enable": true},
            "command": ["tidewater", "run", "--seed", "42", "--name", "fixture"],
            "matrix_cell": cell
        }),
    );
    // Example fields as docs/checkers.md defines them. A valid run lost nothing; an invalid
    // one lost the write acknowledged at `lost_ack`.
    let lost_examples = if valid {
        json!([])
    } else {
        json!([{"key": "t0/0", "offset": 2, "value": 102, "acks": "all",
                "send_op": lost_ack - 1, "ack_op": lost_ack, "proving_read_op": lost_read}])
    };
    write_json(
        &dir.join("results.json"),
        &json!({
            "valid": valid,
            "anomalies": {
                "lost-write": {
                    "count": u64::from(!valid), "violation": !valid,
                    "note": "acks=all with min.insync.replicas=2 must not lose acknowledged writes",
                    "examples": lost_examples
                },
                "hw-regression": {
                    "count": 1, "violation": false, "note": "visibility-only",
                    "examples": [{"key": "t0/0", "class": "visibility-only",
                                  "high_watermarks": [3, 2], "ops": [regression_prior, regression],
                                  "final_hw": 3, "lost_offsets": []}]
                },
                "unseen": {"count": 0, "examples": []}
            },
            "stats": {"unseen_series": [[0, 0], [2_000_000_000u64, 1], [19_000_000_000u64, 0]],
                      "unseen_final": 0, "unknown_reasons": ["final reads of t0/1 timed out"]}
        }),
    );
    let mut samples = String::new();
    for (t_s, isr) in [
        (0u64, vec!["n1", "n2", "n3"]),
        (1, vec!["n2", "n3"]),
        (5, vec!["n3"]),
        (14, vec!["n1", "n2", "n3"]),
    ] {
        for key in ["t0/0", "t0/1"] {
            let leader = json!({"time": t_s * 1_000_000_000, "key": key, "isr": isr, "leader": "n3",
                                "leader_epoch": 2, "high_watermark": 2, "node": "n3"});
            let follower = json!({"time": t_s * 1_000_000_000, "key": key, "isr": ["n1"], "leader": "n3",
                                  "high_watermark": 1, "node": "n1"});
            samples.push_str(&format!("{leader}\n{follower}\n"));
        }
    }
    std::fs::write(dir.join("samples.jsonl"), samples).unwrap();
    Fixture {
        lost_ack,
        lost_read,
        regression,
        regression_prior,
    }
}

/// Asserts that every in-page link (`href="#x"`) of `html` has its target (`id="x"`).
pub fn assert_anchors_resolve(html: &str) {
    let mut rest = html;
    let mut checked = 0;
    while let Some(at) = rest.find("href=\"#") {
        rest = &rest[at + 7..];
        let target = &rest[..rest.find('"').unwrap()];
        assert!(
            html.contains(&format!("id=\"{target}\"")),
            "dangling link #{target}"
        );
        checked += 1;
    }
    assert!(checked > 0, "no in-page links at all");
}

/// Every `href` of `html` that is not an in-page anchor: the targets, relative to `dir`.
pub fn file_links(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_string())
        .filter(|target| !target.starts_with('#'))
        .collect()
}

/// Decodes `%XX` escapes.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

/// Asserts that every link of `html` to a file resolves to an existing file or directory
/// relative to `dir` (the page's directory), and that no link leaves the machine.
pub fn assert_files_resolve(html: &str, dir: &Path) {
    for target in file_links(html) {
        assert!(!target.contains("://"), "a link off the machine: {target}");
        let path = dir.join(percent_decode(&target));
        assert!(path.exists(), "dangling link {target} ({})", path.display());
    }
}
