//! `tidewater matrix` with a `system` axis, end to end (root only, and Kafka in the cache or
//! fetchable; skipped with a message otherwise, unless `TIDEWATER_REQUIRE_KAFKA` is set): one
//! short plan (the leader of t0/0 killed and restarted) on the companion broker and on
//! Kafka 4.1.1's JVMs, both over the Kafka client, as a night (`--night`) so that the matrix
//! writes its per-cell figures to `summary.json`. Each cell's figures (runs, verdicts, lost
//! acknowledged writes, availability) must equal those counted here from its run's own
//! `history.jsonl` and `results.json`, and each run must have run on its cell's system.
//!
//! About 2 minutes: a 12-second companion run, then Kafka's four JVMs start, a 12-second
//! run, and stop. Subnet 10.246.3.0/24.

mod run_support;

use run_support::{acked_absent_from_final_reads, can_run, history, json, kafka_available};
use std::path::{Path, PathBuf};

const SUBNET: &str = "10.246.3.0/24";

const PLAN: &str = r#"
name = "kill-leader-once"
description = "The leader of t0/0 killed at 2 s and started again at 5 s."

[[step]]
at_s = 2
action = "kill"
target = "leader:t0/0"
bind = "k"

[[step]]
at_s = 5
action = "start"
target = "@k"
"#;

/// The matrix, with the plan file at `plan`.
fn matrix(plan: &Path) -> String {
    format!(
        r#"
name = "systems"

[run]
time_limit_s = 12
client = "kafka"
plan = {plan:?}
rate = 50.0
partitions = 1
recovery_time_limit_s = 60
final_time_limit_s = 60

[axes]
system = ["companion", "kafka:4.1.1"]

[[expect]]
description = "safe settings: nothing lost"
lost_writes_max = 0
all_valid = true
"#,
        plan = plan.display().to_string()
    )
}

/// The run directories under `dir` (those with a `config.json`), by their matrix cell.
fn runs_by_cell(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut runs = vec![];
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let config = entry.path().join("config.json");
        if config.is_file() && !entry.path().is_symlink() {
            let cell = json(&config)["matrix_cell"].as_str().unwrap().to_string();
            runs.push((cell, entry.path()));
        }
    }
    runs.sort();
    runs
}

/// Sends invoked and sends acknowledged in a run's history, counted from its raw lines.
fn sends(run_dir: &Path) -> (u64, u64) {
    let ops = history(run_dir);
    let count = |kind: &str| {
        ops.iter()
            .filter(|op| op["process"].is_number() && op["f"] == "send" && op["type"] == kind)
            .count() as u64
    };
    (count("invoke"), count("ok"))
}

#[test]
fn a_matrix_over_two_systems_reports_what_each_run_recorded() {
    if !can_run("matrix_systems") || !kafka_available("matrix_systems") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let plan = tmp.path().join("kill-leader-once.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let file = tmp.path().join("systems.toml");
    std::fs::write(&file, matrix(&plan)).unwrap();
    let store = run_support::KeptStore::new("matrix_systems");
    let night = "20261202T000000";
    let out = run_support::tidewater(&[
        "matrix",
        file.to_str().unwrap(),
        "--store",
        store.path().to_str().unwrap(),
        "--subnet",
        SUBNET,
        "--plain",
        "--seeds",
        "5",
        "--night",
        night,
    ]);
    let transcript = out.transcript();
    assert_eq!(out.code, 0, "every expectation held:\n{transcript}");
    let labels = ["system=companion", "system=kafka:4.1.1"];
    for label in labels {
        assert!(
            out.stdout.contains(&format!("matrix cell {label} run 1")),
            "{transcript}"
        );
    }

    let out_dir = store.path().join("systems");
    let summary = json(&out_dir.join("nights").join(night).join("summary.json"));
    let cells = summary["cells"].as_array().unwrap();
    let runs = runs_by_cell(&out_dir);
    assert_eq!(
        runs.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(),
        labels,
        "one run per cell: {runs:?}"
    );
    for (label, run_dir) in &runs {
        let cell = cells
            .iter()
            .find(|c| c["label"] == label.as_str())
            .unwrap_or_else(|| panic!("{label} in summary.json: {summary}"));
        let config = json(&run_dir.join("config.json"));
        let results = json(&run_dir.join("results.json"));
        // The run ran on its cell's system, over the Kafka client.
        let system = config["system"].as_str().unwrap_or("tidewater");
        let expected = if label.ends_with("companion") {
            "tidewater"
        } else {
            "kafka:4.1.1"
        };
        assert_eq!(system, expected, "{label}");
        assert_eq!(config["client"], "kafka", "{label}");
        let n1_log = std::fs::read_to_string(run_dir.join("nodes/n1/broker.log")).unwrap();
        assert_eq!(
            n1_log.contains("Kafka Server started"),
            expected != "tidewater",
            "{label}: n1 ran {expected}"
        );

        let (invoked, ok) = sends(run_dir);
        let (acked, absent) = acked_absent_from_final_reads(run_dir);
        assert!(acked > 0, "{label}: nothing acknowledged");
        assert_eq!(acked, ok, "{label}: every ok send acknowledges one value");
        assert_eq!(cell["runs"], 1, "{label}");
        assert_eq!(cell["errored"], 0, "{label}");
        assert_eq!(cell["lost_acknowledged"], absent, "{label}");
        assert_eq!(
            results["stats"]["lost_acknowledged"]["total"], absent,
            "{label}"
        );
        let availability = cell["availability"].as_f64().unwrap();
        assert!(
            (availability - ok as f64 / invoked as f64).abs() < 1e-9,
            "{label}: {availability} against {ok} of {invoked}"
        );
        let valid = usize::from(results["valid"] == true);
        assert_eq!(
            cell["valid"],
            serde_json::json!([valid, 1 - valid, 0]),
            "{label}"
        );
        assert_eq!(cell["expectation"], "held", "{label}");
        eprintln!("matrix_systems: {label}: {ok} of {invoked} sends acknowledged, {absent} lost");
    }

    // The page shows the system of every cell, as any other axis, and the two systems side
    // by side: one row (no other axis), both valid and nothing lost, so not differing.
    let page = std::fs::read_to_string(out_dir.join("matrix.html")).unwrap();
    for label in labels {
        assert!(page.contains(label), "{label} on the matrix page");
    }
    let valid = "<span class=\"verdict valid\">1 valid, 0 invalid of 1</span> lost 0";
    assert!(
        page.contains(&format!(
            "<tr><th>settings</th><th>companion</th><th>kafka:4.1.1</th><th>differs</th></tr>\
             <tr><td>(no other axis)</td><td>{valid}</td><td>{valid}</td>\
             <td><span class=\"muted\">no</span></td></tr>"
        )),
        "the systems side by side:\n{page}"
    );
}
