//! An unreachable host in a cluster file is a clear error within seconds, before anything
//! changes on any host: every unreachable node is named with ssh's own reason. Needs only the
//! openssh client (no root, no sshd); skipped with a message without it.

use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;
use tidewater::cluster_file::open_cluster_file;

/// Far above the 2 s connection timeout of the file: only a hang gets here.
const HANG_BOUND: Duration = Duration::from_secs(60);

fn ssh_installed() -> bool {
    let ok = Command::new("ssh").arg("-V").output().is_ok();
    if !ok {
        eprintln!("skipped: the openssh client (ssh) is not installed");
    }
    ok
}

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn cluster_file(dir: &Path) -> std::path::PathBuf {
    let text = format!(
        r#"
        ssh_options = ["-F", "/dev/null", "-o", "StrictHostKeyChecking=no",
                       "-o", "UserKnownHostsFile=/dev/null"]
        sudo = false
        control = "process"
        connect_timeout_s = 2
        [[node]]
        name = "c1"
        host = "127.0.0.1"
        port = {port}
        user = "root"
        ip = "127.0.0.1"
        [[node]]
        name = "n1"
        # TEST-NET-1 (RFC 5737): never routed, so the connection times out or has no route.
        host = "192.0.2.1"
        ip = "192.0.2.1"
        [[node]]
        name = "n2"
        # The .invalid top-level domain never resolves (RFC 2606).
        host = "tidewater-node.invalid"
        ip = "192.0.2.2"
        "#,
        port = closed_port()
    );
    let path = dir.join("cluster.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn unreachable_hosts_are_named_in_one_error_instead_of_a_hang() {
    if !ssh_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = cluster_file(dir.path());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let result = open_cluster_file(&path, vec![], Some(2)).map(|_| ());
        let _ = tx.send(result);
    });
    let result = rx
        .recv_timeout(HANG_BOUND)
        .expect("opening a cluster of unreachable hosts must not hang");
    let err = result.expect_err("no host is reachable").to_string();
    assert!(
        err.contains("preflight failed, nothing was changed"),
        "{err}"
    );
    assert!(
        err.contains("c1 (127.0.0.1): unreachable over ssh") && err.contains("Connection refused"),
        "{err}"
    );
    assert!(
        err.contains("n1 (192.0.2.1): unreachable over ssh"),
        "{err}"
    );
    assert!(
        err.contains("n2 (tidewater-node.invalid): unreachable over ssh"),
        "{err}"
    );
}
#[test]
fn the_cli_reports_an_unreachable_cluster_as_a_setup_failure() {
    if !ssh_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = cluster_file(dir.path());
    let store = dir.path().join("store");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let out = Command::new(env!("CARGO_BIN_EXE_tidewater"))
            .args([
                "run",
                "--plain",
                "--time-limit",
                "5",
                "--nodes",
                "2",
                "--replication-factor",
                "2",
            ])
            .arg("--cluster")
            .arg(&path)
            .arg("--store")
            .arg(&store)
            .output()
            .unwrap();
        let _ = tx.send(out);
    });
    let out = rx
        .recv_timeout(HANG_BOUND)
        .expect("tidewater run must not hang on unreachable hosts");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(3), "setup failure expected:\n{all}");
    assert!(all.contains("unreachable over ssh"), "{all}");
    assert!(all.contains("tidewater-node.invalid"), "{all}");
}
