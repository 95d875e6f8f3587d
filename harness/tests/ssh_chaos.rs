//! A short chaos run through the ssh backend, end to end: `tidewater run --cluster FILE`
//! against "hosts" that are network namespaces on this machine, each running its own `sshd`,
//! reached as root with a key this test generates. A fault plan kills, pauses, partitions and
//! cuts clients off; the run must end with a verdict and every node's log, and leave nothing
//! behind on the hosts: no Tidewater iptables rules, no paused or stray brokers.
//!
//! Then two interrupted runs on the same hosts: SIGINT in the middle of the main phase must
//! leave nothing behind either (the signal guard tears the ssh cluster down), and after a
//! SIGKILL, which no handler sees, `tidewater clean --cluster` must remove what is left.
//!
//! Needs root, `sshd`, `ssh`, `ssh-keygen` and `iptables`; prints a message and passes
//! otherwise. Takes about 90 s: an 18 s main phase with setup, recovery, final reads and
//! teardown, then two short interrupted runs.
//!
//! Names are unique to this test (run id `tsc`, subnet 10.213.31.0/24, remote paths under a
//! temporary directory, since the namespaces share this machine's file system).
//!
//! A second test cuts power through the ssh backend (lossyfs mounted on the hosts), then
//! interrupts two more runs (SIGINT, SIGKILL and `tidewater clean --cluster`); it also needs
//! `/dev/fuse` (run id `tsp`, subnet 10.222.31.0/24, about 60 s).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};
use tidewater::cluster::local::{find_broker_binary, sys, LocalCluster};
use tidewater::cluster::Cluster;

mod run_support;
mod ssh_hosts;
use ssh_hosts::{make_keys, start_hosts, SSHD};

const RUN_ID: &str = "tsc";
const SUBNET: &str = "10.213.31.0/24";

/// Bound on waiting for a run to reach its main phase or to exit after a signal.
const RUN_WAIT_MAX: Duration = Duration::from_secs(180);

fn usable() -> bool {
    let runs = |tool: &str, arg: &str| Command::new(tool).arg(arg).output().is_ok();
    let tools = Path::new(SSHD).exists()
        && runs("ssh", "-V")
        && runs("ssh-keygen", "-?")
        && runs("iptables", "-V");
    if sys::is_root() && tools {
        return true;
    }
    eprintln!("skipped: needs root, sshd, ssh, ssh-keygen and iptables");
    false
}

/// The cluster file: process control (no systemd in a namespace), root without sudo, the
/// broker binary copied by the harness into each node's own directory.
fn cluster_file(dir: &Path, keys: &Path, hosts: &LocalCluster, broker: &Path) -> PathBuf {
    let remote = dir.join("remote");
    let mut text = format!(
        "user = \"root\"\n\
         identity_file = {key:?}\n\
         ssh_options = [\"-o\", \"StrictHostKeyChecking=no\", \"-o\", \
         \"UserKnownHostsFile=/dev/null\", \"-o\", \"LogLevel=ERROR\"]\n\
         sudo = false\n\
         control = \"process\"\n\
         remote_dir = \"{remote}/{{node}}\"\n\
         binary = \"{remote}/{{node}}/bin/tidewater-broker\"\n\
         install_binary = {broker:?}\n\
         stop_timeout_s = 5\n\
         connect_timeout_s = 3\n",
        key = keys.join("client").display().to_string(),
        remote = remote.display(),
        broker = broker.display().to_string(),
    );
    for node in hosts.nodes() {
        text.push_str(&format!(
            "[[node]]\nname = \"{n}\"\nhost = \"{ip}\"\nip = \"{ip}\"\n",
            n = node.name,
            ip = node.ip
        ));
    }
    let path = dir.join("cluster.toml");
    std::fs::write(&path, text).unwrap();
    path
}

const PLAN: &str = r#"
name = "ssh-chaos"
description = "Every fault kind once, through the ssh backend."

[[step]]
at_s = 2
action = "kill"
target = "n1"

[[step]]
at_s = 4
action = "start"
target = "n1"

[[step]]
at_s = 6
action = "pause"
target = "n2"

[[step]]
at_s = 8
action = "resume"
target = "n2"

[[step]]
at_s = 9
action = "isolate"
target = "n3"

[[step]]
at_s = 12
action = "heal"

[[step]]
at_s = 13
action = "cut-clients"
target = "n1"

[[step]]
at_s = 15
action = "heal"
"#;

