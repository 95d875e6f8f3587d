//! What node control ([`crate::cluster`]) and network control ([`crate::net`]) share, so that
//! neither has to import the other for it: the controller's node name (clusters name their
//! nodes by it, partitions cut it off) and the error both report (a command that failed, a
//! node that does not exist). [`crate::cluster`] re-exports them under its own name.

use std::fmt;

/// The controller node's name.
pub const CONTROLLER: &str = "c1";

/// Why a cluster or network operation failed.
#[derive(Debug)]
pub enum Error {
    /// The local backend needs root (network namespaces, veths, bridges).
    NotRoot,
    /// No node of that name in this cluster.
    UnknownNode(String),
    /// A settings problem found before anything was created.
    Config(String),
    /// A command exited unsuccessfully.
    Command {
        /// The command line, for the reader.
        command: String,
        /// Its exit status, `None` when killed by a signal.
        status: Option<i32>,
        /// The tail of its standard error.
        stderr: String,
    },
    /// A system call or file operation failed.
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The operation does not apply to the node's current state (e.g. start a running node).
    State(String),
    /// The backend cannot do this (e.g. power loss without a lossy filesystem).
    Unsupported(String),
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotRoot => f.write_str(
                "the local cluster needs root: it creates network namespaces, veth pairs and a \
                 bridge (run as root, e.g. `sudo -E tidewater run ...`, or use the ssh backend)",
            ),
            Error::UnknownNode(n) => write!(f, "no node named {n:?} in this cluster"),
            Error::Config(m) => write!(f, "cluster configuration: {m}"),
            Error::Command {
                command,
                status,
                stderr,
            } => {
                let status = status.map_or("a signal".to_string(), |s| format!("status {s}"));
                write!(f, "`{command}` failed with {status}: {}", stderr.trim())
            }
            Error::Io { context, source } => write!(f, "{context}: {source}"),
            Error::State(m) | Error::Unsupported(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Shorthand for cluster and network results.
pub type Result<T> = std::result::Result<T, Error>;
