//! Ctrl-C in the middle of a real `tidewater run` (brokers up, faults being injected) leaves
//! nothing of Tidewater's behind: no namespace, bridge, run record or broker process. Needs
//! root; prints a message and passes otherwise. About 15 seconds.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tidewater::cluster::local::state::{RunState, DEFAULT_STATE_DIR};
use tidewater::cluster::local::{find_broker_binary, sys};

/// Bound on every wait of this test.
const WAIT_MAX: Duration = Duration::from_secs(120);

/// Stops the child if the test fails before it exits: SIGINT first, so the harness cleans
/// up, then SIGKILL after a bound.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if !matches!(self.0.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The run record of the run whose directory is under `store`.
fn record_under(store: &Path) -> Option<RunState> {
    RunState::list(Path::new(DEFAULT_STATE_DIR))
        .ok()?
        .into_iter()
        .map(|(_, r)| r)
        .find(|r| r.run_dir.starts_with(store))
}

/// Pids of live processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let alive = matches!(sys::process_state(*pid), Some(s) if s != 'Z');
            alive && String::from_utf8_lossy(&cmdline).contains(needle)
        })
        .collect()
}

/// The broker binary and an empty store, as root; `None` (with a message) otherwise.
fn root_and_store() -> Option<(PathBuf, tempfile::TempDir)> {
    if !sys::is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return None;
    }
    Some((find_broker_binary().unwrap(), tempfile::tempdir().unwrap()))
}

#[test]
fn ctrl_c_during_a_run_leaves_nothing_behind() {
    let Some((broker, store)) = root_and_store() else {
        return;
    };
    let store_path: PathBuf = store.path().canonicalize().unwrap();
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_tidewater"))
            .args(["run", "--time-limit", "120", "--nemesis", "pause,partition"])
            .args(["--nemesis-interval", "2", "--seed", "1", "--plain"])
            .args(["--subnet", "10.213.14.0/24", "--store"])
            .arg(&store_path)
            .env("TIDEWATER_BROKER_BIN", &broker)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Progress lines may go to either stream: read both.
    let (lines_tx, lines) = mpsc::channel();
    let stdout: Box<dyn std::io::Read + Send> = Box::new(child.0.stdout.take().unwrap());
    let stderr: Box<dyn std::io::Read + Send> = Box::new(child.0.stderr.take().unwrap());
    for stream in [stdout, stderr] {
        let tx = lines_tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    let deadline = Instant::now() + WAIT_MAX;
    let mut transcript = vec![];
    while !transcript.iter().any(|l: &String| l.contains("phase main")) {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => transcript.push(line),
            Err(e) => panic!("no main phase ({e}): {transcript:#?}"),
        }
    }
    // Into the fault schedule: a pause started at 2 s, a partition or pause at 6 s.
    std::thread::sleep(Duration::from_secs(7));
    let record = record_under(&store_path).expect("the run recorded its cluster");
    assert!(record.namespaces.iter().all(|ns| sys::netns_exists(ns)));
    assert!(!processes_mentioning(&store_path.display().to_string()).is_empty());

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.0.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGINT), "{status:?}");

    assert!(record_under(&store_path).is_none(), "run record left");
    for ns in &record.namespaces {
        assert!(!sys::netns_exists(ns), "namespace {ns} left");
    }
    for link in record.veths.iter().chain(record.bridge.iter()) {
        assert!(!sys::link_exists(link), "link {link} left");
    }
    let left = processes_mentioning(&store_path.display().to_string());
    assert!(left.is_empty(), "processes left: {left:?}");

    // The interrupted run is recorded as such: results unknown with the reason, the index
    // updated, and the run directory printed.
    let run_dir = record.run_dir.clone();
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    assert_eq!(results["valid"], "unknown", "{results}");
    assert!(
        results["promise_reason"]
            .as_str()
            .unwrap()
            .contains("interrupted by signal 2"),
        "{results}"
    );
    assert!(store_path.join("index.html").is_file());
    drop(lines_tx);
    // The reader threads end when the harness's pipes close (it has exited).
    while let Ok(line) = lines.recv_timeout(WAIT_MAX) {
        transcript.push(line);
    }
    let printed = format!("run directory: {}", run_dir.display());
    assert!(
        transcript.iter().any(|l| l.contains(&printed)),
        "{printed} not in {transcript:#?}"
    );
}

/// SIGTERM to a `tidewater detect` running two cells at once (each a `tidewater run`
/// process) stops both runs with their own teardown, starts no further cell, records no
/// cell of an interrupted run in the table, and exits 128 + SIGTERM with nothing left.
#[test]
fn sigterm_to_detect_stops_its_runs_and_records_none_of_them() {
    let Some((broker, store)) = root_and_store() else {
        return;
    };
    let store_path: PathBuf = store.path().canonicalize().unwrap();
    let table = store_path.join("table.md");
    // The unmodified broker only (`--bugs none`), so the shared broker binary serves.
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_tidewater"))
            .args([
                "detect", "--bugs", "none", "--plans", "none", "--seeds", "4",
            ])
            .args(["--time-limit", "60", "--jobs", "2", "--plain"])
            .args(["--subnet", "10.213.15.0/24", "--broker-bin"])
            .arg(&broker)
            .arg("--store")
            .arg(&store_path)
            .arg("--out")
            .arg(&table)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Both runs are in their main phase once each has its history file growing.
    let deadline = Instant::now() + WAIT_MAX;
    let runs_started = || {
        ["detect-none-random-s1", "detect-none-random-s2"]
            .iter()
            .all(|name| {
                std::fs::read_dir(store_path.join(name))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|run| run.path().join("history.jsonl").is_file())
            })
    };
    while !runs_started() {
        assert!(Instant::now() < deadline, "the two runs never started");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(3));
    let records: Vec<RunState> = RunState::list(Path::new(DEFAULT_STATE_DIR))
        .unwrap()
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| r.run_dir.starts_with(&store_path))
        .collect();
    assert_eq!(records.len(), 2, "two runs with clusters");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.0.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.0.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{stderr}");

    for record in &records {
        for ns in &record.namespaces {
            assert!(!sys::netns_exists(ns), "namespace {ns} left\n{stderr}");
        }
        for link in record.veths.iter().chain(record.bridge.iter()) {
            assert!(!sys::link_exists(link), "link {link} left");
        }
    }
    assert!(record_under(&store_path).is_none(), "run record left");
    let left = processes_mentioning(&store_path.display().to_string());
    assert!(left.is_empty(), "processes left: {left:?}\n{stderr}");
    // No third cell started, and the table holds no cell of the stopped runs.
    assert!(
        !store_path.join("detect-none-random-s3").exists(),
        "{stderr}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(table.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(json["results"], serde_json::json!([]), "{stderr}");
}
