//! Reading a run directory (`config.json`, `results.json`, `samples.jsonl`) into memory.
//!
//! The history is not read here: it can hold millions of operations, so
//! [`crate::scan::history`] streams it instead.

use crate::error::ReportError;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use tidewater_workloads::results::{CheckResults, Promise, Validity};

/// File names inside a run directory (see DESIGN.md, "Store").
pub const CONFIG_FILE: &str = "config.json";
/// The history, one operation per line.
pub const HISTORY_FILE: &str = "history.jsonl";
/// The checkers' conclusions.
pub const RESULTS_FILE: &str = "results.json";
/// ISR / high watermark samples taken from the brokers' status routes during the run.
pub const SAMPLES_FILE: &str = "samples.jsonl";
/// The report this crate writes.
pub const REPORT_FILE: &str = "report.html";

/// Sample lines beyond this many are not read: the harness samples every partition on every
/// node twice a second, so a one-hour run of 3 nodes and 32 partitions writes 0.7 million.
pub const SAMPLES_LINES_MAX: usize = 5_000_000;

/// One ISR / high watermark sample of one replica, as the harness records it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Sample {
    /// Nanoseconds since the test started.
    pub time: u64,
    /// The topic-partition, `topic/partition`.
    pub key: String,
    /// The in-sync replicas as this node sees them.
    #[serde(default)]
    pub isr: Option<Vec<String>>,
    /// The partition's leader as this node sees it.
    #[serde(default)]
    pub leader: Option<String>,
    /// The leader epoch as this node sees it.
    #[serde(default)]
    pub leader_epoch: Option<u64>,
    /// This replica's high watermark.
    #[serde(default)]
    pub high_watermark: Option<u64>,
    /// The node that answered.
    #[serde(default)]
    pub node: Option<String>,
    /// The answering replica's role (`leader`, `follower`), when the broker reports it.
    #[serde(default)]
    pub role: Option<String>,
}

impl Sample {
    /// True when the answering replica is the partition's leader: by its `role` when the
    /// sample has one, else when the answering node is the leader it reports (or either is
    /// unknown). The leader's view of the ISR and HW is the authoritative one.
    pub fn from_leader(&self) -> bool {
        if let Some(role) = &self.role {
            return role == "leader";
        }
        match (&self.node, &self.leader) {
            (Some(n), Some(l)) => n == l,
            _ => true,
        }
    }
}

/// Everything of a run directory except the history.
#[derive(Debug, Clone)]
pub struct RunFiles {
    /// The run directory.
    pub dir: PathBuf,
    /// `config.json`, or `Null` when absent.
    pub config: Value,
    /// `results.json`, or `None` when the run was not checked (yet).
    pub results: Option<CheckResults>,
    /// The samples of `samples.jsonl` answered by the partition's leader ([`Sample::from_leader`]),
    /// the only ones drawn (a follower's view lags by design); empty when absent.
    pub samples: Vec<Sample>,
    /// Problems that did not stop rendering (a torn last line, ...), shown in the report.
    pub warnings: Vec<String>,
}

impl RunFiles {
    /// Reads config, results and samples of `dir`. Missing files are allowed (a run that
    /// crashed early still gets a report); malformed ones are errors.
    pub fn read(dir: &Path) -> Result<RunFiles, ReportError> {
        let config = read_json_opt(&dir.join(CONFIG_FILE))?.unwrap_or(Value::Null);
        let results = match read_json_opt(&dir.join(RESULTS_FILE))? {
            Some(v) => Some(
                parse_results(v)
                    .map_err(|e| ReportError::format(dir.join(RESULTS_FILE), e.to_string()))?,
            ),
            None => None,
        };
        let mut warnings = Vec::new();
        let samples = read_samples(&dir.join(SAMPLES_FILE), &mut warnings)?;
        Ok(RunFiles {
            dir: dir.to_path_buf(),
            config,
            results,
            samples,
            warnings,
        })
    }

    /// A config value as display text (`""` when absent).
    pub fn config_str(&self, key: &str) -> String {
        display_value(self.config.get(key))
    }

    /// The test name: `config.name`, else the parent directory's name.
    pub fn name(&self) -> String {
        match self.config.get("name").and_then(Value::as_str) {
            Some(n) => n.to_string(),
            None => self
                .dir
                .parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "run".to_string()),
        }
    }

    /// The broker/topic settings, as display text (see [`config_settings`]).
    pub fn settings(&self) -> BTreeMap<String, String> {
        config_settings(&self.config)
    }
}

