//! Shared fixture of the mount tests: a temporary backing directory and mount point, and a
//! mount that is unmounted when the fixture drops, whether the test passed or panicked.

#![allow(dead_code)]

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use tempfile::TempDir;
use tidewater_lossyfs::{LossyFs, MountHandle, Options};

/// A mounted lossyfs over a fresh backing directory.
pub struct Mounted {
    /// The mount; dropped (unmounted) before the directories are removed, as fields drop in
    /// declaration order.
    pub handle: MountHandle,
    /// The backing directory: what is durable.
    pub backing: PathBuf,
    /// The mount point: the volatile view.
    pub mnt: PathBuf,
    _dir: TempDir,
}

impl Mounted {
    /// A path in the mounted view.
    pub fn view(&self, relative: &str) -> PathBuf {
        self.mnt.join(relative)
    }

    /// A path in the backing directory.
    pub fn durable(&self, relative: &str) -> PathBuf {
        self.backing.join(relative)
    }
}

/// Mounts with default options; `seed` fills the backing directory first (durable state).
pub fn mount(seed: impl FnOnce(&Path)) -> Mounted {
    mount_with(Options::default(), seed)
}

/// Mounts with `options`; `seed` fills the backing directory first (durable state).
pub fn mount_with(options: Options, seed: impl FnOnce(&Path)) -> Mounted {
    assert!(
        Path::new("/dev/fuse").exists(),
        "these tests mount FUSE filesystems: they need /dev/fuse and root (or fusermount3)"
    );
    let dir = tempfile::tempdir().expect("temporary directory");
    let backing = dir.path().join("backing");
    let mnt = dir.path().join("mnt");
    fs::create_dir(&backing).unwrap();
    fs::create_dir(&mnt).unwrap();
    seed(&backing);
    let handle = LossyFs::mount_with(&backing, &mnt, options).expect("mount lossyfs");
    Mounted {
        handle,
        backing: backing.canonicalize().unwrap(),
        mnt: mnt.canonicalize().unwrap(),
        _dir: dir,
    }
}

/// fsync of a directory (what makes entries durable).
pub fn fsync_dir(path: &Path) {
    File::open(path).unwrap().sync_all().unwrap();
}

/// Names in a directory, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
