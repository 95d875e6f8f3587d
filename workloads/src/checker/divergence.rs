//! `replica-divergence`: replicas of one partition that hold different records at one offset
//! below the high watermark. Kafka promises that every replica in the ISR holds exactly the
//! leader's records up to the HW (that is what lets any of them be elected without loss);
//! above the HW replicas may differ until a follower truncates (KIP-101, KIP-279), so what lies
//! there is reported apart and judges nothing. The input is `replicas.jsonl`
//! ([`crate::replicas`]): every replica's own log, read after the final reads, as Kafka's
//! ReplicaVerificationTool reads each replica of a partition and compares them.
//!
//! One instance per offset. It counts against the run when at least two replicas in the
//! leader's ISR disagree there; a disagreement that involves only a replica outside the ISR
//! (which may not have truncated yet) is an instance that does not count, and is counted apart
//! in the stats (`divergent_below_hw_outside_isr`).

use super::found::Findings;
use crate::replicas::{PartitionReplicas, ReplicaRecord};
use serde_json::{json, Map, Value};

/// At most this many above-HW differences are kept as examples per partition.
const ABOVE_HW_EXAMPLES_MAX: usize = 3;

/// What the comparison found, kept for `stats.replica_logs`.
#[derive(Debug, Default)]
pub struct ReplicaStats {
    /// Why the replica logs were not compared, when they were not.
    pub unread_reason: Option<String>,
    /// One summary per compared partition.
    pub partitions: Vec<Value>,
    /// Offsets below the HW where replicas in the ISR disagree (the anomaly's count).
    pub divergent_below_hw: u64,
    /// Offsets below the HW where only a replica outside the ISR disagrees.
    pub divergent_below_hw_outside_isr: u64,
    /// Offsets at or above the HW where replicas hold different records (allowed).
    pub divergent_above_hw: u64,
}

impl ReplicaStats {
    /// `stats.replica_logs`.
    pub fn to_json(&self) -> Value {
        match &self.unread_reason {
            Some(reason) => json!({"compared": false, "reason": reason}),
            None => json!({
                "compared": true,
                "divergent_below_hw": self.divergent_below_hw,
                "divergent_below_hw_outside_isr": self.divergent_below_hw_outside_isr,
                "divergent_above_hw": self.divergent_above_hw,
                "partitions": self.partitions,
            }),
        }
    }
}

/// A record as the examples show it: the value as a number when it is one (the workload's
/// values are), so it reads like the history's values.
fn record_json(record: &ReplicaRecord) -> Value {
    let value = record
        .value
        .parse::<i64>()
        .map_or_else(|_| json!(record.value), |v| json!(v));
    json!({"value": value, "leader_epoch": record.leader_epoch, "key": record.key})
}

/// Whether two replicas hold the same record at an offset: same batch epoch, key and value.
fn same(a: &ReplicaRecord, b: &ReplicaRecord) -> bool {
    a.leader_epoch == b.leader_epoch && a.key == b.key && a.value == b.value
}

