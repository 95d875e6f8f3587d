//! The store: one directory per run, `store/<name>/<YYYYMMDDTHHMMSS>/`, holding
//! `config.json`, `history.jsonl`, `samples.jsonl`, `final-reads.json`, `results.json`,
//! `report.html`,
//! `harness.log` and `nodes/<node>/` (and, once `tidewater shrink` shrank the run, its
//! `shrunk-plan.toml`, `shrink.md`, `shrink.json` and `shrink/`); `store/latest` is a symlink
//! to the newest run.

use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The files of one run directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    /// `store/<name>/<timestamp>`.
    pub path: PathBuf,
}

impl RunDir {
    /// Wraps an existing run directory (for `check`, `report`, `--replay`).
    pub fn open(path: &Path) -> io::Result<RunDir> {
        if !path.join("config.json").is_file() && !path.join("history.jsonl").is_file() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} is not a run directory (no config.json or history.jsonl)",
                    path.display()
                ),
            ));
        }
        Ok(RunDir {
            path: path.to_path_buf(),
        })
    }

    /// The run's settings, seed and fault schedule.
    pub fn config(&self) -> PathBuf {
        self.path.join("config.json")
    }
    /// The history, one op per line.
    pub fn history(&self) -> PathBuf {
        self.path.join("history.jsonl")
    }
    /// Partition status samples for the ISR plot.
    pub fn samples(&self) -> PathBuf {
        self.path.join("samples.jsonl")
    }
    /// How far the final reads got (decides whether unseen writes can be judged).
    pub fn final_reads(&self) -> PathBuf {
        self.path.join("final-reads.json")
    }
    /// Every replica's own log of every partition, read after the final reads.
    pub fn replicas(&self) -> PathBuf {
        self.path.join("replicas.jsonl")
    }
    /// The checkers' verdict.
    pub fn results(&self) -> PathBuf {
        self.path.join("results.json")
    }
    /// The HTML report.
    pub fn report(&self) -> PathBuf {
        self.path.join("report.html")
    }
    /// The harness's own log.
    pub fn harness_log(&self) -> PathBuf {
        self.path.join("harness.log")
    }
    /// Per-node data and logs.
    pub fn nodes(&self) -> PathBuf {
        self.path.join("nodes")
    }
}

/// `YYYYMMDDTHHMMSS` in UTC for a time.
pub fn timestamp(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian, UTC).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Test names become directory names: keep `[A-Za-z0-9._-]`, replace the rest.
pub fn sanitize_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("run{s}")
    } else {
        s
    }
}

/// Creates `store/<name>/<timestamp>/` (with a `-N` suffix if that second is taken) and
/// `nodes/`, then points `store/latest` at it.
pub fn create_run_dir(store: &Path, name: &str, now: SystemTime) -> io::Result<RunDir> {
    let base = store.join(sanitize_name(name));
    std::fs::create_dir_all(&base)?;
    let stamp = timestamp(now);
    let mut path = base.join(&stamp);
    let mut n = 1;
    loop {
        match std::fs::create_dir(&path) {
            Ok(()) => break,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 100 => {
                path = base.join(format!("{stamp}-{n}"));
                n += 1;
            }
            Err(e) => return Err(e),
        }
    }
    std::fs::create_dir(path.join("nodes"))?;
    point_latest(store, &path)?;
    Ok(RunDir { path })
}

/// Replaces `store/latest` atomically (symlink to a temporary name, then rename) with a
/// relative link, so the store can be moved or copied as a whole.
fn point_latest(store: &Path, run: &Path) -> io::Result<()> {
    let target = run.strip_prefix(store).unwrap_or(run);
    let tmp = store.join(format!(".latest.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)?;
    std::fs::rename(&tmp, store.join("latest"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc_calendar_times() {
        assert_eq!(timestamp(SystemTime::UNIX_EPOCH), "19700101T000000");
        // 2026-11-30T23:08:36Z
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_080_116);
        assert_eq!(timestamp(t), "20261130T230836");
        // A leap day.
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(timestamp(t), "20000229T000000");
    }

    #[test]
    fn run_dirs_follow_the_layout_and_latest_points_at_the_newest() {
        let store = tempfile::tempdir().unwrap();
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_080_116);
        let a = create_run_dir(store.path(), "queue/acks all", t).unwrap();
        assert_eq!(
            a.path,
            store.path().join("queue-acks-all").join("20261130T230836")
        );
        assert!(a.nodes().is_dir());
        let b = create_run_dir(store.path(), "queue/acks all", t).unwrap();
        assert_eq!(b.path.file_name().unwrap(), "20261130T230836-1");
        let latest = std::fs::read_link(store.path().join("latest")).unwrap();
        assert_eq!(latest, Path::new("queue-acks-all/20261130T230836-1"));
        assert_eq!(
            std::fs::canonicalize(store.path().join("latest")).unwrap(),
            std::fs::canonicalize(&b.path).unwrap()
        );
    }

    #[test]
    fn opening_something_that_is_not_a_run_dir_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let err = RunDir::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("not a run directory"), "{err}");
    }
}
