//! `tidewater run --system kafka` against real Apache Kafka (root only; skipped otherwise,
//! and skipped with a message when Kafka cannot be fetched: no Maven or no Maven Central).
//!
//! A short random-schedule run (kill, pause, partition) with the safe settings (acks=all,
//! `min.insync.replicas=2`, unclean election off) against Kafka's JVMs in the local
//! cluster's namespaces: valid, exit 0, hundreds of acknowledged writes none of which the
//! final reads miss (counted here from history.jsonl), faults injected, every client op over
//! Kafka's protocol; every replica of every partition read back (`replicas.jsonl`) and holding
//! exactly what the final reads read at each offset; afterwards no Kafka JVM of the run, no
//! namespace, bridge or run record.
//!
//! LONG: a 45-second main phase (long enough for hundreds of acknowledged writes even on two
//! cores shared with compilers, where one 30-second run acknowledged 708 and another 13),
//! after Kafka's four JVMs take 30 s to minutes to come up. Subnet 10.230.2.0/24.

mod run_support;

use run_support::KeptStore;
use run_support::{
    acked_absent_from_final_reads, can_run, history, kafka_available, latest, run_into,
};
use std::collections::BTreeMap;
use std::path::Path;

const SUBNET: &str = "10.230.2.0/24";

/// Per partition, offset -> value of every record the final reads read (history.jsonl).
fn final_reads(run_dir: &Path) -> BTreeMap<String, BTreeMap<u64, String>> {
    let mut read: BTreeMap<String, BTreeMap<u64, String>> = BTreeMap::new();
    for op in history(run_dir) {
        if op["type"] != "ok" || op["final"] != true {
            continue;
        }
        for m in op["value"].as_array().into_iter().flatten() {
            if m[0] != "poll" {
                continue;
            }
            for (key, pairs) in m[1].as_object().into_iter().flatten() {
                for pair in pairs.as_array().unwrap() {
                    read.entry(key.clone())
                        .or_default()
                        .insert(pair[0].as_u64().unwrap(), pair[1].to_string());
                }
            }
        }
    }
    read
}

/// Per partition and replica node, offset -> value of the records `replicas.jsonl` holds.
fn replica_records(run_dir: &Path) -> BTreeMap<String, BTreeMap<String, BTreeMap<u64, String>>> {
    let text = std::fs::read_to_string(run_dir.join("replicas.jsonl")).unwrap_or_default();
    let mut out: BTreeMap<String, BTreeMap<String, BTreeMap<u64, String>>> = BTreeMap::new();
    for line in text.lines() {
        let partition: serde_json::Value = serde_json::from_str(line).unwrap();
        let key = partition["key"].as_str().unwrap().to_string();
        for replica in partition["replicas"].as_array().unwrap() {
            let records = replica["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| (r[0].as_u64().unwrap(), r[3].as_str().unwrap().to_string()));
            out.entry(key.clone()).or_default().insert(
                replica["node"].as_str().unwrap().to_string(),
                records.collect(),
            );
        }
    }
    out
}

/// The local cluster id the run named in its harness.log.
fn cluster_id(run_dir: &Path) -> String {
    let log = std::fs::read_to_string(run_dir.join("harness.log")).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("local cluster ") && l.contains("namespaces tw-"))
        .expect("harness.log names the local cluster");
    let rest = line.split("local cluster ").nth(1).unwrap();
    rest.split(':').next().unwrap().to_string()
}

