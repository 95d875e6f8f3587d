//! The local backend against real namespaces, processes and packet filters (needs root; each
//! test prints a message and passes without doing anything otherwise).
//!
//! Nodes run this test binary itself in "helper" mode: a TCP server that appends a line to
//! `data/starts` when it starts (fsyncing the file and the directory) and answers every
//! connection with `starts=N`, so a test sees from outside whether a node answers, and whether
//! its data survived a restart. It also appends a line to `data/unsynced-starts` without any
//! fsync, which a power loss takes.
//!
//! Each test uses its own run id and subnet (10.213.X.0/24), so they run in parallel.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidewater::cluster::local::{sys, LocalCluster, LocalSpec, NodeProgram};
use tidewater::cluster::{Cluster, NodeInfo};
use tidewater::net as grudges;
use tidewater::net::rules::Method;

mod net_probe;
use net_probe::probe;

/// Bound for waiting until a node answers (or stops answering).
const SETTLE_MAX: Duration = Duration::from_secs(15);

fn root() -> bool {
    if sys::is_root() {
        return true;
    }
    eprintln!("skipped: the local cluster tests need root (network namespaces)");
    false
}

/// The program of every node: this test binary, running `helper_node`.
fn helper_program() -> NodeProgram {
    NodeProgram::Custom(Arc::new(|node: &NodeInfo, data: &Path| {
        let exe = std::env::current_exe().unwrap();
        vec![
            "env".into(),
            "TW_HELPER_MODE=server".into(),
            format!("TW_LISTEN={}", node.http_addr()),
            format!("TW_DATA={}", data.display()),
            exe.display().to_string(),
            "helper_node".into(),
            "--exact".into(),
            "--ignored".into(),
            "--nocapture".into(),
        ]
    }))
}

/// A spec for this test's own run id, after removing what an earlier, crashed run of the same
/// test may have left.
fn spec(run_id: &str, subnet: &str, brokers: usize, dir: &Path) -> LocalSpec {
    let state_dir = Path::new(tidewater::cluster::local::state::DEFAULT_STATE_DIR);
    if state_dir.join(format!("{run_id}.json")).exists()
        && std::env::var_os("TW_HELPER_MODE").is_none()
    {
        tidewater::clean::clean_run(state_dir, run_id).unwrap();
    }
    raw_spec(run_id, subnet, brokers, dir)
}

fn raw_spec(run_id: &str, subnet: &str, brokers: usize, dir: &Path) -> LocalSpec {
    let mut spec = LocalSpec::new(run_id, dir, helper_program());
    spec.subnet = LocalSpec::parse_subnet(subnet).unwrap();
    spec.brokers = brokers;
    spec.http_port = 7000;
    spec.stop_timeout_ms = 2_000;
    spec.lossy_fs = std::env::var_os("TW_LOSSY").is_some();
    spec
}

/// Not a test: the body of node processes and of the cluster-owning child process.
#[test]
#[ignore = "helper process for the other tests"]
fn helper_node() {
    match std::env::var("TW_HELPER_MODE").as_deref() {
        Ok("server") => serve(),
        Ok("cluster") => own_a_cluster_until_killed(),
        Ok("cluster-panic") => own_a_cluster_then_panic(),
        _ => {}
    }
}

fn serve() {
    use std::io::Write;
    let data = std::path::PathBuf::from(std::env::var("TW_DATA").unwrap());
    let starts_path = data.join("starts");
    let mut starts = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&starts_path)
        .unwrap();
    writeln!(starts, "start").unwrap();
    starts.sync_all().unwrap();
    std::fs::File::open(&data).unwrap().sync_all().unwrap();
    let mut unsynced = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(data.join("unsynced-starts"))
        .unwrap();
    writeln!(unsynced, "start").unwrap();
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

