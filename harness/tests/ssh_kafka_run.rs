//! A whole `tidewater run --cluster FILE --client kafka` against a `kind = "kafka"` cluster
//! file, end to end over ssh into network namespaces, with the companion broker standing in
//! for Apache Kafka: the stand-in `kafka-server-start.sh` reads the `server.properties` the
//! harness wrote and `exec`s `tidewater-broker` with the same node id, Kafka listener,
//! controller (from `controller.quorum.voters`) and settings. So every Kafka-protocol path of
//! a run against Kafka is exercised for real: topic creation with configs (CreateTopics), the
//! nemesis's targets (`KafkaView`, Metadata), the workload and final reads (rskafka), the
//! recovery check (ListOffsets), the samples (Metadata), the kind's start/kill/pause by pid;
//! no HTTP call reaches the brokers from the harness (the history's ops all carry
//! `node: "kafka"`, and the samples have leaders and ISRs but no offsets). It is not Kafka: `docs/real-kafka.md` says what that
//! leaves untested.
//!
//! The stand-in runs the broker through a symlink named after the properties file, so the
//! kind's pid check (the process's command line names this node's properties file) holds as
//! it does for Kafka's JVM.
//!
//! Needs root, `sshd`, `ssh`, `ssh-keygen`, `iptables` and `java` (the kind's preflight looks
//! for one); prints a message and passes otherwise. About 60 s. Subnet 10.227.1.0/24.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use tidewater::cluster::local::{find_broker_binary, sys, LocalCluster};
use tidewater::cluster::Cluster;

mod ssh_hosts;
use ssh_hosts::{make_keys, start_hosts, SSHD};

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

/// Companion-broker settings the stand-in passes on from `server.properties` when present
/// (Kafka's names, which are the broker's too).
const PASSED_ON: &[&str] = &[
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "replica.lag.time.max.ms",
    "broker.session.timeout.ms",
    "broker.heartbeat.interval.ms",
    "log.flush.interval.messages",
];