/// What is left of the run on a host: Tidewater's iptables rules, broker processes, stopped
/// (paused) processes.
fn leftovers(ns: &str) -> Vec<String> {
    let mut found = vec![];
    let rules = Command::new("ip")
        .args(["netns", "exec", ns, "iptables", "-w", "-S"])
        .output()
        .unwrap();
    let rules = String::from_utf8_lossy(&rules.stdout);
    found.extend(
        rules
            .lines()
            .filter(|l| l.contains("TIDEWATER"))
            .map(|l| format!("{ns}: rule {l}")),
    );
    for pid in sys::netns_pids(ns).unwrap() {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
        if cmdline.contains("tidewater-broker") {
            found.push(format!("{ns}: broker process {pid}: {cmdline}"));
        }
        if matches!(state, Some('T') | Some('t')) {
            found.push(format!("{ns}: stopped process {pid}: {cmdline}"));
        }
    }
    found
}

/// A `tidewater run --cluster` in the background, its stderr lines on a channel.
struct Run {
    child: Child,
    lines: Receiver<String>,
    /// Every stderr line so far, for failure messages.
    seen: Vec<String>,
}

impl Run {
    fn start(args: &[String]) -> Run {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tidewater"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Run {
            child,
            lines,
            seen: vec![],
        }
    }

    /// Waits (bounded) for a stderr line containing `text`.
    fn wait_for(&mut self, text: &str) {
        let deadline = Instant::now() + RUN_WAIT_MAX;
        while Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(line) => {
                    let found = line.contains(text);
                    self.seen.push(line);
                    if found {
                        return;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        let _ = self.child.kill();
        panic!("no {text:?} from tidewater:\n{}", self.seen.join("\n"));
    }

    fn signal(&self, signal: i32) {
        // SAFETY: signals our own child process.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, signal) }, 0);
    }

    /// Waits (bounded) for the exit; returns the exit code (None if killed by a signal),
    /// stdout, and the whole stderr.
    fn finish(mut self) -> (Option<i32>, String, String) {
        let deadline = Instant::now() + RUN_WAIT_MAX;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("tidewater did not exit:\n{}", self.seen.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut stdout = String::new();
        use std::io::Read;
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        self.seen.extend(self.lines.try_iter());
        (status.code(), stdout, self.seen.join("\n"))
    }
}

/// The ssh master connections a harness process left running (their command lines name its
/// private control directory, `tw-ssh-<pid>-<n>`).
fn ssh_masters_of(pid: u32) -> Vec<String> {
    let marker = format!("tw-ssh-{pid}-");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.starts_with("ssh") && c.contains(&marker))
        .collect()
}

fn everything_left(hosts: &LocalCluster) -> Vec<String> {
    hosts
        .node_names()
        .iter()
        .flat_map(|n| leftovers(&hosts.netns(n).unwrap()))
        .collect()
}

fn run_args(cluster: &Path, store: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "--plain",
        "--nodes",
        "3",
        "--rate",
        "50",
        "--concurrency",
        "4",
        "--acks",
        "all",
        "--set",
        "min.insync.replicas=2",
    ]
    .iter()
    .chain(extra)
    .map(|s| s.to_string())
    .collect();
    args.extend(["--cluster".into(), cluster.display().to_string()]);
    args.extend(["--store".into(), store.display().to_string()]);
    args
}

