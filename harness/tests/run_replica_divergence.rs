//! End to end (root only; skipped otherwise): `replica-divergence`, every replica's own log
//! compared after the final reads. A plan isolates the leader of t0/0 from the other nodes
//! (clients still reach it, so it appends writes nobody replicates), then heals; a new leader
//! has meanwhile written other records at the same offsets.
//!
//! - With the deliberate bug `keep.divergent.suffix` (a follower skips truncation by leader
//!   epoch) the old leader keeps its suffix, fetches on from its log end and rejoins the ISR:
//!   replicas in the ISR hold different records below the high watermark. The run must be
//!   invalid with exactly the offsets an independent comparison of `replicas.jsonl` finds.
//! - The unmodified broker truncates by leader epoch: the same plan compares settled
//!   replicas and finds nothing.
//!
//! The buggy broker is `$TIDEWATER_DELIBERATE_BUGS_BROKER` (scripts/test.sh builds it before
//! any test starts), or else built with `--features deliberate-bugs` into its own target
//! directory (`<target>/deliberate-bugs/`): building it in the shared one would replace the
//! binary the other cluster tests are running. About 30 s per run once that build is cached.

mod run_support;

use run_support::{can_run, json, latest, KeptStore, Outcome};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The plan: isolate the leader of t0/0 at 3 s, heal at 12 s, wait until it is back in the ISR.
const PLAN: &str = r#"
name = "divergence"
description = "Isolates the leader of t0/0 once, then heals."

[[step]]
at_s = 3
action = "isolate"
target = "leader:t0/0"
bind = "first"

[[step]]
at_s = 12
action = "heal"

[[step]]
action = "wait-for-isr-expand"
key = "t0/0"
target = "@first"
timeout_s = 30
"#;

/// The bug's broker setting.
const BUG: &str = "tidewater.bug.keep.divergent.suffix.enable=true";

/// `tidewater-broker` built with the deliberate bugs: `$TIDEWATER_DELIBERATE_BUGS_BROKER` when
/// set (scripts/test.sh builds one before the other tests start), otherwise built in a target
/// directory of its own.
fn deliberate_bugs_broker() -> PathBuf {
    let binary = match std::env::var_os("TIDEWATER_DELIBERATE_BUGS_BROKER") {
        Some(path) => PathBuf::from(path),
        None => build_deliberate_bugs_broker(),
    };
    // Only a build with the feature accepts the bug's setting.
    let check = Command::new(&binary)
        .args(["--check-config", "--set", BUG])
        .output()
        .expect("run the broker");
    assert!(
        check.status.success(),
        "{} does not accept {BUG}: {}",
        binary.display(),
        String::from_utf8_lossy(&check.stderr)
    );
    binary
}

/// Builds `tidewater-broker` with the deliberate bugs in `<target>/deliberate-bugs/`.
fn build_deliberate_bugs_broker() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR lies in the target directory")
        .join("deliberate-bugs");
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "-p",
            "tidewater-broker",
            "--bin",
            "tidewater-broker",
        ])
        .args(["--features", "deliberate-bugs", "--target-dir"])
        .arg(&target)
        .current_dir(&workspace)
        .status()
        .expect("run cargo");
    assert!(
        status.success(),
        "cargo build --features deliberate-bugs: {status}"
    );
    target.join("debug").join("tidewater-broker")
}

/// Runs the plan on `subnet`, with `broker` as the brokers' binary when given.
fn run(store: &Path, subnet: &str, broker: Option<&Path>, sets: &[&str]) -> Outcome {
    let plan = store.join("divergence.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_tidewater"));
    command.args(["run", "--plan"]).arg(&plan).args([
        "--time-limit",
        "18",
        "--seed",
        "3",
        "--partitions",
        "2",
        "--set",
        "min.insync.replicas=2",
        "--subnet",
        subnet,
        "--plain",
        "--store",
    ]);
    command.arg(store);
    for set in sets {
        command.args(["--set", set]);
    }
    if let Some(broker) = broker {
        command.env("TIDEWATER_BROKER_BIN", broker);
    }
    let out = command.output().expect("run tidewater");
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// What an independent comparison of `replicas.jsonl` finds below the high watermark of each
/// partition (its leader's): by (key, offset), each node's record `[offset, epoch, key,
/// value]`, for offsets where the replicas holding it disagree; and which of those have a
/// disagreement between two replicas of the ISR.
struct Divergence {
    below_hw: BTreeMap<(String, u64), BTreeMap<String, Value>>,
    among_isr: BTreeSet<(String, u64)>,
}

