//! The ssh backend's Kafka kind (`kind = "kafka"`) against real sshd servers in network
//! namespaces. Needs root, `sshd`, `ssh-keygen` and `java` (the preflight looks for one);
//! prints a message and passes otherwise.
//!
//! The first test uses a stand-in release tarball's scripts (`launch = "scripts"`, the
//! default): everything the harness does on the hosts (preflight, properties, format, start,
//! pause, resume, kill, stop, partitions, log collection) goes over real ssh, counted by the
//! stand-ins. Its `kafka-storage.sh` records each format in the data directory and writes
//! `meta.properties`; its `kafka-server-start.sh` `exec`s this test binary (as the real one
//! `exec`s the JVM) as a TCP server on the node's first listener, answering
//! `node.id=K starts=N formats=M`. (No release tarball is at hand here, only the libraries
//! `tidewater kafka fetch` gathers.)
//!
//! The second runs Kafka's JVMs from that cache (`launch = "java"`): the wait for the
//! listeners, the JVM as its own process group, `tidewater clean --cluster` stopping a
//! paused JVM, and a Kafka that refuses its configuration failing the setup with its node
//! and its log. It skips when Kafka is not cached and cannot be fetched, unless
//! `TIDEWATER_REQUIRE_KAFKA` is set. Subnet 10.246.2.0/24, about 40 s.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use tidewater::cluster::local::sys;
use tidewater::cluster::ssh::{Control, KafkaSpec, Kind, SshCluster, SshNode, SshSpec};
use tidewater::cluster::Cluster;

mod net_probe;
use net_probe::probe;
mod ssh_hosts;
use ssh_hosts::{make_keys, start_hosts, SSHD};
mod run_support;
use tidewater::cluster::ssh::Launch;

const SETTLE_MAX: Duration = Duration::from_secs(20);

/// Not a test: the stand-in Kafka server the stand-in `kafka-server-start.sh` runs.
#[test]
#[ignore = "helper process for the other tests"]
fn helper_kafka() {
    use std::io::Write;
    let Ok(props) = std::env::var("TW_KAFKA_PROPS") else {
        return;
    };
    let text = std::fs::read_to_string(&props).unwrap();
    let value = |name: &str| -> String {
        text.lines()
            .rev()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} in {props}"))
            .to_string()
    };
    let data = Path::new(&value("log.dirs")).to_path_buf();
    let count = |file: &str| {
        std::fs::read_to_string(data.join(file))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let mut starts = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(data.join("starts"))
        .unwrap();
    writeln!(starts, "start").unwrap();
    let answer = format!(
        "node.id={} starts={} formats={}",
        value("node.id"),
        count("starts"),
        count("formats")
    );
    let listener = value("listeners");
    let first = listener.split(',').next().unwrap();
    let addr = first.split_once("://").unwrap().1;
    let listener = std::net::TcpListener::bind(addr).unwrap();
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        let _ = writeln!(conn, "{answer}");
    }
}

fn usable() -> bool {
    let tools = Path::new(SSHD).exists()
        && Command::new("ssh-keygen").arg("-?").output().is_ok()
        && Command::new("ssh").arg("-V").output().is_ok()
        && Command::new("java").arg("-version").output().is_ok();
    if sys::is_root() && tools {
        return true;
    }
    eprintln!("skipped: needs root, sshd, ssh, ssh-keygen and java");
    false
}

fn settle(ns: Option<String>, addr: SocketAddr, want: Option<&str>) {
    net_probe::settle_within(ns, addr, want, SETTLE_MAX);
}

