//! The control interface: commands written to the control file `/.lossyfs-control` at the
//! root of a mount, and the status read back from it.
//!
//! The control file lets any process that sees the mount (a harness on another host over
//! ssh, a shell) drive lossyfs without a library or a socket:
//!
//! ```sh
//! echo 'lose-unsynced clean' > /data/n1/.lossyfs-control    # power loss
//! echo 'lose-unsynced torn 42' > /data/n1/.lossyfs-control  # power loss tearing last writes
//! echo 'sync' > /data/n1/.lossyfs-control                   # make everything durable
//! cat /data/n1/.lossyfs-control                             # status, key=value lines
//! ```
//!
//! A command takes effect before the `write` returns; an unknown command fails the write with
//! `EINVAL`. The file is hidden from directory listings and cannot be created, removed or
//! renamed over.

use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;
use std::str::FromStr;

use crate::state::{Mode, Status, CONTROL_FILE_NAME};

/// Longest command accepted, in bytes.
pub const COMMAND_BYTES_MAX: usize = 256;

/// A command of the control file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Lose every unsynced change (`lose-unsynced clean` / `lose-unsynced torn SEED`).
    LoseUnsynced(Mode),
    /// Make every change durable, as `sync(2)` (`sync`).
    Sync,
}

/// Why a command was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

impl FromStr for Command {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Command, ParseError> {
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["lose-unsynced", "clean"] => Ok(Command::LoseUnsynced(Mode::Clean)),
            ["lose-unsynced", "torn", seed] => {
                let seed = seed
                    .parse()
                    .map_err(|_| ParseError(format!("bad seed {seed:?}")))?;
                Ok(Command::LoseUnsynced(Mode::Torn { seed }))
            }
            ["sync"] => Ok(Command::Sync),
            _ => Err(ParseError(format!(
                "unknown command {:?}: expected `lose-unsynced clean`, \
                 `lose-unsynced torn SEED` or `sync`",
                text.trim()
            ))),
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::LoseUnsynced(Mode::Clean) => f.write_str("lose-unsynced clean"),
            Command::LoseUnsynced(Mode::Torn { seed }) => write!(f, "lose-unsynced torn {seed}"),
            Command::Sync => f.write_str("sync"),
        }
    }
}

/// The status text of the control file: one `key=value` per line.
pub fn format_status(status: &Status) -> String {
    let mut text = format!(
        "unsynced_files={}\nunsynced_bytes={}\npending_namespace_ops={}\nwritebacks={}\nlosses={}\n",
        status.unsynced_files,
        status.unsynced_bytes,
        status.pending_namespace_ops,
        status.writebacks,
        status.losses,
    );
    if let Some(loss) = &status.last_loss {
        let mode = match loss.mode {
            Mode::Clean => "clean".to_string(),
            Mode::Torn { seed } => format!("torn-{seed}"),
        };
        text.push_str(&format!(
            "last_loss_mode={mode}\nlast_loss_unsynced_files={}\nlast_loss_unsynced_bytes={}\n\
             last_loss_namespace_ops={}\nlast_loss_torn_writes={}\n",
            loss.unsynced_files,
            loss.unsynced_bytes,
            loss.namespace_ops,
            loss.torn_writes.len(),
        ));
        for torn in &loss.torn_writes {
            text.push_str(&format!(
                "torn={} offset={} length={} kept={}\n",
                torn.path.display(),
                torn.offset,
                torn.length,
                torn.kept
            ));
        }
    }
    text
}

/// Sends `command` to the lossyfs mounted at `mountpoint`; returns once it took effect.
pub fn send(mountpoint: &Path, command: Command) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .open(mountpoint.join(CONTROL_FILE_NAME))?;
    // One write: the command is executed by the write call itself.
    file.write_all(format!("{command}\n").as_bytes())
}

/// Reads the status text of the lossyfs mounted at `mountpoint`.
pub fn read_status(mountpoint: &Path) -> io::Result<String> {
    std::fs::read_to_string(mountpoint.join(CONTROL_FILE_NAME))
}

/// Looks `key` up in a status text.
pub fn status_value<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_round_trip_through_text() {
        for command in [
            Command::LoseUnsynced(Mode::Clean),
            Command::LoseUnsynced(Mode::Torn { seed: 42 }),
            Command::Sync,
        ] {
            assert_eq!(command.to_string().parse::<Command>(), Ok(command));
        }
        assert_eq!(
            "  lose-unsynced   torn 7\n".parse::<Command>(),
            Ok(Command::LoseUnsynced(Mode::Torn { seed: 7 }))
        );
    }

    #[test]
    fn bad_commands_are_refused_with_a_reason() {
        for bad in [
            "",
            "lose-unsynced",
            "lose-unsynced torn",
            "lose-unsynced torn -1",
            "fsck",
        ] {
            let error = bad.parse::<Command>().unwrap_err();
            assert!(!error.to_string().is_empty());
        }
    }

    #[test]
    fn status_values_are_found_by_key() {
        let status = Status {
            unsynced_files: 3,
            pending_namespace_ops: 2,
            ..Status::default()
        };
        let text = format_status(&status);
        assert_eq!(status_value(&text, "unsynced_files"), Some("3"));
        assert_eq!(status_value(&text, "pending_namespace_ops"), Some("2"));
        assert_eq!(status_value(&text, "unsynced"), None);
    }
}
