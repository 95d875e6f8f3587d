//! The ssh backend against real sshd servers: a local cluster whose nodes run `sshd` stands in
//! for a set of hosts, and an ssh cluster (process control, iptables) drives helper servers
//! on them. Needs root, `sshd` and `ssh-keygen`; prints a message and passes otherwise.
//!
//! The helper "broker" is a shell script that reads `listeners` and `log.dirs` from the
//! broker's usual `--set` arguments and runs this test binary as a TCP server answering
//! `starts=N` (N counts starts recorded in its data directory).

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use tidewater::cluster::local::sys;
use tidewater::cluster::ssh::{Control, SshCluster, SshNode, SshSpec};
use tidewater::cluster::Cluster;

mod net_probe;
use net_probe::probe;
mod ssh_hosts;
use ssh_hosts::{make_keys, start_hosts, SSHD};

const SETTLE_MAX: Duration = Duration::from_secs(20);

/// Not a test: the helper server the script runs.
#[test]
#[ignore = "helper process for the other tests"]
fn helper_node() {
    use std::io::Write;
    if std::env::var("TW_HELPER_MODE").as_deref() != Ok("server") {
        return;
    }
    let data = std::path::PathBuf::from(std::env::var("TW_DATA").unwrap());
    std::fs::create_dir_all(&data).unwrap();
    let starts_path = data.join("starts");
    let mut starts = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&starts_path)
        .unwrap();
    writeln!(starts, "start").unwrap();
    let n = std::fs::read_to_string(&starts_path)
        .unwrap()
        .lines()
        .count();
    let listener = std::net::TcpListener::bind(std::env::var("TW_LISTEN").unwrap()).unwrap();
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        let _ = writeln!(conn, "starts={n}");
    }
}

fn usable() -> bool {
    let tools = Path::new(SSHD).exists()
        && Command::new("ssh-keygen").arg("-?").output().is_ok()
        && Command::new("ssh").arg("-V").output().is_ok();
    if sys::is_root() && tools {
        return true;
    }
    eprintln!("skipped: needs root, sshd, ssh and ssh-keygen");
    false
}

/// Probes until the answer matches `want` within [`SETTLE_MAX`] (see `net_probe`).
fn settle(ns: Option<String>, addr: SocketAddr, want: Option<&str>) {
    net_probe::settle_within(ns, addr, want, SETTLE_MAX);
}

#[test]
fn the_ssh_backend_controls_processes_and_partitions_hosts() {
    if !usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let keys = make_keys(dir.path());
    // The "hosts": namespaces running sshd on port 22 of their own address.
    let hosts = start_hosts(dir.path(), &keys, "ts1", "10.213.11.0/24", 2);

    // The helper "broker" the ssh backend starts on each host.
    let script = dir.path().join("fake-broker.sh");
    let exe = std::env::current_exe().unwrap();
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in listeners=http://*) L=\"${{a#listeners=http://}}\";; \
             log.dirs=*) D=\"${{a#log.dirs=}}\";; esac; done\n\
             exec env TW_HELPER_MODE=server TW_LISTEN=\"$L\" TW_DATA=\"$D\" {} helper_node --exact --ignored --nocapture\n",
            exe.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();

    let remote_dir = dir.path().join("remote").join("{node}");
    let spec = SshSpec {
        http_port: 7100,
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
        binary: script.display().to_string(),
        unit: String::new(),
        config_path: String::new(),
        stop_timeout_s: 3,
        wipe_on_setup: true,
        nodes: hosts
            .nodes()
            .iter()
            .map(|n| SshNode::new(n.name.clone(), format!("root@{}", n.ip), n.ip))
            .collect(),
        ..SshSpec::default()
    };
    // sshd may take a moment to listen.
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
    cluster.start_all().unwrap();
    let addr = |n: &str| cluster.node(n).unwrap().http_addr();
    let ns = |n: &str| Some(hosts.netns(n).unwrap());
    settle(None, addr("n1"), Some("starts=1"));
    settle(ns("n2"), addr("n1"), Some("starts=1"));

    cluster.pause("n1").unwrap();
    assert!(
        probe(None, addr("n1")).is_err(),
        "a paused node must not answer"
    );
    cluster.resume("n1").unwrap();
    settle(None, addr("n1"), Some("starts=1"));
    cluster.kill("n1").unwrap();
    assert!(!cluster.is_running("n1"));
    settle(None, addr("n1"), None);
    cluster.start("n1").unwrap();
    settle(None, addr("n1"), Some("starts=2"));

    let grudge = tidewater::net::isolate(&cluster.node_names(), &["n1".to_string()]);
    cluster.net().partition(&grudge).unwrap();
    settle(ns("n2"), addr("n1"), None);
    settle(None, addr("n1"), Some("starts=2"));
    cluster.net().heal().unwrap();
    settle(ns("n2"), addr("n1"), Some("starts=2"));

    let logs = dir.path().join("logs");
    cluster.collect_logs("n1", &logs).unwrap();
    let log = std::fs::read_to_string(logs.join("broker.log")).unwrap();
    assert_eq!(
        log.matches("=== tidewater: starting ===").count(),
        2,
        "{log}"
    );

    cluster.teardown().unwrap();
    settle(None, addr("n1"), None);
    assert!(!cluster.is_running("n2"));
    drop(cluster);
    hosts.teardown().unwrap();
    assert!(!sys::netns_exists("tw-ts1-n1"));
}
