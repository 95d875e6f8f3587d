//! The unclean-election comparison of issue 4 (root only; skipped otherwise):
//!
//! - `--plan unclean-election --set unclean.leader.election.enable=true --acks 1` loses
//!   acknowledged writes: it exits 1 (invalid: data was lost), prints "DATA LOST: N of M
//!   acknowledged writes" with N and M counted here straight from history.jsonl, and keeps
//!   the promise (the settings allow the loss);
//! - the same plan with `unclean.leader.election.enable=false`, `--acks all` and
//!   `min.insync.replicas=2` loses none and exits 0.
//!
//! LONG: two 45-second runs (the plan waits for the ISR to shrink and for the old ISR to be
//! fenced), about 2 minutes in all.

mod run_support;

use run_support::{acked_absent_from_final_reads, can_run, latest, run_into, KeptStore, Outcome};
use serde_json::Value;

fn run_plan(store: &std::path::Path, subnet: &str, extra: &[&str]) -> (Outcome, Value) {
    let mut args = vec![
        "--plan",
        "unclean-election",
        "--time-limit",
        "45",
        "--seed",
        "5",
    ];
    args.extend_from_slice(&["--rate", "100"]);
    args.extend_from_slice(extra);
    run_into(store, subnet, &args)
}

#[test]
fn unclean_election_loses_acknowledged_writes_and_the_safe_settings_do_not() {
    if !can_run("run_unclean_election") {
        return;
    }
    let store = KeptStore::new("run_unclean_election");

    let (unsafe_run, results) = run_plan(
        store.path(),
        "10.214.2.0/24",
        &[
            "--acks",
            "1",
            "--set",
            "unclean.leader.election.enable=true",
        ],
    );
    // Data was lost: a fact, so exit 1, whatever the settings allow.
    assert_eq!(unsafe_run.code, 1, "{}", unsafe_run.transcript());
    let (acked, absent) = acked_absent_from_final_reads(&latest(store.path()));
    assert!(
        absent > 0,
        "unclean election should lose acknowledged writes\n{}",
        unsafe_run.transcript()
    );
    // Every figure printed and stored equals the count straight from the history.
    assert_eq!(
        results["stats"]["lost_acknowledged"]["total"], absent,
        "{}",
        results["stats"]["lost_acknowledged"]
    );
    let headline = format!("DATA LOST: {absent} of {acked} acknowledged writes");
    assert!(
        unsafe_run.stdout.contains(&headline),
        "{headline}\n{}",
        unsafe_run.transcript()
    );
    // The settings allow it: the promise is kept, and says why.
    assert_eq!(results["valid"], false);
    assert_eq!(results["promise"], "kept", "{}", results["promise_reason"]);
    assert!(results["promise_reason"]
        .as_str()
        .unwrap()
        .contains("acks=1"));
    let lost = &results["anomalies"]["lost-write"];
    assert_eq!(lost["breaks_promise"], false, "{lost}");
    for example in lost["examples"].as_array().unwrap() {
        assert!(example["offset"].is_u64(), "{example}");
        assert_eq!(example["acks"], "1", "{example}");
    }

    let (safe_run, results) = run_plan(
        store.path(),
        "10.214.3.0/24",
        &[
            "--acks",
            "all",
            "--set",
            "min.insync.replicas=2",
            "--set",
            "unclean.leader.election.enable=false",
        ],
    );
    assert_eq!(safe_run.code, 0, "{}", safe_run.transcript());
    let (acked, absent) = acked_absent_from_final_reads(&latest(store.path()));
    assert_eq!(absent, 0, "{}", safe_run.transcript());
    assert!(acked > 0, "the safe run acknowledged writes");
    assert_eq!(results["stats"]["lost_acknowledged"]["total"], 0);
    assert_eq!(
        (results["valid"].clone(), results["promise"].clone()),
        (Value::Bool(true), Value::from("kept"))
    );
    assert!(
        safe_run.stdout.contains(&format!(
            "no acknowledged write lost ({acked} acknowledged)"
        )),
        "{}",
        safe_run.transcript()
    );
}
