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

/// Three nodes on loopback addresses where nothing listens: every connection is refused at
/// once, and no packet ever leaves this machine.
fn cluster_file(dir: &Path) -> std::path::PathBuf {
    let mut text = String::from(
        r#"
        ssh_options = ["-F", "/dev/null", "-o", "StrictHostKeyChecking=no",
                       "-o", "UserKnownHostsFile=/dev/null"]
        sudo = false
        control = "process"
        connect_timeout_s = 2
        "#,
    );
    for (name, host) in [
        ("c1", "127.0.0.1"),
        ("n1", "127.0.0.2"),
        ("n2", "127.0.0.3"),
    ] {
        text.push_str(&format!(
            "[[node]]\nname = \"{name}\"\nhost = \"{host}\"\nport = {port}\nuser = \"root\"\nip = \"{host}\"\n",
            port = closed_port()
        ));
    }
    let path = dir.join("cluster.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Everything a finished `tidewater` printed, standard output then standard error.
fn printed(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
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
    for node in ["n1 (127.0.0.2)", "n2 (127.0.0.3)"] {
        assert!(
            err.contains(&format!("{node}: unreachable over ssh")),
            "{err}"
        );
    }
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
    let all = printed(&out);
    assert_eq!(out.status.code(), Some(3), "setup failure expected:\n{all}");
    assert!(all.contains("unreachable over ssh"), "{all}");
    assert!(all.contains("127.0.0.3"), "{all}");
}

#[test]
fn a_matrix_on_an_unreachable_cluster_stops_before_its_first_run_with_one_message() {
    if !ssh_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = cluster_file(dir.path());
    let matrix = dir.path().join("m.toml");
    std::fs::write(
        &matrix,
        "name = \"m\"\n[run]\nnodes = 2\nreplication_factor = 2\ntime_limit_s = 5\n[axes]\nacks = [\"1\", \"all\"]\n",
    )
    .unwrap();
    let store = dir.path().join("store");
    let out = Command::new(env!("CARGO_BIN_EXE_tidewater"))
        .arg("matrix")
        .arg(&matrix)
        .arg("--cluster")
        .arg(&path)
        .arg("--store")
        .arg(&store)
        .output()
        .unwrap();
    let all = printed(&out);
    assert_eq!(out.status.code(), Some(3), "{all}");
    assert!(all.contains("matrix not started"), "{all}");
    assert_eq!(
        all.matches("unreachable over ssh").count(),
        3,
        "one message naming every host: {all}"
    );
    assert!(!all.contains("matrix cell"), "no run started: {all}");
    assert!(!store.exists(), "nothing written: {all}");
}
