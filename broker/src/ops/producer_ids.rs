//! Producer ids for InitProducerId (idempotent producers without a `transactional.id`).
//!
//! As in Kafka since KIP-730, a broker hands out ids from a block the controller allocated to
//! it ([`crate::controller::protocol::ProducerIdBlock`], 1000 ids, persisted by the controller
//! before it answers), so ids are unique across the cluster and across restarts of any node,
//! and asks for the next block when one is used up. A standalone broker has no controller: it
//! allocates its blocks itself, through a checkpoint in its first log dir written before a
//! block is used. Every producer starts at epoch 0 (Kafka's `TransactionCoordinator` answers a
//! non-transactional InitProducerId with a new id and epoch 0, whatever id the request names).

use std::path::PathBuf;

use crate::broker::Broker;
use crate::controller::protocol::{ProducerIdBlock, PRODUCER_ID_BLOCK_SIZE};
use crate::storage::checkpoint;

/// File of a standalone broker's next unallocated producer id, in its first log dir.
pub const PRODUCER_ID_CHECKPOINT: &str = "producer-id-block-checkpoint";

/// A producer id and epoch for a new idempotent producer, or why none could be had (the
/// controller did not answer: Kafka's client retries, as on COORDINATOR_LOAD_IN_PROGRESS).
pub async fn new_producer(broker: &Broker) -> Result<(i64, i16), String> {
    let mut block = broker.producer_ids.block.lock().await;
    let exhausted = block.is_none_or(|(next, end)| next >= end);
    if exhausted {
        let fresh = match &broker.cluster {
            Some(cluster) => cluster.allocate_producer_ids().await?,
            None => allocate_locally(broker)?,
        };
        assert!(fresh.size > 0 && fresh.first_producer_id >= 0, "{fresh:?}");
        let end = fresh.first_producer_id + i64::from(fresh.size);
        tracing::info!(
            first = fresh.first_producer_id,
            end,
            "new producer id block"
        );
        *block = Some((fresh.first_producer_id, end));
    }
    let (next, end) = block.as_mut().expect("a block was just allocated");
    let producer_id = *next;
    *next += 1;
    assert!(producer_id < *end, "ids come from inside the block");
    Ok((producer_id, 0))
}

/// A standalone broker's next block: the checkpoint moves past it before it is used.
fn allocate_locally(broker: &Broker) -> Result<ProducerIdBlock, String> {
    let path = checkpoint_path(broker)?;
    let first = checkpoint::read_offset(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .unwrap_or(0);
    let next = first + u64::from(PRODUCER_ID_BLOCK_SIZE);
    let first_producer_id = i64::try_from(first)
        .ok()
        .filter(|_| i64::try_from(next).is_ok())
        .ok_or_else(|| "the producer id space is exhausted".to_string())?;
    checkpoint::write_offset(&path, next).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(ProducerIdBlock {
        first_producer_id,
        size: PRODUCER_ID_BLOCK_SIZE,
    })
}

fn checkpoint_path(broker: &Broker) -> Result<PathBuf, String> {
    broker
        .config
        .log_dirs
        .first()
        .map(|dir| dir.join(PRODUCER_ID_CHECKPOINT))
        .ok_or_else(|| "no log dir to keep producer ids in".to_string())
}
