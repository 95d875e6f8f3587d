//! End to end (root only; skipped otherwise): `tidewater run --plan leader-isolation` against
//! a real local cluster. While the old leader of t0/0 is cut from every other node (clients
//! still reach it), the clients must follow the leadership change: the new leader
//! acknowledges writes before the heal, and the old one acknowledged writes before the cut.
//! This is what a client that stays on a deposed leader (issue 12) never shows.
//!
//! About 45 s: setup, a 25 s main phase, recovery, final reads, teardown.

mod run_support;

use run_support::{can_run, history, latest, tidewater};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

const SUBNET: &str = "10.214.171.0/24";

/// The node a grudge isolates: the one that drops every other node.
fn isolated_node(grudge: &Value) -> String {
    let grudge = grudge.as_object().expect("a grudge is an object");
    let nodes = grudge.len();
    grudge
        .iter()
        .find(|(_, dropped)| dropped.as_array().is_some_and(|d| d.len() == nodes - 1))
        .map(|(node, _)| node.clone())
        .unwrap_or_else(|| panic!("no node is cut from all others in {grudge:?}"))
}

/// The key of a send op (`[["send", key, ...]]`).
fn send_key(op: &Value) -> Option<&str> {
    op["value"][0][1].as_str()
}

#[test]
fn during_a_leader_isolation_both_the_old_and_the_new_leader_acknowledge_writes() {
    if !can_run("run_leader_isolation") {
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let run = tidewater(&[
        "run",
        "--plan",
        "leader-isolation",
        "--time-limit",
        "25",
        "--seed",
        "12",
        "--acks",
        "all",
        "--set",
        "min.insync.replicas=2",
        "--store",
        store.path().to_str().unwrap(),
        "--subnet",
        SUBNET,
        "--plain",
    ]);
    assert_eq!(run.code, 0, "{}", run.transcript());
    // The harness's default timeouts are announced and stored.
    assert!(
        run.stderr
            .contains("set broker.session.timeout.ms=4000 (harness default)"),
        "{}",
        run.transcript()
    );
    let ops = history(&latest(store.path()));

    let nemesis: Vec<&Value> = ops.iter().filter(|o| o["process"] == "nemesis").collect();
    let cut = nemesis
        .iter()
        .find(|o| o["f"] == "start-partition" && o["error"].is_null())
        .unwrap_or_else(|| panic!("no partition was applied: {nemesis:?}"));
    let cut_at = cut["time"].as_u64().unwrap();
    let healed_at = nemesis
        .iter()
        .find(|o| o["f"] == "stop-partition" && o["time"].as_u64().unwrap() > cut_at)
        .map(|o| o["time"].as_u64().unwrap())
        .unwrap_or_else(|| panic!("the partition was never healed: {nemesis:?}"));
    let old = isolated_node(&cut["value"]);

    // Acknowledged sends to t0/0, by node, before the cut and during it.
    let mut before: BTreeMap<String, usize> = BTreeMap::new();
    let mut during: BTreeMap<String, usize> = BTreeMap::new();
    for op in ops
        .iter()
        .filter(|o| o["f"] == "send" && o["type"] == "ok" && send_key(o) == Some("t0/0"))
    {
        let node = op["node"].as_str().expect("an ok send names its node");
        let time = op["time"].as_u64().unwrap();
        if time < cut_at {
            *before.entry(node.to_string()).or_default() += 1;
        } else if time < healed_at {
            *during.entry(node.to_string()).or_default() += 1;
        }
    }
    let seen = format!(
        "old leader {old}, cut at {} ms, healed at {} ms; acknowledged sends to t0/0 by node \
         before the cut {before:?}, during it {during:?}",
        cut_at / 1_000_000,
        healed_at / 1_000_000
    );
    assert!(
        before.get(&old).copied().unwrap_or(0) > 0,
        "the old leader acknowledged nothing before the cut: {seen}"
    );
    let new_leaders: BTreeSet<&String> = during.keys().filter(|n| **n != old).collect();
    assert!(
        !new_leaders.is_empty(),
        "no other node acknowledged a write while the old leader was isolated: {seen}"
    );
    eprintln!("{seen}");

    // The history contract: a process whose op ended info never invokes again.
    let mut retired = BTreeSet::new();
    for op in ops.iter().filter(|o| o["process"].is_u64()) {
        let p = op["process"].as_u64().unwrap();
        assert!(!retired.contains(&p), "process {p} acted after info: {op}");
        if op["type"] == "info" {
            retired.insert(p);
        }
    }
}
