//! Every acknowledged write that is gone, from the report's own pass over the history, so
//! that the lost-writes plot draws all of them (results.json keeps only a few examples).
//!
//! An acknowledged send is gone when the ok final reads (which page every partition from its
//! log start) did not return its value, unless its offset lies below the final log start
//! offset (retention may have deleted it: that proves nothing). With complete final reads
//! this is the checker's `stats.lost_acknowledged` (lost writes, and acknowledged writes
//! never seen once the final reads completed). With incomplete final reads only the offsets
//! they covered count, a subset of what the checker can prove with every read. The report
//! compares its count with the checker's per partition and says so when they differ.

use crate::scan::history::HistoryScan;
use serde_json::Value;
use std::collections::BTreeMap;
use tidewater_workloads::results::CheckResults;

/// The gone acknowledged writes of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyLosses {
    /// Offsets of the gone writes whose acknowledgement named one, sorted.
    pub offsets: Vec<u64>,
    /// Gone writes acknowledged without an offset (counted, not placeable on an offset axis).
    pub without_offset: u64,
    /// Acknowledged writes of this partition.
    pub acked: u64,
}

impl KeyLosses {
    /// Gone writes, with or without offsets.
    pub fn count(&self) -> u64 {
        self.offsets.len() as u64 + self.without_offset
    }
}

/// How the set of gone writes was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossSource {
    /// From the history: acknowledged sends against the final reads.
    History,
    /// The history has no ok final read: only the checker's examples can be drawn.
    Examples,
}

/// Every gone acknowledged write the history shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Losses {
    /// How they were found.
    pub source: LossSource,
    /// Per partition (every partition with an acknowledged write, and those of examples).
    pub by_key: BTreeMap<String, KeyLosses>,
    /// Gone writes in all.
    pub total: u64,
    /// Acknowledged writes in all.
    pub acked: u64,
    /// Whether the final reads completed (results.json says; else: the history has some).
    pub final_completed: bool,
    /// Acknowledged writes below the final log start offset, not judged.
    pub retention_excluded: u64,
    /// Cumulative gone writes by acknowledgement time: (ns, count) at each gone write.
    pub gone_by_ack: Vec<(u64, u64)>,
    /// `stats.lost_acknowledged` of results.json: the total and per partition.
    pub checker: Option<(u64, BTreeMap<String, u64>)>,
}

impl Losses {
    /// Partitions where this count and the checker's differ: (key, ours, checker's).
    pub fn disagreements(&self) -> Vec<(String, u64, u64)> {
        let Some((_, checker)) = &self.checker else {
            return Vec::new();
        };
        if self.source != LossSource::History {
            return Vec::new();
        }
        let mut keys: Vec<&String> = self.by_key.keys().chain(checker.keys()).collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .filter_map(|k| {
                let ours = self.by_key.get(k).map_or(0, KeyLosses::count);
                let theirs = checker.get(k).copied().unwrap_or(0);
                (ours != theirs).then(|| (k.clone(), ours, theirs))
            })
            .collect()
    }
}

/// `stats.lost_acknowledged` as (total, by key), when results.json has it.
fn checker_losses(results: Option<&CheckResults>) -> Option<(u64, BTreeMap<String, u64>)> {
    let lost = results?.stats.get("lost_acknowledged")?;
    let total = lost.get("total")?.as_u64()?;
    let by_key = lost
        .get("by_key")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                .collect()
        })
        .unwrap_or_default();
    Some((total, by_key))
}

/// The offsets of the `lost-write` examples, by key: all that can be drawn without final
/// reads in the history.
fn from_examples(results: Option<&CheckResults>) -> BTreeMap<String, KeyLosses> {
    let mut out: BTreeMap<String, KeyLosses> = BTreeMap::new();
    let examples = results
        .and_then(|r| r.anomalies.get("lost-write"))
        .map(|a| a.examples.as_slice())
        .unwrap_or_default();
    for e in examples {
        let Some(key) = e.get("key").and_then(Value::as_str) else {
            continue;
        };
        let entry = out.entry(key.to_string()).or_default();
        match e.get("offset").and_then(Value::as_u64) {
            Some(offset) => entry.offsets.push(offset),
            None => entry.without_offset += 1,
        }
    }
    for k in out.values_mut() {
        k.offsets.sort_unstable();
    }
    out
}

