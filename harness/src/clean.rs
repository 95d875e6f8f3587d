//! `tidewater clean`: removes what interrupted runs of the local backend left behind.
//!
//! Acts only on run records (see [`crate::cluster::local::state`]): each names the bridge,
//! namespaces and veths a run created; processes are found inside those namespaces. Nothing
//! without a record is touched, so other software's namespaces, links and iptables rules are
//! safe. A record whose harness process is still alive belongs to a live run and is skipped.

use crate::cluster::local::state::{self, RunState};
use crate::cluster::{Error, Result};
use crate::runner::EXIT_HARNESS;
use clap::Args;
use std::path::{Path, PathBuf};

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
    /// Lossy filesystems detached.
    pub mounts: usize,
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
    report.mounts += removed.mounts;
    Ok(())
}

/// Whether the process that wrote the record still runs: same pid and same start time (a
/// reused pid does not count), and not a zombie. Records without a start time fall back to the process name.
fn harness_alive(record: &RunState) -> bool {
    use crate::cluster::local::sys::{process_start_ticks, process_state};
    // A killed harness may linger as a zombie until its parent reaps it: that is gone too.
    let pid = record.harness_pid;
    if matches!(process_state(pid as i32), None | Some('Z' | 'X')) {
        return false;
    }
    let Some(ticks) = process_start_ticks(pid) else {
        return false;
    };
    if record.harness_start_ticks != 0 {
        return ticks == record.harness_start_ticks;
    }
    let exe = std::fs::read_link(format!("/proc/{}/exe", record.harness_pid));
    exe.is_ok_and(|e| e.to_string_lossy().contains("tidewater"))
}

/// `tidewater clean`.
#[derive(Debug, Args)]
pub struct CleanArgs {
    /// Clean the hosts of this cluster file (Tidewater's iptables rules, brokers left
    /// running) instead of this machine's leftovers.
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
}

pub(crate) fn clean_command(args: &CleanArgs) -> i32 {
    if let Some(file) = &args.cluster {
        return match crate::cluster_file::clean_cluster_file(file) {
            Ok(()) => {
                println!("cleaned the hosts of {}", file.display());
                0
            }
            Err(e) => {
                eprintln!("tidewater: clean {}: {e}", file.display());
                EXIT_HARNESS
            }
        };
    }
    match clean_all() {
        Ok(report) => {
            println!(
                "cleaned {} run(s): {} process(es), {} namespace(s), {} link(s), {} lossy mount(s) removed",
                report.runs.len(),
                report.processes,
                report.namespaces,
                report.links,
                report.mounts
            );
            if !report.live.is_empty() {
                println!("skipped live run(s): {}", report.live.join(", "));
            }
            0
        }
        Err(e) => {
            eprintln!("tidewater: clean: {e}");
            EXIT_HARNESS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_live_only_while_its_exact_process_runs() {
        let me = std::process::id();
        let ticks = crate::cluster::local::sys::process_start_ticks(me).unwrap();
        let mut record = RunState {
            run_id: "x".into(),
            harness_pid: me,
            harness_start_ticks: ticks,
            ..RunState::default()
        };
        assert!(harness_alive(&record));
        record.harness_start_ticks = ticks + 1;
        assert!(!harness_alive(&record), "same pid, another process");
        record.harness_pid = u32::MAX;
        assert!(!harness_alive(&record), "no such process");
    }

    #[test]
    fn a_killed_harness_that_is_still_a_zombie_is_not_live() {
        use crate::cluster::local::sys::{process_start_ticks, process_state};
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let record = RunState {
            run_id: "z".into(),
            harness_pid: pid,
            harness_start_ticks: process_start_ticks(pid).unwrap(),
            ..RunState::default()
        };
        assert!(harness_alive(&record));
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        // Not reaped yet: the kernel keeps it as a zombie until we wait for it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while process_state(pid as i32) != Some('Z') {
            assert!(std::time::Instant::now() < deadline, "SIGKILL did not take");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!harness_alive(&record));
        child.wait().unwrap();
    }
}
