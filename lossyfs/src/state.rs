//! [`State`]: the mounted view (volatile, in memory) over the backing directory (durable).
//!
//! The backing directory holds exactly the durable state. Everything the mounted view shows
//! beyond it lives here: per file an [`Overlay`] of unsynced pages and length, and a
//! [`Journal`] of namespace operations that no directory fsync has committed yet. An fsync
//! writes a file's overlay into its backing file; an fsync of a directory replays the journal
//! operations it commits on the backing directory. Losing the unsynced state drops all of it,
//! so the mounted view becomes the backing directory again.
//!
//! Every file has a *home*, the backing file that holds its durable content: its durable
//! path when its name is durable, else a file in the orphan area `<backing>/.lossyfs/orphans`
//! (a file fsynced before its creation was, or unlinked durably while still open). Orphans do
//! not survive a loss, as a real filesystem frees unlinked inodes when it recovers.
//!
//! The methods mirror the FUSE operations and return an [`Errno`] for the caller.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::{self, DirBuilder, File};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType, INodeNo};

use crate::control::{Mode, CONTROL_FILE_NAME};
use crate::journal::{Ino, Journal, NsOp};
use crate::overlay::Overlay;

/// Inode number of the root directory (FUSE's fixed root).
pub const ROOT_INO: Ino = 1;
/// Inode number of the control file `/.lossyfs-control`.
pub const CONTROL_INO: Ino = 2;
/// First inode number handed to a file or directory below the root.
const FIRST_INO: Ino = 3;
/// Name of lossyfs's own directory in the backing root, hidden from the mounted view.
pub const STATE_DIR_NAME: &str = ".lossyfs";
/// Longest entry name accepted (as ext4 and most Linux filesystems).
const NAME_BYTES_MAX: usize = 255;

/// Bounds on the volatile state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Dirty page memory above which the file with the most dirty pages is written back to
    /// its home (made durable) as a kernel's writeback would.
    pub dirty_bytes_max: u64,
    /// Pending namespace operations above which the oldest one is committed, as a journal
    /// commits on its own after a while.
    pub pending_ops_max: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            dirty_bytes_max: 256 * 1024 * 1024,
            pending_ops_max: 100_000,
        }
    }
}

/// What one loss of unsynced state threw away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LossReport {
    /// How the loss treated the last unsynced writes.
    pub mode: Mode,
    /// Files whose content or length differed from their durable state.
    pub unsynced_files: u64,
    /// Memory held by their dirty pages, in bytes (page-granular).
    pub unsynced_bytes: u64,
    /// Namespace operations no directory fsync had committed.
    pub namespace_ops: u64,
    /// For a torn loss: each file whose last write was torn (path relative to the backing
    /// directory), with the bytes of that write kept and its length.
    pub torn_writes: Vec<TornWrite>,
}

/// One write that a torn loss cut short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornWrite {
    /// The file, relative to the backing directory.
    pub path: PathBuf,
    /// Offset of the write.
    pub offset: u64,
    /// Bytes the write had.
    pub length: u64,
    /// Bytes of it that survived.
    pub kept: u64,
}

/// Counters of the volatile state, as the control file reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Files whose content or length differ from their durable state.
    pub unsynced_files: u64,
    /// Memory held by dirty pages, in bytes.
    pub unsynced_bytes: u64,
    /// Namespace operations not yet committed by a directory fsync.
    pub pending_namespace_ops: u64,
    /// Files written back because dirty memory passed its bound.
    pub writebacks: u64,
    /// Losses of unsynced state so far.
    pub losses: u64,
    /// The last loss, if any.
    pub last_loss: Option<LossReport>,
}

/// A regular file's volatile content and its open home.
#[derive(Debug, Default)]
struct FileNode {
    /// Unsynced pages and length over the home's content.
    overlay: Overlay,
    /// The home, opened read-write while the file is open or being flushed.
    backing: Option<File>,
    /// Whether the home is in the orphan area rather than at the durable path.
    orphan: bool,
}

/// A directory's volatile entries.
#[derive(Debug, Default)]
struct DirNode {
    /// Entries by name; `None` until first needed, then read from the backing directory
    /// (a directory not yet loaded has no volatile change, so the backing one is its truth).
    entries: Option<BTreeMap<OsString, Ino>>,
}

#[derive(Debug)]
enum Node {
    File(FileNode),
    Dir(DirNode),
}

/// One file or directory of the mounted view.
#[derive(Debug)]
struct Inode {
    /// Content: file overlay or directory entries.
    node: Node,
    /// Its entry in the mounted view; `None` once unlinked (it may still be open).
    link: Option<(Ino, OsString)>,
    /// Its entry in the durable namespace; `None` while its creation is not durable, and once
    /// its removal is.
    durable: Option<(Ino, OsString)>,
    /// Permission bits.
    perm: u16,
    /// Owner.
    uid: u32,
    /// Group.
    gid: u32,
    /// Last access (kept in memory only).
    atime: SystemTime,
    /// Last modification (kept in memory only).
    mtime: SystemTime,
    /// Last status change (kept in memory only).
    ctime: SystemTime,
    /// References the kernel holds (FUSE lookup count); it may name the inode until forgotten.
    lookups: u64,
    /// Open file handles.
    open_handles: u32,
    /// Pending journal operations naming it; they need it when they commit.
    journal_refs: u32,
}

