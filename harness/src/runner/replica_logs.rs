//! After the final reads: every replica's own log of every partition, read through the
//! system under test ([`System::replica_logs`]) into `replicas.jsonl`, for the checker's
//! `replica-divergence` (docs/checkers.md). Kafka's ReplicaVerificationTool is the model: read
//! each replica, compare offset by offset.
//!
//! A follower that has just come back may still hold a suffix it has not truncated yet, which
//! is allowed; so each partition is read again (within [`SETTLE_TIME_LIMIT`] for the whole
//! phase) until it has settled: every replica answered, in the ISR, at the leader's log end,
//! which is its high watermark. A partition that does not settle is compared as last read; the
//! checker then counts only disagreements between replicas of the ISR.

use crate::system::{System, PROBE_INTERVAL};
use std::time::Duration;
use tidewater_workloads::replicas::PartitionReplicas;
use tokio::time::Instant;

/// Bound on waiting for the partitions to settle before their logs are compared.
pub const SETTLE_TIME_LIMIT: Duration = Duration::from_secs(30);

/// Reads every replica of every key, one partition at a time (a replica's log may be large),
/// each until it settled or the phase's deadline passed. `Err` when the system cannot read its
/// replicas' logs at all.
pub async fn read_all<S: System>(
    system: &S,
    keys: &[String],
) -> Result<Vec<PartitionReplicas>, String> {
    let deadline = Instant::now() + SETTLE_TIME_LIMIT;
    let mut partitions = Vec::with_capacity(keys.len());
    for key in keys {
        loop {
            let read = system.replica_logs(key).await?;
            if read.settled || Instant::now() + PROBE_INTERVAL >= deadline {
                partitions.push(read);
                break;
            }
            tokio::time::sleep(PROBE_INTERVAL).await;
        }
    }
    Ok(partitions)
}

/// One line for the user: what was read, and what did not settle.
pub fn describe(partitions: &[PartitionReplicas]) -> String {
    let records: usize = partitions
        .iter()
        .flat_map(|p| &p.replicas)
        .map(|r| r.records.len())
        .sum();
    let replicas: usize = partitions.iter().map(|p| p.replicas.len()).sum();
    let unsettled: Vec<&str> = partitions
        .iter()
        .filter(|p| !p.settled)
        .map(|p| p.key.as_str())
        .collect();
    let mut line = format!(
        "replica logs: {replicas} replicas of {} partitions read ({records} records)",
        partitions.len()
    );
    if !unsettled.is_empty() {
        line.push_str(&format!(
            "; not settled within {}s: {}",
            SETTLE_TIME_LIMIT.as_secs(),
            unsettled.join(" ")
        ));
    }
    line
}
