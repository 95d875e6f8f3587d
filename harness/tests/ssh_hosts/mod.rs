//! Shared by the ssh tests: "remote hosts" on this machine, one network namespace per node,
//! each running an sshd of its own reached with a key the test generates.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use tidewater::cluster::local::{LocalCluster, LocalSpec, NodeProgram};
use tidewater::cluster::{Cluster as _, NodeInfo};

/// The system sshd.
pub const SSHD: &str = "/usr/sbin/sshd";

fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "ssh-keygen");
}

/// Generates a host key and a client key under `dir/keys` (the client's public key is the
/// only authorized key) and returns that directory.
pub fn make_keys(dir: &Path) -> PathBuf {
    let keys = dir.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    keygen(&keys.join("host"));
    keygen(&keys.join("client"));
    std::fs::copy(keys.join("client.pub"), keys.join("authorized_keys")).unwrap();
    // sshd's privilege separation directory.
    std::fs::create_dir_all("/run/sshd").unwrap();
    keys
}

/// The argv of a node's sshd: a configuration of its own (no PAM, root by key only, no
/// system config file), listening on the node's address only, in the foreground.
fn sshd_argv(keys: &Path, node: &NodeInfo) -> Vec<String> {
    let key = |f: &str| keys.join(f).display().to_string();
    let mut argv = vec![
        SSHD.into(),
        "-D".into(),
        "-e".into(),
        "-f".into(),
        "/dev/null".into(),
    ];
    for opt in [
        format!("ListenAddress={}", node.ip),
        "Port=22".into(),
        format!("HostKey={}", key("host")),
        format!("AuthorizedKeysFile={}", key("authorized_keys")),
        "PermitRootLogin=prohibit-password".into(),
        "PasswordAuthentication=no".into(),
        "KbdInteractiveAuthentication=no".into(),
        "StrictModes=no".into(),
        "PidFile=none".into(),
        "UsePAM=no".into(),
        "MaxSessions=64".into(),
        "MaxStartups=64".into(),
    ] {
        argv.push("-o".into());
        argv.push(opt);
    }
    argv
}

/// Starts `brokers` + 1 hosts (namespaces named after `run_id` on `subnet`), each running
/// sshd, after removing what an earlier interrupted run of the same test left. The hosts are
/// torn down when the returned cluster is dropped, also when an assertion fails.
pub fn start_hosts(
    dir: &Path,
    keys: &Path,
    run_id: &str,
    subnet: &str,
    brokers: usize,
) -> LocalCluster {
    let keys = keys.to_path_buf();
    let program = NodeProgram::Custom(Arc::new(move |node: &NodeInfo, _data: &Path| {
        sshd_argv(&keys, node)
    }));
    let state_dir = Path::new(tidewater::cluster::local::state::DEFAULT_STATE_DIR);
    if state_dir.join(format!("{run_id}.json")).exists() {
        tidewater::clean::clean_run(state_dir, run_id).unwrap();
    }
    let mut spec = LocalSpec::new(run_id, dir.join("hosts"), program);
    spec.subnet = LocalSpec::parse_subnet(subnet).unwrap();
    spec.brokers = brokers;
    let hosts = LocalCluster::create(spec).unwrap();
    hosts.start_all().unwrap();
    // Every sshd listens before a run's preflight connects: on a loaded machine an sshd can
    // take a while to bind, and the preflight answers a refused connection as unreachable
    // (CI saw it once). A liveness bound, not a timing check.
    for node in hosts.nodes() {
        let address = std::net::SocketAddr::from((node.ip, 22));
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_millis(500))
            .is_err()
        {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "the sshd of {} never listened on {address}",
                node.name
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    hosts
}
