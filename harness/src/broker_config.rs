//! The broker's own configuration schema, asked before a run starts.
//!
//! `tidewater-broker --check-config --set k=v ...` checks each `--set` of a run with the
//! broker's parser (one source of truth: names, types, ranges) and says whether it goes to the
//! brokers, to the test topic, or to both. A typo (`min.insync.replica=2`) or a bad value
//! (`min.insync.replicas=abc`) is refused in well under a second, before a run directory,
//! a namespace or a process exists, instead of surfacing a minute later as brokers that
//! would not start.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Where each setting of a run goes, as the broker's schema says.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
pub struct Routing {
    /// Settings every broker starts with.
    pub broker: BTreeMap<String, String>,
    /// Settings of the test topic (its `configs`).
    pub topic: BTreeMap<String, String>,
    /// Every topic-level setting name the broker knows.
    #[serde(default)]
    pub topic_settings: Vec<String>,
}

/// Checks `sets` with the broker binary at `binary`. `Err` names the refused setting in the
/// broker's words.
pub fn check_sets(binary: &Path, sets: &BTreeMap<String, String>) -> Result<Routing, String> {
    let mut command = Command::new(binary);
    command.arg("--check-config");
    for (k, v) in sets {
        command.arg("--set").arg(format!("{k}={v}"));
    }
    let out = command
        .output()
        .map_err(|e| format!("cannot run {} --check-config: {e}", binary.display()))?;
    if !out.status.success() {
        let message = String::from_utf8_lossy(&out.stderr);
        let message = message.trim();
        let message = message
            .strip_prefix("tidewater-broker: ")
            .unwrap_or(message);
        return Err(format!(
            "--set refused by the broker's configuration: {message}"
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "{} --check-config answered something else than its routing ({e}); is it an older build?",
            binary.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::local::find_broker_binary;
    use crate::runner::config::{TOPIC_ONLY_SETTINGS, TOPIC_SETTINGS};

    fn sets(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn typos_and_bad_values_are_refused_with_the_settings_name() {
        let binary = find_broker_binary().unwrap();
        let err = check_sets(&binary, &sets(&[("min.insync.replica", "2")])).unwrap_err();
        assert!(err.contains("\"min.insync.replica\""), "{err}");
        let err = check_sets(&binary, &sets(&[("min.insync.replicas", "abc")])).unwrap_err();
        assert!(
            err.contains("\"min.insync.replicas\"") && err.contains("abc"),
            "{err}"
        );
        let ok = check_sets(
            &binary,
            &sets(&[
                ("min.insync.replicas", "2"),
                ("replica.lag.time.max.ms", "3000"),
            ]),
        )
        .unwrap();
        assert_eq!(ok.broker.len(), 2);
        assert_eq!(ok.topic.keys().collect::<Vec<_>>(), ["min.insync.replicas"]);
    }

    #[test]
    fn values_outside_kafkas_bounds_are_refused_before_a_run_with_the_settings_name() {
        // Issue 22: `--set segment.bytes=1` was accepted and wedged the brokers of the run.
        let binary = find_broker_binary().unwrap();
        for (name, value, bound) in [
            ("segment.bytes", "1", "at least 1048576"),
            ("log.segment.bytes", "1048575", "at least 1048576"),
            ("max.message.bytes", "2147483648", "at most 2147483647"),
            ("flush.messages", "0", "at least 1"),
        ] {
            let err = check_sets(&binary, &sets(&[(name, value)])).unwrap_err();
            assert!(
                err.contains(&format!("\"{name}\"")) && err.contains(bound),
                "{name}={value}: {err}"
            );
        }
    }

    #[test]
    fn the_harness_routes_topic_settings_as_the_broker_schema_does() {
        let binary = find_broker_binary().unwrap();
        let known = check_sets(&binary, &BTreeMap::new())
            .unwrap()
            .topic_settings;
        let mut ours: Vec<&str> = TOPIC_SETTINGS.to_vec();
        let mut theirs: Vec<&str> = known.iter().map(String::as_str).collect();
        ours.sort();
        theirs.sort();
        assert_eq!(
            ours, theirs,
            "the harness's topic-level settings are the broker's"
        );
        for name in TOPIC_SETTINGS {
            // Each value at its setting's lower bound (Kafka's), which the broker must take.
            let value = match *name {
                n if n.ends_with(".enable") => "true",
                "segment.bytes" => "1048576",
                _ => "1",
            };
            let routing = check_sets(&binary, &sets(&[(name, value)])).unwrap();
            assert!(routing.topic.contains_key(*name), "{name}: {routing:?}");
            let to_brokers = !TOPIC_ONLY_SETTINGS.contains(name);
            assert_eq!(
                routing.broker.contains_key(*name),
                to_brokers,
                "{name}: {routing:?}"
            );
        }
    }
}
