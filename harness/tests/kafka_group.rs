//! The group workload against real Apache Kafka (issue 24, item 2; root only, and skipped
//! with a message when Java or Kafka cannot be had, a failure under
//! `TIDEWATER_REQUIRE_KAFKA=1`).
//!
//! `tidewater run --system kafka --workload group` under the random schedule with the safe
//! settings: groups form on Kafka's own group coordinator (members join, including KIP-394's
//! second join with the id Kafka hands out, sync, poll and commit), the run is valid, and the
//! figures the run stores (`stats.groups`, `stats.rebalances`) equal the counts made here
//! from history.jsonl. Until 2026-12-07 the harness's group client failed every join
//! against Kafka with MEMBER_ID_REQUIRED and such a run still said valid.
//!
//! LONG: Kafka's four JVMs come up (20 s to minutes on two shared cores), then a 30-second
//! main phase. Subnet 10.230.4.0/24.

mod run_support;

use run_support::{acked_absent_from_final_reads, can_run, history, kafka_available, latest};
use run_support::{run_into, KeptStore};
use std::collections::BTreeSet;

const SUBNET: &str = "10.230.4.0/24";

#[test]
fn the_group_workload_against_kafka_forms_groups_and_is_valid() {
    if !can_run("kafka_group") || !kafka_available("kafka_group") {
        return;
    }
    let store = KeptStore::new("kafka_group");
    let (outcome, results) = run_into(
        store.path(),
        SUBNET,
        &[
            "--system",
            "kafka",
            "--workload",
            "group",
            "--time-limit",
            "30",
            "--seed",
            "1",
        ],
    );
    let run_dir = latest(store.path());
    let keep = |what: &str| store.explain(&outcome, what);
    assert_eq!(outcome.code, 0, "{}", keep("exit"));
    assert_eq!(results["valid"], true, "{}", keep("verdict"));
    let (acked, absent) = acked_absent_from_final_reads(&run_dir);
    assert!(acked > 0, "{}", keep("nothing acknowledged"));
    assert_eq!(absent, 0, "{}", keep("acknowledged writes missing"));

    let ops = history(&run_dir);
    let completed = |f: &str, kind: &str| {
        ops.iter()
            .filter(|op| op["f"] == f && op["type"] == kind)
            .count()
    };
    let ok_rebalances = completed("rebalance", "ok");
    assert!(ok_rebalances > 0, "{}", keep("no group formed"));
    assert!(completed("commit", "ok") > 0, "{}", keep("no commit"));
    let rebalances = &results["stats"]["rebalances"];
    assert_eq!(
        (
            rebalances["ok"].as_u64(),
            rebalances["fail"].as_u64(),
            rebalances["info"].as_u64()
        ),
        (
            Some(ok_rebalances as u64),
            Some(completed("rebalance", "fail") as u64),
            Some(completed("rebalance", "info") as u64)
        ),
        "{}",
        keep("stats.rebalances against the history")
    );
    let groups: BTreeSet<&str> = ops
        .iter()
        .filter(|op| op["f"] == "rebalance" && op["type"] == "ok")
        .filter_map(|op| op["value"]["group"].as_str())
        .collect();
    assert_eq!(
        results["stats"]["groups"].as_u64(),
        Some(groups.len() as u64),
        "{}",
        keep("stats.groups against the history")
    );
    let member_id_required = ops
        .iter()
        .filter(|op| op["f"] == "rebalance" && op["error"] == "MEMBER_ID_REQUIRED")
        .count();
    assert_eq!(
        member_id_required,
        0,
        "{}",
        keep("a join ended on KIP-394's answer instead of joining again")
    );
    eprintln!(
        "kafka group: {ok_rebalances} rebalances, {} groups, {acked} acknowledged",
        groups.len()
    );
}