/// Parses results.json. A file written before `promise` existed is judged from its anomalies'
/// `violation` flags (read as `breaks_promise`): broken when one occurred, kept when the
/// history is valid or every anomaly was allowed, unknown otherwise, so that its standing
/// is not shown as merely "allowed".
pub fn parse_results(v: Value) -> Result<CheckResults, serde_json::Error> {
    let has_promise = v.get("promise").is_some();
    let mut results: CheckResults = serde_json::from_value(v)?;
    if !has_promise {
        let broken = results
            .anomalies
            .values()
            .any(|a| a.count > 0 && a.breaks_promise);
        results.promise = match (broken, results.valid) {
            (true, _) => Promise::Broken,
            (false, Validity::Unknown) => Promise::Unknown,
            (false, _) => Promise::Kept,
        };
        if results.promise_reason.is_empty() {
            results.promise_reason =
                "judged from the anomalies' violation flags (results.json has no promise field)"
                    .to_string();
        }
    }
    Ok(results)
}

/// Acknowledged writes that are gone: `stats.lost_acknowledged.total`, the figure shown
/// everywhere; for results.json files written before that field, the `lost-write` count.
pub fn lost_acknowledged(results: &CheckResults) -> u64 {
    match results
        .stats
        .pointer("/lost_acknowledged/total")
        .and_then(Value::as_u64)
    {
        Some(n) => n,
        None => results.anomalies.get("lost-write").map_or(0, |a| a.count),
    }
}

/// The broker/topic settings of a config: `settings`, or `sets` as the harness's `RunConfig`
/// names them (`--set key=value`).
pub fn config_settings(config: &Value) -> BTreeMap<String, String> {
    let map = config.get("settings").or_else(|| config.get("sets"));
    match map.and_then(Value::as_object) {
        Some(m) => m
            .iter()
            .map(|(k, v)| (k.clone(), display_value(Some(v))))
            .collect(),
        None => BTreeMap::new(),
    }
}

/// A JSON value as short display text: strings without quotes, lists of plain values joined
/// with commas (`["kill","pause"]` is `kill,pause`), others as compact JSON.
pub fn display_value(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) if items.iter().all(|i| !i.is_object() && !i.is_array()) => items
            .iter()
            .map(|i| display_value(Some(i)))
            .collect::<Vec<_>>()
            .join(","),
        Some(other) => other.to_string(),
    }
}

/// Reads a JSON file, `None` when it does not exist.
pub fn read_json_opt(path: &Path) -> Result<Option<Value>, ReportError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| ReportError::format(path, e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ReportError::io(path, e)),
    }
}

/// Reads `samples.jsonl`. A malformed last line is a torn write of a killed harness and only
/// warned about; a malformed line elsewhere is an error.
fn read_samples(path: &Path, warnings: &mut Vec<String>) -> Result<Vec<Sample>, ReportError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ReportError::io(path, e)),
    };
    let mut samples = Vec::new();
    let mut pending_error: Option<String> = None;
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| ReportError::io(path, e))?;
        if let Some(message) = pending_error.take() {
            return Err(ReportError::format(path, message));
        }
        if n >= SAMPLES_LINES_MAX {
            warnings.push(format!(
                "{SAMPLES_FILE}: only the first {SAMPLES_LINES_MAX} samples are drawn"
            ));
            break;
        }
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Sample>(&line) {
            // Only the leaders' samples are kept: a third of the memory with three nodes.
            Ok(s) if s.from_leader() => samples.push(s),
            Ok(_) => {}
            Err(e) => pending_error = Some(format!("line {}: {e}", n + 1)),
        }
    }
    if let Some(message) = pending_error {
        warnings.push(format!(
            "{SAMPLES_FILE}: ignored a torn last line ({message})"
        ));
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(line: &str) -> Sample {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn the_leaders_sample_is_chosen_by_role_then_by_node() {
        // The harness's sampler writes role, and null for what a replica does not know.
        let follower = r#"{"time":1,"key":"t0/0","node":"n2","role":"follower","isr":[],"leader":null,"leader_epoch":null,"high_watermark":4}"#;
        let leader = r#"{"time":1,"key":"t0/0","node":"n1","role":"leader","isr":["n1","n2"],"leader":"n1","leader_epoch":3,"high_watermark":5}"#;
        assert!(!sample(follower).from_leader());
        assert!(sample(leader).from_leader());
        assert!(!sample(r#"{"time":1,"key":"k","node":"n2","leader":"n1"}"#).from_leader());
        assert!(sample(r#"{"time":1,"key":"k"}"#).from_leader());
    }
}