impl Inode {
    fn kind(&self) -> FileType {
        match self.node {
            Node::File(_) => FileType::RegularFile,
            Node::Dir(_) => FileType::Directory,
        }
    }
}

/// What an open file handle refers to.
#[derive(Debug)]
enum Handle {
    /// An open regular file.
    File(Ino),
    /// An open directory, with the entries it lists (taken at opendir so that removing entries
    /// while listing, as `remove_dir_all` does, skips none).
    Dir(Vec<(Ino, FileType, OsString)>),
}

/// The whole volatile state of one mount.
#[derive(Debug)]
pub struct State {
    /// The backing directory: the durable state.
    backing_root: PathBuf,
    /// Where homes of files without a durable name live.
    orphan_dir: PathBuf,
    /// Bounds on memory.
    limits: Limits,
    /// Every inode the view or the journal still needs, by number.
    inodes: HashMap<Ino, Inode>,
    /// Next inode number; numbers are never reused, even across losses, so the kernel never
    /// confuses an inode from before a loss with one from after.
    next_ino: Ino,
    /// Open file and directory handles.
    handles: HashMap<u64, Handle>,
    /// Next handle number; never reused, like inode numbers.
    next_fh: u64,
    /// Namespace operations not yet durable.
    journal: Journal,
    /// Sum of the overlays' dirty page memory, compared with `limits.dirty_bytes_max`.
    dirty_bytes: u64,
    /// Files written back because of the dirty memory bound.
    writebacks: u64,
    /// Losses so far.
    losses: u64,
    /// The last loss.
    last_loss: Option<LossReport>,
}

/// Result of an operation of the mounted view.
pub type FsResult<T> = Result<T, Errno>;

/// Cache lifetime given to the kernel for entries and attributes: none, so that after a loss
/// the kernel asks again and sees the durable state.
pub const TTL: Duration = Duration::ZERO;

