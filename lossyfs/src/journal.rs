//! [`Journal`]: namespace operations (create, mkdir, unlink, rmdir, rename) that the mounted
//! view shows but that are not durable yet, in the order they happened.
//!
//! An fsync of directory `D` commits every pending operation that changed `D`'s entries,
//! together with every earlier pending operation that shares an object with one being
//! committed (a directory whose entries it changes, or a directory it creates, removes or
//! moves), transitively. So for each object the committed operations are always a prefix of
//! its operations, the durable namespace is always one the mounted view could have shown
//! given that order, and each committed operation finds its parent directories durable.

use std::collections::HashSet;
use std::ffi::OsString;

/// An inode number of the mounted view.
pub type Ino = u64;

/// One namespace operation, recorded when the mounted view performed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NsOp {
    /// A regular file `ino` was created as `parent/name`.
    Create {
        /// Directory that got the entry.
        parent: Ino,
        /// Entry name.
        name: OsString,
        /// The new file.
        ino: Ino,
    },
    /// A directory `ino` was created as `parent/name`.
    Mkdir {
        /// Directory that got the entry.
        parent: Ino,
        /// Entry name.
        name: OsString,
        /// The new directory.
        ino: Ino,
    },
    /// The regular file `ino` at `parent/name` was unlinked.
    Unlink {
        /// Directory that lost the entry.
        parent: Ino,
        /// Entry name.
        name: OsString,
        /// The file that was unlinked.
        ino: Ino,
    },
    /// The empty directory `ino` at `parent/name` was removed.
    Rmdir {
        /// Directory that lost the entry.
        parent: Ino,
        /// Entry name.
        name: OsString,
        /// The directory that was removed.
        ino: Ino,
    },
    /// `ino` moved from `parent/name` to `new_parent/new_name`, replacing `replaced` if set.
    Rename {
        /// Directory that lost the entry.
        parent: Ino,
        /// Old entry name.
        name: OsString,
        /// Directory that got the entry.
        new_parent: Ino,
        /// New entry name.
        new_name: OsString,
        /// The inode that moved.
        ino: Ino,
        /// Whether the moved inode is a directory (then it is an object of the operation).
        ino_is_dir: bool,
        /// The inode that was at the new name and is gone with the rename.
        replaced: Option<Ino>,
        /// Whether the replaced inode is a (necessarily empty) directory.
        replaced_is_dir: bool,
    },
}

impl NsOp {
    /// Directories whose entries this operation changed: an fsync of one of them commits it.
    pub fn dirs(&self) -> Vec<Ino> {
        match self {
            NsOp::Create { parent, .. }
            | NsOp::Mkdir { parent, .. }
            | NsOp::Unlink { parent, .. }
            | NsOp::Rmdir { parent, .. } => vec![*parent],
            NsOp::Rename {
                parent, new_parent, ..
            } => vec![*parent, *new_parent],
        }
    }

    /// Objects whose operations must become durable in order: the directories whose entries
    /// changed, and any directory created, removed or moved.
    pub fn objects(&self) -> Vec<Ino> {
        let mut objects = self.dirs();
        match self {
            NsOp::Mkdir { ino, .. } | NsOp::Rmdir { ino, .. } => objects.push(*ino),
            NsOp::Rename {
                ino,
                ino_is_dir,
                replaced,
                replaced_is_dir,
                ..
            } => {
                if *ino_is_dir {
                    objects.push(*ino);
                }
                if let (Some(replaced), true) = (replaced, replaced_is_dir) {
                    objects.push(*replaced);
                }
            }
            NsOp::Create { .. } | NsOp::Unlink { .. } => {}
        }
        objects
    }

    /// Every inode the operation names; the state keeps each alive until the operation is
    /// committed or discarded.
    pub fn inodes(&self) -> Vec<Ino> {
        match self {
            NsOp::Create { parent, ino, .. }
            | NsOp::Mkdir { parent, ino, .. }
            | NsOp::Unlink { parent, ino, .. }
            | NsOp::Rmdir { parent, ino, .. } => vec![*parent, *ino],
            NsOp::Rename {
                parent,
                new_parent,
                ino,
                replaced,
                ..
            } => {
                let mut inodes = vec![*parent, *new_parent, *ino];
                inodes.extend(replaced);
                inodes
            }
        }
    }
}

/// The pending namespace operations, oldest first.
#[derive(Debug, Default)]
pub struct Journal {
    /// Operations not yet durable, in the order the mounted view performed them.
    ops: Vec<NsOp>,
}

