//! The outside clients (kcat and kafka-python) and what their answers must show, shared by
//! `broker/tests/kafka_clients.rs` (the companion broker) and
//! `harness/tests/kafka_clients_real.rs` (Apache Kafka), which include this file by path so
//! both hold the same expectations.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

/// Whether kcat and kafka-python are here; `TIDEWATER_REQUIRE_KAFKA_CLIENTS` (set by CI) makes
/// their absence a failure, otherwise `test` says it skipped.
pub fn clients_present(test: &str) -> bool {
    let kcat = Command::new("kcat")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    let python = Command::new("python3")
        .args(["-c", "import kafka"])
        .output()
        .is_ok_and(|o| o.status.success());
    if kcat && python {
        return true;
    }
    assert!(
        std::env::var_os("TIDEWATER_REQUIRE_KAFKA_CLIENTS").is_none(),
        "kcat present: {kcat}, kafka-python present: {python}; both are required here"
    );
    eprintln!("skipping {test}: kcat ({kcat}) or kafka-python ({python}) missing");
    false
}

/// Runs a client to its end, with `stdin` as its input (none: an empty one), and logs what it
/// said on standard error.
pub fn run(command: &mut Command, stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("client runs");
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let output = child.wait_with_output().unwrap();
    eprintln!(
        "{command:?}: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// kcat against `bootstrap`.
pub fn kcat(bootstrap: &str, args: &[&str], stdin: Option<&str>) -> Output {
    run(
        Command::new("kcat").args(["-b", bootstrap]).args(args),
        stdin,
    )
}

/// One step of `python_client.py` against `bootstrap`: its last line, as JSON.
pub fn python(bootstrap: &str, step: &str, topic: &str) -> Value {
    // Both crates sit beside `broker/`, so the script is found from either.
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../broker/tests/kafka_clients/python_client.py");
    let output = run(
        Command::new("python3")
            .arg(script)
            .args([bootstrap, step, topic]),
        None,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "python {step} failed: {stdout}");
    serde_json::from_str(stdout.lines().last().expect("a JSON line")).expect("JSON")
}

/// The `produce-consume` step's answer: topic `topic` listed, 60 distinct acknowledged offsets,
/// every one read back and nothing else, and the group's commit at the end of each partition
/// written to (computed from the acknowledged offsets).
pub fn assert_produced_read_and_committed(answer: &Value, topic: &str) {
    assert!(answer["topics"].as_array().unwrap().contains(&json!(topic)));
    let pairs = |v: &Value| -> BTreeSet<(u64, u64)> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_u64().unwrap(), p[1].as_u64().unwrap()))
            .collect()
    };
    let acked = pairs(&answer["acked"]);
    assert_eq!(acked.len(), 60, "60 distinct acknowledged offsets");
    assert_eq!(
        pairs(&answer["read"]),
        acked,
        "every acknowledged offset read back, nothing else"
    );
    let mut ends: BTreeMap<String, u64> = BTreeMap::new();
    for (partition, offset) in &acked {
        let end = ends.entry(partition.to_string()).or_default();
        *end = (*end).max(offset + 1);
    }
    let committed: BTreeMap<String, u64> = answer["committed"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(p, o)| (p.clone(), o.as_u64().unwrap()))
        .filter(|(p, _)| ends.contains_key(p))
        .collect();
    assert_eq!(
        committed, ends,
        "the group committed the end of each partition"
    );
}

/// The `group` step's answer: alone, the member owns partitions 0 to 2; with a second member
/// they are split between the two, disjoint and complete; each member's commits (7 and 9)
/// read back on its own partitions.
pub fn assert_group_split_and_committed(answer: &Value) {
    assert_eq!(answer["alone"], json!([0, 1, 2]));
    let first: BTreeSet<u64> = serde_json::from_value(answer["split"][0].clone()).unwrap();
    let second: BTreeSet<u64> = serde_json::from_value(answer["split"][1].clone()).unwrap();
    assert!(
        !first.is_empty() && !second.is_empty(),
        "both members own partitions"
    );
    assert!(first.is_disjoint(&second));
    assert_eq!(first.union(&second).count(), 3);
    let mut expected = serde_json::Map::new();
    for p in &first {
        expected.insert(p.to_string(), json!(7));
    }
    for p in &second {
        expected.insert(p.to_string(), json!(9));
    }
    assert_eq!(answer["committed"], Value::Object(expected));
}

/// The `txn-offsets` step's answer: offsets sent in a transaction count once it commits and
/// never when it aborts (by the client or by a fencing successor), an open transaction's do
/// not show; the fenced producer's commit fails; a new member of the group resumes exactly
/// where the committed offsets stand. Each of the step's readings is every distinct answer of
/// OffsetFetch in order: after a commit the answers go from the offsets before it to the
/// transaction's and through nothing else (both systems answer EndTxn before the markers are
/// written, so the first answers may still be the old ones); after the abort, while the third
/// transaction is open and after the fencing, 2 s of answers are all the first commit's. The
/// expected reads come from the step's layout: input `in{i}` went to partition `i % 3` at
/// offset `i / 3` (ten per partition), and the committed transaction's output
/// `out-committed` to partition 0 after them, at offset 10.
pub fn assert_transactional_offsets(answer: &Value) {
    eprintln!("txn-offsets answered: {answer}");
    assert_eq!(
        answer["polled"],
        json!(30),
        "the member polled every input: {answer}"
    );
    let reached = |key: &str, before: &Value, after: &Value| {
        let seen = answer[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key}: {answer}"));
        assert_eq!(
            seen.last(),
            Some(after),
            "{key} reached the commit's offsets: {answer}"
        );
        assert!(
            seen[..seen.len() - 1].iter().all(|a| a == before),
            "{key} showed only the offsets before and after the commit: {answer}"
        );
    };
    let committed = json!({"0": 3, "1": 5, "2": 7});
    reached("after_commit", &json!({}), &committed);
    for key in ["after_abort", "while_open", "after_fencing"] {
        assert_eq!(answer[key], json!([committed]), "{key}: {answer}");
    }
    assert_eq!(
        answer["fenced"],
        json!("ProducerFencedError"),
        "the fenced producer's commit failed: {answer}"
    );
    let last = json!({"0": 10, "1": 5, "2": 7});
    reached("after_successor", &committed, &last);
    let mut expected = serde_json::Map::new();
    for (partition, from) in last.as_object().unwrap() {
        let p: u64 = partition.parse().unwrap();
        let mut reads: Vec<Value> = (from.as_u64().unwrap()..10)
            .map(|offset| json!([offset, format!("in{}", 3 * offset + p)]))
            .collect();
        if p == 0 {
            reads.push(json!([10, "out-committed"]));
        }
        if !reads.is_empty() {
            expected.insert(partition.clone(), Value::Array(reads));
        }
    }
    assert_eq!(answer["resumed"], Value::Object(expected), "{answer}");
}