/// Builds a cluster, starts it, installs the signal guard, reports the node pids on stdout
/// and waits to be signalled or killed.
fn own_a_cluster_until_killed() {
    let id = std::env::var("TW_RUN_ID").unwrap();
    let subnet = std::env::var("TW_SUBNET").unwrap();
    let dir = std::env::var("TW_DIR").unwrap();
    let cluster = LocalCluster::create(raw_spec(&id, &subnet, 2, Path::new(&dir))).unwrap();
    tidewater::cluster::local::guard::install_signal_handlers().unwrap();
    cluster.start_all().unwrap();
    cluster.pause("n2").unwrap();
    let grudge = grudges::isolate(&cluster.node_names(), &["n1".to_string()]);
    cluster.net().partition(&grudge).unwrap();
    let pids: Vec<String> = cluster
        .node_names()
        .iter()
        .map(|n| cluster.pid(n).unwrap().unwrap().to_string())
        .collect();
    println!("READY {}", pids.join(" "));
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Builds and starts a cluster like [`own_a_cluster_until_killed`], then panics: unwinding
/// drops the cluster, which must tear it down.
fn own_a_cluster_then_panic() {
    let id = std::env::var("TW_RUN_ID").unwrap();
    let subnet = std::env::var("TW_SUBNET").unwrap();
    let dir = std::env::var("TW_DIR").unwrap();
    let cluster = LocalCluster::create(raw_spec(&id, &subnet, 2, Path::new(&dir))).unwrap();
    cluster.start_all().unwrap();
    cluster.pause("n1").unwrap();
    let pids: Vec<String> = cluster
        .node_names()
        .iter()
        .map(|n| cluster.pid(n).unwrap().unwrap().to_string())
        .collect();
    println!("READY {}", pids.join(" "));
    panic!("a bug in the harness");
}

/// Probes until the answer matches `want` within [`SETTLE_MAX`] (see `net_probe`).
fn settle(ns: Option<String>, addr: SocketAddr, want: Option<&str>) {
    net_probe::settle_within(ns, addr, want, SETTLE_MAX);
}

fn addr(cluster: &LocalCluster, node: &str) -> SocketAddr {
    cluster.node(node).unwrap().http_addr()
}

fn ns(cluster: &LocalCluster, node: &str) -> Option<String> {
    Some(cluster.netns(node).unwrap())
}

/// Nothing of run `id` is left: no namespace, link, record or live process.
fn assert_nothing_left(id: &str, state_dir: &Path, pids: &[i32]) {
    let namespaces = sys::run(&["ip", "netns", "list"]).unwrap();
    assert!(
        !namespaces.contains(&format!("tw-{id}-")),
        "namespaces left: {namespaces}"
    );
    let links: Vec<String> = std::fs::read_dir("/sys/class/net")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|l| l.starts_with(&format!("tw{id}")))
        .collect();
    assert!(links.is_empty(), "links left: {links:?}");
    assert!(
        !state_dir.join(format!("{id}.json")).exists(),
        "run record left"
    );
    for pid in pids {
        let deadline = Instant::now() + SETTLE_MAX;
        while node_alive(*pid) {
            assert!(Instant::now() < deadline, "process {pid} still alive");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Whether `pid` is a live helper node (a pid reused by anything else does not count).
fn node_alive(pid: i32) -> bool {
    let running = matches!(sys::process_state(pid), Some(s) if s != 'Z');
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let marker = b"TW_HELPER_MODE=server";
    running && environ.windows(marker.len()).any(|w| w == marker)
}

fn pids(cluster: &LocalCluster) -> Vec<i32> {
    cluster
        .node_names()
        .iter()
        .filter_map(|n| cluster.pid(n).unwrap())
        .collect()
}

#[test]
fn node_control_pause_kill_restart_and_wipe_are_visible_from_outside() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = spec("tc1", "10.213.1.0/24", 2, dir.path());
    let state_dir = spec.state_dir.clone();
    let cluster = LocalCluster::create(spec).unwrap();
    cluster.start_all().unwrap();
    let n1 = addr(&cluster, "n1");
    settle(None, n1, Some("starts=1"));
    settle(ns(&cluster, "n2"), n1, Some("starts=1"));

    cluster.pause("n1").unwrap();
    assert!(cluster.is_paused("n1") && cluster.is_running("n1"));
    let silent = probe(None, n1);
    assert!(silent.is_err(), "a paused node must not answer: {silent:?}");
    cluster.resume("n1").unwrap();
    settle(None, n1, Some("starts=1"));

    cluster.kill("n1").unwrap();
    assert!(!cluster.is_running("n1"));
    settle(None, n1, None);
    cluster.start("n1").unwrap();
    settle(None, n1, Some("starts=2"));

    cluster.restart("n1").unwrap();
    settle(None, n1, Some("starts=3"));
    assert!(
        cluster.wipe("n1").is_err(),
        "wiping a running node is refused"
    );
    cluster.stop("n1").unwrap();
    cluster.wipe("n1").unwrap();
    cluster.start("n1").unwrap();
    settle(None, n1, Some("starts=1"));
    // The other broker was never touched.
    settle(None, addr(&cluster, "n2"), Some("starts=1"));

    let logs = dir.path().join("collected");
    cluster.collect_logs("n1", &logs).unwrap();
    let mut log = String::new();
    std::fs::File::open(logs.join("broker.log"))
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    // First start, after kill, restart, after wipe.
    assert_eq!(log.matches("=== tidewater: starting").count(), 4, "{log}");

    let live = pids(&cluster);
    assert_eq!(live.len(), 3);
    drop(cluster);
    assert_nothing_left("tc1", &state_dir, &live);
}

/// Isolation and cutting clients off, checked by TCP probes between namespaces; heal restores
/// every path and leaves a foreign rule alone.
fn partition_test(method: Method, id: &str, subnet: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = spec(id, subnet, 3, dir.path());
    spec.net_method = Some(method);
    let state_dir = spec.state_dir.clone();
    let cluster = LocalCluster::create(spec).unwrap();
    assert_eq!(cluster.net_method(), method);
    cluster.start_all().unwrap();
    let (n1, n2, n3) = (
        addr(&cluster, "n1"),
        addr(&cluster, "n2"),
        addr(&cluster, "n3"),
    );
    for a in [n1, n2, n3] {
        settle(ns(&cluster, "c1"), a, Some("starts=1"));
    }
    // A rule that is not Tidewater's, which heal must leave in place.
    let n1_ns = cluster.netns("n1").unwrap();
    let foreign: &[&str] = match method {
        Method::Iptables => &[
            "iptables",
            "-w",
            "-A",
            "INPUT",
            "-s",
            "192.0.2.1/32",
            "-j",
            "DROP",
        ],
        Method::Iproute => &[
            "ip",
            "rule",
            "add",
            "pref",
            "500",
            "from",
            "192.0.2.1/32",
            "blackhole",
        ],
    };
    let mut argv = vec!["ip", "netns", "exec", n1_ns.as_str()];
    argv.extend_from_slice(foreign);
    sys::run(&argv).unwrap();

    let grudge = grudges::isolate(&cluster.node_names(), &["n1".to_string()]);
    cluster.net().partition(&grudge).unwrap();
    assert_eq!(cluster.net().current(), grudge);
    settle(ns(&cluster, "n2"), n1, None);
    settle(ns(&cluster, "n1"), n2, None);
    settle(ns(&cluster, "c1"), n1, None);
    let timed_out = probe(ns(&cluster, "n3"), n1).unwrap_err();
    assert_eq!(
        timed_out.kind(),
        std::io::ErrorKind::TimedOut,
        "dropped, not refused"
    );
    settle(ns(&cluster, "n2"), n3, Some("starts=1"));
    settle(None, n1, Some("starts=1"));

    cluster.net().heal().unwrap();
    assert!(cluster.net().current().is_empty());
    settle(ns(&cluster, "n2"), n1, Some("starts=1"));
    settle(ns(&cluster, "n1"), n2, Some("starts=1"));

    cluster
        .net()
        .partition(&grudges::cut_clients(&["n2".to_string()]))
        .unwrap();
    settle(None, n2, None);
    settle(None, n1, Some("starts=1"));
    settle(ns(&cluster, "n1"), n2, Some("starts=1"));
    cluster.net().heal().unwrap();
    settle(None, n2, Some("starts=1"));

    let listing: &[&str] = match method {
        Method::Iptables => &["iptables", "-w", "-S", "INPUT"],
        Method::Iproute => &["ip", "rule", "show"],
    };
    let mut argv = vec!["ip", "netns", "exec", n1_ns.as_str()];
    argv.extend_from_slice(listing);
    let rules = sys::run(&argv).unwrap();
    assert!(
        rules.contains("192.0.2.1"),
        "heal removed a foreign rule: {rules}"
    );
    assert!(
        !rules.contains("TIDEWATER") && !rules.contains("10.213."),
        "{rules}"
    );

    let live = pids(&cluster);
    cluster.teardown().unwrap();
    assert_nothing_left(id, &state_dir, &live);
}

#[test]
fn partitions_with_iptables_drop_peers_until_healed() {
    if !root() {
        return;
    }
    if !tidewater::net::rules::iptables_available() {
        panic!("iptables is not installed: `apt-get install -y iptables` (CI installs it)");
    }
    partition_test(Method::Iptables, "tc2", "10.213.2.0/24");
}

#[test]
fn partitions_with_ip_rules_drop_peers_until_healed() {
    if !root() {
        return;
    }
    partition_test(Method::Iproute, "tc3", "10.213.3.0/24");
}

/// Starts this binary as a child that owns a cluster (paused node, partition in force) and
/// returns it with the node pids it reported.
fn spawn_cluster_owner(id: &str, subnet: &str, dir: &Path) -> (std::process::Child, Vec<i32>) {
    spawn_helper("cluster", id, subnet, dir)
}

fn spawn_helper(mode: &str, id: &str, subnet: &str, dir: &Path) -> (std::process::Child, Vec<i32>) {
    spawn_helper_with(mode, id, subnet, dir, false)
}

fn spawn_helper_with(
    mode: &str,
    id: &str,
    subnet: &str,
    dir: &Path,
    lossy: bool,
) -> (std::process::Child, Vec<i32>) {
    let mut command = Command::new(std::env::current_exe().unwrap());
    if lossy {
        command.env("TW_LOSSY", "1");
    }
    let mut child = command
        .args(["helper_node", "--exact", "--ignored", "--nocapture"])
        .env("TW_HELPER_MODE", mode)
        .env("RUST_BACKTRACE", "0")
        .env("TW_RUN_ID", id)
        .env("TW_SUBNET", subnet)
        .env("TW_DIR", dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = loop {
        match lines.next() {
            Some(line) => {
                let line = line.unwrap();
                if let Some(rest) = line.strip_prefix("READY ") {
                    break rest.to_string();
                }
            }
            None => panic!(
                "the cluster owner exited before it was ready: {:?}",
                child.wait()
            ),
        }
    };
    // Keep draining its stdout so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    let pids = ready
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    (child, pids)
}

/// Kills the child if a test fails before it exits.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sigint_in_the_middle_of_a_run_leaves_nothing_behind() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (child, pids) = spawn_cluster_owner("tc4", "10.213.4.0/24", dir.path());
    let mut child = KillOnDrop(child);
    assert_eq!(pids.len(), 3);
    assert_eq!(sys::process_state(pids[2]), Some('T'), "n2 is paused");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.0.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGINT), "{status:?}");
    let state_dir = Path::new(tidewater::cluster::local::state::DEFAULT_STATE_DIR);
    assert_nothing_left("tc4", state_dir, &pids);
}