/// The stand-in release under `home/bin`: `kafka-storage.sh` formats (writes
/// `meta.properties`), `kafka-server-start.sh` runs the companion broker as Kafka.
fn stand_in_release(home: &Path, broker: &Path) {
    let write = |name: &str, body: String| {
        let path = home.join("bin").join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    // format -t ID -c PROPS --ignore-formatted
    write(
        "kafka-storage.sh",
        "#!/bin/sh\nd=$(sed -n 's/^log.dirs=//p' \"$5\" | tail -1)\nmkdir -p \"$d\"\n\
         echo \"cluster.id=$3\" > \"$d/meta.properties\"\n"
            .into(),
    );
    let passed_on: String = PASSED_ON
        .iter()
        .map(|name| {
            format!("v=$(get {name}); [ -n \"$v\" ] && set -- \"$@\" --set \"{name}=$v\"\n")
        })
        .collect();
    write(
        "kafka-server-start.sh",
        format!(
            "#!/bin/sh\n\
             p=\"$1\"\n\
             get() {{ sed -n \"s/^$1=//p\" \"$p\" | tail -1; }}\n\
             mkdir -p \"$LOG_DIR\"\n\
             ln -sf {broker} \"$p.broker\"\n\
             dirs=$(get log.dirs)\n\
             voters=$(get controller.quorum.voters)\n\
             controller=\"http://${{voters#*@}}\"\n\
             set --\n\
             {passed_on}\
             if [ \"$(get process.roles)\" = controller ]; then\n\
             \x20 exec \"$p.broker\" --role controller --set \"listeners=$controller\" \
             --set \"log.dirs=$dirs\" \"$@\"\n\
             fi\n\
             plain=$(get listeners | tr ',' '\\n' | sed -n 's#^PLAINTEXT://##p')\n\
             host=${{plain%:*}}\n\
             port=${{plain##*:}}\n\
             exec \"$p.broker\" --set \"broker.id=$(get node.id)\" \
             --set \"listeners=http://$host:$((port + 1000))\" \
             --set \"kafka.listeners=PLAINTEXT://$plain\" \
             --set \"controller.address=$controller\" --set \"log.dirs=$dirs\" \"$@\"\n",
            broker = broker.display(),
        ),
    );
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
         stop_timeout_s = 5\n\
         connect_timeout_s = 3\n\
         [kafka]\n\
         home = {home:?}\n\
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
name = "kafka-kind"
description = "A kill, a pause and a leader isolation, resolved through Kafka's metadata."

[[step]]
at_s = 3
action = "kill"
target = "n1"

[[step]]
at_s = 6
action = "start"
target = "n1"

[[step]]
at_s = 9
action = "pause"
target = "leader:t0/0"
bind = "p"

[[step]]
at_s = 14
action = "resume"
target = "@p"
"#;

#[test]
fn a_run_against_the_kafka_kind_speaks_only_kafka() {
    if !usable() {
        return;
    }
    let broker = find_broker_binary().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let keys = make_keys(dir.path());
    let hosts = start_hosts(dir.path(), &keys, "tkr", "10.227.1.0/24", 3);
    let home = dir.path().join("kafka");
    stand_in_release(&home, &broker);
    let cluster = cluster_file(dir.path(), &keys, &hosts, &home);
    let plan = dir.path().join("kafka-kind.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let store = dir.path().join("store");

    let output = Command::new(env!("CARGO_BIN_EXE_tidewater"))
        .args(["run", "--plain", "--client", "kafka", "--nodes", "3"])
        .args(["--rate", "50", "--concurrency", "4", "--seed", "3"])
        .args(["--time-limit", "18", "--recovery-time-limit", "30"])
        .args(["--final-time-limit", "30"])
        .args(["--set", "min.insync.replicas=2"])
        .arg("--plan")
        .arg(&plan)
        .arg("--cluster")
        .arg(&cluster)
        .arg("--store")
        .arg(&store)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let transcript = format!(
        "exit {:?}\n--- stdout\n{stdout}\n--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(0), "{transcript}");
    assert!(stdout.contains("verdict: valid"), "{transcript}");
    assert!(
        transcript.contains("cluster up: n1=kafka://10.227.1.11:7300"),
        "{transcript}"
    );

    let run_dir = std::fs::canonicalize(store.join("latest")).unwrap();
    let history = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap();
    let mut client_ops = 0;
    let mut acked = 0;
    for line in history.lines() {
        let op: serde_json::Value = serde_json::from_str(line).unwrap();
        if op["process"].is_number() {
            if let Some(node) = op["node"].as_str() {
                assert_eq!(node, "kafka", "{line}");
                client_ops += 1;
            }
            acked += usize::from(op["type"] == "ok" && op["f"] == "send");
        }
        if op["process"] == "nemesis" && op["f"] == "start-pause" {
            // The leader was found through Kafka's metadata: a broker, not the controller.
            let paused = op["value"].to_string();
            assert!(paused.contains("\"n"), "{line}");
        }
    }
    assert!(client_ops > 0 && acked > 0, "{transcript}");
    // Samples come from Kafka's Metadata: leaders and ISRs, no offsets.
    let samples = std::fs::read_to_string(run_dir.join("samples.jsonl")).unwrap();
    let samples: Vec<serde_json::Value> = samples
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!samples.is_empty(), "{transcript}");
    for sample in &samples {
        assert_eq!(sample["role"], "leader", "{sample}");
        assert_eq!(sample["node"], sample["leader"], "{sample}");
        assert!(sample["high_watermark"].is_null(), "{sample}");
    }
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    assert_eq!(results["stats"]["lost_acknowledged"]["total"], 0);
    let n1_log = std::fs::read_to_string(run_dir.join("nodes/n1/broker.log")).unwrap_or_default();
    assert!(
        n1_log.contains("topic created by the controller") || n1_log.contains("broker started"),
        "the stand-in's log was collected:\n{n1_log}"
    );
}