impl Journal {
    /// Number of pending operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Records an operation the mounted view just performed.
    pub fn push(&mut self, op: NsOp) {
        self.ops.push(op);
    }

    /// Removes and returns, oldest first, what an fsync of directory `dir` makes durable.
    pub fn take_for_dir(&mut self, dir: Ino) -> Vec<NsOp> {
        let mut objects: HashSet<Ino> = HashSet::new();
        let mut taken = vec![false; self.ops.len()];
        // Walking backwards, an operation is taken when it changed `dir` or shares an object
        // with a later operation already taken.
        for (i, op) in self.ops.iter().enumerate().rev() {
            let op_objects = op.objects();
            if op.dirs().contains(&dir) || op_objects.iter().any(|o| objects.contains(o)) {
                taken[i] = true;
                objects.extend(op_objects);
            }
        }
        let mut committed = Vec::new();
        let mut kept = Vec::new();
        for (op, taken) in self.ops.drain(..).zip(taken) {
            if taken {
                committed.push(op);
            } else {
                kept.push(op);
            }
        }
        self.ops = kept;
        committed
    }

    /// Removes and returns the oldest operation (which depends on nothing pending).
    pub fn take_oldest(&mut self) -> Option<NsOp> {
        if self.ops.is_empty() {
            None
        } else {
            Some(self.ops.remove(0))
        }
    }

    /// Removes and returns every pending operation, oldest first.
    pub fn take_all(&mut self) -> Vec<NsOp> {
        std::mem::take(&mut self.ops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(parent: Ino, name: &str, ino: Ino) -> NsOp {
        NsOp::Create {
            parent,
            name: name.into(),
            ino,
        }
    }

    fn mkdir(parent: Ino, name: &str, ino: Ino) -> NsOp {
        NsOp::Mkdir {
            parent,
            name: name.into(),
            ino,
        }
    }

    fn rename_file(parent: Ino, name: &str, new_parent: Ino, new_name: &str, ino: Ino) -> NsOp {
        NsOp::Rename {
            parent,
            name: name.into(),
            new_parent,
            new_name: new_name.into(),
            ino,
            ino_is_dir: false,
            replaced: None,
            replaced_is_dir: false,
        }
    }

    #[test]
    fn fsync_of_a_directory_commits_only_operations_that_touch_it() {
        let mut journal = Journal::default();
        journal.push(create(1, "a", 10));
        journal.push(mkdir(1, "d", 11));
        journal.push(create(11, "x", 12));
        journal.push(mkdir(1, "e", 13));
        journal.push(create(13, "y", 14));
        // fsync(e) commits y's creation and e's own creation, which y needs; and through the
        // root (an object of e's creation) every earlier operation on the root.
        let committed = journal.take_for_dir(13);
        assert_eq!(
            committed,
            vec![
                create(1, "a", 10),
                mkdir(1, "d", 11),
                mkdir(1, "e", 13),
                create(13, "y", 14)
            ]
        );
        // x (inside d) comes after d's creation and no committed operation comes after it
        // on d, so it stays pending.
        assert_eq!(journal.take_all(), vec![create(11, "x", 12)]);
    }

    #[test]
    fn later_operations_on_the_directory_stay_pending_only_if_they_come_after() {
        let mut journal = Journal::default();
        journal.push(create(1, "a.tmp", 10));
        journal.push(rename_file(1, "a.tmp", 1, "a", 10));
        journal.push(create(2, "other", 20));
        assert_eq!(journal.take_for_dir(1).len(), 2);
        assert_eq!(journal.len(), 1);
        assert!(journal.take_for_dir(1).is_empty());
    }

    #[test]
    fn a_cross_directory_rename_drags_earlier_operations_of_both_directories() {
        let mut journal = Journal::default();
        journal.push(create(2, "f", 10));
        journal.push(create(3, "g", 11));
        journal.push(rename_file(2, "f", 3, "f", 10));
        journal.push(create(2, "later", 12));
        let committed = journal.take_for_dir(3);
        assert_eq!(
            committed,
            vec![
                create(2, "f", 10),
                create(3, "g", 11),
                rename_file(2, "f", 3, "f", 10)
            ]
        );
        assert_eq!(journal.take_all(), vec![create(2, "later", 12)]);
    }

    #[test]
    fn a_directory_that_is_only_fsynced_itself_does_not_commit_its_creation() {
        let mut journal = Journal::default();
        journal.push(mkdir(1, "empty", 10));
        assert!(journal.take_for_dir(10).is_empty());
        assert_eq!(journal.take_for_dir(1).len(), 1);
    }
}
