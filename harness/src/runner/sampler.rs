//! Samples every broker's `GET /v1/status` about every 500 ms during the run and appends one
//! line per local replica to `samples.jsonl`, for the report's ISR and high-watermark plots:
//! `{"time": ns, "key": "t0/0", "isr": ["n1","n2"], "leader": "n1", "leader_epoch": 3,
//! "high_watermark": 17, "node": "n1"}`.
//!
//! Apache Kafka has no status route: there [`run_kafka`] samples Kafka's Metadata instead, one
//! line per partition that has a leader, as if from that leader (`role` `leader`, its ISR and
//! epoch) but without offsets, since Metadata carries none.

use crate::recorder::Recorder;
use serde_json::{json, Value};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tidewater_workloads::client::{node_name, BrokerClient};

/// Time between two samples of one broker.
pub const SAMPLE_INTERVAL_MS: u64 = 500;

/// Turns one `/v1/status` answer of `node` into sample lines. Accepts the replicas as a list
/// under `replicas` (or `partitions`), each naming its topic and partition (or `key`).
pub fn sample_lines(time_ns: u64, node: &str, status: &Value) -> Vec<Value> {
    let replicas = status
        .get("replicas")
        .or_else(|| status.get("partitions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::with_capacity(replicas.len());
    for r in &replicas {
        let key = match (
            r.get("key").and_then(Value::as_str),
            r.get("topic").and_then(Value::as_str),
            r.get("partition").and_then(Value::as_u64),
        ) {
            (Some(k), _, _) => k.to_string(),
            (None, Some(t), Some(p)) => format!("{t}/{p}"),
            _ => continue,
        };
        let isr: Vec<String> = r
            .get("isr")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(node_name).collect())
            .unwrap_or_default();
        let hw = r
            .get("high_watermark")
            .or_else(|| r.get("hw"))
            .and_then(Value::as_u64);
        let leo = r
            .get("log_end_offset")
            .or_else(|| r.get("leo"))
            .and_then(Value::as_u64);
        out.push(json!({
            "time": time_ns,
            "key": key,
            "node": node,
            "role": r.get("role").cloned().unwrap_or(Value::Null),
            "isr": isr,
            "leader": r.get("leader").and_then(node_name),
            "leader_epoch": r.get("leader_epoch").cloned().unwrap_or(Value::Null),
            "high_watermark": hw,
            "log_end_offset": leo,
            "log_start_offset": r.get("log_start_offset").cloned().unwrap_or(Value::Null),
        }));
    }
    out
}

/// Samples until `stop` is set; returns the number of lines written. Unreachable brokers are
/// skipped (that is what the faults do); a write error ends sampling and is returned.
pub async fn run(
    client: Arc<BrokerClient>,
    nodes: Vec<String>,
    recorder: Arc<Recorder>,
    path: &Path,
    stop: Arc<AtomicBool>,
) -> std::io::Result<u64> {
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    let mut lines = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(SAMPLE_INTERVAL_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let answers = futures::future::join_all(nodes.iter().map(|n| client.status(n))).await;
        let time = recorder.now_ns();
        for (node, answer) in nodes.iter().zip(answers) {
            let Ok(status) = answer else { continue };
            for line in sample_lines(time, node, &status) {
                serde_json::to_writer(&mut out, &line)?;
                out.write_all(b"\n")?;
                lines += 1;
            }
        }
    }
    out.flush()?;
    Ok(lines)
}

/// The sample lines of one Metadata answer: per partition with a leader, a line in the
/// leader's name, without offsets.
pub fn metadata_lines(
    time_ns: u64,
    parts: &[tidewater_workloads::client::PartitionMeta],
) -> Vec<Value> {
    parts
        .iter()
        .filter_map(|p| {
            let leader = p.leader.as_ref()?;
            Some(json!({
                "time": time_ns,
                "key": p.key,
                "node": leader,
                "role": "leader",
                "isr": p.isr,
                "leader": leader,
                "leader_epoch": p.leader_epoch,
                "high_watermark": null,
                "log_end_offset": null,
                "log_start_offset": null,
            }))
        })
        .collect()
}

/// [`run`] against Apache Kafka: Kafka's Metadata every [`SAMPLE_INTERVAL_MS`] (one broker
/// answers for the cluster; an unanswered round is skipped).
pub async fn run_kafka(
    admin: tidewater_workloads::kafka_admin::KafkaAdmin,
    recorder: Arc<Recorder>,
    path: &Path,
    stop: Arc<AtomicBool>,
) -> std::io::Result<u64> {
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    let mut lines = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(SAMPLE_INTERVAL_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let Ok(parts) = admin.metadata().await else {
            continue;
        };
        for line in metadata_lines(recorder.now_ns(), &parts) {
            serde_json::to_writer(&mut out, &line)?;
            out.write_all(b"\n")?;
            lines += 1;
        }
    }
    out.flush()?;
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_replicas_become_sample_lines() {
        let status = json!({"broker_id": 1, "replicas": [
            {"topic": "t0", "partition": 0, "role": "leader", "leader": 1, "leader_epoch": 3,
             "isr": [1, 2], "high_watermark": 17, "log_end_offset": 18, "log_start_offset": 0},
            {"topic": "t0", "partition": 1, "role": "follower", "leader": 2, "leader_epoch": 1,
             "isr": [2], "high_watermark": 4},
            {"role": "nonsense"},
        ]});
        let lines = sample_lines(5, "n1", &status);
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            json!({"time": 5, "key": "t0/0", "node": "n1", "role": "leader",
                   "isr": ["n1", "n2"], "leader": "n1", "leader_epoch": 3,
                   "high_watermark": 17, "log_end_offset": 18, "log_start_offset": 0})
        );
        assert_eq!(lines[1]["leader"], "n2");
        assert_eq!(lines[1]["log_end_offset"], Value::Null);
    }

    #[test]
    fn kafka_metadata_becomes_leader_lines_without_offsets() {
        use tidewater_workloads::client::PartitionMeta;
        let parts = vec![
            PartitionMeta {
                key: "t0/0".into(),
                leader: Some("n2".into()),
                leader_epoch: Some(4),
                isr: vec!["n2".into(), "n3".into()],
                replicas: vec!["n1".into(), "n2".into(), "n3".into()],
            },
            PartitionMeta {
                key: "t0/1".into(),
                leader: None,
                leader_epoch: None,
                isr: vec![],
                replicas: vec!["n1".into()],
            },
        ];
        let lines = metadata_lines(9, &parts);
        assert_eq!(
            lines,
            [
                json!({"time": 9, "key": "t0/0", "node": "n2", "role": "leader",
                    "isr": ["n2", "n3"], "leader": "n2", "leader_epoch": 4,
                    "high_watermark": null, "log_end_offset": null, "log_start_offset": null})
            ]
        );
    }
}
