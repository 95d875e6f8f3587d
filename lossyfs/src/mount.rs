//! [`LossyFs::mount`]: mounts a lossyfs over a backing directory in a background session;
//! [`MountHandle`] drives it and unmounts it when dropped.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use fuser::{BackgroundSession, Config, MountOption, SessionACL};

use crate::control::Command;
use crate::fuse_ops::{self, LossyFilesystem};
use crate::state::{Limits, LossReport, Mode, State, Status, STATE_DIR_NAME};

/// Settings of a mount.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Bounds on the volatile state (dirty memory, pending namespace operations).
    pub limits: Limits,
    /// Let users other than the mounting one use the mount (FUSE's `allow_other`; a non-root
    /// mounter needs `user_allow_other` in `/etc/fuse.conf`).
    pub allow_other: bool,
}

/// The lossy filesystem.
pub struct LossyFs;

impl LossyFs {
    /// Mounts a lossyfs at `mountpoint` over `backing` with default options.
    pub fn mount(backing: &Path, mountpoint: &Path) -> io::Result<MountHandle> {
        LossyFs::mount_with(backing, mountpoint, Options::default())
    }

    /// Mounts a lossyfs at `mountpoint` over `backing`. The mount serves requests from a
    /// background thread until the handle is dropped or [`MountHandle::unmount`] is called.
    pub fn mount_with(
        backing: &Path,
        mountpoint: &Path,
        options: Options,
    ) -> io::Result<MountHandle> {
        let state = Arc::new(Mutex::new(State::new(backing, options.limits)?));
        let backing = fuse_ops::lock(&state).backing_root().to_path_buf();
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName(format!("lossyfs:{}", backing.display())),
            MountOption::Subtype("lossyfs".to_string()),
            MountOption::DefaultPermissions,
            MountOption::NoAtime,
        ];
        config.acl = if options.allow_other {
            SessionACL::All
        } else {
            SessionACL::Owner
        };
        let session = fuser::spawn_mount(
            LossyFilesystem::new(Arc::clone(&state)),
            mountpoint,
            &config,
        )?;
        Ok(MountHandle {
            session: Some(session),
            state,
            backing,
            mountpoint: mountpoint.canonicalize()?,
        })
    }
}

/// A mounted lossyfs. Dropping it unmounts (lazily if the mount is busy).
pub struct MountHandle {
    /// The FUSE session; `None` once unmounted.
    session: Option<BackgroundSession>,
    /// The state the session serves, shared so the handle can drive it directly.
    state: Arc<Mutex<State>>,
    /// The backing directory (canonical).
    backing: PathBuf,
    /// The mount point (canonical).
    mountpoint: PathBuf,
}

impl MountHandle {
    /// Where the filesystem is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The backing directory, which holds exactly the durable state.
    pub fn backing(&self) -> &Path {
        &self.backing
    }

    /// Loses every unsynced change (see [`Mode`]); returns what was lost.
    pub fn lose_unsynced(&self, mode: Mode) -> io::Result<LossReport> {
        fuse_ops::lock(&self.state).lose_unsynced(mode)
    }

    /// Makes every change durable, as `sync(2)`.
    pub fn sync_all(&self) -> io::Result<()> {
        fuse_ops::execute(&mut fuse_ops::lock(&self.state), Command::Sync)
    }

    /// Counters of the volatile state.
    pub fn status(&self) -> Status {
        fuse_ops::lock(&self.state).status()
    }

    /// Unmounts, reporting failure (a busy mount is then detached lazily). Unsynced state is
    /// lost, as at a power loss: unmounting is not a sync.
    pub fn unmount(mut self) -> io::Result<()> {
        self.unmount_inner()
    }

    fn unmount_inner(&mut self) -> io::Result<()> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        let result = session.umount_and_join().or_else(|e| {
            // Busy (a process still has a file open): detach it so the mount point is free;
            // the session ends when the last user lets go.
            detach(&self.mountpoint)?;
            Err(e)
        });
        // Nothing from the orphan area outlives the mount: those files were unlinked.
        let _ = fs::remove_dir_all(self.backing.join(STATE_DIR_NAME));
        result
    }
}

impl Drop for MountHandle {
    fn drop(&mut self) {
        if let Err(e) = self.unmount_inner() {
            eprintln!("lossyfs: unmounting {}: {e}", self.mountpoint.display());
        }
    }
}

/// Lazily unmounts `mountpoint` (`umount2(MNT_DETACH)`).
pub fn detach(mountpoint: &Path) -> io::Result<()> {
    let path = CString::new(mountpoint.as_os_str().as_bytes())?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
