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
//! The methods mirror the FUSE operations and return an [`Errno`] for the caller. This module
//! holds the view (inodes, entries, handles, namespace operations); `durability` holds what
//! makes changes durable (fsync, directory fsync, writeback) and what loses them.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType, INodeNo};

use crate::journal::{Ino, Journal, NsOp};
use crate::overlay::Overlay;

mod durability;

pub use durability::torn_prefix_len;
use durability::{orphan_path, reset_dir};

/// Inode number of the root directory (FUSE's fixed root).
pub const ROOT_INO: Ino = 1;
/// Name of the control file in the root of every mount.
pub const CONTROL_FILE_NAME: &str = ".lossyfs-control";
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

/// How a loss treats the last unsynced writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every unsynced change is lost: files return to their last durable content and length.
    Clean,
    /// As `Clean`, except that each file whose last change was a write keeps a prefix of that
    /// write (possibly empty, never all of it), drawn from the seed and the file's path.
    Torn {
        /// Seed of the prefix lengths.
        seed: u64,
    },
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

fn errno_to_io(errno: Errno) -> io::Error {
    io::Error::from_raw_os_error(errno.code())
}

#[cfg(test)]
mod tests {
    use super::*;

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
