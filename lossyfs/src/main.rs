//! `tidewater-lossyfs`: mount a lossy filesystem and drive it (see docs/lossyfs.md).

use clap::Parser;
use tidewater_lossyfs::cli::{self, LossyfsCommand};

/// A FUSE filesystem that forgets what was not fsynced, on command.
#[derive(Debug, Parser)]
#[command(name = "tidewater-lossyfs", version)]
struct Args {
    #[command(subcommand)]
    command: LossyfsCommand,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = cli::run(args.command) {
        eprintln!("tidewater-lossyfs: {e}");
        std::process::exit(1);
    }
}
