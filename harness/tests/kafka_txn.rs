//! `tidewater run --workload txn` over Kafka's own Java client (root only; skipped with a
//! message when Kafka's jars cannot be fetched, unless `TIDEWATER_REQUIRE_KAFKA` is set):
//! against real Apache Kafka 4.1.1 without faults, and against the companion broker's
//! transaction coordinator under the random schedule; and the refusals of what cannot run
//! (no root needed).
//!
//! Each run: transactions with the safe settings. Valid; the committed and aborted
//! transactions the results count equal a count over `history.jsonl`; every committed send is
//! in the read_committed final reads and no aborted one is read anywhere; the client settings
//! are recorded; no driver process is left. Subnets 10.248.2.0/24 (Kafka) and 10.248.3.0/24
//! (companion).

mod run_support;

use run_support::{
    can_run, history, json, kafka_available, latest, run_into, tidewater, KeptStore,
};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

const SUBNET: &str = "10.248.2.0/24";
const COMPANION_SUBNET: &str = "10.248.3.0/24";

/// Committed, aborted and unknown transactions, the values committed transactions sent, the
/// values failed ones sent, and every value any ok read returned (final reads apart).
struct Counted {
    by_type: BTreeMap<String, u64>,
    deliberate_aborts: u64,
    committed_values: HashSet<i64>,
    aborted_values: HashSet<i64>,
    read: HashSet<i64>,
    read_final: HashSet<i64>,
}

fn count(ops: &[Value]) -> Counted {
    let mut c = Counted {
        by_type: BTreeMap::new(),
        deliberate_aborts: 0,
        committed_values: HashSet::new(),
        aborted_values: HashSet::new(),
        read: HashSet::new(),
        read_final: HashSet::new(),
    };
    for op in ops.iter().filter(|op| op["process"].is_number()) {
        let kind = op["type"].as_str().unwrap();
        let micro = op["value"].as_array().cloned().unwrap_or_default();
        if op["f"] == "txn" && kind != "invoke" {
            *c.by_type.entry(kind.to_string()).or_default() += 1;
            if kind == "fail" && op["error"] == "aborted" {
                c.deliberate_aborts += 1;
            }
            for m in micro.iter().filter(|m| m[0] == "send") {
                match kind {
                    "ok" => c.committed_values.insert(m[2][1].as_i64().unwrap()),
                    "fail" => c.aborted_values.insert(m[2].as_i64().unwrap()),
                    _ => false,
                };
            }
        }
        if kind != "ok" {
            continue;
        }
        for m in micro.iter().filter(|m| m[0] == "poll") {
            for records in m[1].as_object().into_iter().flat_map(|o| o.values()) {
                for pair in records.as_array().unwrap() {
                    let v = pair[1].as_i64().unwrap();
                    c.read.insert(v);
                    if op["final"] == true {
                        c.read_final.insert(v);
                    }
                }
            }
        }
    }
    c
}

/// Java driver processes of a cluster on `subnet` still running.
fn drivers_left(subnet: &str) -> Vec<String> {
    let prefix = subnet.trim_end_matches("0/24");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (cmdline.contains("TidewaterDriver") && cmdline.contains(prefix)).then_some(cmdline)
        })
        .collect()
}

#[test]
fn transactions_against_kafka_are_valid_and_counted_as_the_history_says() {
    if !can_run("kafka_txn") || !kafka_available("kafka_txn") {
        return;
    }
    let args = [
        "--system",
        "kafka",
        "--workload",
        "txn",
        "--time-limit",
        "20",
        "--seed",
        "7",
        "--nemesis",
        "none",
        "--rate",
        "100",
    ];
    check_transactional_run("kafka_txn", SUBNET, &args, 20);
}

/// The companion broker's transaction coordinator and read_committed reads under kills,
/// pauses and partitions (the random schedule of seed 3).
#[test]
fn transactions_against_the_companion_broker_are_valid_under_faults() {
    if !can_run("kafka_txn") || !kafka_available("kafka_txn") {
        return;
    }
    let args = [
        "--workload",
        "txn",
        "--time-limit",
        "30",
        "--seed",
        "3",
        "--rate",
        "100",
    ];
    check_transactional_run("companion_txn", COMPANION_SUBNET, &args, 20);
}

