//! Helpers shared by the `run*` integration tests: run the real `tidewater` binary and read
//! what it stored.

#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What one `tidewater` invocation did.
pub struct Outcome {
    /// Its exit code.
    pub code: i32,
    /// Standard output (the summary and the verdict).
    pub stdout: String,
    /// Standard error (seed, parameters, progress lines).
    pub stderr: String,
}

impl Outcome {
    /// Everything it printed, for assertion messages.
    pub fn transcript(&self) -> String {
        format!(
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// True when the local cluster can run (it needs root); prints why a test is skipped.
pub fn can_run(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipping {test}: the local cluster needs root");
    }
    root
}

/// Runs `tidewater ARGS` to completion.
pub fn tidewater(args: &[&str]) -> Outcome {
    let out = Command::new(env!("CARGO_BIN_EXE_tidewater"))
        .args(args)
        .output()
        .expect("run the tidewater binary");
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Fetches the default Kafka (cached after the first time); `false`, saying why for `test`,
/// when it cannot be had here. CI sets `TIDEWATER_REQUIRE_KAFKA`, so that a machine where the
/// fetch fails fails the test instead of skipping it.
pub fn kafka_available(test: &str) -> bool {
    let fetched = tidewater(&["kafka", "fetch"]);
    if fetched.code != 0 && std::env::var_os("TIDEWATER_REQUIRE_KAFKA").is_some() {
        panic!(
            "TIDEWATER_REQUIRE_KAFKA is set but Kafka could not be fetched:\n{}",
            fetched.stderr
        );
    }
    if fetched.code != 0 {
        eprintln!(
            "skipping {test}: Kafka could not be fetched (CI fetches it first):\n{}",
            fetched.stderr
        );
    }
    fetched.code == 0
}

/// Runs `tidewater run ARGS --store STORE --subnet SUBNET --plain` and returns what it did
/// with the `results.json` of the run it stored.
pub fn run_into(store: &Path, subnet: &str, args: &[&str]) -> (Outcome, Value) {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&[
        "--store",
        store.to_str().unwrap(),
        "--subnet",
        subnet,
        "--plain",
    ]);
    let out = tidewater(&all);
    let results = json(&latest(store).join("results.json"));
    (out, results)
}

/// The run directory `store/latest` points at.
pub fn latest(store: &Path) -> PathBuf {
    let link = store.join("latest");
    let target = std::fs::read_link(&link).expect("store/latest is a symlink");
    store.join(target)
}

/// Parses a JSON file of a run directory.
pub fn json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// Every line of `history.jsonl`, parsed.
pub fn history(run_dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(run_dir.join("history.jsonl"))
        .expect("history.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("history line is JSON"))
        .collect()
}

/// Acknowledged writes of a stored history, and how many of them the final reads did not
/// return (ignoring those acknowledged below the final log start offset, which retention may
/// have deleted). Counted straight from the raw JSON lines, independently of the checker,
/// so that a test can hold the figures the harness prints to this count.
pub fn acked_absent_from_final_reads(run_dir: &Path) -> (u64, u64) {
    use std::collections::{BTreeMap, HashMap, HashSet};
    let mut acked: HashMap<i64, (String, u64)> = HashMap::new();
    let mut read_final: HashSet<i64> = HashSet::new();
    let mut log_start: BTreeMap<String, u64> = BTreeMap::new();
    for op in history(run_dir) {
        if op["type"] != "ok" {
            continue;
        }
        let micro_ops = op["value"].as_array().cloned().unwrap_or_default();
        if op["f"] == "send" {
            for m in &micro_ops {
                let key = m[1].as_str().unwrap().to_string();
                let offset = m[2][0].as_u64().unwrap_or(u64::MAX);
                acked.insert(m[2][1].as_i64().unwrap(), (key, offset));
            }
        }
        if op["final"] == true {
            if let Some(starts) = op["log_start_offsets"].as_object() {
                for (key, start) in starts {
                    let s = log_start.entry(key.clone()).or_default();
                    *s = (*s).max(start.as_u64().unwrap());
                }
            }
            for m in micro_ops.iter().filter(|m| m[0] == "poll") {
                for records in m[1].as_object().into_iter().flat_map(|o| o.values()) {
                    for pair in records.as_array().unwrap() {
                        read_final.insert(pair[1].as_i64().unwrap());
                    }
                }
            }
        }
    }
    let absent = acked
        .iter()
        .filter(|(value, (key, offset))| {
            !read_final.contains(value)
                && (*offset == u64::MAX || *offset >= log_start.get(key).copied().unwrap_or(0))
        })
        .count() as u64;
    (acked.len() as u64, absent)
}

/// Where failed runs' stores are copied.
pub const FAILED_STORES_DIR: &str = "/tmp/tidewater-failed";

/// A temporary `--store` that is kept when the test fails: on a panic (a failed assertion)
/// it is copied to `/tmp/tidewater-failed/<test>-<unix secs>-<pid>/` and the path is printed,
/// so the history and the brokers' logs of a rare failure can be analysed afterwards. A test
/// that passes leaves nothing behind.
pub struct KeptStore {
    dir: tempfile::TempDir,
    test: &'static str,
}

impl KeptStore {
    /// A fresh store for `test` (its name names the kept copy).
    pub fn new(test: &'static str) -> KeptStore {
        KeptStore {
            dir: tempfile::tempdir().expect("a temporary store"),
            test,
        }
    }

    /// The store's path, for `--store`.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// An assertion's message about `what`: the store kept (copied for a look after the
    /// test), where, and everything `outcome` printed.
    pub fn explain(&self, outcome: &Outcome, what: &str) -> String {
        let kept = self.keep().map(|p| p.display().to_string());
        format!("{what}; store kept at {kept:?}\n{}", outcome.transcript())
    }

    /// Copies the store to [`FAILED_STORES_DIR`]; returns the copy's path.
    pub fn keep(&self) -> std::io::Result<PathBuf> {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let kept = Path::new(FAILED_STORES_DIR).join(format!(
            "{}-{secs}-{}",
            self.test,
            std::process::id()
        ));
        std::fs::create_dir_all(FAILED_STORES_DIR)?;
        // `cp -a` keeps `latest` a symlink and the nodes' files as they are.
        let status = Command::new("cp")
            .arg("-a")
            .arg(self.dir.path())
            .arg(&kept)
            .status()?;
        if !status.success() {
            return Err(std::io::Error::other(format!("cp -a exited {status}")));
        }
        Ok(kept)
    }
}

impl Drop for KeptStore {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        match self.keep() {
            Ok(kept) => eprintln!(
                "{} failed: its store is kept at {} (latest run: {}/latest)",
                self.test,
                kept.display(),
                kept.display()
            ),
            Err(e) => eprintln!("{} failed: keeping its store failed: {e}", self.test),
        }
    }
}
