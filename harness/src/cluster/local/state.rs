//! What a local cluster created, recorded on disk before each thing is created, so that a
//! harness killed at any point leaves a record `tidewater clean` can act on.
//!
//! One JSON file per run in the registry directory (default [`DEFAULT_STATE_DIR`]).
//! [`remove_resources`] deletes exactly what a record names and nothing else.

use super::sys::{self, link_exists, netns_exists};
use crate::cluster::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where run records live unless a spec says otherwise.
pub const DEFAULT_STATE_DIR: &str = "/run/tidewater";

/// Bound on waiting for killed processes to leave a namespace.
const KILL_WAIT_MAX: Duration = Duration::from_secs(5);

/// Everything one local cluster created on this machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunState {
    /// The run's short id, part of every name below.
    pub run_id: String,
    /// The harness process that created it.
    pub harness_pid: u32,
    /// That process's start time (clock ticks since boot, `/proc/PID/stat` field 22), so a
    /// reused pid is not mistaken for a live harness. 0 when unknown.
    #[serde(default)]
    pub harness_start_ticks: u64,
    /// The run directory (data and logs are kept: they are the evidence).
    pub run_dir: PathBuf,
    /// The bridge, once its creation started.
    pub bridge: Option<String>,
    /// Network namespaces, in creation order.
    pub namespaces: Vec<String>,
    /// Host-side veth interfaces, in creation order.
    pub veths: Vec<String>,
    /// Lossy filesystems mounted over node data directories (mount points), recorded before
    /// each mount; a harness that dies leaves them mounted but dead, so `tidewater clean`
    /// detaches them (`umount -l`).
    #[serde(default)]
    pub mounts: Vec<PathBuf>,
}

impl RunState {
    /// The record's path in `dir`.
    pub fn path(dir: &Path, run_id: &str) -> PathBuf {
        dir.join(format!("{run_id}.json"))
    }

    /// Writes the record atomically (write, fsync, rename).
    pub fn save(&self, dir: &Path) -> Result<()> {
        use std::io::Write;
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        let path = Self::path(dir, &self.run_id);
        let tmp = path.with_extension("json.tmp");
        let body = serde_json::to_vec_pretty(self).expect("a run state always serialises");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| Error::io(format!("write {}", path.display()), e))
    }

    /// Reads a record.
    pub fn load(path: &Path) -> Result<RunState> {
        let body =
            std::fs::read(path).map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        serde_json::from_slice(&body).map_err(|e| {
            Error::Config(format!(
                "{} is not a Tidewater run record: {e}",
                path.display()
            ))
        })
    }

    /// Every record in `dir` (none if it does not exist).
    pub fn list(dir: &Path) -> Result<Vec<(PathBuf, RunState)>> {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(Error::io(format!("list {}", dir.display()), e)),
        };
        let mut out = vec![];
        for entry in entries {
            let path = entry.map_err(|e| Error::io("list run records", e))?.path();
            if path.extension().is_some_and(|x| x == "json") {
                out.push((path.clone(), RunState::load(&path)?));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

/// What [`remove_resources`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removed {
    /// Processes killed inside the run's namespaces.
    pub processes: usize,
    /// Namespaces deleted.
    pub namespaces: usize,
    /// Links (veths, bridge) deleted.
    pub links: usize,
    /// Lossy filesystems detached.
    pub mounts: usize,
}

/// Kills every process inside the record's namespaces (SIGCONT first, so paused ones die at
/// once), then detaches the lossy filesystems still mounted (`umount -l`: a dead FUSE server
/// leaves a mount that only answers `ENOTCONN`), then deletes the namespaces, the veths and
/// the bridge, then the record itself.
///
/// Deleting a namespace also deletes its iptables chains and ip rules, so nothing of the
/// run's network faults outlives it. Things already gone are skipped.
pub fn remove_resources(state: &RunState, state_dir: &Path) -> Result<Removed> {
    let mut removed = Removed::default();
    let mut first_error: Option<Error> = None;
    for ns in state.namespaces.iter().rev() {
        if !netns_exists(ns) {
            continue;
        }
        match kill_namespace_processes(ns) {
            Ok(n) => removed.processes += n,
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
        match sys::run(&["ip", "netns", "del", ns]) {
            Ok(_) => removed.namespaces += 1,
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    for mount in state.mounts.iter().rev() {
        if !sys::is_mounted(mount) {
            continue;
        }
        let path = mount.to_string_lossy();
        match sys::run(&["umount", "-l", &path]) {
            Ok(_) => removed.mounts += 1,
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let links = state.veths.iter().rev().chain(state.bridge.iter());
    for link in links {
        if !link_exists(link) {
            continue;
        }
        match sys::run(&["ip", "link", "del", link]) {
            Ok(_) => removed.links += 1,
            // A veth vanishes with its peer's namespace, possibly just after the check above.
            Err(_) if !link_exists(link) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let path = RunState::path(state_dir, &state.run_id);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(removed),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(removed),
        Err(e) => Err(Error::io(format!("remove {}", path.display()), e)),
    }
}

/// Kills every process in `ns` and waits (bounded) until none is left. Returns how many.
fn kill_namespace_processes(ns: &str) -> Result<usize> {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let pids = sys::netns_pids(ns)?;
    for pid in &pids {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGCONT);
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    let deadline = Instant::now() + KILL_WAIT_MAX;
    while !sys::netns_pids(ns)?.is_empty() {
        if Instant::now() > deadline {
            return Err(Error::State(format!(
                "processes in namespace {ns} survived SIGKILL for {KILL_WAIT_MAX:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(pids.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_the_registry_directory() {
        let dir = tempfile::tempdir().unwrap();
        let state = RunState {
            run_id: "ab12".into(),
            harness_pid: 7,
            harness_start_ticks: 12,
            run_dir: "/tmp/run".into(),
            bridge: Some("twab12br".into()),
            namespaces: vec!["tw-ab12-c1".into()],
            veths: vec!["twab12c1".into()],
            mounts: vec!["/tmp/run/nodes/c1/data".into()],
        };
        state.save(dir.path()).unwrap();
        let listed = RunState::list(dir.path()).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].1, state);
        assert!(RunState::list(&dir.path().join("missing"))
            .unwrap()
            .is_empty());
    }
}
