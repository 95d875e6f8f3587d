//! End to end: `tidewater run` against a real local cluster (root only; skipped otherwise),
//! then `--replay` of that run and `tidewater check` of its stored history.
//!
//! Long-ish: two 10-second runs plus setup and teardown, about 40 s in all.

mod run_support;

use run_support::{can_run, history, json, latest, tidewater, KeptStore};

const SUBNET: &str = "10.214.1.0/24";

#[test]
fn run_prints_the_seed_stores_everything_and_replay_repeats_the_fault_schedule() {
    if !can_run("run_e2e") {
        return;
    }
    let store = KeptStore::new("run_e2e");
    let store_arg = store.path().to_str().unwrap();
    let first = tidewater(&[
        "run",
        "--time-limit",
        "10",
        "--nemesis",
        "kill,partition",
        "--nemesis-interval",
        "2",
        "--seed",
        "11",
        "--rate",
        "50",
        "--set",
        "min.insync.replicas=2",
        "--store",
        store_arg,
        "--subnet",
        SUBNET,
        "--plain",
    ]);
    assert_eq!(first.code, 0, "{}", first.transcript());
    assert!(
        first.stderr.starts_with("seed=11\n"),
        "{}",
        first.transcript()
    );
    let last: Vec<&str> = first.stdout.lines().rev().take(2).collect();
    assert_eq!(last[0], "verdict: valid", "{}", first.transcript());
    assert!(last[1].starts_with("report: "), "{}", first.transcript());

    let run_dir = latest(store.path());
    assert!(run_dir.starts_with(store.path().join("queue")));
    for file in [
        "config.json",
        "history.jsonl",
        "results.json",
        "report.html",
        "harness.log",
        "samples.jsonl",
        "final-reads.json",
        "nodes/n1/broker.log",
        "nodes/c1/broker.log",
    ] {
        assert!(
            run_dir.join(file).is_file(),
            "{file} missing in {}",
            run_dir.display()
        );
    }
    assert!(store.path().join("index.html").is_file());
    let config = json(&run_dir.join("config.json"));
    assert_eq!(config["seed"], 11);
    assert_eq!(json(&run_dir.join("results.json"))["valid"], true);
    assert_eq!(json(&run_dir.join("final-reads.json"))["completed"], true);

    let ops = history(&run_dir);
    for (i, op) in ops.iter().enumerate() {
        assert_eq!(op["index"], i as u64, "indexes are dense");
    }
    let nemesis_fs: Vec<String> = ops
        .iter()
        .filter(|op| op["process"] == "nemesis")
        .map(|op| op["f"].as_str().unwrap().to_string())
        .collect();
    assert!(
        nemesis_fs.iter().any(|f| f.starts_with("start-")),
        "{nemesis_fs:?}"
    );
    assert!(ops
        .iter()
        .any(|op| op["final"] == true && op["type"] == "ok"));
    assert!(ops.iter().any(|op| op["f"] == "send" && op["type"] == "ok"));

    let replay = tidewater(&[
        "run",
        "--replay",
        run_dir.to_str().unwrap(),
        "--store",
        store_arg,
        "--subnet",
        SUBNET,
        "--plain",
    ]);
    assert_eq!(replay.code, 0, "{}", replay.transcript());
    assert!(
        replay.stderr.starts_with("seed=11\n"),
        "{}",
        replay.transcript()
    );
    let replay_dir = latest(store.path());
    assert_ne!(replay_dir, run_dir);
    let replay_config = json(&replay_dir.join("config.json"));
    assert_eq!(replay_config["schedule"], config["schedule"]);
    assert_eq!(replay_config["replay_of"], run_dir.to_str().unwrap());
    let replay_fs: Vec<String> = history(&replay_dir)
        .iter()
        .filter(|op| op["process"] == "nemesis")
        .map(|op| op["f"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        replay_fs, nemesis_fs,
        "the replay injects the same faults in the same order"
    );

    // The stored history can be checked again, with the same verdict.
    let check = tidewater(&["check", run_dir.to_str().unwrap()]);
    assert_eq!(check.code, 0, "{}", check.transcript());
    assert!(
        check.stdout.ends_with("verdict: valid\n"),
        "{}",
        check.transcript()
    );

    // A prefix of the history has no final reads: it cannot show what the log held at the
    // end, so it is unknown (exit 2), never invalid for writes it did not see read.
    let text = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let prefix = store.path().join("prefix.jsonl");
    std::fs::write(&prefix, lines[..lines.len() / 2].join("\n") + "\n").unwrap();
    let check = tidewater(&["check", "--history", prefix.to_str().unwrap()]);
    assert_eq!(check.code, 2, "{}", check.transcript());
    assert!(
        check.stdout.contains("no ok final read"),
        "{}",
        check.transcript()
    );

    // A run directory whose config.json cannot be read is refused, not checked with defaults.
    std::fs::write(run_dir.join("config.json"), "{ not json").unwrap();
    let check = tidewater(&["check", run_dir.to_str().unwrap()]);
    assert_eq!(check.code, 3, "{}", check.transcript());
    assert!(
        check.stderr.contains("config.json"),
        "{}",
        check.transcript()
    );
}

#[test]
fn bad_flags_fail_with_a_clear_message_before_anything_starts() {
    let out = tidewater(&["run", "--acks", "2"]);
    assert_eq!(out.code, 2, "{}", out.transcript());
    assert!(out.stderr.contains("--acks"), "{}", out.transcript());
    let out = tidewater(&["run", "--replication-factor", "5", "--nodes", "3"]);
    assert_eq!(out.code, 3, "{}", out.transcript());
    assert!(
        out.stderr.contains("--replication-factor 5"),
        "{}",
        out.transcript()
    );
    let out = tidewater(&["run", "--plan", "no-such-plan"]);
    assert_eq!(out.code, 3, "{}", out.transcript());
    assert!(out.stderr.contains("no-such-plan"), "{}", out.transcript());
    // A typo in a setting name or value is refused by the broker's own schema, before a run
    // directory (or anything else) exists.
    let store = tempfile::tempdir().unwrap();
    for (set, named) in [
        ("min.insync.replica=2", "\"min.insync.replica\""),
        ("min.insync.replicas=abc", "\"abc\""),
        ("retention.ms=soon", "\"retention.ms\""),
    ] {
        let out = tidewater(&[
            "run",
            "--set",
            set,
            "--store",
            store.path().to_str().unwrap(),
        ]);
        assert_eq!(out.code, 3, "{set}: {}", out.transcript());
        assert!(out.stderr.contains(named), "{set}: {}", out.transcript());
        assert_eq!(
            std::fs::read_dir(store.path()).unwrap().count(),
            0,
            "{set}: nothing created"
        );
    }
    // Only private subnets: anything else could send the harness's traffic off the machine.
    for subnet in ["0.0.0.0/24", "255.255.255.0/24", "8.8.8.0/24"] {
        let out = tidewater(&[
            "run",
            "--subnet",
            subnet,
            "--store",
            store.path().to_str().unwrap(),
        ]);
        assert_eq!(out.code, 3, "{subnet}: {}", out.transcript());
        assert!(
            out.stderr.contains("not a private range"),
            "{subnet}: {}",
            out.transcript()
        );
        assert_eq!(
            std::fs::read_dir(store.path()).unwrap().count(),
            0,
            "{subnet}: nothing created"
        );
    }
}

/// Kills the child if the test fails before it exits.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Processes whose command line mentions `needle` (the brokers carry their address in it).
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(needle) && !cmdline.contains("processes_mentioning") {
                found.push(cmdline);
            }
        }
    }
    found
}

