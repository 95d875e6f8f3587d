//! Samples the system under test about every 500 ms during the run and appends one line per
//! replica observed to `samples.jsonl`, for the report's ISR and high-watermark plots:
//! `{"time": ns, "key": "t0/0", "isr": ["n1","n2"], "leader": "n1", "leader_epoch": 3,
//! "high_watermark": 17, "node": "n1"}`.
//!
//! What one round observes is the system's ([`System::sample`]): the companion broker's
//! `GET /v1/status` of every broker, one line per local replica; Apache Kafka's Metadata, one
//! line per partition that has a leader, as if from that leader, without offsets.

use crate::recorder::Recorder;
use crate::system::System;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Time between two samples.
pub const SAMPLE_INTERVAL_MS: u64 = 500;

/// Samples until `stop` is set; returns the number of lines written. What does not answer is
/// skipped (that is what the faults do); a write error ends sampling and is returned.
pub async fn run<S: System>(
    system: Arc<S>,
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
        for line in system.sample(&recorder).await {
            serde_json::to_writer(&mut out, &line)?;
            out.write_all(b"\n")?;
            lines += 1;
        }
    }
    out.flush()?;
    Ok(lines)
}