/// Compares every replica of `partition` offset by offset, adding one `replica-divergence`
/// instance per offset below the HW where the replicas disagree, and its summary to `stats`.
pub fn compare(partition: &PartitionReplicas, findings: &mut Findings, stats: &mut ReplicaStats) {
    let high_watermark = partition.high_watermark();
    let replicas = &partition.replicas;
    let mut cursors = vec![0usize; replicas.len()];
    let (mut below, mut outside_isr, mut above, mut compared) = (0u64, 0u64, 0u64, 0u64);
    let mut above_examples = Vec::new();
    // Every offset some replica holds, in order: the smallest offset under the cursors.
    while let Some(offset) = replicas
        .iter()
        .zip(&cursors)
        .filter_map(|(r, &c)| r.records.get(c).map(|rec| rec.offset))
        .min()
    {
        let mut held: Vec<(&str, &ReplicaRecord)> = Vec::new();
        for (r, c) in replicas.iter().zip(cursors.iter_mut()) {
            if let Some(rec) = r.records.get(*c).filter(|rec| rec.offset == offset) {
                held.push((&r.node, rec));
                *c += 1;
            }
        }
        if held.len() < 2 {
            continue;
        }
        compared += 1;
        let first = held[0].1;
        if held.iter().all(|(_, rec)| same(first, rec)) {
            continue;
        }
        let example = || {
            let mut by_node = Map::new();
            for (node, rec) in &held {
                let mut shown = record_json(rec);
                shown["in_sync"] = json!(partition.in_sync(node));
                by_node.insert(node.to_string(), shown);
            }
            json!({
                "key": partition.key,
                "offset": offset,
                "high_watermark": high_watermark,
                "leader": partition.leader,
                "nodes": held.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
                "replicas": by_node,
            })
        };
        if offset >= high_watermark {
            above += 1;
            if above_examples.len() < ABOVE_HW_EXAMPLES_MAX {
                above_examples.push(example());
            }
            continue;
        }
        let in_sync: Vec<&ReplicaRecord> = held
            .iter()
            .filter(|(node, _)| partition.in_sync(node))
            .map(|(_, rec)| *rec)
            .collect();
        let isr_disagrees = in_sync.iter().any(|rec| !same(in_sync[0], rec));
        if isr_disagrees {
            below += 1;
        } else {
            outside_isr += 1;
        }
        findings.add("replica-divergence", isr_disagrees, example);
    }
    stats.divergent_below_hw += below;
    stats.divergent_below_hw_outside_isr += outside_isr;
    stats.divergent_above_hw += above;
    stats.partitions.push(summary(
        partition,
        high_watermark,
        [compared, below, outside_isr, above],
        above_examples,
    ));
}

