//! The broker's operations, whichever front door decoded the request: typed requests in,
//! typed answers or an [`ApiError`] out, and nothing of HTTP or Kafka's framing. The HTTP
//! routes ([`crate::http::routes`]) and the Kafka listener ([`crate::kafka`]) parse a request,
//! call one of these, and encode the answer, so both append, read and refuse alike.
//!
//! Validation happens before any change, so a refused request leaves the logs and the catalog
//! untouched. On a standalone broker an operation works on the local catalog; in a cluster it
//! goes through the replication side ([`crate::replication::ReplicaManager`]) or the
//! controller.
//!
//! # Layout
//!
//! - [`produce`]: produce a batch (acks, `max.message.bytes`, timestamps, the leader path).
//! - [`producer_ids`]: producer ids for InitProducerId, from blocks the controller allocates.
//! - [`fetch`]: a consumer's read of one partition, with its long poll.
//! - [`offsets`]: list offsets (earliest, latest, by timestamp), end offsets of leader
//!   epochs, delete records.
//! - [`topics`]: create, describe, list and delete topics.
//! - [`replica_log`]: one replica's own log, any role, in pages (the harness compares them).
//! - [`cluster`]: metadata, the status of local replicas, the metrics text.
//! - [`txn_markers`], [`txn_verify`]: the coordinator's markers to partition leaders, and the
//!   leaders' verification of a transactional produce with the coordinator (KIP-890 part 1).
//!
//! Consumer groups have their operations in [`crate::group`] (the coordinator).

pub mod cluster;
pub mod fetch;
pub mod offsets;
pub mod produce;
pub mod producer_ids;
pub mod replica_log;
pub mod topics;
pub mod txn_markers;
pub mod txn_verify;

use crate::broker::Broker;
use crate::error::{ApiError, ErrorKind};
use crate::partition::Partition;

/// Runs `f` in place, telling a multi-threaded runtime first when `may_block` so it moves this
/// worker's other tasks elsewhere (`block_in_place`). Cheap appends (one write(2)) skip the
/// hand-off, which would cost more than the write.
pub fn run_maybe_blocking<R>(may_block: bool, f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let multi_thread = Handle::try_current()
        .map(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
        .unwrap_or(false);
    if may_block && multi_thread {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// An offset from a request, which must not be negative.
fn non_negative_offset(offset: i64) -> Result<u64, ApiError> {
    u64::try_from(offset).map_err(|_| {
        ApiError::new(
            ErrorKind::OffsetOutOfRange,
            format!("offset {offset} is negative"),
        )
    })
}

/// KIP-320 for a consumer's request on `partition` of `topic`, with the leader epoch the
/// client believes current: in a cluster the replication side's checks (leader, epoch), alone
/// the partition's own epoch.
fn check_consumer_read(
    broker: &Broker,
    topic: &str,
    index: u32,
    partition: &Partition,
    client_epoch: Option<u32>,
) -> Result<(), ApiError> {
    match &broker.cluster {
        Some(cluster) => cluster.check_consumer_read_at(topic, index, client_epoch),
        None => crate::replication::leadership_checks::check_client_leader_epoch(
            client_epoch,
            partition.offsets().leader_epoch,
        ),
    }
}
