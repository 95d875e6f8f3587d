//! Tidewater's lossy filesystem: a FUSE filesystem that serves reads and writes from memory
//! over a backing directory, keeps in the backing directory exactly what was made durable
//! (file fsync/fdatasync for content and length, directory fsync for creations, removals and
//! renames), and on command loses the rest, as a power loss would. `docs/lossyfs.md`
//! describes the model, the control interface and where it is simpler than a real disk.
//!
//! # Layout
//!
//! - [`overlay`]: one file's unsynced pages and length over its durable backing file.
//! - [`journal`]: namespace operations not yet made durable, and which an fsync commits.
//! - [`state`]: the mounted view: inodes, handles, fsync, loss of unsynced state (and its
//!   [`Mode`]), the control file's name and inode.
//! - [`fuse_ops`]: the FUSE front over the state, and the control file.
//! - [`control`]: control commands and status over the state, and a client for them.
//! - [`mount`]: [`LossyFs::mount`] and the [`MountHandle`] that unmounts on drop.
//! - [`cli`]: the `lossyfs` subcommands (mount, lose, sync, status).

pub mod cli;
pub mod control;
pub mod fuse_ops;
pub mod journal;
pub mod mount;
pub mod overlay;
pub mod state;

pub use control::Command;
pub use mount::{LossyFs, MountHandle, Options};
pub use state::{Limits, LossReport, Mode, Status, TornWrite, CONTROL_FILE_NAME};
