//! [`LossyFilesystem`]: the FUSE front of a [`State`]. Each request locks the state, calls the
//! matching operation and replies; the control file is served here.
//!
//! Files are opened with `FOPEN_DIRECT_IO` and entries and attributes are given a zero cache
//! lifetime, so the kernel keeps no page cache or attribute of its own for `read` and `write`:
//! after a loss it can show nothing but the new state.
//!
//! Shared writable `mmap` is allowed too (`FUSE_DIRECT_IO_ALLOW_MMAP`, Linux 6.6 and later):
//! Kafka maps its index files. Mapped pages do live in the page cache, and a loss stays
//! faithful because of two things the kernel and the state guarantee together:
//! - when a mapping goes away (`munmap`, or the exit of a killed process) FUSE writes its dirty
//!   pages back before the exit completes, so they reach the state as unsynced writes before
//!   the harness, which kills a node before its loss, asks for the loss; `msync` is an fsync;
//! - a loss gives every inode a new number (numbers are never reused), so no later lookup can
//!   reach a kernel inode, or a cached page, from before the loss.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request,
    TimeOrNow, WriteFlags,
};

use crate::control::{self, Command, COMMAND_BYTES_MAX};
use crate::state::{State, CONTROL_FILE_NAME, CONTROL_INO, ROOT_INO, TTL};

/// The file handle of every open of the control file (it keeps no per-open state).
const CONTROL_FH: FileHandle = FileHandle(0);

/// The FUSE filesystem: a shared [`State`] behind a lock.
pub struct LossyFilesystem {
    /// Shared with the mount handle, which drives losses and syncs directly.
    state: Arc<Mutex<State>>,
}

impl LossyFilesystem {
    /// A filesystem serving `state`.
    pub fn new(state: Arc<Mutex<State>>) -> LossyFilesystem {
        LossyFilesystem { state }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

/// Locks the state; a panic in another request does not make it unusable (each operation
/// leaves the state consistent before anything can fail).
pub fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Executes a control command on the state.
pub fn execute(state: &mut State, command: Command) -> std::io::Result<()> {
    match command {
        Command::LoseUnsynced(mode) => state.lose_unsynced(mode).map(|_| ()),
        Command::Sync => state.sync_all(),
    }
}

fn control_attr() -> FileAttr {
    let now = SystemTime::now();
    FileAttr {
        ino: INodeNo(CONTROL_INO),
        size: 0,
        blocks: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind: FileType::RegularFile,
        perm: 0o600,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn is_control(parent: INodeNo, name: &OsStr) -> bool {
    parent.0 == ROOT_INO && name == CONTROL_FILE_NAME
}

fn time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl Filesystem for LossyFilesystem {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Older kernels refuse a shared mmap of these files (ENODEV); everything else works.
        let _ = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if is_control(parent, name) {
            return reply.entry(&TTL, &control_attr(), Generation(0));
        }
        match self.state().lookup(parent.0, name) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.state().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if ino.0 == CONTROL_INO {
            return reply.attr(&TTL, &control_attr());
        }
        match self.state().attr(ino.0) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        if ino.0 == CONTROL_INO {
            // `echo cmd > control` truncates first; there is nothing to truncate.
            return reply.attr(&TTL, &control_attr());
        }
        let result = self.state().setattr(
            ino.0,
            mode,
            uid,
            gid,
            size,
            atime.map(time),
            mtime.map(time),
        );
        match result {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        match self
            .state()
            .mkdir(parent.0, name, mode, umask, req.uid(), req.gid())
        {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.state().unlink(parent.0, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.state().rmdir(parent.0, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        match self
            .state()
            .rename(parent.0, name, newparent.0, newname, flags.bits())
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if ino.0 == CONTROL_INO {
            return reply.opened(CONTROL_FH, FopenFlags::FOPEN_DIRECT_IO);
        }
        match self.state().open(ino.0, flags.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if ino.0 == CONTROL_INO {
            let text = control::format_status(&self.state().status());
            let bytes = text.as_bytes();
            let start = (offset as usize).min(bytes.len());
            let end = start.saturating_add(size as usize).min(bytes.len());
            return reply.data(&bytes[start..end]);
        }
        match self.state().read(fh.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if ino.0 == CONTROL_INO {
            return reply_control_write(&mut self.state(), data, reply);
        }
        match self.state().write(fh.0, offset, data) {
            Ok(written) => reply.written(written),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2) makes nothing durable.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if ino.0 != CONTROL_INO {
            self.state().release(fh.0);
        }
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if ino.0 == CONTROL_INO {
            return reply.ok();
        }
        match self.state().fsync(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.state().opendir(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let state = self.state();
        let listing = match state.readdir(fh.0) {
            Ok(listing) => listing,
            Err(e) => return reply.error(e),
        };
        for (i, (ino, kind, name)) in listing.iter().enumerate().skip(offset as usize) {
            // The offset given with an entry is where the next readdir resumes.
            if reply.add(INodeNo(*ino), i as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.state().releasedir(fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.state().fsyncdir(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.state().statfs() {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(e.into()),
        }
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        // Permissions are checked by the kernel (`default_permissions`).
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        if is_control(parent, name) {
            return reply.created(
                &TTL,
                &control_attr(),
                Generation(0),
                CONTROL_FH,
                FopenFlags::FOPEN_DIRECT_IO,
            );
        }
        let result = self
            .state()
            .create(parent.0, name, mode, umask, flags, req.uid(), req.gid());
        match result {
            Ok((attr, fh)) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(fh),
                FopenFlags::FOPEN_DIRECT_IO,
            ),
            Err(e) => reply.error(e),
        }
    }
}

/// Parses and executes one control command written to the control file.
fn reply_control_write(state: &mut State, data: &[u8], reply: ReplyWrite) {
    if data.len() > COMMAND_BYTES_MAX {
        return reply.error(Errno::E2BIG);
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return reply.error(Errno::EINVAL);
    };
    let command: Command = match text.parse() {
        Ok(command) => command,
        Err(_) => return reply.error(Errno::EINVAL),
    };
    match execute(state, command) {
        Ok(()) => reply.written(data.len() as u32),
        Err(e) => {
            log_error(state.backing_root(), &format!("{command}: {e}"));
            reply.error(e.into())
        }
    }
}

/// Reports a failure that the caller only sees as an errno.
fn log_error(backing: &Path, message: &str) {
    eprintln!("lossyfs {}: {message}", backing.display());
}
