//! `results.json`: what the checkers concluded about a run.
//!
//! Shape: `{"valid": true|false|"unknown", "anomalies": {NAME: {"count": N, "examples": [...]}}, "stats": {...}}`.
//! Reports, the index and the matrix read this file; the checkers write it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The verdict of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Validity {
    /// No anomaly that the run's settings forbid.
    Valid,
    /// At least one anomaly that the run's settings forbid.
    Invalid,
    /// The checkers could not decide (for example the final reads did not complete).
    Unknown,
}

impl Validity {
    /// The process exit code for this verdict: 0 valid, 1 invalid, 2 unknown.
    pub fn exit_code(self) -> i32 {
        match self {
            Validity::Valid => 0,
            Validity::Invalid => 1,
            Validity::Unknown => 2,
        }
    }

    /// Combines two verdicts: invalid wins over unknown, which wins over valid.
    pub fn and(self, other: Validity) -> Validity {
        use Validity::*;
        match (self, other) {
            (Invalid, _) | (_, Invalid) => Invalid,
            (Unknown, _) | (_, Unknown) => Unknown,
            _ => Valid,
        }
    }

    /// "valid", "invalid" or "unknown".
    pub fn as_str(self) -> &'static str {
        match self {
            Validity::Valid => "valid",
            Validity::Invalid => "invalid",
            Validity::Unknown => "unknown",
        }
    }
}

impl Serialize for Validity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Validity::Valid => s.serialize_bool(true),
            Validity::Invalid => s.serialize_bool(false),
            Validity::Unknown => s.serialize_str("unknown"),
        }
    }
}

impl<'de> Deserialize<'de> for Validity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Bool(true) => Ok(Validity::Valid),
            Value::Bool(false) => Ok(Validity::Invalid),
            Value::String(s) if s == "unknown" => Ok(Validity::Unknown),
            other => Err(serde::de::Error::custom(format!(
                "valid must be true, false or \"unknown\", got {other}"
            ))),
        }
    }
}

/// One kind of anomaly found in a history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anomaly {
    /// How many instances were found.
    pub count: u64,
    /// Concrete instances (bounded), each an object naming key, offsets, values and op indexes.
    pub examples: Vec<Value>,
    /// True when the run's settings forbid this anomaly, so it makes the run invalid.
    #[serde(default)]
    pub violation: bool,
    /// Why this anomaly is (or is not) a violation under the run's settings.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// The content of `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResults {
    /// The verdict.
    pub valid: Validity,
    /// Every anomaly found, by name (`lost-write`, `hw-regression`, ...).
    pub anomalies: BTreeMap<String, Anomaly>,
    /// Counts and series the report draws (ops by type, unseen over time, ...).
    #[serde(default)]
    pub stats: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_serializes_as_in_the_design() {
        assert_eq!(serde_json::to_string(&Validity::Valid).unwrap(), "true");
        assert_eq!(serde_json::to_string(&Validity::Invalid).unwrap(), "false");
        assert_eq!(
            serde_json::to_string(&Validity::Unknown).unwrap(),
            "\"unknown\""
        );
        let v: Validity = serde_json::from_str("\"unknown\"").unwrap();
        assert_eq!(v, Validity::Unknown);
        assert!(serde_json::from_str::<Validity>("\"maybe\"").is_err());
    }

    #[test]
    fn invalid_dominates_unknown_dominates_valid() {
        use Validity::*;
        assert_eq!(Valid.and(Unknown), Unknown);
        assert_eq!(Unknown.and(Invalid), Invalid);
        assert_eq!(Valid.and(Valid), Valid);
    }
}
