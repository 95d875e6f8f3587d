//! `replicas.jsonl`: every replica's own log of every partition, read by the harness after the
//! final reads, one line per partition. The checker compares the replicas offset by offset
//! (`replica-divergence`, docs/checkers.md); the file keeps what each replica held, so a stored
//! run is checked again without rerunning it.
//!
//! A record is written as `[offset, leader_epoch, key, value]` (key `null` when absent), the
//! most compact shape JSON has for it: a replica's log is the bulk of the file.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::Path;

/// One record as one replica stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "(u64, u32, Option<String>, String)")]
#[serde(into = "(u64, u32, Option<String>, String)")]
pub struct ReplicaRecord {
    /// Its offset.
    pub offset: u64,
    /// The epoch of the leader that appended its batch.
    pub leader_epoch: u32,
    /// Its key, if any.
    pub key: Option<String>,
    /// Its value, as text (the workload's values are decimal integers).
    pub value: String,
}

impl From<(u64, u32, Option<String>, String)> for ReplicaRecord {
    fn from((offset, leader_epoch, key, value): (u64, u32, Option<String>, String)) -> Self {
        ReplicaRecord {
            offset,
            leader_epoch,
            key,
            value,
        }
    }
}

impl From<ReplicaRecord> for (u64, u32, Option<String>, String) {
    fn from(r: ReplicaRecord) -> Self {
        (r.offset, r.leader_epoch, r.key, r.value)
    }
}

/// One replica's own log of a partition, read from the node that holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaLog {
    /// The node holding the replica (`n2`).
    pub node: String,
    /// `leader` or `follower`, as the replica said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The replica's first offset.
    pub log_start_offset: u64,
    /// The replica's own high watermark.
    pub high_watermark: u64,
    /// The replica's log end offset.
    pub log_end_offset: u64,
    /// Its records from the log start offset, in offset order.
    pub records: Vec<ReplicaRecord>,
    /// True when the read stopped at the harness's bound before the log end: offsets at and
    /// past the last record are not compared.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// A replica the harness could not read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnreadReplica {
    /// The node holding the replica.
    pub node: String,
    /// What went wrong (the node's error, a timeout, ...).
    pub error: String,
}

/// Every replica of one partition, as read at the end of a run: one line of `replicas.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PartitionReplicas {
    /// The partition, `topic/partition`.
    pub key: String,
    /// The node that led the partition when the logs were read, if one was known.
    #[serde(default)]
    pub leader: Option<String>,
    /// The leader's ISR (node names) when the logs were read; empty when unknown.
    #[serde(default)]
    pub isr: Vec<String>,
    /// True when, before the logs were read, every replica answered, was in the ISR, and had
    /// reached the leader's log end, which was also its high watermark: nothing was left to
    /// replicate or truncate.
    #[serde(default)]
    pub settled: bool,
    /// The replicas that answered.
    pub replicas: Vec<ReplicaLog>,
    /// The replicas that did not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread: Vec<UnreadReplica>,
}

impl PartitionReplicas {
    /// Records the leader and ISR the system named for these reads, and whether the
    /// partition had settled: every replica answered and is in the ISR, and every log ends
    /// where the leader's does, at the leader's high watermark, which every replica knows.
    pub fn judge(&mut self, leader: Option<String>, isr: Vec<String>, replicas: &[String]) {
        let (mut in_sync, mut all) = (isr.clone(), replicas.to_vec());
        in_sync.sort();
        all.sort();
        let leader_log = self
            .replicas
            .iter()
            .find(|r| Some(&r.node) == leader.as_ref());
        self.settled = self.unread.is_empty()
            && all
                .iter()
                .all(|n| self.replicas.iter().any(|r| &r.node == n))
            && in_sync == all
            && leader_log.is_some_and(|l| {
                l.high_watermark == l.log_end_offset
                    && self.replicas.iter().all(|r| {
                        r.log_end_offset == l.log_end_offset && r.high_watermark == l.high_watermark
                    })
            });
        (self.leader, self.isr) = (leader, isr);
    }

    /// The high watermark the comparison is judged against: the leader's, when the leader's
    /// log was read, otherwise the highest any replica knows (a follower's HW never passes
    /// its leader's).
    pub fn high_watermark(&self) -> u64 {
        let leader = self
            .replicas
            .iter()
            .find(|r| Some(&r.node) == self.leader.as_ref());
        match leader {
            Some(l) => l.high_watermark,
            None => self
                .replicas
                .iter()
                .map(|r| r.high_watermark)
                .max()
                .unwrap_or(0),
        }
    }