#[test]
fn clean_removes_what_a_killed_harness_left() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (child, pids) = spawn_cluster_owner("tc5", "10.213.5.0/24", dir.path());
    let mut child = KillOnDrop(child);
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    // SIGKILL gave the harness no chance: its nodes, namespaces and bridge are still there.
    assert!(sys::netns_exists("tw-tc5-n1"));
    assert!(sys::link_exists("twtc5br"));
    assert!(node_alive(pids[1]));
    let state_dir = Path::new(tidewater::cluster::local::state::DEFAULT_STATE_DIR);
    let report = tidewater::clean::clean_run(state_dir, "tc5").unwrap();
    assert_eq!(report.runs, ["tc5"]);
    assert_eq!(report.namespaces, 3);
    // The paused n2 may already be gone: when its parent died, its process group was orphaned
    // with a stopped member, and the kernel sent it SIGHUP and SIGCONT.
    assert!((2..=3).contains(&report.processes), "{report:?}");
    assert_nothing_left("tc5", state_dir, &pids);
}

#[test]
fn a_subnet_in_use_or_a_taken_run_id_is_refused_before_creating_anything() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let first = LocalCluster::create(spec("tc6", "10.213.6.0/24", 1, dir.path())).unwrap();
    let same_subnet = LocalCluster::create(spec("tc7", "10.213.6.0/24", 1, dir.path()));
    let err = same_subnet.err().expect("subnet in use").to_string();
    assert!(err.contains("in use"), "{err}");
    assert!(!sys::netns_exists("tw-tc7-c1"));
    let same_id = LocalCluster::create(raw_spec("tc6", "10.213.8.0/24", 1, dir.path()));
    assert!(same_id
        .err()
        .expect("id in use")
        .to_string()
        .contains("tc6"));
    drop(first);
    assert_nothing_left(
        "tc6",
        Path::new(tidewater::cluster::local::state::DEFAULT_STATE_DIR),
        &[],
    );
}

