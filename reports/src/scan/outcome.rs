//! How a client operation completed (ok, fail or info), as the history pass and the worker
//! lanes both count it.

use tidewater_workloads::history::OpType;

/// How a client operation completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// It took effect.
    Ok,
    /// It certainly had no effect.
    Fail,
    /// Indeterminate.
    Info,
}

impl Outcome {
    /// All outcomes in display order.
    pub const ALL: [Outcome; 3] = [Outcome::Ok, Outcome::Fail, Outcome::Info];

    /// "ok", "fail" or "info".
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Info => "info",
        }
    }

    pub(crate) fn of(kind: OpType) -> Option<Outcome> {
        match kind {
            OpType::Invoke => None,
            OpType::Ok => Some(Outcome::Ok),
            OpType::Fail => Some(Outcome::Fail),
            OpType::Info => Some(Outcome::Info),
        }
    }
}