/// One partition's line of `stats.replica_logs.partitions`.
fn summary(
    partition: &PartitionReplicas,
    high_watermark: u64,
    [compared, below, outside_isr, above]: [u64; 4],
    above_examples: Vec<Value>,
) -> Value {
    let mut replicas = Map::new();
    for r in &partition.replicas {
        replicas.insert(
            r.node.clone(),
            json!({
                "role": r.role,
                "in_sync": partition.in_sync(&r.node),
                "log_start_offset": r.log_start_offset,
                "high_watermark": r.high_watermark,
                "log_end_offset": r.log_end_offset,
                "records": r.records.len(),
                "truncated": r.truncated,
            }),
        );
    }
    json!({
        "key": partition.key,
        "leader": partition.leader,
        "isr": partition.isr,
        "settled": partition.settled,
        "high_watermark": high_watermark,
        "replicas": replicas,
        "unread": partition.unread,
        "offsets_compared": compared,
        "divergent_below_hw": below,
        "divergent_below_hw_outside_isr": outside_isr,
        "divergent_above_hw": above,
        "above_hw_examples": above_examples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicas::ReplicaLog;

    fn log(node: &str, high_watermark: u64, records: &[(u64, u32, &str)]) -> ReplicaLog {
        ReplicaLog {
            node: node.into(),
            role: None,
            log_start_offset: records.first().map_or(0, |r| r.0),
            high_watermark,
            log_end_offset: records.last().map_or(0, |r| r.0 + 1),
            records: records
                .iter()
                .map(|&(o, e, v)| (o, e, None, v.to_string()).into())
                .collect(),
            truncated: false,
        }
    }

    fn run(partition: &PartitionReplicas) -> (Findings, ReplicaStats) {
        let (mut findings, mut stats) = (Findings::new(10), ReplicaStats::default());
        compare(partition, &mut findings, &mut stats);
        (findings, stats)
    }

    #[test]
    fn replicas_that_agree_below_the_hw_and_differ_above_it_are_no_instance() {
        // n3 still holds an old leader's suffix at offsets 3 and 4, above the HW of 3.
        let p = PartitionReplicas {
            key: "t0/0".into(),
            leader: Some("n1".into()),
            isr: vec!["n1".into(), "n2".into(), "n3".into()],
            replicas: vec![
                log(
                    "n1",
                    3,
                    &[(0, 0, "1"), (1, 0, "2"), (2, 1, "3"), (3, 1, "4")],
                ),
                log("n2", 3, &[(0, 0, "1"), (1, 0, "2"), (2, 1, "3")]),
                log(
                    "n3",
                    2,
                    &[
                        (0, 0, "1"),
                        (1, 0, "2"),
                        (2, 1, "3"),
                        (3, 0, "9"),
                        (4, 0, "10"),
                    ],
                ),
            ],
            ..Default::default()
        };
        let (mut findings, stats) = run(&p);
        assert!(findings.examples_mut("replica-divergence").is_none());
        assert_eq!((stats.divergent_below_hw, stats.divergent_above_hw), (0, 1));
        let summary = &stats.partitions[0];
        assert_eq!(summary["offsets_compared"], 4, "offset 4 is on n3 alone");
        assert_eq!(summary["above_hw_examples"][0]["offset"], 3);
        assert_eq!(
            summary["above_hw_examples"][0]["replicas"]["n3"]["value"],
            9
        );
    }

    #[test]
    fn a_different_record_below_the_hw_on_an_isr_member_is_an_instance_per_offset() {
        // n2 kept x1, x2 (epoch 1) where the leader n1 has y1, y2 (epoch 2); HW 4.
        let p = PartitionReplicas {
            key: "t0/1".into(),
            leader: Some("n1".into()),
            isr: vec!["n1".into(), "n2".into()],
            replicas: vec![
                log(
                    "n1",
                    4,
                    &[(0, 0, "a"), (1, 2, "y1"), (2, 2, "y2"), (3, 2, "y3")],
                ),
                log(
                    "n2",
                    4,
                    &[(0, 0, "a"), (1, 1, "x1"), (2, 1, "x2"), (3, 2, "y3")],
                ),
                log("n3", 1, &[(0, 0, "a"), (1, 1, "x1")]),
            ],
            ..Default::default()
        };
        let (mut findings, stats) = run(&p);
        assert_eq!(
            (
                stats.divergent_below_hw,
                stats.divergent_below_hw_outside_isr
            ),
            (2, 0)
        );
        let examples = findings.examples_mut("replica-divergence").unwrap().clone();
        assert_eq!(examples.len(), 2);
        assert_eq!(examples[0]["offset"], 1);
        assert_eq!(examples[0]["nodes"], json!(["n1", "n2", "n3"]));
        assert_eq!(
            examples[0]["replicas"]["n2"],
            json!({"value": "x1", "leader_epoch": 1, "key": null, "in_sync": true})
        );
        assert_eq!(examples[1]["offset"], 2);
        assert_eq!(examples[1]["nodes"], json!(["n1", "n2"]));
    }

    #[test]
    fn a_difference_only_outside_the_isr_is_counted_apart() {
        let p = PartitionReplicas {
            key: "t0/0".into(),
            leader: Some("n1".into()),
            isr: vec!["n1".into(), "n2".into()],
            replicas: vec![
                log("n1", 2, &[(0, 0, "1"), (1, 1, "2")]),
                log("n2", 2, &[(0, 0, "1"), (1, 1, "2")]),
                log("n3", 0, &[(0, 0, "1"), (1, 0, "7")]),
            ],
            ..Default::default()
        };
        let (mut findings, stats) = run(&p);
        assert_eq!(
            (
                stats.divergent_below_hw,
                stats.divergent_below_hw_outside_isr
            ),
            (0, 1)
        );
        assert_eq!(
            findings.examples_mut("replica-divergence").unwrap().len(),
            1
        );
    }
}