fn compare_replicas(run_dir: &Path) -> Divergence {
    let text = std::fs::read_to_string(run_dir.join("replicas.jsonl")).expect("replicas.jsonl");
    let mut found = Divergence {
        below_hw: BTreeMap::new(),
        among_isr: BTreeSet::new(),
    };
    for line in text.lines() {
        let p: Value = serde_json::from_str(line).unwrap();
        let key = p["key"].as_str().unwrap().to_string();
        let replicas = p["replicas"].as_array().unwrap();
        let leader = replicas
            .iter()
            .find(|r| r["node"] == p["leader"])
            .unwrap_or_else(|| panic!("the leader's log of {key} was read: {}", p["unread"]));
        let high_watermark = leader["high_watermark"].as_u64().unwrap();
        let isr: Vec<&str> = p["isr"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        let mut at: BTreeMap<u64, BTreeMap<String, Value>> = BTreeMap::new();
        for r in replicas {
            let node = r["node"].as_str().unwrap().to_string();
            for record in r["records"].as_array().unwrap() {
                let offset = record[0].as_u64().unwrap();
                at.entry(offset)
                    .or_default()
                    .insert(node.clone(), record.clone());
            }
        }
        for (offset, held) in at.range(..high_watermark) {
            let distinct: BTreeSet<String> = held.values().map(Value::to_string).collect();
            if distinct.len() < 2 {
                continue;
            }
            let in_isr: BTreeSet<String> = held
                .iter()
                .filter(|(node, _)| isr.contains(&node.as_str()))
                .map(|(_, r)| r.to_string())
                .collect();
            if in_isr.len() > 1 {
                found.among_isr.insert((key.clone(), *offset));
            }
            found.below_hw.insert((key.clone(), *offset), held.clone());
        }
    }
    found
}

#[test]
fn a_follower_that_keeps_its_divergent_suffix_is_reported_at_exactly_its_offsets() {
    if !can_run("run_replica_divergence") {
        return;
    }
    let broker = deliberate_bugs_broker();
    let store = KeptStore::new("run_replica_divergence_bug");
    let out = run(store.path(), "10.243.1.0/24", Some(&broker), &[BUG]);
    let run_dir = latest(store.path());
    let results = json(&run_dir.join("results.json"));
    let found = compare_replicas(&run_dir);
    let seen = format!(
        "{}\nindependently: {} offsets differ below the HW, {} among the ISR: {:?}",
        out.transcript(),
        found.below_hw.len(),
        found.among_isr.len(),
        found.among_isr
    );
    assert!(
        !found.among_isr.is_empty(),
        "no divergence was built: {seen}"
    );
    assert_eq!(out.code, 1, "{seen}");
    assert_eq!(results["valid"], false, "{seen}");
    assert_eq!(results["promise"], "broken", "{seen}");
    let anomaly = &results["anomalies"]["replica-divergence"];
    assert_eq!(anomaly["count"], found.below_hw.len() as u64, "{seen}");
    assert_eq!(
        (
            anomaly["invalidates"].clone(),
            anomaly["breaks_promise"].clone()
        ),
        (Value::Bool(true), Value::Bool(true))
    );
    let stats = &results["stats"]["replica_logs"];
    assert_eq!(
        stats["divergent_below_hw"],
        found.among_isr.len() as u64,
        "{seen}"
    );
    // Every example names an offset the comparison found, with each node's record as stored.
    let examples = anomaly["examples"].as_array().unwrap();
    assert_eq!(examples.len(), found.below_hw.len().min(10), "{seen}");
    for e in examples {
        let at = (
            e["key"].as_str().unwrap().to_string(),
            e["offset"].as_u64().unwrap(),
        );
        let held = found
            .below_hw
            .get(&at)
            .unwrap_or_else(|| panic!("example {e} is no divergent offset: {seen}"));
        let mut nodes: Vec<&str> = e["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        nodes.sort_unstable();
        assert_eq!(
            nodes,
            held.keys().map(String::as_str).collect::<Vec<_>>(),
            "{e}"
        );
        for (node, record) in held {
            let shown = &e["replicas"][node];
            assert_eq!(shown["leader_epoch"], record[1], "{e}");
            assert_eq!(
                shown["value"].to_string().trim_matches('"'),
                record[3].as_str().unwrap(),
                "{e}"
            );
        }
    }
    // The terminal says the same.
    let line = format!(
        "{} offsets differ below the high watermark among the ISR",
        found.among_isr.len()
    );
    assert!(out.stdout.contains(&line), "no `{line}`: {seen}");
    assert!(
        out.stdout.contains(&format!(
            "anomaly replica-divergence: {} (BREAKS THE PROMISE)",
            found.below_hw.len()
        )),
        "{seen}"
    );
    // And the report, in its own section.
    let report = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(
        report.contains("id=\"anomaly-replica-divergence\""),
        "{seen}"
    );
    assert!(
        report.contains(&format!(
            "<b id=\"replicas-below-hw\">{}</b>",
            found.among_isr.len()
        )),
        "{seen}"
    );
    eprintln!("{seen}");
}

#[test]
fn a_correct_broker_under_the_same_plan_has_replicas_that_agree() {
    if !can_run("run_replica_divergence") {
        return;
    }
    let store = KeptStore::new("run_replica_divergence_clean");
    let out = run(store.path(), "10.243.2.0/24", None, &[]);
    let run_dir = latest(store.path());
    let results = json(&run_dir.join("results.json"));
    let found = compare_replicas(&run_dir);
    let seen = out.transcript();
    assert!(found.below_hw.is_empty(), "{:?}: {seen}", found.below_hw);
    assert_eq!(out.code, 0, "{seen}");
    assert!(
        results["anomalies"].get("replica-divergence").is_none(),
        "{seen}"
    );
    let stats = &results["stats"]["replica_logs"];
    assert_eq!(stats["compared"], true, "{seen}");
    assert_eq!(stats["divergent_below_hw"], 0, "{seen}");
    // Not vacuous: both partitions settled with every replica read and records to compare.
    let partitions = stats["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 2, "{seen}");
    for p in partitions {
        assert_eq!(p["settled"], true, "{p}");
        assert_eq!(p["replicas"].as_object().unwrap().len(), 3, "{p}");
        assert!(p["offsets_compared"].as_u64().unwrap() > 0, "{p}");
    }
    assert!(
        out.stdout
            .contains("0 offsets differ below the high watermark among the ISR"),
        "{seen}"
    );
}