/// Finds every gone acknowledged write of the scanned history.
pub fn find_losses(scan: &HistoryScan, results: Option<&CheckResults>) -> Losses {
    let checker = checker_losses(results);
    let final_completed = results
        .and_then(|r| r.stats.pointer("/lost_acknowledged/final_reads_completed"))
        .and_then(Value::as_bool)
        .unwrap_or(scan.final_ok > 0);
    let mut by_key: BTreeMap<String, KeyLosses> = BTreeMap::new();
    let mut losses = Losses {
        source: LossSource::History,
        by_key: BTreeMap::new(),
        total: 0,
        acked: scan.acked.len() as u64,
        final_completed,
        retention_excluded: 0,
        gone_by_ack: Vec::new(),
        checker,
    };
    if scan.final_ok == 0 {
        losses.source = LossSource::Examples;
        losses.by_key = from_examples(results);
        losses.total = losses.by_key.values().map(KeyLosses::count).sum();
        return losses;
    }
    let mut present = scan.final_values.clone();
    present.sort_unstable();
    present.dedup();
    for a in &scan.acked {
        let entry = by_key.entry(scan.key_name(a.key).to_string()).or_default();
        entry.acked += 1;
        if present.binary_search(&a.value).is_ok() {
            continue;
        }
        let fk = scan.final_keys.get(&a.key).copied().unwrap_or_default();
        if let (Some(offset), Some(start)) = (a.offset, fk.log_start) {
            if offset < start {
                losses.retention_excluded += 1;
                continue;
            }
        }
        // Incomplete final reads prove only what they covered: from the log start (or
        // their first record) up to the last record they returned.
        let covered = |offset: u64| {
            let from = fk.log_start.or(fk.first).unwrap_or(0);
            fk.reach
                .is_some_and(|reach| from <= offset && offset <= reach)
        };
        let gone = final_completed || a.offset.is_some_and(covered);
        if !gone {
            continue;
        }
        match a.offset {
            Some(offset) => entry.offsets.push(offset),
            None => entry.without_offset += 1,
        }
        losses.total += 1;
        losses.gone_by_ack.push((a.ack_ns, losses.total));
    }
    for k in by_key.values_mut() {
        k.offsets.sort_unstable();
    }
    losses.by_key = by_key;
    losses
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::history::scan_history;
    use std::collections::BTreeSet;

    fn scan(lines: &[String]) -> HistoryScan {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        std::fs::write(&path, lines.join("\n")).unwrap();
        scan_history(&path, &BTreeSet::new()).unwrap()
    }

    fn send(index: u64, key: &str, offset: u64, value: i64) -> [String; 2] {
        [
            format!(
                r#"{{"index":{index},"time":{index},"process":1,"type":"invoke","f":"send","value":[["send","{key}",{value}]]}}"#
            ),
            format!(
                r#"{{"index":{},"time":{},"process":1,"type":"ok","f":"send","value":[["send","{key}",[{offset},{value}]]]}}"#,
                index + 1,
                index + 1
            ),
        ]
    }

    fn final_read(index: u64, key: &str, records: &str, hw: u64, start: u64) -> [String; 2] {
        [
            format!(
                r#"{{"index":{index},"time":{index},"process":9,"type":"invoke","f":"poll","value":[["poll"]],"final":true}}"#
            ),
            format!(
                r#"{{"index":{},"time":{},"process":9,"type":"ok","f":"poll","value":[["poll",{{"{key}":{records}}}]],"high_watermarks":{{"{key}":{hw}}},"log_start_offsets":{{"{key}":{start}}},"final":true}}"#,
                index + 1,
                index + 1
            ),
        ]
    }

    #[test]
    fn acknowledged_values_missing_from_complete_final_reads_are_gone() {
        let mut lines = Vec::new();
        lines.extend(send(0, "a", 0, 10));
        lines.extend(send(2, "a", 1, 11));
        lines.extend(send(4, "a", 2, 12));
        lines.extend(send(6, "b", 0, 20));
        lines.extend(send(8, "b", 1, 21));
        // a: offset 0 deleted by retention, offset 1 now holds another value, 2 is cut off.
        lines.extend(final_read(10, "a", "[[1,99]]", 2, 1));
        lines.extend(final_read(12, "b", "[[0,20],[1,21]]", 2, 0));
        let losses = find_losses(&scan(&lines), None);
        assert_eq!(losses.source, LossSource::History);
        assert!(losses.final_completed);
        assert_eq!(losses.by_key["a"].offsets, vec![1, 2]);
        assert_eq!(losses.by_key["b"].count(), 0);
        assert_eq!(
            (losses.total, losses.acked, losses.retention_excluded),
            (2, 5, 1)
        );
        assert_eq!(losses.gone_by_ack, vec![(3, 1), (5, 2)]);
    }

    #[test]
    fn without_final_reads_only_the_examples_can_be_drawn() {
        let lines = send(0, "a", 0, 10);
        let results: CheckResults = serde_json::from_value(serde_json::json!({
            "valid": false,
            "anomalies": {"lost-write": {"count": 3, "examples": [{"key": "a", "offset": 4}]}},
            "stats": {"lost_acknowledged": {"total": 3, "by_key": {"a": 3}}}
        }))
        .unwrap();
        let losses = find_losses(&scan(&lines), Some(&results));
        assert_eq!(losses.source, LossSource::Examples);
        assert_eq!(losses.by_key["a"].offsets, vec![4]);
        assert_eq!(losses.checker.as_ref().unwrap().0, 3);
        assert!(
            losses.disagreements().is_empty(),
            "examples are not a count"
        );
    }
}
