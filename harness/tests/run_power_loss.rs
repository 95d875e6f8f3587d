//! Power loss end to end (issue 16; root only, skipped otherwise). The `power-loss-leader`
//! plan cuts the power of t0/0's leader right after its ISR shrank to itself, with acks=all:
//!
//! - with `min.insync.replicas=1` the lone leader acknowledged writes only it held, and its
//!   power loss takes them: exit 1 (data lost, counted here from history.jsonl), and the
//!   promise is kept (one power loss of min.insync.replicas holders allows it);
//! - with `flush.messages=1` every acknowledged record was fsynced: nothing is lost, exit 0;
//! - with `min.insync.replicas=2` (and no fsync) the lone leader acknowledges nothing, and the
//!   followers that left the ISR below min ISR stay eligible to lead (KIP-966's ELR): one of
//!   them leads while the old leader is down, and the old leader, booting without a
//!   clean-shutdown marker, leaves the ELR and follows. Nothing acknowledged is lost, exit 0;
//! - the same with `eligible.leader.replicas.enable=false` (the rules before KIP-966): the
//!   old leader, the only ISR member, leads again on its shorter log and the followers
//!   truncate to it; the writes the full ISR acknowledged are lost and the promise is
//!   reported broken.
//!
//! After every run no lossyfs mount is left under the store.
//!
//! LONG: four 30-second runs, about 2.5 minutes in all.

mod run_support;

use run_support::{acked_absent_from_final_reads, can_run, json, latest, tidewater, Outcome};
use serde_json::Value;
use std::path::Path;

fn run_plan(store: &Path, subnet: &str, sets: &[&str]) -> (Outcome, Value, u64, u64) {
    let mut args = vec![
        "run",
        "--plan",
        "power-loss-leader",
        "--time-limit",
        "30",
        "--seed",
        "1",
        "--acks",
        "all",
        "--store",
        store.to_str().unwrap(),
        "--subnet",
        subnet,
        "--plain",
    ];
    for set in sets {
        args.extend_from_slice(&["--set", set]);
    }
    let out = tidewater(&args);
    let run = latest(store);
    let results = json(&run.join("results.json"));
    let (acked, absent) = acked_absent_from_final_reads(&run);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let store = store.canonicalize().unwrap();
    assert!(
        !mounts.contains(store.to_str().unwrap()),
        "a lossyfs mount outlived the run:\n{mounts}"
    );
    (out, results, acked, absent)
}

#[test]
fn power_loss_of_a_lone_leader_loses_what_only_it_held_unless_every_record_was_fsynced() {
    if !can_run("run_power_loss") {
        return;
    }
    let store = tempfile::tempdir().unwrap();

    let (out, results, acked, absent) =
        run_plan(store.path(), "10.222.2.0/24", &["min.insync.replicas=1"]);
    assert_eq!(out.code, 1, "{}", out.transcript());
    assert!(absent > 0, "nothing was lost\n{}", out.transcript());
    assert_eq!(results["stats"]["lost_acknowledged"]["total"], absent);
    let headline = format!("DATA LOST: {absent} of {acked} acknowledged writes");
    assert!(out.stdout.contains(&headline), "{}", out.transcript());
    assert_eq!(results["promise"], "kept", "{}", results["promise_reason"]);
    assert!(
        results["promise_reason"]
            .as_str()
            .unwrap()
            .contains("power was lost"),
        "{}",
        results["promise_reason"]
    );

    let (out, results, acked, absent) = run_plan(
        store.path(),
        "10.222.3.0/24",
        &["min.insync.replicas=1", "flush.messages=1"],
    );
    assert_eq!(out.code, 0, "{}", out.transcript());
    assert!(acked > 0);
    assert_eq!(absent, 0);
    assert_eq!(results["valid"], true);
    assert_eq!(results["promise"], "kept", "{}", results["promise_reason"]);

    let (out, results, acked, absent) =
        run_plan(store.path(), "10.222.4.0/24", &["min.insync.replicas=2"]);
    assert_eq!(out.code, 0, "{}", out.transcript());
    assert!(acked > 0);
    assert_eq!(absent, 0, "{}", out.transcript());
    assert_eq!(results["stats"]["lost_acknowledged"]["total"], 0);
    assert_eq!(results["valid"], true);
    assert_eq!(results["promise"], "kept", "{}", results["promise_reason"]);

    let (out, results, _, absent) = run_plan(
        store.path(),
        "10.222.5.0/24",
        &[
            "min.insync.replicas=2",
            "eligible.leader.replicas.enable=false",
        ],
    );
    assert_eq!(out.code, 1, "{}", out.transcript());
    assert!(absent > 0, "{}", out.transcript());
    assert_eq!(results["stats"]["lost_acknowledged"]["total"], absent);
    assert_eq!(
        results["promise"], "broken",
        "{}",
        results["promise_reason"]
    );
}