    /// Whether `node` is in sync: in the leader's ISR, or any replica when the ISR is unknown.
    pub fn in_sync(&self, node: &str) -> bool {
        self.isr.is_empty() || self.isr.iter().any(|n| n == node)
    }
}

/// Writes `partitions` to `path` as JSON Lines, one partition a line.
pub fn write_file(path: &Path, partitions: &[PartitionReplicas]) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for p in partitions {
        serde_json::to_writer(&mut out, p)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// Reads `replicas.jsonl`, one partition at a time, handing each to `each`. A line that does
/// not parse is an error naming its number.
pub fn read_file(path: &Path, mut each: impl FnMut(PartitionReplicas)) -> std::io::Result<()> {
    let reader = std::io::BufReader::new(std::fs::File::open(path)?);
    for (i, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let partition = serde_json::from_str(&line).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} line {}: {e}", path.display(), i + 1),
            )
        })?;
        each(partition);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_compact_arrays_and_round_trip() {
        let log = ReplicaLog {
            node: "n1".into(),
            role: Some("leader".into()),
            log_start_offset: 0,
            high_watermark: 1,
            log_end_offset: 2,
            records: vec![
                (0, 1, None, "907".to_string()).into(),
                (1, 2, Some("k".to_string()), "908".to_string()).into(),
            ],
            truncated: false,
        };
        let text = serde_json::to_string(&log).unwrap();
        assert!(
            text.contains(r#""records":[[0,1,null,"907"],[1,2,"k","908"]]"#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<ReplicaLog>(&text).unwrap(), log);
    }

    #[test]
    fn a_partition_settles_once_every_replica_is_in_sync_at_the_leaders_end_and_hw() {
        let replica = |node: &str, high_watermark, log_end_offset| ReplicaLog {
            node: node.into(),
            role: None,
            log_start_offset: 0,
            high_watermark,
            log_end_offset,
            records: Vec::new(),
            truncated: false,
        };
        let nodes = ["n1".to_string(), "n2".to_string(), "n3".to_string()];
        let judged = |logs: Vec<ReplicaLog>, isr: &[&str]| {
            let mut p = PartitionReplicas {
                key: "t0/0".into(),
                replicas: logs,
                ..Default::default()
            };
            p.judge(
                Some("n2".into()),
                isr.iter().map(|n| n.to_string()).collect(),
                &nodes,
            );
            p.settled
        };
        let all = ["n3", "n1", "n2"];
        let at = |hw, leo| {
            vec![
                replica("n1", 9, 9),
                replica("n2", 9, 9),
                replica("n3", hw, leo),
            ]
        };
        assert!(judged(at(9, 9), &all));
        // n3 has every record but has not yet learned the HW (Kafka tells a follower the HW in
        // its next fetch): not settled, or its read would stop short.
        assert!(!judged(at(8, 9), &all));
        assert!(!judged(at(9, 10), &all), "a suffix to truncate");
        assert!(!judged(at(9, 9), &["n1", "n2"]), "n3 outside the ISR");
        let mut unread = at(9, 9);
        unread.pop();
        assert!(!judged(unread, &all), "n3 not read");
    }

    #[test]
    fn the_judged_high_watermark_is_the_leaders() {
        let replica = |node: &str, high_watermark| ReplicaLog {
            node: node.into(),
            role: None,
            log_start_offset: 0,
            high_watermark,
            log_end_offset: 9,
            records: Vec::new(),
            truncated: false,
        };
        let mut p = PartitionReplicas {
            key: "t0/0".into(),
            leader: Some("n2".into()),
            isr: vec!["n2".into(), "n3".into()],
            replicas: vec![replica("n1", 9), replica("n2", 7), replica("n3", 5)],
            ..Default::default()
        };
        assert_eq!(p.high_watermark(), 7);
        assert!(p.in_sync("n3") && !p.in_sync("n1"));
        p.leader = None;
        assert_eq!(p.high_watermark(), 9, "no leader read: the highest HW");
        p.isr.clear();
        assert!(p.in_sync("n1"), "an unknown ISR counts every replica");
    }
}