#[test]
fn chaos_runs_over_ssh_end_with_a_verdict_and_leave_nothing_behind() {
    if !usable() {
        return;
    }
    let broker = find_broker_binary().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let keys = make_keys(dir.path());

    // LocalCluster tears the hosts down when dropped, also when an assertion fails.
    let hosts = start_hosts(dir.path(), &keys, RUN_ID, SUBNET, 3);
    let cluster = cluster_file(dir.path(), &keys, &hosts, &broker);
    let plan = dir.path().join("ssh-chaos.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let store = dir.path().join("store");

    // 1. A whole run with every fault kind.
    let plan_arg = plan.display().to_string();
    let run = Run::start(&run_args(
        &cluster,
        &store,
        &[
            "--seed",
            "5",
            "--time-limit",
            "18",
            "--plan",
            &plan_arg,
            "--recovery-time-limit",
            "30",
            "--final-time-limit",
            "30",
        ],
    ));
    let pid = run.child.id();
    let (code, stdout, stderr) = run.finish();
    let transcript = format!("exit {code:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    let left = everything_left(&hosts);
    assert!(left.is_empty(), "left behind: {left:#?}\n{transcript}");
    assert_eq!(
        ssh_masters_of(pid),
        Vec::<String>::new(),
        "ssh masters left"
    );
    assert!(
        matches!(code, Some(0..=2)),
        "a verdict, not a harness failure:\n{transcript}"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("verdict: ")),
        "{transcript}"
    );
    let run_dir = std::fs::canonicalize(store.join("latest")).unwrap();
    for node in ["c1", "n1", "n2", "n3"] {
        let log = run_dir.join("nodes").join(node).join("broker.log");
        let text = std::fs::read_to_string(&log)
            .unwrap_or_else(|e| panic!("{}: {e}\n{transcript}", log.display()));
        let starts = text.matches("=== tidewater: starting ===").count();
        let expected = if node == "n1" { 2 } else { 1 };
        assert_eq!(starts, expected, "starts of {node} in its log:\n{text}");
    }
    let history = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap();
    for f in [
        "start-kill",
        "start-pause",
        "stop-pause",
        "start-partition",
        "stop-partition",
    ] {
        assert!(
            history.contains(&format!("\"f\":\"{f}\"")),
            "nemesis op {f} in the history"
        );
    }
    let ok_client_ops = history
        .lines()
        .filter(|l| l.contains("\"type\":\"ok\"") && !l.contains("\"process\":\"nemesis\""))
        .count();
    assert!(
        ok_client_ops > 0,
        "the workload reached the brokers over the bridge"
    );

    // 2. SIGINT during the main phase, faults coming every second: the signal guard heals,
    //    resumes and stops everything on the hosts.
    let faults = [
        "--seed",
        "6",
        "--time-limit",
        "60",
        "--nemesis",
        "kill,pause,partition",
        "--nemesis-interval",
        "1",
    ];
    let mut run = Run::start(&run_args(&cluster, &store, &faults));
    run.wait_for("phase main");
    std::thread::sleep(Duration::from_secs(4));
    run.signal(libc::SIGINT);
    let pid = run.child.id();
    let (code, _, stderr) = run.finish();
    assert_eq!(
        ssh_masters_of(pid),
        Vec::<String>::new(),
        "ssh masters left"
    );
    let left = everything_left(&hosts);
    assert!(left.is_empty(), "left after SIGINT: {left:#?}\n{stderr}");
    assert_ne!(
        code,
        Some(0),
        "an interrupted run is not a valid one:\n{stderr}"
    );

    // 3. SIGKILL: brokers stay behind (setsid), then the cluster file's clean removes them.
    let mut run = Run::start(&run_args(&cluster, &store, &faults));
    run.wait_for("phase main");
    std::thread::sleep(Duration::from_secs(4));
    run.signal(libc::SIGKILL);
    let (code, _, stderr) = run.finish();
    assert_eq!(code, None, "killed by the signal:\n{stderr}");
    let left = everything_left(&hosts);
    assert!(
        left.iter().any(|l| l.contains("broker process")),
        "a SIGKILLed harness leaves its brokers running: {left:#?}"
    );
    let clean = Command::new(env!("CARGO_BIN_EXE_tidewater"))
        .arg("clean")
        .arg("--cluster")
        .arg(&cluster)
        .output()
        .unwrap();
    assert!(
        clean.status.success(),
        "tidewater clean --cluster: {}",
        String::from_utf8_lossy(&clean.stderr)
    );
    let left = everything_left(&hosts);
    assert!(left.is_empty(), "left after clean: {left:#?}");

    hosts.teardown().unwrap();
}

/// Power loss through the ssh backend: the harness mounts lossyfs (`tidewater lossyfs mount`,
/// started over ssh like the brokers) over every host's data directory, and `power-loss-leader`
/// with min.insync.replicas=1 loses what only the lone leader held. The figure printed and
/// stored equals the count from the history; afterwards no mount and no lossyfs process is
/// left on the hosts, nor after SIGINT, nor after SIGKILL and `tidewater clean --cluster`.
/// Run id `tsp`, subnet 10.222.31.0/24. About 60 s.
#[test]
fn power_loss_over_ssh_loses_what_only_the_leader_held_and_leaves_no_mount() {
    if !usable() || !Path::new("/dev/fuse").exists() {
        return;
    }
    let broker = find_broker_binary().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let keys = make_keys(dir.path());
    let hosts = start_hosts(dir.path(), &keys, "tsp", "10.222.31.0/24", 3);
    let cluster = cluster_file(dir.path(), &keys, &hosts, &broker);
    // The hosts share this machine's file system: the harness binary serves lossyfs there.
    let mut text = std::fs::read_to_string(&cluster).unwrap();
    text = text.replacen(
        "stop_timeout_s",
        &format!(
            "lossyfs_binary = {:?}\nstop_timeout_s",
            env!("CARGO_BIN_EXE_tidewater")
        ),
        1,
    );
    std::fs::write(&cluster, text).unwrap();
    let store = dir.path().join("store");
    let args: Vec<String> = [
        "run",
        "--plain",
        "--nodes",
        "3",
        "--rate",
        "50",
        "--concurrency",
        "4",
        "--acks",
        "all",
        "--set",
        "min.insync.replicas=1",
        "--seed",
        "1",
        "--time-limit",
        "30",
        "--plan",
        "power-loss-leader",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        "--cluster".into(),
        cluster.display().to_string(),
        "--store".into(),
        store.display().to_string(),
    ])
    .collect();
    let remote = dir.path().join("remote").display().to_string();
    // Brokers, paused processes, rules, lossyfs processes and mounts left on the hosts.
    let all_left = || {
        let mut left = everything_left(&hosts);
        for node in hosts.node_names() {
            let ns = hosts.netns(&node).unwrap();
            for pid in sys::netns_pids(&ns).unwrap() {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                if cmdline.contains("lossyfs mount") {
                    left.push(format!("{ns}: lossyfs process {pid}: {cmdline}"));
                }
            }
        }
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        left.extend(
            mounts
                .lines()
                .filter(|l| l.contains(&remote))
                .map(|l| format!("mount {l}")),
        );
        left
    };

    let run = Run::start(&args);
    let pid = run.child.id();
    let (code, stdout, stderr) = run.finish();
    let transcript = format!("exit {code:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    let left = all_left();
    assert!(left.is_empty(), "left behind: {left:#?}\n{transcript}");
    assert_eq!(
        ssh_masters_of(pid),
        Vec::<String>::new(),
        "ssh masters left"
    );

    assert_eq!(code, Some(1), "data lost, a fact:\n{transcript}");
    let run_dir = std::fs::canonicalize(store.join("latest")).unwrap();
    let history = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap();
    assert!(
        history.contains("\"f\":\"start-power-loss\""),
        "{transcript}"
    );
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("results.json")).unwrap()).unwrap();
    let (acked, absent) = run_support::acked_absent_from_final_reads(&run_dir);
    assert!(absent > 0, "the power loss took nothing\n{transcript}");
    assert_eq!(results["stats"]["lost_acknowledged"]["total"], absent);
    assert!(
        stdout.contains(&format!(
            "DATA LOST: {absent} of {acked} acknowledged writes"
        )),
        "{transcript}"
    );
    assert_eq!(results["promise"], "kept", "{}", results["promise_reason"]);
    // The durable side of n1's data is what the broker fsynced; the view is unmounted.
    assert!(dir.path().join("remote/n1/data.durable").is_dir());

    // SIGINT in the main phase: the signal guard unmounts, as it stops the brokers.
    let mut run = Run::start(&args);
    run.wait_for("phase main");
    run.signal(libc::SIGINT);
    let (_, _, stderr) = run.finish();
    let left = all_left();
    assert!(left.is_empty(), "left after SIGINT: {left:#?}\n{stderr}");

    // SIGKILL: brokers and mounts stay; the cluster file's clean removes them.
    let mut run = Run::start(&args);
    run.wait_for("phase main");
    run.signal(libc::SIGKILL);
    let (code, _, stderr) = run.finish();
    assert_eq!(code, None, "killed by the signal:\n{stderr}");
    assert!(
        all_left().iter().any(|l| l.starts_with("mount ")),
        "a SIGKILLed harness leaves its mounts: {:#?}",
        all_left()
    );
    let clean = Command::new(env!("CARGO_BIN_EXE_tidewater"))
        .arg("clean")
        .arg("--cluster")
        .arg(&cluster)
        .output()
        .unwrap();
    assert!(
        clean.status.success(),
        "tidewater clean --cluster: {}",
        String::from_utf8_lossy(&clean.stderr)
    );
    let left = all_left();
    assert!(left.is_empty(), "left after clean: {left:#?}");

    hosts.teardown().unwrap();
}
