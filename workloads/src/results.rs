//! `results.json`: what the checkers concluded about a run.
//!
//! Shape: `{"valid": true|false|"unknown", "promise": "kept"|"broken"|"unknown", "promise_reason":
//! "...", "anomalies": {NAME: {"count": N, "examples": [...], ...}}, "stats": {...}}`.
//! Reports, the index and the matrix read this file; the checkers write it.
//!
//! `valid` is a fact about the history, as in Jepsen: false when any acknowledged write is
//! gone or any consistency anomaly was seen, whatever the settings. `promise` is a judgement:
//! whether Kafka's guarantees under the run's settings and faults held.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The verdict of a run: a fact about its history, whatever the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Validity {
    /// Nothing acknowledged was lost and no consistency anomaly was seen, in a run that
    /// tested something.
    Valid,
    /// An acknowledged write is gone, or a consistency anomaly was seen.
    Invalid,
    /// The checkers could not decide: the final reads did not complete, or the run tested
    /// nothing (no acknowledged write, no fault injected). `stats.unknown_reasons` says why.
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

/// Whether Kafka's guarantees, under the run's settings and faults, held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Promise {
    /// Everything the settings promise held (data may still be lost where they allow it).
    Kept,
    /// An anomaly that the settings forbid was seen.
    Broken,
    /// Nothing broke the promise, but the run could not show that it held.
    #[default]
    Unknown,
}

impl Promise {
    /// "kept", "broken" or "unknown".
    pub fn as_str(self) -> &'static str {
        match self {
            Promise::Kept => "kept",
            Promise::Broken => "broken",
            Promise::Unknown => "unknown",
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
    /// True when these instances make the history invalid (a lost acknowledged write or a
    /// consistency anomaly), whatever the settings.
    #[serde(default)]
    pub invalidates: bool,
    /// True when the run's settings forbid this anomaly: Kafka's promise is broken.
    #[serde(default, alias = "violation")]
    pub breaks_promise: bool,
    /// Why this anomaly does (or does not) break the promise under the run's settings.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// The content of `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResults {
    /// The verdict: a fact about the history.
    pub valid: Validity,
    /// Whether Kafka's guarantees under the run's settings held.
    #[serde(default)]
    pub promise: Promise,
    /// One sentence: why the promise is kept, broken or unknown.
    #[serde(default)]
    pub promise_reason: String,
    /// Every anomaly found, by name (`lost-write`, `hw-regression`, ...).
    pub anomalies: BTreeMap<String, Anomaly>,
    /// Counts and series the report draws (ops by type, unseen over time, ...).
    #[serde(default)]
    pub stats: Value,
}

/// The verdict and the promise together, as a reader takes them in at a glance: green only
/// when nothing was lost, amber when data was lost (or an anomaly seen) in a way the settings
/// allow, red when Kafka's promise was broken, grey when the run could not tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Valid: nothing acknowledged lost, no anomaly.
    Clean,
    /// Invalid, but every anomaly is one the settings allow (acks=1, unclean election, ...).
    Allowed,
    /// An anomaly the settings forbid.
    Broken,
    /// Unknown: the run could not show either.
    Unknown,
}

impl Standing {
    /// The CSS class of its badge: `clean`, `allowed`, `broken` or `unknown`.
    pub fn class(self) -> &'static str {
        match self {
            Standing::Clean => "clean",
            Standing::Allowed => "allowed",
            Standing::Broken => "broken",
            Standing::Unknown => "unknown",
        }
    }
}

impl CheckResults {
    /// Where the run stands: see [`Standing`].
    pub fn standing(&self) -> Standing {
        match (self.promise, self.valid) {
            (Promise::Broken, _) => Standing::Broken,
            (_, Validity::Invalid) => Standing::Allowed,
            (_, Validity::Unknown) => Standing::Unknown,
            (_, Validity::Valid) => Standing::Clean,
        }
    }

    /// A short label for the run's badge: "valid", "data lost, allowed", "promise broken",
    /// "unknown".
    pub fn standing_label(&self) -> &'static str {
        match self.standing() {
            Standing::Clean => "valid",
            Standing::Allowed if self.lost_acknowledged() > 0 => "data lost, allowed",
            Standing::Allowed => "invalid, allowed",
            Standing::Broken if self.lost_acknowledged() > 0 => "data lost, promise broken",
            Standing::Broken => "promise broken",
            Standing::Unknown => "unknown",
        }
    }

    /// `stats.lost_acknowledged.total`: acknowledged writes that are gone (0 when absent).
    /// The headline loss figure shown everywhere.
    pub fn lost_acknowledged(&self) -> u64 {
        self.stats["lost_acknowledged"]["total"]
            .as_u64()
            .unwrap_or(0)
    }

    /// `stats.sends.acked`: acknowledged sends (0 when absent).
    pub fn acknowledged(&self) -> u64 {
        self.stats["sends"]["acked"].as_u64().unwrap_or(0)
    }

    /// The headline of a run in one line: what was lost, and whether the settings allow it.
    pub fn headline(&self) -> String {
        let (lost, acked) = (self.lost_acknowledged(), self.acknowledged());
        let sends = self.stats["sends"]["values"].as_u64().unwrap_or(0);
        match self.valid {
            Validity::Invalid if lost > 0 => format!(
                "DATA LOST: {lost} of {acked} acknowledged writes; {}",
                self.promise_reason
            ),
            Validity::Invalid => format!("INVALID: {}", self.promise_reason),
            Validity::Unknown => format!("UNKNOWN: {}", self.promise_reason),
            Validity::Valid => {
                let share = if sends == 0 {
                    String::new()
                } else {
                    format!(
                        "; {:.0}% of sends acknowledged",
                        100.0 * acked as f64 / sends as f64
                    )
                };
                format!("no acknowledged write lost ({acked} acknowledged){share}")
            }
        }
    }
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