impl State {
    /// Opens the state over `backing_root`: prepares the hidden state directory and throws
    /// away orphans a previous mount left (they were unlinked files).
    pub fn new(backing_root: &Path, limits: Limits) -> io::Result<State> {
        let backing_root = backing_root.canonicalize()?;
        if !backing_root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a directory", backing_root.display()),
            ));
        }
        let orphan_dir = backing_root.join(STATE_DIR_NAME).join("orphans");
        reset_dir(&orphan_dir)?;
        let mut state = State {
            backing_root,
            orphan_dir,
            limits,
            inodes: HashMap::new(),
            next_ino: FIRST_INO,
            handles: HashMap::new(),
            next_fh: 1,
            journal: Journal::default(),
            dirty_bytes: 0,
            writebacks: 0,
            losses: 0,
            last_loss: None,
        };
        state.reset_to_backing()?;
        Ok(state)
    }

    /// The backing directory.
    pub fn backing_root(&self) -> &Path {
        &self.backing_root
    }

    /// Looks `name` up in `parent`; the kernel now holds a reference to the result.
    pub fn lookup(&mut self, parent: Ino, name: &OsStr) -> FsResult<FileAttr> {
        let ino = *self.entries(parent)?.get(name).ok_or(Errno::ENOENT)?;
        self.inode_mut(ino)?.lookups += 1;
        self.attr(ino)
    }

    /// The kernel dropped `count` references to `ino`.
    pub fn forget(&mut self, ino: Ino, count: u64) {
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.lookups = inode.lookups.saturating_sub(count);
            self.maybe_forget(ino);
        }
    }

    /// Attributes of `ino`.
    pub fn attr(&self, ino: Ino) -> FsResult<FileAttr> {
        let inode = self.inode(ino)?;
        let (size, nlink) = match &inode.node {
            Node::File(file) => (file.overlay.len(), u32::from(inode.link.is_some())),
            Node::Dir(_) => (4096, 2),
        };
        Ok(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: inode.atime,
            mtime: inode.mtime,
            ctime: inode.ctime,
            crtime: inode.ctime,
            kind: inode.kind(),
            perm: inode.perm,
            nlink,
            uid: inode.uid,
            gid: inode.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    /// Changes attributes; a new size truncates or extends the file (volatile until fsync).
    /// Permissions, owner and times are kept in memory and are not part of the model.
    #[allow(clippy::too_many_arguments)]
    pub fn setattr(
        &mut self,
        ino: Ino,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    ) -> FsResult<FileAttr> {
        if let Some(size) = size {
            self.truncate(ino, size)?;
        }
        let inode = self.inode_mut(ino)?;
        if let Some(mode) = mode {
            inode.perm = (mode & 0o7777) as u16;
        }
        if let Some(uid) = uid {
            inode.uid = uid;
        }
        if let Some(gid) = gid {
            inode.gid = gid;
        }
        if let Some(atime) = atime {
            inode.atime = atime;
        }
        if let Some(mtime) = mtime {
            inode.mtime = mtime;
        }
        inode.ctime = SystemTime::now();
        self.attr(ino)
    }

    /// Opens a regular file; returns the handle. `O_TRUNC` truncates it (volatile).
    pub fn open(&mut self, ino: Ino, flags: i32) -> FsResult<u64> {
        if !matches!(self.inode(ino)?.node, Node::File(_)) {
            return Err(Errno::EISDIR);
        }
        if flags & libc::O_TRUNC != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY {
            self.truncate(ino, 0)?;
        }
        Ok(self.new_file_handle(ino))
    }

    /// Creates (or, without `O_EXCL`, opens) the regular file `parent/name`.
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        &mut self,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        uid: u32,
        gid: u32,
    ) -> FsResult<(FileAttr, u64)> {
        check_name(parent, name)?;
        if let Some(&existing) = self.entries(parent)?.get(name) {
            if flags & libc::O_EXCL != 0 {
                return Err(Errno::EEXIST);
            }
            let fh = self.open(existing, flags)?;
            self.inode_mut(existing)?.lookups += 1;
            return Ok((self.attr(existing)?, fh));
        }
        let perm = (mode & !umask & 0o7777) as u16;
        let node = Node::File(FileNode::default());
        let ino = self.add_inode(node, parent, name, perm, uid, gid);
        self.journal_push(NsOp::Create {
            parent,
            name: name.to_owned(),
            ino,
        })?;
        self.inode_mut(ino)?.lookups += 1;
        let fh = self.new_file_handle(ino);
        Ok((self.attr(ino)?, fh))
    }

    /// Creates the directory `parent/name`.
    #[allow(clippy::too_many_arguments)]
    pub fn mkdir(
        &mut self,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        umask: u32,
        uid: u32,
        gid: u32,
    ) -> FsResult<FileAttr> {
        check_name(parent, name)?;
        if self.entries(parent)?.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        let perm = (mode & !umask & 0o7777) as u16;
        let node = Node::Dir(DirNode {
            entries: Some(BTreeMap::new()),
        });
        let ino = self.add_inode(node, parent, name, perm, uid, gid);
        self.journal_push(NsOp::Mkdir {
            parent,
            name: name.to_owned(),
            ino,
        })?;
        self.inode_mut(ino)?.lookups += 1;
        self.attr(ino)
    }

    /// Unlinks the regular file `parent/name` (it stays readable through open handles).
    pub fn unlink(&mut self, parent: Ino, name: &OsStr) -> FsResult<()> {
        check_name(parent, name)?;
        let ino = *self.entries(parent)?.get(name).ok_or(Errno::ENOENT)?;
        if !matches!(self.inode(ino)?.node, Node::File(_)) {
            return Err(Errno::EISDIR);
        }
        self.entries(parent)?.remove(name);
        self.unlink_inode(ino);
        self.touch(parent);
        self.journal_push(NsOp::Unlink {
            parent,
            name: name.to_owned(),
            ino,
        })?;
        self.maybe_forget(ino);
        Ok(())
    }

    /// Removes the empty directory `parent/name`.
    pub fn rmdir(&mut self, parent: Ino, name: &OsStr) -> FsResult<()> {
        check_name(parent, name)?;
        let ino = *self.entries(parent)?.get(name).ok_or(Errno::ENOENT)?;
        if !matches!(self.inode(ino)?.node, Node::Dir(_)) {
            return Err(Errno::ENOTDIR);
        }
        if !self.entries(ino)?.is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        self.entries(parent)?.remove(name);
        self.unlink_inode(ino);
        self.touch(parent);
        self.journal_push(NsOp::Rmdir {
            parent,
            name: name.to_owned(),
            ino,
        })?;
        self.maybe_forget(ino);
        Ok(())
    }

    /// Renames `parent/name` to `new_parent/new_name`, replacing what is there (POSIX rules).
    /// `RENAME_NOREPLACE` is honoured; `RENAME_EXCHANGE` and whiteouts are refused.
    pub fn rename(
        &mut self,
        parent: Ino,
        name: &OsStr,
        new_parent: Ino,
        new_name: &OsStr,
        flags: u32,
    ) -> FsResult<()> {
        if flags & !libc::RENAME_NOREPLACE != 0 {
            return Err(Errno::EINVAL);
        }
        check_name(parent, name)?;
        check_name(new_parent, new_name)?;
        let ino = *self.entries(parent)?.get(name).ok_or(Errno::ENOENT)?;
        let replaced = self.entries(new_parent)?.get(new_name).copied();
        if replaced == Some(ino) {
            return Ok(());
        }
        if replaced.is_some() && flags & libc::RENAME_NOREPLACE != 0 {
            return Err(Errno::EEXIST);
        }
        let ino_is_dir = matches!(self.inode(ino)?.node, Node::Dir(_));
        if ino_is_dir && self.is_ancestor_or_self(ino, new_parent) {
            return Err(Errno::EINVAL);
        }
        let mut replaced_is_dir = false;
        if let Some(replaced) = replaced {
            replaced_is_dir = matches!(self.inode(replaced)?.node, Node::Dir(_));
            match (ino_is_dir, replaced_is_dir) {
                (true, false) => return Err(Errno::ENOTDIR),
                (false, true) => return Err(Errno::EISDIR),
                (true, true) if !self.entries(replaced)?.is_empty() => {
                    return Err(Errno::ENOTEMPTY)
                }
                _ => {}
            }
        }
        self.entries(parent)?.remove(name);
        self.entries(new_parent)?.insert(new_name.to_owned(), ino);
        self.inode_mut(ino)?.link = Some((new_parent, new_name.to_owned()));
        if let Some(replaced) = replaced {
            self.unlink_inode(replaced);
        }
        self.touch(parent);
        self.touch(new_parent);
        self.journal_push(NsOp::Rename {
            parent,
            name: name.to_owned(),
            new_parent,
            new_name: new_name.to_owned(),
            ino,
            ino_is_dir,
            replaced,
            replaced_is_dir,
        })?;
        if let Some(replaced) = replaced {
            self.maybe_forget(replaced);
        }
        Ok(())
    }

    /// Reads from an open file.
    pub fn read(&mut self, fh: u64, offset: u64, size: u32) -> FsResult<Vec<u8>> {
        let ino = self.file_handle(fh)?;
        self.open_backing_if_needed(ino)?;
        let file = self.file(ino)?;
        Ok(file
            .overlay
            .read(file.backing.as_ref(), offset, u64::from(size))?)
    }

    /// Writes to an open file (volatile until fsync); returns the bytes written.
    pub fn write(&mut self, fh: u64, offset: u64, data: &[u8]) -> FsResult<u32> {
        let ino = self.file_handle(fh)?;
        self.open_backing_if_needed(ino)?;
        let file = self.file_mut(ino)?;
        let before = file.overlay.dirty_bytes();
        file.overlay.write(file.backing.as_ref(), offset, data)?;
        let after = file.overlay.dirty_bytes();
        self.dirty_bytes = self.dirty_bytes - before + after;
        self.touch(ino);
        self.enforce_dirty_limit()?;
        Ok(data.len() as u32)
    }

    /// Closes a file or directory handle.
    pub fn release(&mut self, fh: u64) {
        if let Some(Handle::File(ino)) = self.handles.remove(&fh) {
            if let Some(inode) = self.inodes.get_mut(&ino) {
                inode.open_handles -= 1;
                if inode.open_handles == 0 {
                    if let Node::File(file) = &mut inode.node {
                        file.backing = None;
                    }
                }
            }
            self.maybe_forget(ino);
        }
    }

    /// fsync/fdatasync of a file: its content and length become durable in its home. The
    /// file's name does not: that takes an fsync of its directory.
    pub fn fsync(&mut self, ino: Ino) -> FsResult<()> {
        Ok(self.flush_file(ino)?)
    }

    /// Opens a directory for listing; returns the handle.
    pub fn opendir(&mut self, ino: Ino) -> FsResult<u64> {
        let parent = match &self.inode(ino)?.link {
            Some((parent, _)) => *parent,
            None => ino,
        };
        let names: Vec<(OsString, Ino)> = self
            .entries(ino)?
            .iter()
            .map(|(name, &child)| (name.clone(), child))
            .collect();
        let mut listing = vec![
            (ino, FileType::Directory, OsString::from(".")),
            (parent, FileType::Directory, OsString::from("..")),
        ];
        for (name, child) in names {
            listing.push((child, self.inode(child)?.kind(), name));
        }
        let fh = self.next_fh;
        self.next_fh += 1;
        self.handles.insert(fh, Handle::Dir(listing));
        Ok(fh)
    }

    /// The listing of an open directory from position `offset` on.
    pub fn readdir(&self, fh: u64) -> FsResult<&[(Ino, FileType, OsString)]> {
        match self.handles.get(&fh) {
            Some(Handle::Dir(listing)) => Ok(listing),
            _ => Err(Errno::EBADF),
        }
    }

    /// Closes a directory handle.
    pub fn releasedir(&mut self, fh: u64) {
        self.handles.remove(&fh);
    }

    /// fsync of a directory: commits the pending namespace operations that changed its
    /// entries, with those they depend on (see [`Journal::take_for_dir`]).
    pub fn fsyncdir(&mut self, ino: Ino) -> FsResult<()> {
        self.inode(ino)?;
        for op in self.journal.take_for_dir(ino) {
            self.commit(op)?;
        }
        Ok(())
    }

    /// Filesystem statistics of the backing directory's filesystem.
    pub fn statfs(&self) -> io::Result<libc::statvfs> {
        let path = std::ffi::CString::new(self.backing_root.as_os_str().as_bytes())?;
        let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a valid NUL-terminated path and a properly sized out-parameter.
        if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stat)
    }

    /// Makes everything durable, as `sync(2)`: commits every pending namespace operation,
    /// then flushes every file.
    pub fn sync_all(&mut self) -> io::Result<()> {
        for op in self.journal.take_all() {
            self.commit(op)?;
        }
        let mut unsynced: Vec<Ino> = self
            .inodes
            .iter()
            .filter(|(_, inode)| matches!(&inode.node, Node::File(f) if f.overlay.is_unsynced()))
            .map(|(&ino, _)| ino)
            .collect();
        unsynced.sort_unstable();
        for ino in unsynced {
            self.flush_file(ino)?;
        }
        Ok(())
    }

    /// Loses every unsynced change, as a power loss would: files return to their last
    /// durable content and length, uncommitted namespace operations are undone. With
    /// [`Mode::Torn`], each file whose last change was a write keeps a prefix of that write,
    /// of a length drawn from the seed and the file's path.
    ///
    /// Every inode and handle from before the loss becomes stale (`ESTALE`, `EBADF`): a
    /// process holding files open across a loss sees them fail, as it would not survive a
    /// power loss either.
    pub fn lose_unsynced(&mut self, mode: Mode) -> io::Result<LossReport> {
        let mut inos: Vec<Ino> = self.inodes.keys().copied().collect();
        inos.sort_unstable();
        let mut report = LossReport {
            mode,
            unsynced_files: 0,
            unsynced_bytes: 0,
            namespace_ops: self.journal.len() as u64,
            torn_writes: Vec::new(),
        };
        for ino in inos {
            let Some(Inode {
                node: Node::File(file),
                ..
            }) = self.inodes.get(&ino)
            else {
                continue;
            };
            if !file.overlay.is_unsynced() {
                continue;
            }
            report.unsynced_files += 1;
            report.unsynced_bytes += file.overlay.dirty_bytes();
            if let Mode::Torn { seed } = mode {
                if let Some(torn) = self.tear(ino, seed)? {
                    report.torn_writes.push(torn);
                }
            }
        }
        self.reset_to_backing()?;
        self.losses += 1;
        self.last_loss = Some(report.clone());
        Ok(report)
    }

    /// Counters for the control file.
    pub fn status(&self) -> Status {
        let mut status = Status {
            pending_namespace_ops: self.journal.len() as u64,
            unsynced_bytes: self.dirty_bytes,
            writebacks: self.writebacks,
            losses: self.losses,
            last_loss: self.last_loss.clone(),
            ..Status::default()
        };
        for inode in self.inodes.values() {
            if let Node::File(file) = &inode.node {
                status.unsynced_files += u64::from(file.overlay.is_unsynced());
            }
        }
        status
    }

    /// Writes the kept prefix of `ino`'s last write into its durable file, if the file has a
    /// durable name (a file whose creation is lost is gone whole).
    fn tear(&mut self, ino: Ino, seed: u64) -> io::Result<Option<TornWrite>> {
        let Some(path) = self.durable_path(ino) else {
            return Ok(None);
        };
        let file = self.file(ino).map_err(errno_to_io)?;
        let Some((offset, length)) = file.overlay.last_write() else {
            return Ok(None);
        };
        let relative = path
            .strip_prefix(&self.backing_root)
            .unwrap_or(&path)
            .to_path_buf();
        let kept = torn_prefix_len(seed, &relative, length);
        let backing = File::options().read(true).write(true).open(&path)?;
        let kept = file.overlay.tear_last_write(&backing, kept)?;
        Ok(Some(TornWrite {
            path: relative,
            offset,
            length,
            kept,
        }))
    }

    /// Drops all volatile state: the view becomes the backing directory.
    fn reset_to_backing(&mut self) -> io::Result<()> {
        let meta = fs::metadata(&self.backing_root)?;
        self.inodes.clear();
        self.handles.clear();
        self.journal = Journal::default();
        self.dirty_bytes = 0;
        let mut root = inode_from_metadata(Node::Dir(DirNode::default()), &meta);
        root.durable = None;
        self.inodes.insert(ROOT_INO, root);
        reset_dir(&self.orphan_dir)
    }

    /// Replays one committed operation on the backing directory.
    fn commit(&mut self, op: NsOp) -> io::Result<()> {
        match &op {
            NsOp::Create { parent, name, ino } => {
                let dst = self.durable_child(*parent, name);
                let perm = self.inode(*ino).map_err(errno_to_io)?.perm;
                let orphan = orphan_path(&self.orphan_dir, *ino);
                let file = self.file_mut(*ino).map_err(errno_to_io)?;
                if file.orphan {
                    fs::rename(orphan, &dst)?;
                    file.orphan = false;
                } else {
                    File::options()
                        .write(true)
                        .create_new(true)
                        .mode(u32::from(perm))
                        .open(&dst)?;
                }
                self.inode_mut(*ino).map_err(errno_to_io)?.durable = Some((*parent, name.clone()));
            }
            NsOp::Mkdir { parent, name, ino } => {
                let dst = self.durable_child(*parent, name);
                let perm = self.inode(*ino).map_err(errno_to_io)?.perm;
                DirBuilder::new().mode(u32::from(perm)).create(&dst)?;
                self.inode_mut(*ino).map_err(errno_to_io)?.durable = Some((*parent, name.clone()));
            }
            NsOp::Unlink { parent, name, ino } => {
                let path = self.durable_child(*parent, name);
                if self.drop_durable_name(*ino, &path)? {
                    fs::remove_file(&path)?;
                }
            }
            NsOp::Rmdir { parent, name, ino } => {
                fs::remove_dir(self.durable_child(*parent, name))?;
                self.inode_mut(*ino).map_err(errno_to_io)?.durable = None;
            }
            NsOp::Rename {
                parent,
                name,
                new_parent,
                new_name,
                ino,
                replaced,
                replaced_is_dir,
                ..
            } => {
                let src = self.durable_child(*parent, name);
                let dst = self.durable_child(*new_parent, new_name);
                match replaced {
                    // The rename itself replaces the old file (or empty directory) at `dst`.
                    Some(replaced) if !replaced_is_dir => {
                        self.drop_durable_name(*replaced, &dst)?;
                    }
                    Some(replaced) => {
                        self.inode_mut(*replaced).map_err(errno_to_io)?.durable = None;
                    }
                    None => {}
                }
                fs::rename(&src, &dst)?;
                self.inode_mut(*ino).map_err(errno_to_io)?.durable =
                    Some((*new_parent, new_name.clone()));
            }
        }
        for ino in op.inodes() {
            if let Some(inode) = self.inodes.get_mut(&ino) {
                inode.journal_refs -= 1;
            }
            self.maybe_forget(ino);
        }
        Ok(())
    }

    /// The durable name `path` of the regular file `ino` goes away (a committed unlink, or a
    /// committed rename over it). A file still open keeps its content: its home moves to the
    /// orphan area. Returns whether the backing file is still at `path`, for the caller to
    /// remove or replace.
    fn drop_durable_name(&mut self, ino: Ino, path: &Path) -> io::Result<bool> {
        let orphan = orphan_path(&self.orphan_dir, ino);
        let inode = self.inode_mut(ino).map_err(errno_to_io)?;
        inode.durable = None;
        let still_open = inode.open_handles > 0;
        let Node::File(file) = &mut inode.node else {
            unreachable!("only regular files are unlinked or replaced as files");
        };
        if still_open {
            fs::rename(path, orphan)?;
            file.orphan = true;
            Ok(false)
        } else {
            file.backing = None;
            Ok(true)
        }
    }

    /// Writes a file's overlay into its home, creating an orphan home if its name is not
    /// durable yet.
    fn flush_file(&mut self, ino: Ino) -> io::Result<()> {
        let unsynced = self.file(ino).map_err(errno_to_io)?.overlay.is_unsynced();
        if !unsynced {
            return Ok(());
        }
        if self.home_path(ino).is_none() {
            let perm = self.inode(ino).map_err(errno_to_io)?.perm;
            let home = File::options()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(u32::from(perm))
                .open(orphan_path(&self.orphan_dir, ino))?;
            let file = self.file_mut(ino).map_err(errno_to_io)?;
            file.orphan = true;
            file.backing = Some(home);
        }
        self.open_backing(ino)?;
        let inode = self.inodes.get_mut(&ino).expect("checked above");
        let open_handles = inode.open_handles;
        let Node::File(file) = &mut inode.node else {
            unreachable!("checked above");
        };
        let before = file.overlay.dirty_bytes();
        let home = file.backing.as_ref().expect("opened above");
        file.overlay.flush(home)?;
        if open_handles == 0 {
            file.backing = None;
        }
        self.dirty_bytes -= before;
        Ok(())
    }

    /// Writes back files, largest overlay first, while dirty memory exceeds its bound.
    fn enforce_dirty_limit(&mut self) -> io::Result<()> {
        while self.dirty_bytes > self.limits.dirty_bytes_max {
            let largest = self
                .inodes
                .iter()
                .filter_map(|(&ino, inode)| match &inode.node {
                    Node::File(file) => Some((file.overlay.dirty_bytes(), ino)),
                    Node::Dir(_) => None,
                })
                .max();
            let Some((bytes, ino)) = largest else { break };
            if bytes == 0 {
                break;
            }
            self.flush_file(ino)?;
            self.writebacks += 1;
        }
        Ok(())
    }

    /// Records a namespace operation, committing the oldest when too many are pending.
    fn journal_push(&mut self, op: NsOp) -> io::Result<()> {
        for ino in op.inodes() {
            if let Some(inode) = self.inodes.get_mut(&ino) {
                inode.journal_refs += 1;
            }
        }
        self.journal.push(op);
        while self.journal.len() > self.limits.pending_ops_max {
            let oldest = self.journal.take_oldest().expect("journal is not empty");
            self.commit(oldest)?;
        }
        Ok(())
    }

    /// Adds a new inode linked as `parent/name` in the view (not durable).
    fn add_inode(
        &mut self,
        node: Node,
        parent: Ino,
        name: &OsStr,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        let now = SystemTime::now();
        self.inodes.insert(
            ino,
            Inode {
                node,
                link: Some((parent, name.to_owned())),
                durable: None,
                perm,
                uid,
                gid,
                atime: now,
                mtime: now,
                ctime: now,
                lookups: 0,
                open_handles: 0,
                journal_refs: 0,
            },
        );
        if let Some(Node::Dir(DirNode {
            entries: Some(entries),
        })) = self.inodes.get_mut(&parent).map(|p| &mut p.node)
        {
            entries.insert(name.to_owned(), ino);
        }
        self.touch(parent);
        ino
    }

    /// The entry `name` in the mounted view is gone; `ino` may live on through handles.
    fn unlink_inode(&mut self, ino: Ino) {
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.link = None;
            inode.ctime = SystemTime::now();
        }
    }

    /// Drops what an unreachable inode no longer needs, and the inode itself once nothing
    /// (kernel, handle, journal) refers to it.
    fn maybe_forget(&mut self, ino: Ino) {
        if ino == ROOT_INO {
            return;
        }
        let Some(inode) = self.inodes.get_mut(&ino) else {
            return;
        };
        if inode.link.is_some() || inode.open_handles > 0 {
            return;
        }
        // Unreachable and closed: nothing can write or fsync it any more.
        if let Node::File(file) = &mut inode.node {
            self.dirty_bytes -= file.overlay.dirty_bytes();
            file.overlay.forget_unsynced(0);
            file.backing = None;
        }
        if inode.lookups == 0 && inode.journal_refs == 0 {
            let orphan = matches!(&inode.node, Node::File(f) if f.orphan);
            self.inodes.remove(&ino);
            if orphan {
                let _ = fs::remove_file(orphan_path(&self.orphan_dir, ino));
            }
        }
    }

    /// Opens the home of `ino` if durable bytes show through its overlay.
    fn open_backing_if_needed(&mut self, ino: Ino) -> FsResult<()> {
        if self.file(ino)?.overlay.needs_backing() {
            self.open_backing(ino)?;
        }
        Ok(())
    }

    /// Opens the home of `ino` (it must have one).
    fn open_backing(&mut self, ino: Ino) -> io::Result<()> {
        if self.file(ino).map_err(errno_to_io)?.backing.is_some() {
            return Ok(());
        }
        let path = self
            .home_path(ino)
            .expect("a file with durable bytes has a home");
        let home = File::options().read(true).write(true).open(path)?;
        self.file_mut(ino).map_err(errno_to_io)?.backing = Some(home);
        Ok(())
    }

    /// Where the durable content of `ino` lives, if anywhere.
    fn home_path(&self, ino: Ino) -> Option<PathBuf> {
        match &self.inodes.get(&ino)?.node {
            Node::File(file) if file.orphan => Some(orphan_path(&self.orphan_dir, ino)),
            _ => self.durable_path(ino),
        }
    }

    /// The backing path of `ino`'s durable name, if it has one.
    fn durable_path(&self, ino: Ino) -> Option<PathBuf> {
        let mut names = Vec::new();
        let mut current = ino;
        while current != ROOT_INO {
            let (parent, name) = self.inodes.get(&current)?.durable.as_ref()?;
            names.push(name);
            current = *parent;
        }
        let mut path = self.backing_root.clone();
        path.extend(names.into_iter().rev());
        Some(path)
    }

    /// The backing path of `name` in the durable directory `parent`. The journal's ordering
    /// guarantees the directory is durable when an operation in it commits.
    fn durable_child(&self, parent: Ino, name: &OsStr) -> PathBuf {
        self.durable_path(parent)
            .expect("a committed operation's directory is durable")
            .join(name)
    }

    /// The entries of directory `dir`, loaded from the backing directory on first use.
    fn entries(&mut self, dir: Ino) -> FsResult<&mut BTreeMap<OsString, Ino>> {
        let loaded = match &self.inode(dir)?.node {
            Node::Dir(d) => d.entries.is_some(),
            Node::File(_) => return Err(Errno::ENOTDIR),
        };
        if !loaded {
            self.load_dir(dir)?;
        }
        match &mut self.inode_mut(dir)?.node {
            Node::Dir(DirNode {
                entries: Some(entries),
            }) => Ok(entries),
            _ => unreachable!("loaded above"),
        }
    }

    /// Reads a directory that has no volatile change from the backing directory. Only
    /// regular files and directories are part of the view.
    fn load_dir(&mut self, dir: Ino) -> io::Result<()> {
        let path = self
            .durable_path(dir)
            .expect("a directory not yet loaded is durable");
        let mut entries = BTreeMap::new();
        for entry in fs::read_dir(&path)? {
            let entry = entry?;
            let name = entry.file_name();
            if dir == ROOT_INO && (name == STATE_DIR_NAME || name == CONTROL_FILE_NAME) {
                continue;
            }
            let meta = entry.metadata()?;
            let node = if meta.is_file() {
                Node::File(FileNode {
                    overlay: Overlay::durable(meta.len()),
                    ..FileNode::default()
                })
            } else if meta.is_dir() {
                Node::Dir(DirNode::default())
            } else {
                continue;
            };
            let ino = self.next_ino;
            self.next_ino += 1;
            let mut inode = inode_from_metadata(node, &meta);
            inode.link = Some((dir, name.clone()));
            inode.durable = Some((dir, name.clone()));
            self.inodes.insert(ino, inode);
            entries.insert(name, ino);
        }
        if let Node::Dir(d) = &mut self.inode_mut(dir).map_err(errno_to_io)?.node {
            d.entries = Some(entries);
        }
        Ok(())
    }

    /// Whether `ancestor` is `ino` or one of its parents in the view.
    fn is_ancestor_or_self(&self, ancestor: Ino, mut ino: Ino) -> bool {
        loop {
            if ino == ancestor {
                return true;
            }
            match self.inodes.get(&ino).and_then(|i| i.link.as_ref()) {
                Some((parent, _)) => ino = *parent,
                None => return false,
            }
        }
    }

    fn new_file_handle(&mut self, ino: Ino) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        self.handles.insert(fh, Handle::File(ino));
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.open_handles += 1;
        }
        fh
    }

    fn file_handle(&self, fh: u64) -> FsResult<Ino> {
        match self.handles.get(&fh) {
            Some(Handle::File(ino)) => Ok(*ino),
            _ => Err(Errno::EBADF),
        }
    }

    fn truncate(&mut self, ino: Ino, len: u64) -> FsResult<()> {
        let file = self.file_mut(ino)?;
        let before = file.overlay.dirty_bytes();
        file.overlay.truncate(len);
        let after = file.overlay.dirty_bytes();
        self.dirty_bytes = self.dirty_bytes - before + after;
        self.touch(ino);
        Ok(())
    }

    fn touch(&mut self, ino: Ino) {
        if let Some(inode) = self.inodes.get_mut(&ino) {
            let now = SystemTime::now();
            inode.mtime = now;
            inode.ctime = now;
        }
    }

    fn inode(&self, ino: Ino) -> FsResult<&Inode> {
        self.inodes.get(&ino).ok_or(Errno::ESTALE)
    }

    fn inode_mut(&mut self, ino: Ino) -> FsResult<&mut Inode> {
        self.inodes.get_mut(&ino).ok_or(Errno::ESTALE)
    }

    fn file(&self, ino: Ino) -> FsResult<&FileNode> {
        match &self.inode(ino)?.node {
            Node::File(file) => Ok(file),
            Node::Dir(_) => Err(Errno::EISDIR),
        }
    }

    fn file_mut(&mut self, ino: Ino) -> FsResult<&mut FileNode> {
        match &mut self.inode_mut(ino)?.node {
            Node::File(file) => Ok(file),
            Node::Dir(_) => Err(Errno::EISDIR),
        }
    }
}

