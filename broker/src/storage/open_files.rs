//! The broker's open-file budget, checked at start-up before any log is opened.
//!
//! Every segment keeps its `.log` and `.index` open (as Kafka does, see `docs/storage.md`), so
//! a broker holding `S` segments needs `2 * S` file descriptors plus a few for listeners,
//! connections and checkpoints. Kafka asks operators to raise the open-file limit; the broker
//! does what it can itself: it raises its soft `RLIMIT_NOFILE` to the hard limit, and when even
//! that cannot hold its segments it refuses to start with a message saying how many files it
//! needs, instead of opening logs until `EMFILE` and serving nothing.

use std::io;
use std::path::{Path, PathBuf};

/// File descriptors each segment holds while the broker runs: its `.log` and its `.index`.
pub const FILES_PER_SEGMENT: u64 = 2;

/// File descriptors kept for everything but segments: standard streams, the runtime's
/// epoll and event fds, listeners, log directory locks, checkpoint and catalog writes, a few
/// connections (a broker that can hold its logs but not one client is no better).
pub const FILES_RESERVED: u64 = 128;

/// The process's `RLIMIT_NOFILE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimit {
    /// What the process may open now.
    pub soft: u64,
    /// What the soft limit may be raised to without privileges.
    pub hard: u64,
}

/// The current limit.
pub fn open_file_limit() -> io::Result<FileLimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(FileLimit {
        soft: limit.rlim_cur,
        hard: limit.rlim_max,
    })
}

/// Raises the soft limit to the hard one (Linux refuses more than `fs.nr_open`, so an
/// unlimited hard limit is capped there) and returns the limit in force afterwards. A raise
/// that the kernel refuses leaves the limit as it was.
pub fn raise_open_file_limit() -> io::Result<FileLimit> {
    let limit = open_file_limit()?;
    let target = limit.hard.min(nr_open().unwrap_or(1 << 20));
    if target <= limit.soft {
        return Ok(limit);
    }
    let raised = libc::rlimit {
        rlim_cur: target,
        rlim_max: limit.hard,
    };
    // SAFETY: setrlimit reads the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        tracing::warn!(
            "cannot raise the open-file limit from {} to {target}: {}",
            limit.soft,
            io::Error::last_os_error()
        );
        return Ok(limit);
    }
    open_file_limit()
}

/// The kernel's ceiling on a process's open files.
fn nr_open() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Segments (`.log` files) in the partition directories of `log_dirs`; directories of
/// deleted partitions (`-delete`), which start-up removes, do not count. A log directory
/// that does not exist yet holds none.
pub fn count_segments(log_dirs: &[PathBuf]) -> io::Result<u64> {
    let mut segments = 0;
    for dir in log_dirs {
        let entries = match std::fs::read_dir(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            other => other?,
        };
        for entry in entries {
            let entry = entry?;
            let deleted = entry.file_name().to_string_lossy().ends_with("-delete");
            if entry.file_type()?.is_dir() && !deleted {
                segments += count_logs(&entry.path())?;
            }
        }
    }
    Ok(segments)
}

fn count_logs(partition_dir: &Path) -> io::Result<u64> {
    let mut logs = 0;
    for entry in std::fs::read_dir(partition_dir)? {
        if entry?.file_name().to_string_lossy().ends_with(".log") {
            logs += 1;
        }
    }
    Ok(logs)
}

/// File descriptors a broker holding `segments` segments needs.
pub fn files_needed(segments: u64) -> u64 {
    segments
        .saturating_mul(FILES_PER_SEGMENT)
        .saturating_add(FILES_RESERVED)
}

/// Whether `segments` fit within `limit`; the error is the message to stop with.
pub fn check_budget(segments: u64, limit: FileLimit) -> Result<(), String> {
    let needed = files_needed(segments);
    if needed <= limit.soft {
        return Ok(());
    }
    Err(format!(
        "the log directories hold {segments} segments, which need {needed} open files \
         ({FILES_PER_SEGMENT} per segment + {FILES_RESERVED}), but the open-file limit is {} \
         (hard limit {}); raise it (`ulimit -n`, `LimitNOFILE=` in systemd) to at least \
         {needed}, or make room by deleting topics; no log was opened",
        limit.soft, limit.hard
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_of_live_partitions_are_counted_and_deleted_ones_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        for (partition, files) in [
            (
                "a-0",
                &["00000000000000000000.log", "00000000000000000000.index"][..],
            ),
            (
                "a-1",
                &["00000000000000000000.log", "00000000000000000007.log"][..],
            ),
            ("b-0.17x0-delete", &["00000000000000000000.log"][..]),
        ] {
            std::fs::create_dir_all(logs.join(partition)).unwrap();
            for file in files {
                std::fs::write(logs.join(partition).join(file), b"").unwrap();
            }
        }
        std::fs::write(logs.join("topics.json"), b"{}").unwrap();
        let missing = dir.path().join("not-yet");
        assert_eq!(count_segments(&[logs, missing]).unwrap(), 3);
    }

    #[test]
    fn the_budget_refuses_more_segments_than_the_limit_holds_and_says_what_is_needed() {
        let limit = FileLimit {
            soft: 1024,
            hard: 4096,
        };
        assert_eq!(check_budget(0, limit), Ok(()));
        assert_eq!(check_budget((1024 - FILES_RESERVED) / 2, limit), Ok(()));
        let refused = check_budget(600, limit).unwrap_err();
        assert!(refused.contains("600 segments"), "{refused}");
        assert!(refused.contains(&format!("need {}", 1200 + FILES_RESERVED)));
        assert!(refused.contains("limit is 1024"), "{refused}");
        assert_eq!(files_needed(u64::MAX), u64::MAX);
    }

    #[test]
    fn raising_never_lowers_the_limit() {
        let before = open_file_limit().unwrap();
        let after = raise_open_file_limit().unwrap();
        assert!(after.soft >= before.soft && after.hard == before.hard);
    }
}
