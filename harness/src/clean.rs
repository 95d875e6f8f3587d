//! `tidewater clean`: removes what interrupted runs of the local backend left behind.
//!
//! Acts only on run records (see [`crate::cluster::local::state`]): each names the bridge,
//! namespaces and veths a run created; processes are found inside those namespaces. Nothing
//! without a record is touched, so other software's namespaces, links and iptables rules are
//! safe. A record whose harness process is still alive belongs to a live run and is skipped.

use crate::cluster::local::state::{self, RunState};
use crate::cluster::{Error, Result};
use std::path::Path;

/// What was cleaned, per run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanReport {
    /// Run ids whose leftovers were removed.
    pub runs: Vec<String>,
    /// Run ids skipped because their harness still runs.
    pub live: Vec<String>,
    /// Processes killed.
    pub processes: usize,
    /// Namespaces deleted.
    pub namespaces: usize,
    /// Links (veths, bridges) deleted.
    pub links: usize,
}

/// Cleans every record in the default registry, `/run/tidewater`.
pub fn clean_all() -> Result<CleanReport> {
    clean_dir(Path::new(state::DEFAULT_STATE_DIR))
}

/// Cleans every record in `dir` whose harness is gone.
pub fn clean_dir(dir: &Path) -> Result<CleanReport> {
    if !crate::cluster::local::sys::is_root() {
        return Err(Error::NotRoot);
    }
    let mut report = CleanReport::default();
    for (_, record) in RunState::list(dir)? {
        if harness_alive(&record) {
            report.live.push(record.run_id.clone());
            continue;
        }
        clean_record(&record, dir, &mut report)?;
    }
    Ok(report)
}

/// Cleans one run's leftovers, whether or not its harness still runs.
pub fn clean_run(dir: &Path, run_id: &str) -> Result<CleanReport> {
    let record = RunState::load(&RunState::path(dir, run_id))?;
    let mut report = CleanReport::default();
    clean_record(&record, dir, &mut report)?;
    Ok(report)
}

fn clean_record(record: &RunState, dir: &Path, report: &mut CleanReport) -> Result<()> {
    let removed = state::remove_resources(record, dir)?;
    report.runs.push(record.run_id.clone());
    report.processes += removed.processes;
    report.namespaces += removed.namespaces;
    report.links += removed.links;
    Ok(())
}

/// Whether the process that wrote the record still runs and is a Tidewater process (a pid
/// reused by something else does not count).
fn harness_alive(record: &RunState) -> bool {
    if record.harness_pid == std::process::id() {
        return true;
    }
    let exe = std::fs::read_link(format!("/proc/{}/exe", record.harness_pid));
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", record.harness_pid));
    match (exe, cmdline) {
        (Ok(exe), Ok(cmdline)) => {
            let name = exe
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            name.starts_with("tidewater") || String::from_utf8_lossy(&cmdline).contains("tidewater")
        }
        _ => false,
    }
}