/// Refuses names the view cannot hold: lossyfs's own names in the root, and overlong ones.
fn check_name(parent: Ino, name: &OsStr) -> FsResult<()> {
    if name.len() > NAME_BYTES_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    if parent == ROOT_INO && (name == STATE_DIR_NAME || name == CONTROL_FILE_NAME) {
        return Err(Errno::EPERM);
    }
    Ok(())
}

fn inode_from_metadata(node: Node, meta: &fs::Metadata) -> Inode {
    let time = |secs: i64, nsecs: i64| {
        UNIX_EPOCH + Duration::new(secs.max(0) as u64, nsecs.clamp(0, 999_999_999) as u32)
    };
    Inode {
        node,
        link: None,
        durable: None,
        perm: (meta.mode() & 0o7777) as u16,
        uid: meta.uid(),
        gid: meta.gid(),
        atime: time(meta.atime(), meta.atime_nsec()),
        mtime: time(meta.mtime(), meta.mtime_nsec()),
        ctime: time(meta.ctime(), meta.ctime_nsec()),
        lookups: 0,
        open_handles: 0,
        journal_refs: 0,
    }
}

fn orphan_path(orphan_dir: &Path, ino: Ino) -> PathBuf {
    orphan_dir.join(ino.to_string())
}

/// Empties `dir`, creating it (and its parents) if needed.
fn reset_dir(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    fs::create_dir_all(dir)
}

