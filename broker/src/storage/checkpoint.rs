//! Small checkpoint files in a partition directory, replaced atomically.
//!
//! Format (Kafka's checkpoint style, plain text): a version line `0`, a count line, then one
//! entry per line. Offsets checkpoints hold a single number per entry; the leader-epoch
//! checkpoint holds `epoch start_offset` pairs.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use super::LogError;

/// Version written on the first line of every checkpoint file.
const CHECKPOINT_VERSION: &str = "0";

/// Writes `bytes` to `path` so that after a crash the file holds either the old or the new
/// content: write a temporary file, fsync it, rename it over `path`, fsync the directory.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp_path = path.with_file_name(tmp_name);
    {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp_path)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&tmp_path, path)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Fsyncs a directory so that file creations, renames and deletions in it are durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes checkpoint lines (each already formatted) atomically.
pub fn write_entries(path: &Path, entries: &[String]) -> io::Result<()> {
    let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", entries.len());
    for entry in entries {
        text.push_str(entry);
        text.push('\n');
    }
    write_atomically(path, text.as_bytes())
}

/// Reads the entry lines of a checkpoint; `Ok(None)` when the file does not exist.
pub fn read_entries(path: &Path) -> Result<Option<Vec<String>>, LogError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::Io(e)),
    };
    let bad = |why: &str| LogError::Corrupt(format!("checkpoint {}: {why}", path.display()));
    let mut lines = text.lines();
    if lines.next() != Some(CHECKPOINT_VERSION) {
        return Err(bad("unknown version"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| bad("bad count line"))?;
    let entries: Vec<String> = lines
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    if entries.len() != count {
        return Err(bad("entry count does not match"));
    }
    Ok(Some(entries))
}

/// Writes a checkpoint holding one offset.
pub fn write_offset(path: &Path, offset: u64) -> io::Result<()> {
    write_entries(path, &[offset.to_string()])
}

/// Reads a checkpoint holding one offset; `Ok(None)` when the file does not exist.
pub fn read_offset(path: &Path) -> Result<Option<u64>, LogError> {
    let Some(entries) = read_entries(path)? else {
        return Ok(None);
    };
    match entries.as_slice() {
        [only] => only.parse().map(Some).map_err(|_| {
            LogError::Corrupt(format!(
                "checkpoint {}: bad offset {only:?}",
                path.display()
            ))
        }),
        _ => Err(LogError::Corrupt(format!(
            "checkpoint {}: expected one entry",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_checkpoint_round_trips_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log-start-offset-checkpoint");
        assert_eq!(read_offset(&path).unwrap(), None);
        write_offset(&path, 17).unwrap();
        write_offset(&path, 42).unwrap();
        assert_eq!(read_offset(&path).unwrap(), Some(42));
        assert_eq!(fs::read_to_string(&path).unwrap(), "0\n1\n42\n");
        assert!(!dir.path().join("log-start-offset-checkpoint.tmp").exists());
    }

    #[test]
    fn garbage_checkpoint_is_reported_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cp");
        fs::write(&path, "0\n2\n5\n").unwrap();
        assert!(matches!(read_offset(&path), Err(LogError::Corrupt(_))));
        fs::write(&path, "9\n1\n5\n").unwrap();
        assert!(matches!(read_offset(&path), Err(LogError::Corrupt(_))));
    }
}
