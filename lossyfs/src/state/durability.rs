//! Durability: what fsyncs make durable and what a loss throws away. File fsync writes an
//! overlay into the file's home; directory fsync replays committed journal operations on the
//! backing directory; a loss drops every volatile change (keeping, when torn, a prefix of each
//! file's last write).

use std::fs::{self, DirBuilder, File};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{
    errno_to_io, inode_from_metadata, DirNode, FsResult, Inode, LossReport, Mode, Node, State,
    TornWrite, ROOT_INO,
};
use crate::journal::{Ino, Journal, NsOp};

impl State {
    /// fsync/fdatasync of a file: its content and length become durable in its home. The
    /// file's name does not: that takes an fsync of its directory.
    pub fn fsync(&mut self, ino: Ino) -> FsResult<()> {
        Ok(self.flush_file(ino)?)
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

    /// Writes the kept prefix of `ino`'s last write into its durable file, if the file has a
    /// durable name (a file whose creation is lost is gone whole).
    pub(super) fn tear(&mut self, ino: Ino, seed: u64) -> io::Result<Option<TornWrite>> {
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
    pub(super) fn reset_to_backing(&mut self) -> io::Result<()> {
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
    pub(super) fn commit(&mut self, op: NsOp) -> io::Result<()> {
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
    pub(super) fn drop_durable_name(&mut self, ino: Ino, path: &Path) -> io::Result<bool> {
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
    pub(super) fn flush_file(&mut self, ino: Ino) -> io::Result<()> {
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
    pub(super) fn enforce_dirty_limit(&mut self) -> io::Result<()> {
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
    pub(super) fn journal_push(&mut self, op: NsOp) -> io::Result<()> {
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
}

pub(super) fn orphan_path(orphan_dir: &Path, ino: Ino) -> PathBuf {
    orphan_dir.join(ino.to_string())
}

/// Empties `dir`, creating it (and its parents) if needed.
pub(super) fn reset_dir(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    fs::create_dir_all(dir)
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
}
