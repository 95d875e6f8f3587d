//! A whole `tidewater run --cluster FILE --client kafka` against a `kind = "kafka"` cluster
//! file whose hosts run Apache Kafka's JVMs: over real ssh into network namespaces (one
//! sshd per namespace, as `ssh_chaos.rs`), each host runs `kafka.Kafka` from the release
//! `tidewater kafka fetch` cached (`launch = "java"`: the cache has `libs/`, no `bin/`).
//! Every fault of the plan (a kill and restart, a pause of the leader found through Kafka's
//! metadata, an isolation with iptables) is applied over ssh, the workload and final reads
//! speak Kafka's protocol, and with the safe settings (acks=all, `min.insync.replicas=2`,
//! unclean election off) the run is valid with hundreds of acknowledged writes, none of which
//! the final reads miss (counted here from `history.jsonl`). Afterwards no JVM, stopped
//! process, Tidewater rule or namespace is left.
//!
//! Needs root, `sshd`, `ssh`, `ssh-keygen`, `iptables` and `java`, and Kafka in the cache
//! (fetched here when Maven Central answers); prints a message and passes otherwise, unless
//! `TIDEWATER_REQUIRE_KAFKA` is set (then a missing Kafka fails it). About 2 minutes: four
//! JVMs start over ssh, then a 30-second main phase. Subnet 10.246.1.0/24.

mod run_support;
mod ssh_hosts;

use run_support::{acked_absent_from_final_reads, history, json, kafka_available, tidewater};
use run_support::{KeptStore, Outcome};
use ssh_hosts::{make_keys, start_hosts, SSHD};
use std::path::{Path, PathBuf};
use std::process::Command;
use tidewater::cluster::local::{sys, LocalCluster};
use tidewater::cluster::Cluster;

const SUBNET: &str = "10.246.1.0/24";

/// The hosts' run id: their namespaces are `tw-tkr-<node>`.
const HOSTS_ID: &str = "tkr";

fn usable() -> bool {
    let runs = |tool: &str, arg: &str| Command::new(tool).arg(arg).output().is_ok();
    let tools = Path::new(SSHD).exists()
        && runs("ssh", "-V")
        && runs("ssh-keygen", "-?")
        && runs("iptables", "-V")
        && runs("java", "-version");
    if sys::is_root() && tools {
        return true;
    }
    eprintln!("skipped: needs root, sshd, ssh, ssh-keygen, iptables and java");
    false
}

/// The cached release of the default Kafka (fetched if it is not yet), as `kafka fetch`
/// prints it.
fn kafka_home() -> PathBuf {
    let fetched = tidewater(&["kafka", "fetch"]);
    assert_eq!(fetched.code, 0, "{}", fetched.transcript());
    PathBuf::from(fetched.stdout.trim())
}

fn cluster_file(dir: &Path, keys: &Path, hosts: &LocalCluster, home: &Path) -> PathBuf {
    let mut text = format!(
        "kind = \"kafka\"\n\
         user = \"root\"\n\
         identity_file = {key:?}\n\
         ssh_options = [\"-o\", \"StrictHostKeyChecking=no\", \"-o\", \
         \"UserKnownHostsFile=/dev/null\", \"-o\", \"LogLevel=ERROR\"]\n\
         sudo = false\n\
         control = \"process\"\n\
         client_ip = \"{client}\"\n\
         remote_dir = \"{remote}/{{node}}\"\n\
         stop_timeout_s = 10\n\
         connect_timeout_s = 3\n\
         [kafka]\n\
         home = {home:?}\n\
         launch = \"java\"\n\
         port = 7300\n\
         controller_port = 7301\n",
        key = keys.join("client").display().to_string(),
        client = hosts.spec().bridge_ip(),
        remote = dir.join("remote").display(),
        home = home.display().to_string(),
    );
    for node in hosts.nodes() {
        text.push_str(&format!(
            "[[node]]\nname = \"{n}\"\nhost = \"{ip}\"\nip = \"{ip}\"\n",
            n = node.name,
            ip = node.ip
        ));
    }
    let path = dir.join("cluster-kafka.toml");
    std::fs::write(&path, text).unwrap();
    path
}

const PLAN: &str = r#"
name = "kafka-over-ssh"
description = "A kill and restart, a pause of a leader found through Kafka's metadata, an isolation."

[[step]]
at_s = 3
action = "kill"
target = "n1"

[[step]]
at_s = 6
action = "start"
target = "n1"

[[step]]
at_s = 13
action = "pause"
target = "leader:t0/0"
bind = "p"

[[step]]
at_s = 17
action = "resume"
target = "@p"

[[step]]
at_s = 20
action = "isolate"
target = "n3"

[[step]]
at_s = 24
action = "heal"
"#;