/// What the run left on this machine: processes naming the store, namespaces, links and the
/// run record of cluster `id`.
fn leftovers(store: &Path, id: &str) -> Vec<String> {
    let mut found = vec![];
    let store = store.display().to_string();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&store) && cmdline.contains("kafka") {
            found.push(format!(
                "process {}: {cmdline}",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    let list = |args: &[&str]| {
        let out = std::process::Command::new("ip")
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let prefix = format!("tw-{id}-");
    found.extend(
        list(&["netns", "list"])
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .map(|l| format!("namespace {l}")),
    );
    let link = format!("tw{id}");
    found.extend(
        list(&["-o", "link"])
            .lines()
            .filter(|l| l.contains(&link))
            .map(|l| format!("link {l}")),
    );
    if Path::new(&format!("/run/tidewater/{id}.json")).exists() {
        found.push(format!("run record /run/tidewater/{id}.json"));
    }
    found
}

#[test]
fn a_safe_random_schedule_against_kafka_is_valid_and_leaves_nothing_behind() {
    if !can_run("kafka_local") || !kafka_available("kafka_local") {
        return;
    }
    let store = KeptStore::new("kafka_local");
    let (outcome, results) = run_into(
        store.path(),
        SUBNET,
        &[
            "--system",
            "kafka",
            "--time-limit",
            "45",
            "--seed",
            "3",
            "--nemesis",
            "kill,pause,partition",
            "--nemesis-interval",
            "4",
            "--rate",
            "100",
        ],
    );
    let run_dir = latest(store.path());
    let keep = |what: &str| store.explain(&outcome, what);
    assert_eq!(outcome.code, 0, "{}", keep("exit"));
    assert_eq!(results["valid"], true, "{}", keep("verdict"));
    let (acked, absent) = acked_absent_from_final_reads(&run_dir);
    assert!(acked >= 200, "{}", keep(&format!("{acked} acknowledged")));
    assert_eq!(absent, 0, "{}", keep("acknowledged writes missing"));
    let ops = history(&run_dir);
    let faults = ops
        .iter()
        .filter(|op| op["process"] == "nemesis" && op["f"].as_str().unwrap().starts_with("start-"))
        .count();
    assert!(faults > 0, "{}", keep("no fault injected"));
    let over_http = ops
        .iter()
        .filter(|op| op["process"].is_number() && op["node"].is_string() && op["node"] != "kafka")
        .count();
    assert_eq!(over_http, 0, "{}", keep("client ops not over Kafka"));
    // Every replica was read (consumer fetches to each broker, KIP-392) and, the run having
    // settled, holds exactly the records the final reads read from the leaders.
    assert_eq!(
        results["stats"]["replica_logs"]["compared"],
        true,
        "{}",
        keep("replica logs compared")
    );
    let read = final_reads(&run_dir);
    let replicas = replica_records(&run_dir);
    assert_eq!(
        replicas.keys().collect::<Vec<_>>(),
        ["t0/0", "t0/1", "t0/2"],
        "{}",
        keep("partitions in replicas.jsonl")
    );
    for (key, by_node) in &replicas {
        assert_eq!(
            by_node.keys().collect::<Vec<_>>(),
            ["n1", "n2", "n3"],
            "{}",
            keep(&format!("replicas of {key}"))
        );
        for (node, records) in by_node {
            assert_eq!(
                records,
                &read[key],
                "{}",
                keep(&format!(
                    "{node}'s replica of {key} against the final reads"
                ))
            );
        }
    }
    // The samples carry each leader's own offsets (ListOffsets and a fetch sent to it), so the
    // report's high-watermark plot has data: every partition has sampled HWs, and on this run
    // that lost nothing none lies past the end of what the final reads read.
    let samples = std::fs::read_to_string(run_dir.join("samples.jsonl")).unwrap();
    let samples: Vec<serde_json::Value> = samples
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (key, records) in &read {
        let end = records.keys().next_back().map_or(0, |last| last + 1);
        let sampled: Vec<u64> = samples
            .iter()
            .filter(|s| s["key"] == key.as_str())
            .filter_map(|s| s["high_watermark"].as_u64())
            .collect();
        assert!(
            !sampled.is_empty(),
            "{}",
            keep(&format!("no HW sampled for {key}"))
        );
        assert!(
            sampled.iter().all(|hw| *hw <= end),
            "{}",
            keep(&format!(
                "{key}: a sampled HW above the final reads' end {end}: {sampled:?}"
            ))
        );
    }
    let config = run_support::json(&run_dir.join("config.json"));
    assert_eq!(
        config["system"],
        format!("kafka:{}", tidewater::kafka::DEFAULT_VERSION)
    );
    let server_properties = std::fs::read_to_string(run_dir.join("nodes/n1/server.properties"));
    assert!(
        server_properties
            .unwrap()
            .contains("min.insync.replicas=2\n"),
        "the run's settings reach Kafka"
    );
    let left = leftovers(store.path(), &cluster_id(&run_dir));
    assert!(
        left.is_empty(),
        "{}",
        keep(&format!("left behind: {left:?}"))
    );
}
