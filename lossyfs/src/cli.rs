//! The command line of lossyfs, as a clap subcommand tree that the `tidewater-lossyfs` binary
//! runs and that the harness can embed as `tidewater lossyfs ...`.

use std::io::{self, Write};
use std::path::PathBuf;

use clap::Subcommand;

use crate::control::{self, Command};
use crate::mount::{LossyFs, Options};
use crate::state::{Limits, Mode};

/// `lossyfs` subcommands.
#[derive(Debug, Subcommand)]
pub enum LossyfsCommand {
    /// Mount a lossyfs over BACKING at MOUNTPOINT and serve it in the foreground until
    /// SIGINT or SIGTERM, then unmount. Prints `mounted MOUNTPOINT` once it is usable.
    Mount {
        /// Directory holding the durable state.
        backing: PathBuf,
        /// Where to mount.
        mountpoint: PathBuf,
        /// Dirty page memory above which files are written back (made durable).
        #[arg(long, default_value_t = Limits::default().dirty_bytes_max)]
        dirty_bytes_max: u64,
        /// Let other users use the mount (FUSE `allow_other`).
        #[arg(long)]
        allow_other: bool,
    },
    /// Lose every unsynced change of the mount at MOUNTPOINT (a power loss).
    Lose {
        /// The mount point.
        mountpoint: PathBuf,
        /// Keep a prefix of each file's last unsynced write, drawn from this seed.
        #[arg(long, value_name = "SEED")]
        torn: Option<u64>,
    },
    /// Make every change of the mount at MOUNTPOINT durable.
    Sync {
        /// The mount point.
        mountpoint: PathBuf,
    },
    /// Print the status of the mount at MOUNTPOINT (key=value lines).
    Status {
        /// The mount point.
        mountpoint: PathBuf,
    },
}

/// Runs one subcommand.
pub fn run(command: LossyfsCommand) -> io::Result<()> {
    match command {
        LossyfsCommand::Mount {
            backing,
            mountpoint,
            dirty_bytes_max,
            allow_other,
        } => {
            let options = Options {
                limits: Limits {
                    dirty_bytes_max,
                    ..Limits::default()
                },
                allow_other,
            };
            serve(&backing, &mountpoint, options)
        }
        LossyfsCommand::Lose { mountpoint, torn } => {
            let mode = match torn {
                Some(seed) => Mode::Torn { seed },
                None => Mode::Clean,
            };
            control::send(&mountpoint, Command::LoseUnsynced(mode))
        }
        LossyfsCommand::Sync { mountpoint } => control::send(&mountpoint, Command::Sync),
        LossyfsCommand::Status { mountpoint } => {
            print!("{}", control::read_status(&mountpoint)?);
            Ok(())
        }
    }
}

/// Mounts and blocks until SIGINT or SIGTERM, then unmounts.
fn serve(
    backing: &std::path::Path,
    mountpoint: &std::path::Path,
    options: Options,
) -> io::Result<()> {
    // Block the signals in this thread before the session threads start (they inherit the
    // mask), then wait for one synchronously: no handler runs concurrently with the mount.
    let signals = termination_signals();
    // SAFETY: a valid, initialised signal set; blocking signals has no memory effects.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &signals, std::ptr::null_mut()) };
    let handle = LossyFs::mount_with(backing, mountpoint, options)?;
    println!("mounted {}", handle.mountpoint().display());
    io::stdout().flush()?;
    let mut signal = 0;
    // SAFETY: as above; `signal` is a valid out-parameter.
    unsafe { libc::sigwait(&signals, &mut signal) };
    handle.unmount()
}

fn termination_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set before sigaddset reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        set
    }
}