/// Writes the stand-in release under `home/bin`.
fn stand_in_release(home: &Path) {
    let exe = std::env::current_exe().unwrap();
    let write = |name: &str, body: String| {
        let path = home.join("bin").join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    // format -t ID -c PROPS --ignore-formatted
    write(
        "kafka-storage.sh",
        "#!/bin/sh\nd=$(sed -n 's/^log.dirs=//p' \"$5\")\nmkdir -p \"$d\"\n\
         echo \"$1 $3\" >> \"$d/formats\"\necho \"cluster.id=$3\" > \"$d/meta.properties\"\n\
         echo \"Formatting $d with metadata.version 3.9-IV0.\"\n"
            .into(),
    );
    write(
        "kafka-server-start.sh",
        format!(
            "#!/bin/sh\nmkdir -p \"$LOG_DIR\"\necho \"[KafkaRaftServer] started with $1\" >> \
             \"$LOG_DIR/server.log\"\nexec env TW_KAFKA_PROPS=\"$1\" {} helper_kafka --exact \
             --ignored --nocapture --skip \"$1\"\n",
            exe.display()
        ),
    );
}

#[test]
fn the_kafka_kind_formats_starts_signals_and_partitions_kafka_over_ssh() {
    if !usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let keys = make_keys(dir.path());
    let hosts = start_hosts(dir.path(), &keys, "tk1", "10.224.1.0/24", 2);
    let home = dir.path().join("kafka");
    stand_in_release(&home);
    let remote_dir = dir.path().join("remote").join("{node}");
    let spec = SshSpec {
        kind: Kind::Kafka,
        kafka: KafkaSpec {
            home: home.display().to_string(),
            port: 7200,
            controller_port: 7201,
            ..KafkaSpec::default()
        },
        client_ip: Some(hosts.spec().bridge_ip()),
        ssh_options: vec![
            "-i".into(),
            keys.join("client").display().to_string(),
            "-o".into(),
            "StrictHostKeyChecking=no".into(),
            "-o".into(),
            "UserKnownHostsFile=/dev/null".into(),
            "-o".into(),
            "LogLevel=ERROR".into(),
        ],
        sudo: false,
        control: Control::Process,
        remote_dir: remote_dir.display().to_string(),
        stop_timeout_s: 3,
        nodes: hosts
            .nodes()
            .iter()
            .map(|n| SshNode::new(n.name.clone(), format!("root@{}", n.ip), n.ip))
            .collect(),
        ..SshSpec::default()
    };
    let settings = vec![
        ("min.insync.replicas".to_string(), "2".to_string()),
        ("flush.messages".to_string(), "1".to_string()),
    ];
    let deadline = Instant::now() + SETTLE_MAX;
    let cluster = loop {
        match SshCluster::create(spec.clone(), settings.clone()) {
            Ok(c) => break c,
            Err(e) if Instant::now() < deadline => {
                eprintln!("waiting for sshd: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("{e}"),
        }
    };
    cluster.start_all().unwrap();
    let bootstrap = cluster.kafka_bootstrap();
    let n1 = bootstrap["n1"];
    assert_eq!(
        n1.to_string(),
        format!("{}:7200", cluster.node("n1").unwrap().ip)
    );
    let c1: SocketAddr = format!("{}:7201", cluster.node("c1").unwrap().ip)
        .parse()
        .unwrap();
    let ns = |n: &str| Some(hosts.netns(n).unwrap());
    settle(None, c1, Some("node.id=0 starts=1 formats=1"));
    settle(None, n1, Some("node.id=1 starts=1 formats=1"));
    settle(ns("n2"), n1, Some("node.id=1 starts=1 formats=1"));

    cluster.pause("n1").unwrap();
    assert!(cluster.is_running("n1"), "a paused JVM is alive");
    assert!(probe(None, n1).is_err(), "a paused node must not answer");
    cluster.resume("n1").unwrap();
    settle(None, n1, Some("node.id=1 starts=1 formats=1"));
    cluster.kill("n1").unwrap();
    assert!(!cluster.is_running("n1"));
    settle(None, n1, None);
    cluster.start("n1").unwrap();
    settle(None, n1, Some("node.id=1 starts=2 formats=1"));
    cluster.stop("n1").unwrap();
    assert!(!cluster.is_running("n1"));
    cluster.wipe("n1").unwrap();
    cluster.start("n1").unwrap();
    settle(None, n1, Some("node.id=1 starts=1 formats=1"));

    let grudge = tidewater::net::isolate(&cluster.node_names(), &["n1".to_string()]);
    cluster.net().partition(&grudge).unwrap();
    settle(ns("n2"), n1, None);
    cluster.net().heal().unwrap();
    settle(ns("n2"), n1, Some("node.id=1 starts=1 formats=1"));

    let logs = dir.path().join("logs");
    cluster.collect_logs("n1", &logs).unwrap();
    let read = |f: &str| std::fs::read_to_string(logs.join(f)).unwrap();
    let properties = read("server.properties");
    for line in [
        "process.roles=broker",
        "node.id=1",
        "min.insync.replicas=2",
        "log.flush.interval.messages=1",
    ] {
        assert!(
            properties.lines().any(|l| l == line),
            "{line}:\n{properties}"
        );
    }
    let broker_log = read("broker.log");
    assert_eq!(
        broker_log.matches("=== tidewater: starting ===").count(),
        3,
        "{broker_log}"
    );
    assert_eq!(broker_log.matches("Formatting").count(), 2, "{broker_log}");
    assert_eq!(read("server.log").matches("started with").count(), 3);

    // `tidewater clean --cluster FILE` stops a Kafka that a lost harness left running.
    let file = dir.path().join("kafka-cluster.toml");
    std::fs::write(&file, toml::to_string(&spec).unwrap()).unwrap();
    assert!(cluster.is_running("n2"));
    tidewater::cluster_file::clean_cluster_file(&file).unwrap();
    assert!(!cluster.is_running("n2"));
    settle(None, n1, None);

    cluster.teardown().unwrap();
    settle(None, c1, None);
    assert!(!cluster.is_running("n2"));
    drop(cluster);
    hosts.teardown().unwrap();
    assert!(!sys::netns_exists("tw-tk1-n1"));
}

/// The ssh options of the test hosts: the generated key, no host key checks.
fn test_ssh_options(keys: &Path) -> Vec<String> {
    [
        "-i",
        &keys.join("client").display().to_string(),
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Processes on this machine whose command line names `dir` (the hosts' Kafka JVMs).
fn processes_naming(dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline
                .contains(&dir)
                .then(|| format!("{}: {cmdline}", entry.file_name().to_string_lossy()))
        })
        .collect()
}

/// The state letter of process `pid` (`T` when stopped) and its process group.
fn state_and_group(pid: i32) -> (char, i32) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit(") ").next().unwrap().split(' ').collect();
    (
        fields[0].chars().next().unwrap(),
        fields[2].parse().unwrap(),
    )
}

#[test]
fn kafkas_jvms_over_ssh_come_up_pause_and_are_cleaned_and_a_refused_config_names_its_node() {
    if !usable() || !run_support::kafka_available("ssh_kafka") {
        return;
    }
    let fetched = run_support::tidewater(&["kafka", "fetch"]);
    let home = fetched.stdout.trim().to_string();
    let dir = tempfile::tempdir().unwrap();
    let keys = make_keys(dir.path());
    let hosts = start_hosts(dir.path(), &keys, "tkc", "10.246.2.0/24", 1);
    let remote = dir.path().join("remote");
    let spec = SshSpec {
        kind: Kind::Kafka,
        kafka: KafkaSpec {
            home: home.clone(),
            launch: Launch::Java,
            port: 7310,
            controller_port: 7311,
            ..KafkaSpec::default()
        },
        client_ip: Some(hosts.spec().bridge_ip()),
        ssh_options: test_ssh_options(&keys),
        sudo: false,
        control: Control::Process,
        remote_dir: remote.join("{node}").display().to_string(),
        stop_timeout_s: 10,
        nodes: hosts
            .nodes()
            .iter()
            .map(|n| SshNode::new(n.name.clone(), format!("root@{}", n.ip), n.ip))
            .collect(),
        ..SshSpec::default()
    };
    let deadline = Instant::now() + SETTLE_MAX;
    let cluster = loop {
        match SshCluster::create(spec.clone(), vec![]) {
            Ok(c) => break c,
            Err(e) if Instant::now() < deadline => {
                eprintln!("waiting for sshd: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("{e}"),
        }
    };
    // A JVM gone before it listens fails the wait, naming its node.
    cluster.start_all().unwrap();
    cluster.kill("n1").unwrap();
    let e = cluster
        .wait_kafka_listening(tidewater::kafka::START_TIME_LIMIT)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "Kafka on node n1 (root@10.246.2.11) exited before listening on 10.246.2.11:7310; \
             last lines of its broker.log:\n  "
        ),
        "{e}"
    );
    cluster.start("n1").unwrap();
    let started = Instant::now();
    cluster
        .wait_kafka_listening(tidewater::kafka::START_TIME_LIMIT)
        .unwrap();
    eprintln!(
        "ssh_kafka: Kafka listening {:?} after the start",
        started.elapsed()
    );
    assert!(cluster.is_running("n1"));

    // The pid file names the JVM itself, the leader of its own process group.
    let pid: i32 = std::fs::read_to_string(remote.join("n1/kafka.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(cmdline.contains(" kafka.Kafka "), "{cmdline}");
    assert!(cmdline.contains(&format!("-cp {home}/libs/*")), "{cmdline}");
    assert_eq!(state_and_group(pid).1, pid, "its own process group");
    cluster.pause("n1").unwrap();
    let stopped_by = Instant::now() + SETTLE_MAX;
    while state_and_group(pid).0 != 'T' && Instant::now() < stopped_by {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(state_and_group(pid).0, 'T', "paused");

    // A harness lost with a JVM paused: `tidewater clean --cluster FILE` stops both JVMs.
    let file = dir.path().join("kafka-cluster.toml");
    std::fs::write(&file, toml::to_string(&spec).unwrap()).unwrap();
    tidewater::cluster_file::clean_cluster_file(&file).unwrap();
    assert!(!cluster.is_running("n1") && !cluster.is_running("c1"));
    assert_eq!(processes_naming(&remote), Vec::<String>::new());
    let log = std::fs::read_to_string(remote.join("n1/broker.log")).unwrap();
    assert!(log.contains("Kafka Server started"), "{log}");
    cluster.teardown().unwrap();
    drop(cluster);

    // A configuration Kafka refuses (its format checks it): the setup fails naming the first
    // node, with Kafka's reason from its log (not the stack trace's frames), and starts none.
    let mut refused = spec.clone();
    refused
        .kafka
        .properties
        .insert("log.segment.bytes".into(), "1".into());
    let cluster = SshCluster::create(refused, vec![]).unwrap();
    let e = cluster.start_all().unwrap_err().to_string();
    assert!(
        e.contains("Kafka on node c1 (root@10.246.2.10) did not start: "),
        "{e}"
    );
    assert!(e.contains("kafka-storage.sh format failed"), "{e}");
    assert!(
        e.contains("ConfigException: Invalid value 1 for configuration log.segment.bytes"),
        "Kafka's reason quoted: {e}"
    );
    assert!(!e.contains("\tat "), "no stack frames: {e}");
    assert!(!cluster.is_running("n1"), "the brokers were not started");
    cluster.teardown().unwrap();
    drop(cluster);
    assert_eq!(processes_naming(&remote), Vec::<String>::new());
    hosts.teardown().unwrap();
    assert!(!sys::netns_exists("tw-tkc-n1"));
}