fn errno_to_io(errno: Errno) -> io::Error {
    io::Error::from_raw_os_error(errno.code())
}

/// How many bytes of a `length`-byte write a torn loss keeps: drawn uniformly from
/// `0..length` by the seed and the file's path, so a given seed tears the same file the same
/// way whatever order files were touched in.
pub fn torn_prefix_len(seed: u64, path: &Path, length: u64) -> u64 {
    if length == 0 {
        return 0;
    }
    // FNV-1a of the path, mixed with the seed by splitmix64.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in path.as_os_str().as_bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = (seed ^ hash).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    z % length
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_prefix_is_below_the_write_length_and_depends_on_seed_and_path() {
        let path = Path::new("t0-0/00000000000000000000.log");
        for length in [1, 2, 17, 4096] {
            for seed in 0..50 {
                assert!(torn_prefix_len(seed, path, length) < length);
            }
        }
        assert_eq!(
            torn_prefix_len(7, path, 1000),
            torn_prefix_len(7, path, 1000)
        );
        let by_seed: std::collections::HashSet<u64> =
            (0..20).map(|s| torn_prefix_len(s, path, 1000)).collect();
        assert!(by_seed.len() > 10, "seeds spread the prefix: {by_seed:?}");
    }

    #[test]
    fn names_of_lossyfs_itself_are_refused_in_the_root_only() {
        assert_eq!(
            check_name(ROOT_INO, OsStr::new(STATE_DIR_NAME)),
            Err(Errno::EPERM)
        );
        assert_eq!(
            check_name(ROOT_INO, OsStr::new(CONTROL_FILE_NAME)),
            Err(Errno::EPERM)
        );
        assert_eq!(check_name(5, OsStr::new(STATE_DIR_NAME)), Ok(()));
        assert_eq!(
            check_name(5, OsStr::new(&"x".repeat(256))),
            Err(Errno::ENAMETOOLONG)
        );
    }
}