#[test]
fn a_panic_while_owning_a_cluster_leaves_nothing_behind() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state_dir = Path::new(tidewater::cluster::local::state::DEFAULT_STATE_DIR);
    if state_dir.join("tc8.json").exists() {
        tidewater::clean::clean_run(state_dir, "tc8").unwrap();
    }
    let (child, pids) = spawn_helper("cluster-panic", "tc8", "10.213.7.0/24", dir.path());
    let mut child = KillOnDrop(child);
    let status = child.0.wait().unwrap();
    assert!(!status.success(), "the helper test panicked: {status:?}");
    assert_nothing_left("tc8", state_dir, &pids);
}

#[test]
fn a_failed_setup_removes_what_it_had_created() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The node directories cannot be created under a regular file: setup fails after the
    // bridge, the first namespace and its veth exist.
    let blocker = dir.path().join("not-a-directory");
    std::fs::write(&blocker, "").unwrap();
    let spec = spec("tc9", "10.213.9.0/24", 2, &blocker.join("run"));
    let state_dir = spec.state_dir.clone();
    let err = LocalCluster::create(spec).err().expect("setup fails");
    assert!(err.to_string().contains("not-a-directory"), "{err}");
    assert_nothing_left("tc9", &state_dir, &[]);
}

/// The lossyfs mount points of a run's nodes that are still mounted.
fn lossy_mounts(dir: &Path) -> Vec<String> {
    ["c1", "n1", "n2"]
        .iter()
        .map(|n| {
            dir.canonicalize()
                .unwrap()
                .join("nodes")
                .join(n)
                .join("data")
        })
        .filter(|p| sys::is_mounted(p))
        .map(|p| p.display().to_string())
        .collect()
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

#[test]
fn power_loss_keeps_what_a_node_fsynced_and_loses_the_rest() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut spec = spec("tp1", "10.220.7.0/24", 1, dir.path());
    spec.lossy_fs = true;
    let state_dir = spec.state_dir.clone();
    let cluster = LocalCluster::create(spec).unwrap();
    cluster.start_all().unwrap();
    let n1 = addr(&cluster, "n1");
    let data = dir.path().join("nodes/n1/data");
    settle(None, n1, Some("starts=1"));
    assert_eq!(lines(&data.join("unsynced-starts")), 1);
    // SIGKILL alone keeps the page cache: the unsynced line survives.
    cluster.kill("n1").unwrap();
    cluster.start("n1").unwrap();
    settle(None, n1, Some("starts=2"));
    assert_eq!(lines(&data.join("unsynced-starts")), 2);
    // Power loss: the fsynced starts stay; the unsynced lines are gone (the file itself was
    // made durable, empty, by the second start's directory fsync).
    cluster.power_loss("n1", None).unwrap();
    assert!(!cluster.is_running("n1"));
    settle(None, n1, None);
    assert_eq!(lines(&data.join("starts")), 2);
    assert!(data.join("unsynced-starts").exists());
    assert_eq!(lines(&data.join("unsynced-starts")), 0);
    cluster.start("n1").unwrap();
    settle(None, n1, Some("starts=3"));
    assert_eq!(lines(&data.join("unsynced-starts")), 1);
    // A torn power loss keeps a seeded prefix (never all) of the last unsynced line.
    cluster.power_loss("n1", Some(7)).unwrap();
    let kept = std::fs::read_to_string(data.join("unsynced-starts")).unwrap();
    assert!("start\n".starts_with(&kept) && kept.len() < 6, "{kept:?}");
    cluster.start("n1").unwrap();
    settle(None, n1, Some("starts=4"));
    // A wipe of the mounted directory empties it for good, even across a power loss.
    cluster.stop("n1").unwrap();
    cluster.wipe("n1").unwrap();
    cluster.power_loss("n1", None).unwrap();
    cluster.start("n1").unwrap();
    settle(None, n1, Some("starts=1"));

    let live = pids(&cluster);
    drop(cluster);
    assert_nothing_left("tp1", &state_dir, &live);
    assert!(lossy_mounts(dir.path()).is_empty(), "mounts left");
    // Teardown synced before unmounting: the evidence is in the backing directory.
    let durable = dir.path().join("nodes/n1/data.durable");
    assert_eq!(lines(&durable.join("starts")), 1);
    assert_eq!(lines(&durable.join("unsynced-starts")), 1);
}

