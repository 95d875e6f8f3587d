//! The one error type of the crate: which file could not be read, written or understood.

use std::path::PathBuf;

/// Why a report, index or matrix page could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A JSON file (config, results) is not what it should be.
    #[error("{path}: {message}")]
    Format {
        /// The file involved.
        path: PathBuf,
        /// What is wrong, with the line number for JSON Lines files.
        message: String,
    },
    /// plotters failed to draw a chart (a bug on our side rather than bad input).
    #[error("drawing plot {plot}: {message}")]
    Plot {
        /// The id of the plot.
        plot: String,
        /// plotters' error.
        message: String,
    },
}

impl ReportError {
    /// Wraps an I/O error with the path it concerns.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ReportError::Io {
            path: path.into(),
            source,
        }
    }

    /// A format error about `path`.
    pub(crate) fn format(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        ReportError::Format {
            path: path.into(),
            message: message.into(),
        }
    }
}
