//! End to end: `tidewater run --workload group` against a real local cluster (root only;
//! skipped otherwise) with broker faults, safe settings (acks=all, min.insync.replicas=2) and
//! the workload's own consumer faults. About 60 s: a 20-second main phase plus setup,
//! recovery, final reads and teardown.

mod run_support;

use run_support::{can_run, history, json, latest, tidewater, KeptStore};

const SUBNET: &str = "10.216.1.0/24";

#[test]
fn a_group_run_with_faults_is_valid_and_reports_rebalances_and_redeliveries() {
    if !can_run("run_group") {
        return;
    }
    // Kept under /tmp/tidewater-failed/ when an assertion fails, for the analysis.
    let store = KeptStore::new("run_group");
    let run = tidewater(&[
        "run",
        "--workload",
        "group",
        "--name",
        "group-e2e",
        "--time-limit",
        "20",
        "--nemesis",
        "kill,pause,partition",
        "--nemesis-interval",
        "3",
        "--seed",
        "21",
        "--acks",
        "all",
        "--set",
        "min.insync.replicas=2",
        "--recovery-time-limit",
        "30",
        "--final-time-limit",
        "30",
        "--store",
        store.path().to_str().unwrap(),
        "--subnet",
        SUBNET,
        "--plain",
    ]);
    assert_eq!(run.code, 0, "{}", run.transcript());
    assert!(
        run.stdout.ends_with("verdict: valid\n"),
        "{}",
        run.transcript()
    );

    let run_dir = latest(store.path());
    assert!(run_dir.starts_with(store.path().join("group-e2e")));
    let config = json(&run_dir.join("config.json"));
    assert_eq!(config["workload"], "group");
    let ops = history(&run_dir);
    // Every broker fault the schedule drew was injected (`start-kill`, ...).
    let steps = config["schedule"]["step"].as_array().unwrap();
    assert!(!steps.is_empty(), "{}", config["schedule"]);
    let nemesis: Vec<&serde_json::Value> = ops
        .iter()
        .filter(|op| op["process"] == "nemesis")
        .map(|op| &op["f"])
        .collect();
    // The history op each fault action of the schedule starts with (docs/history.md).
    let start_of = |action: &str| match action {
        "isolate" | "partition" | "cut" | "cut-clients" => Some("partition"),
        "kill" | "stop" | "restart" => Some("kill"),
        "pause" => Some("pause"),
        _ => None,
    };
    let faults: Vec<&str> = steps
        .iter()
        .filter_map(|step| step["action"].as_str())
        .filter_map(start_of)
        .collect();
    assert!(!faults.is_empty(), "{}", config["schedule"]);
    for fault in faults {
        let start = serde_json::json!(format!("start-{fault}"));
        assert!(
            nemesis.contains(&&start),
            "{start} missing from the history: {nemesis:?}"
        );
    }
    let count = |f: &str, kind: &str| {
        ops.iter()
            .filter(|op| op["f"] == f && op["type"] == kind)
            .count()
    };
    assert!(count("rebalance", "ok") > 0, "no rebalance completed");
    assert!(count("commit", "ok") > 0, "no commit completed");
    assert!(count("send", "ok") > 0, "no send completed");
    assert!(
        ops.iter()
            .any(|op| op["final"] == true && op["type"] == "ok"),
        "the final reads ran"
    );

    let results = json(&run_dir.join("results.json"));
    assert_eq!(results["valid"], true, "{results}");
    let stats = &results["stats"];
    let rebalances = &stats["rebalances"];
    assert_eq!(
        rebalances["count"].as_u64().unwrap() as usize,
        count("rebalance", "ok") + count("rebalance", "fail") + count("rebalance", "info"),
        "{rebalances}"
    );
    assert_eq!(
        rebalances["series"].as_array().unwrap().len() as u64,
        rebalances["count"].as_u64().unwrap(),
        "fewer than 2000 rebalances: every one is in the series"
    );
    let redeliveries = &stats["redeliveries"];
    eprintln!(
        "rebalances: count={} duration_ms_mean={} duration_ms_max={}; redeliveries: {redeliveries}; crashes={} stalls={} leaves={}",
        rebalances["count"],
        rebalances["duration_ms_mean"],
        rebalances["duration_ms_max"],
        count("crash", "info"),
        count("stall", "ok"),
        count("leave", "ok")
    );
    assert!(
        redeliveries["delivered"].as_u64().unwrap() > 0,
        "{redeliveries}"
    );
    assert!(
        redeliveries["redelivered_records"].as_u64().unwrap()
            <= redeliveries["redeliveries"].as_u64().unwrap(),
        "{redeliveries}"
    );
    let report = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(report.contains("Rebalances"), "the report shows rebalances");
}