#[test]
fn power_loss_is_refused_without_a_lossy_filesystem() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = spec("tp2", "10.220.8.0/24", 1, dir.path());
    let cluster = LocalCluster::create(spec).unwrap();
    cluster.start_all().unwrap();
    let e = cluster.power_loss("n1", None).unwrap_err().to_string();
    assert!(e.contains("not on a lossy filesystem"), "{e}");
    assert!(
        cluster.is_running("n1"),
        "a refused power loss kills nothing"
    );
}

#[test]
fn sigint_and_clean_leave_no_lossy_mount_behind() {
    if !root() {
        return;
    }
    let state_dir = Path::new(tidewater::cluster::local::state::DEFAULT_STATE_DIR);
    // Ctrl-C: the guard's teardown unmounts.
    let dir = tempfile::tempdir().unwrap();
    let (child, pids) = spawn_helper_with("cluster", "tp3", "10.220.9.0/24", dir.path(), true);
    let mut child = KillOnDrop(child);
    assert_eq!(lossy_mounts(dir.path()).len(), 3);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.0.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGINT), "{status:?}");
    assert_nothing_left("tp3", state_dir, &pids);
    assert!(
        lossy_mounts(dir.path()).is_empty(),
        "mounts left after SIGINT"
    );

    // SIGKILL: the mounts outlive their dead FUSE server until `clean` detaches them.
    let dir = tempfile::tempdir().unwrap();
    let (child, pids) = spawn_helper_with("cluster", "tp4", "10.220.9.0/24", dir.path(), true);
    let mut child = KillOnDrop(child);
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    assert_eq!(lossy_mounts(dir.path()).len(), 3);
    let report = tidewater::clean::clean_run(state_dir, "tp4").unwrap();
    assert_eq!(report.mounts, 3, "{report:?}");
    assert_nothing_left("tp4", state_dir, &pids);
    assert!(
        lossy_mounts(dir.path()).is_empty(),
        "mounts left after clean"
    );
}