/// Runs `args` on `subnet` and holds the run to the history: valid, counted as the history
/// says, at least `committed_min` commits and one deliberate abort, every committed value read
/// at the end and no aborted one read anywhere, the client settings recorded, no driver left.
fn check_transactional_run(name: &'static str, subnet: &str, args: &[&str], committed_min: u64) {
    let store = KeptStore::new(name);
    let (outcome, results) = run_into(store.path(), subnet, args);
    let run_dir = latest(store.path());
    let keep = |what: &str| store.explain(&outcome, what);
    assert_eq!(outcome.code, 0, "{}", keep("exit"));
    assert_eq!(results["valid"], true, "{}", keep("verdict"));

    let c = count(&history(&run_dir));
    let txns = &results["stats"]["transactions"]["txns"];
    let ours = |k: &str| c.by_type.get(k).copied().unwrap_or(0);
    assert_eq!(txns["committed"], ours("ok"), "{}", keep("committed"));
    assert_eq!(txns["aborted"], ours("fail"), "{}", keep("aborted"));
    assert_eq!(txns["unknown"], ours("info"), "{}", keep("unknown"));
    assert!(
        ours("ok") >= committed_min,
        "{}",
        keep(&format!("{} committed", ours("ok")))
    );
    assert!(c.deliberate_aborts >= 1, "{}", keep("no deliberate abort"));

    // read_committed: every committed value is in the final reads, no aborted one anywhere.
    let missing: Vec<_> = c.committed_values.difference(&c.read_final).collect();
    assert!(
        missing.is_empty(),
        "{}",
        keep(&format!("committed, not read: {missing:?}"))
    );
    let aborted_read: Vec<_> = c.aborted_values.intersection(&c.read).collect();
    assert!(
        aborted_read.is_empty(),
        "{}",
        keep(&format!("aborted, read: {aborted_read:?}"))
    );

    // The client's settings are recorded, and the checker judged with them.
    let config = json(&run_dir.join("config.json"));
    assert_eq!(config["client"], "java");
    assert_eq!(
        config["java_client"]["producer"]["enable.idempotence"],
        "true"
    );
    assert_eq!(
        config["java_client"]["producer"]["transactional.id"],
        "tidewater-w*"
    );
    assert_eq!(
        config["java_client"]["consumer"]["isolation.level"],
        "read_committed"
    );
    let settings = &results["stats"]["settings"];
    assert_eq!(settings["transactional"], true);
    assert_eq!(settings["enable_idempotence"], true);
    assert!(run_dir.join("java-driver.log").is_file());
    let left = drivers_left(subnet);
    assert!(
        left.is_empty(),
        "{}",
        keep(&format!("drivers left: {left:?}"))
    );
}

/// What the Java client cannot run is refused before anything starts: exit 3, one message,
/// no run directory.
#[test]
fn transactions_and_idempotence_where_they_cannot_run_are_refused_up_front() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path().to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--workload", "txn", "--client", "kafka"],
            "--workload txn runs over the Java client",
        ),
        (
            &["--idempotence", "--client", "kafka"],
            "--idempotence needs the Java client",
        ),
        (
            &["--system", "kafka", "--workload", "txn", "--acks", "1"],
            "need --acks all",
        ),
        (
            &[
                "--system",
                "kafka",
                "--client",
                "java",
                "--workload",
                "group",
            ],
            "does not run over --client java",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["run", "--store", s, "--time-limit", "5"];
        all.extend_from_slice(args);
        let out = tidewater(&all);
        assert_eq!(out.code, 3, "{args:?}: {}", out.transcript());
        assert!(
            out.stderr.contains(expected),
            "{args:?}: {}",
            out.transcript()
        );
        assert!(
            !store.path().join("latest").exists(),
            "{args:?} made a run directory"
        );
    }
}