#[test]
fn sigint_in_the_main_phase_heals_stops_and_removes_everything() {
    use std::io::BufRead;
    if !can_run("run_e2e sigint") {
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let subnet_prefix = "10.214.6.";
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_tidewater"))
        .args([
            "run",
            "--time-limit",
            "120",
            "--nemesis",
            "partition",
            "--nemesis-interval",
            "1",
            "--seed",
            "3",
            "--store",
            store.path().to_str().unwrap(),
            "--subnet",
            "10.214.6.0/24",
            "--plain",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start tidewater");
    let mut child = KillOnDrop(child);
    let mut stderr = std::io::BufReader::new(child.0.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in stderr.by_ref() {
        let line = line.unwrap();
        let in_main = line.starts_with("phase main");
        seen.push(line);
        if in_main {
            break;
        }
    }
    // Keep reading, so the harness never writes into a closed pipe.
    let drain = std::thread::spawn(move || stderr.map_while(Result::ok).collect::<Vec<_>>());
    assert!(
        seen.iter().any(|l| l.starts_with("phase main")),
        "the run never reached its main phase:\n{}",
        seen.join("\n")
    );
    // Let the partition start (at 1 s) so there is a rule and traffic to clean up.
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(
        !processes_mentioning(subnet_prefix).is_empty(),
        "brokers run"
    );
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    let status = child.0.wait().unwrap();
    let rest = drain.join().unwrap();
    assert_eq!(
        status.code(),
        Some(128 + libc::SIGINT),
        "{status:?}\n{}",
        rest.join("\n")
    );

    assert_eq!(processes_mentioning(subnet_prefix), Vec::<String>::new());
    let addrs = std::process::Command::new("ip")
        .args(["-o", "addr"])
        .output()
        .unwrap();
    let addrs = String::from_utf8_lossy(&addrs.stdout);
    assert!(
        !addrs.contains(subnet_prefix),
        "bridge address left behind:\n{addrs}"
    );
    let run_dir = latest(store.path());
    let ops = history(&run_dir);
    assert!(
        ops.iter().any(|op| op["type"] == "ok"),
        "the history written so far is on disk"
    );
}
