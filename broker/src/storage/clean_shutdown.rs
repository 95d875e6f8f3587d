//! The clean-shutdown marker (Kafka's `.kafka_cleanshutdown`, KIP-966).
//!
//! A broker that stops in order, after flushing every log, writes `.tidewater_cleanshutdown`
//! into each log directory with its broker epoch. At start-up it takes the markers (reads and
//! removes them, durably, before anything else is written) and tells the controller the epoch
//! when every directory had one with the same epoch. A broker killed, crashed or cut from power
//! leaves no marker, so the controller knows it may have lost unflushed records and takes it
//! out of every ISR and ELR.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::checkpoint::{sync_dir, write_atomically};

/// The marker's file name in each log directory.
pub const MARKER_FILE_NAME: &str = ".tidewater_cleanshutdown";

/// The marker's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Marker {
    /// Format version (0).
    version: u32,
    /// The broker epoch of the incarnation that stopped.
    broker_epoch: u64,
}

fn marker_path(dir: &Path) -> PathBuf {
    dir.join(MARKER_FILE_NAME)
}

/// Reads and removes the markers of `dirs`. Returns the epoch they name when every directory
/// had a readable marker and all name the same epoch; `None` otherwise (an unclean shutdown,
/// or a first start). The removal is made durable before returning, so a crash from here on
/// is seen as unclean at the next start.
pub fn take(dirs: &[PathBuf]) -> io::Result<Option<u64>> {
    let mut epochs = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let path = marker_path(dir);
        let marker = match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<Marker>(&bytes).ok(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if path.exists() {
            fs::remove_file(&path)?;
            sync_dir(dir)?;
        }
        epochs.push(marker.map(|m| m.broker_epoch));
    }
    let first = epochs.first().copied().flatten();
    let all_same = epochs.iter().all(|&e| e.is_some() && e == first);
    Ok(first.filter(|_| all_same))
}

/// Writes the marker with `broker_epoch` into every directory of `dirs` (write, fsync,
/// rename, fsync the directory). Call it last, after every log is flushed.
pub fn write(dirs: &[PathBuf], broker_epoch: u64) -> io::Result<()> {
    let marker = Marker {
        version: 0,
        broker_epoch,
    };
    let bytes = serde_json::to_vec(&marker).map_err(io::Error::other)?;
    for dir in dirs {
        write_atomically(&marker_path(dir), &bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(n: usize) -> (tempfile::TempDir, Vec<PathBuf>) {
        let root = tempfile::tempdir().unwrap();
        let dirs: Vec<PathBuf> = (0..n).map(|i| root.path().join(format!("d{i}"))).collect();
        for d in &dirs {
            fs::create_dir_all(d).unwrap();
        }
        (root, dirs)
    }

    #[test]
    fn written_marker_is_taken_once() {
        let (_root, dirs) = dirs(2);
        write(&dirs, 7).unwrap();
        assert_eq!(take(&dirs).unwrap(), Some(7));
        // Taken: a crash after this start is an unclean shutdown.
        assert_eq!(take(&dirs).unwrap(), None);
        assert!(!dirs[0].join(MARKER_FILE_NAME).exists());
    }

    #[test]
    fn first_start_and_missing_or_mixed_markers_are_unclean() {
        let (_root, dirs) = dirs(2);
        assert_eq!(take(&dirs).unwrap(), None);
        write(&dirs[..1], 3).unwrap();
        assert_eq!(take(&dirs).unwrap(), None, "one directory without a marker");
        write(&dirs[..1], 3).unwrap();
        write(&dirs[1..], 4).unwrap();
        assert_eq!(take(&dirs).unwrap(), None, "markers of two incarnations");
        fs::write(dirs[0].join(MARKER_FILE_NAME), b"garbage").unwrap();
        assert_eq!(take(&dirs[..1]).unwrap(), None, "unreadable marker");
        assert!(!dirs[0].join(MARKER_FILE_NAME).exists());
    }
}
