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