/// What is left on this machine of the hosts' Kafka: JVMs (any process naming the hosts'
/// remote directory), stopped processes and Tidewater's iptables rules in the namespaces.
fn leftovers(hosts: &LocalCluster, remote: &Path) -> Vec<String> {
    let mut found = vec![];
    let remote = remote.display().to_string();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&remote) {
            let pid = entry.file_name().to_string_lossy().into_owned();
            found.push(format!("process {pid}: {cmdline}"));
        }
    }
    for node in hosts.node_names() {
        let ns = hosts.netns(&node).unwrap();
        let rules = Command::new("ip")
            .args(["netns", "exec", &ns, "iptables", "-w", "-S"])
            .output()
            .unwrap();
        found.extend(
            String::from_utf8_lossy(&rules.stdout)
                .lines()
                .filter(|l| l.contains("TIDEWATER"))
                .map(|l| format!("{ns}: rule {l}")),
        );
        for pid in sys::netns_pids(&ns).unwrap() {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
            if matches!(state, Some('T') | Some('t')) {
                found.push(format!("{ns}: stopped process {pid}"));
            }
        }
    }
    found
}

#[test]
fn a_safe_run_against_kafka_jvms_over_ssh_is_valid_and_leaves_nothing_behind() {
    if !usable() || !kafka_available("ssh_kafka_run") {
        return;
    }
    let home = kafka_home();
    let dir = tempfile::tempdir().unwrap();
    let keys = make_keys(dir.path());
    let hosts = start_hosts(dir.path(), &keys, HOSTS_ID, SUBNET, 3);
    let cluster = cluster_file(dir.path(), &keys, &hosts, &home);
    let plan = dir.path().join("kafka-over-ssh.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let store = KeptStore::new("ssh_kafka_run");
    let store_path = store.path().to_str().unwrap();

    let outcome: Outcome = tidewater(&[
        "run",
        "--plain",
        "--client",
        "kafka",
        "--nodes",
        "3",
        "--rate",
        "100",
        "--seed",
        "3",
        "--time-limit",
        "30",
        "--recovery-time-limit",
        "60",
        "--final-time-limit",
        "60",
        "--set",
        "min.insync.replicas=2",
        "--plan",
        plan.to_str().unwrap(),
        "--cluster",
        cluster.to_str().unwrap(),
        "--store",
        store_path,
    ]);
    let keep = |what: &str| store.explain(&outcome, what);
    assert_eq!(outcome.code, 0, "{}", keep("exit"));
    assert!(
        outcome.stdout.contains("verdict: valid"),
        "{}",
        keep("verdict")
    );
    assert!(
        outcome
            .transcript()
            .contains("cluster up: n1=kafka://10.246.1.11:7300"),
        "{}",
        keep("cluster up")
    );

    let run_dir = run_support::latest(store.path());
    let results = json(&run_dir.join("results.json"));
    assert_eq!(results["valid"], true, "{}", keep("results.json"));
    let (acked, absent) = acked_absent_from_final_reads(&run_dir);
    assert!(acked >= 200, "{}", keep(&format!("{acked} acknowledged")));
    assert_eq!(absent, 0, "{}", keep("acknowledged writes missing"));
    assert_eq!(results["stats"]["lost_acknowledged"]["total"], 0);
    eprintln!("ssh_kafka_run: {acked} acknowledged writes, all in the final reads");

    // Every fault of the plan was applied (through ssh: the hosts are reached no other way),
    // and no client op went anywhere but Kafka's protocol.
    let ops = history(&run_dir);
    let applied = |f: &str| {
        ops.iter()
            .filter(|op| op["process"] == "nemesis" && op["f"] == f && op["type"] != "invoke")
            .map(|op| op["value"].to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(applied("start-kill").len(), 1, "{}", keep("kill"));
    let paused = applied("start-pause");
    assert_eq!(paused.len(), 1, "{}", keep("pause"));
    assert!(paused[0].contains("\"n"), "a broker paused: {paused:?}");
    assert_eq!(applied("start-partition").len(), 1, "{}", keep("isolation"));
    let failed_faults: Vec<&serde_json::Value> = ops
        .iter()
        .filter(|op| op["process"] == "nemesis" && op["type"] == "fail")
        .collect();
    assert!(
        failed_faults.is_empty(),
        "{}",
        keep(&format!("{failed_faults:?}"))
    );
    let not_kafka = ops
        .iter()
        .filter(|op| op["process"].is_number() && op["node"].is_string() && op["node"] != "kafka")
        .count();
    assert_eq!(not_kafka, 0, "{}", keep("client ops not over Kafka"));

    // It was Kafka: n1's JVM started, was killed, and started again, logging to broker.log.
    let n1_log = std::fs::read_to_string(run_dir.join("nodes/n1/broker.log")).unwrap();
    assert_eq!(
        n1_log.matches("=== tidewater: starting ===").count(),
        2,
        "{}",
        keep("n1's starts")
    );
    assert_eq!(
        n1_log.matches("Kafka Server started").count(),
        2,
        "{}",
        keep("n1's Kafka starts")
    );
    let properties = std::fs::read_to_string(run_dir.join("nodes/n1/server.properties")).unwrap();
    assert!(
        properties.contains("min.insync.replicas=2\n"),
        "{properties}"
    );

    let left = leftovers(&hosts, &dir.path().join("remote"));
    assert!(
        left.is_empty(),
        "{}",
        keep(&format!("left behind: {left:?}"))
    );
    let namespaces: Vec<String> = hosts
        .node_names()
        .iter()
        .map(|n| hosts.netns(n).unwrap())
        .collect();
    hosts.teardown().unwrap();
    drop(hosts);
    for ns in namespaces {
        assert!(!sys::netns_exists(&ns), "{ns} left behind");
    }
}
