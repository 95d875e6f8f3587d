//! Persistence of the controller state: one JSON file written atomically (temp file, fsync,
//! rename, fsync of the directory), so a crash leaves either the old or the new state.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::state::ControllerSnapshot;

/// File name of the controller state inside its data directory.
pub const STATE_FILE_NAME: &str = "controller-state.json";

/// Reads and writes the controller snapshot in one directory.
#[derive(Debug, Clone)]
pub struct ControllerStore {
    /// The state file (`<dir>/controller-state.json`).
    path: PathBuf,
}

impl ControllerStore {
    /// A store in `dir`, created if missing.
    pub fn open(dir: &Path) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        Ok(Self {
            path: dir.join(STATE_FILE_NAME),
        })
    }

    /// The persisted snapshot, or `None` on first start.
    pub fn load(&self) -> io::Result<Option<ControllerSnapshot>> {
        match fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}", self.path.display()),
                )
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Persists the snapshot atomically.
    pub fn save(&self, snapshot: &ControllerSnapshot) -> io::Result<()> {
        let bytes = serde_json::to_vec_pretty(snapshot).map_err(io::Error::other)?;
        write_file_atomically(&self.path, &bytes)
    }
}

/// Writes `bytes` to `path` so that readers see the old or the new content, never a mix, even
/// after a crash: write a temporary file, fsync it, rename it over `path`, fsync the directory.
pub fn write_file_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::state::{ControllerConfig, ControllerState};

    #[test]
    fn save_then_load_returns_the_same_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let store = ControllerStore::open(dir.path()).unwrap();
        assert_eq!(store.load().unwrap(), None);
        let mut state = ControllerState::new(ControllerConfig::default());
        state.register_broker(1, "http://127.0.0.1:1", None, 0);
        store.save(state.snapshot()).unwrap();
        let loaded = store.load().unwrap().unwrap();
        assert_eq!(loaded.metadata_version, state.metadata_version());
        assert_eq!(loaded.brokers[&1].address, "http://127.0.0.1:1");
        assert!(!dir.path().join("controller-state.tmp").exists());
    }

    #[test]
    fn corrupt_state_file_is_an_error_not_an_empty_cluster() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(STATE_FILE_NAME), b"{not json").unwrap();
        let store = ControllerStore::open(dir.path()).unwrap();
        assert_eq!(store.load().unwrap_err().kind(), io::ErrorKind::InvalidData);
    }
}
