//! InitProducerId: a producer id and epoch for an idempotent producer (KIP-98), from the
//! broker's block of ids ([`crate::ops::producer_ids`]). Any broker answers it, as in Kafka,
//! where a producer without a `transactional.id` sends it to any broker.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::records::{NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
use tidewater_kafka_model::ErrorCode;

use super::txn::fenced_for;
use super::{reply, ConnectionError, KafkaContext, Reply, Request};
use crate::ops::producer_ids::new_producer;
use crate::txn::state::ProducerIdAndEpoch;

/// InitProducerId. Without a transactional id: a new producer id with epoch 0, whatever id
/// and epoch the request names (Kafka's `TransactionCoordinator.handleInitProducerId` for a
/// null transactional id; a producer bumping its epoch after UNKNOWN_PRODUCER_ID or
/// OUT_OF_ORDER_SEQUENCE_NUMBER gets a fresh id, KIP-360). As in Kafka's `KafkaApis`, a
/// request naming only one of producer id and epoch, or an empty transactional id, is
/// INVALID_REQUEST. A transactional id goes to the transaction coordinator (which answers
/// NOT_COORDINATOR unless this broker leads the id's partition). When the controller gives
/// no block of ids, COORDINATOR_LOAD_IN_PROGRESS, which Kafka answers while its block is not
/// ready and clients retry.
pub async fn init_producer_id(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let body: InitProducerIdRequest = request.decode()?;
    let failed = |error: ErrorCode| {
        InitProducerIdResponse::default()
            .with_error_code(error.code())
            .with_producer_id(ProducerId(NO_PRODUCER_ID))
            .with_producer_epoch(NO_PRODUCER_EPOCH)
    };
    let names_id = body.producer_id.0 != NO_PRODUCER_ID;
    let names_epoch = body.producer_epoch != NO_PRODUCER_EPOCH;
    if names_id != names_epoch {
        return Ok(reply(failed(ErrorCode::InvalidRequest)));
    }
    match body.transactional_id.as_ref().map(|id| id.0.as_str()) {
        Some("") => return Ok(reply(failed(ErrorCode::InvalidRequest))),
        Some(transactional_id) => {
            let expected = names_id.then_some(ProducerIdAndEpoch {
                producer_id: body.producer_id.0,
                producer_epoch: body.producer_epoch,
            });
            let answer = match context
                .transactions
                .init_producer_id(transactional_id, body.transaction_timeout_ms, expected)
                .await
            {
                Ok(producer) => InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(producer.producer_id))
                    .with_producer_epoch(producer.producer_epoch),
                Err(refusal) => {
                    tracing::debug!(transactional_id, error = %refusal.code, message = %refusal.message, "InitProducerId refused");
                    failed(ErrorCode::UnknownServerError).with_error_code(fenced_for(
                        refusal.code,
                        request.version(),
                        4,
                    ))
                }
            };
            return Ok(reply(answer));
        }
        None => {}
    }
    match new_producer(&context.broker).await {
        Ok((producer_id, producer_epoch)) => Ok(reply(
            InitProducerIdResponse::default()
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(producer_epoch),
        )),
        Err(why) => {
            tracing::warn!("InitProducerId without a producer id block: {why}");
            Ok(reply(failed(ErrorCode::CoordinatorLoadInProgress)))
        }
    }
}
