//! `tidewater run --client kafka` (root only; skipped otherwise): the queue workload through
//! rskafka over the brokers' Kafka listeners gives the verdicts it gives over HTTP.
//!
//! - `--plan unclean-election` with `min.insync.replicas=1` and unclean election on loses
//!   acknowledged writes: exit 1, "DATA LOST: N of M" with N and M counted here from
//!   history.jsonl, the promise kept (the settings allow it);
//! - the same plan with the safe settings (acks=all, `min.insync.replicas=2`, unclean election
//!   off) loses none and exits 0.
//!
//! Every client op of both runs carries `node: "kafka"`: the workload did not use HTTP.
//!
//! Then the group workload over Kafka's group protocol (`kafka_group`): valid, with
//! rebalances and commits that succeeded, counted from the history.
//!
//! LONG: two 45-second runs and a 20-second one, about 2.5 minutes in all.

mod run_support;

use run_support::{acked_absent_from_final_reads, can_run, latest, run_into, KeptStore, Outcome};
use serde_json::Value;

fn run_plan(store: &std::path::Path, subnet: &str, extra: &[&str]) -> (Outcome, Value) {
    let mut args = vec![
        "--client",
        "kafka",
        "--plan",
        "unclean-election",
        "--time-limit",
        "45",
        "--seed",
        "5",
        "--rate",
        "100",
    ];
    args.extend_from_slice(extra);
    run_into(store, subnet, &args)
}

/// The `node` of every client op that names one, counted.
fn op_nodes(run_dir: &std::path::Path) -> std::collections::BTreeMap<String, usize> {
    let history = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap();
    let mut nodes = std::collections::BTreeMap::new();
    for line in history.lines() {
        let op: Value = serde_json::from_str(line).unwrap();
        if op["process"].is_number() {
            if let Some(node) = op["node"].as_str() {
                *nodes.entry(node.to_string()).or_default() += 1;
            }
        }
    }
    nodes
}

#[test]
fn the_kafka_client_loses_what_http_loses_and_keeps_what_it_keeps() {
    if !can_run("run_kafka_client") {
        return;
    }
    let store = KeptStore::new("run_kafka_client");

    let (unsafe_run, results) = run_plan(
        store.path(),
        "10.226.1.0/24",
        &[
            "--set",
            "min.insync.replicas=1",
            "--set",
            "unclean.leader.election.enable=true",
        ],
    );
    assert_eq!(unsafe_run.code, 1, "{}", unsafe_run.transcript());
    let run_dir = latest(store.path());
    let nodes = op_nodes(&run_dir);
    assert_eq!(nodes.keys().collect::<Vec<_>>(), ["kafka"], "{nodes:?}");
    let (acked, absent) = acked_absent_from_final_reads(&run_dir);
    assert!(absent > 0, "{}", unsafe_run.transcript());
    assert_eq!(results["stats"]["lost_acknowledged"]["total"], absent);
    let headline = format!("DATA LOST: {absent} of {acked} acknowledged writes");
    assert!(
        unsafe_run.stdout.contains(&headline),
        "{headline}\n{}",
        unsafe_run.transcript()
    );
    assert_eq!(results["promise"], "kept", "{}", results["promise_reason"]);

    let (safe_run, results) = run_plan(
        store.path(),
        "10.226.2.0/24",
        &[
            "--set",
            "min.insync.replicas=2",
            "--set",
            "unclean.leader.election.enable=false",
        ],
    );
    assert_eq!(safe_run.code, 0, "{}", safe_run.transcript());
    let run_dir = latest(store.path());
    let nodes = op_nodes(&run_dir);
    assert_eq!(nodes.keys().collect::<Vec<_>>(), ["kafka"], "{nodes:?}");
    let (acked, absent) = acked_absent_from_final_reads(&run_dir);
    assert_eq!(absent, 0, "{}", safe_run.transcript());
    assert!(acked > 0);
    assert_eq!(
        (results["valid"].clone(), results["promise"].clone()),
        (Value::Bool(true), Value::from("kept"))
    );

    let (group_run, results) = run_into(
        store.path(),
        "10.226.3.0/24",
        &[
            "--client",
            "kafka",
            "--workload",
            "group",
            "--time-limit",
            "20",
            "--seed",
            "4",
        ],
    );
    assert_eq!(group_run.code, 0, "{}", group_run.transcript());
    assert_eq!(results["valid"], true);
    let history = std::fs::read_to_string(latest(store.path()).join("history.jsonl")).unwrap();
    let ok = |f: &str| {
        history
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|op| op["f"] == f && op["type"] == "ok")
            .count()
    };
    assert!(ok("rebalance") > 0, "{}", group_run.transcript());
    assert!(ok("commit") > 0, "{}", group_run.transcript());
    assert!(ok("send") > 0, "{}", group_run.transcript());
}
