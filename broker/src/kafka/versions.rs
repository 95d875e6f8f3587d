//! The APIs and versions served, and ApiVersions itself.
//!
//! The lower bounds are Kafka 4's (the oldest versions the `kafka-protocol` codecs carry);
//! the upper bounds stop before features this broker does not have: Fetch v13+ addresses
//! topics by id, ListOffsets v8+ asks for tiered storage offsets, OffsetFetch v8+ batches
//! groups, JoinGroup and the other group APIs stop before KIP-848.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::VersionRange;

use super::{reply, ConnectionError, Reply, Request};
use crate::error::ErrorKind;
use crate::kafka::errors::code;

/// Every served API with its versions, in API key order.
pub const SERVED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 7),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 7),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 4),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::EndTxn, 0, 4),
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::TxnOffsetCommit, 0, 3),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
];

/// The versions of `key` served, or `None` when the API is not served at all.
pub fn served(key: ApiKey) -> Option<VersionRange> {
    SERVED
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|&(_, min, max)| VersionRange { min, max })
}

fn api_list() -> Vec<ApiVersion> {
    SERVED
        .iter()
        .map(|&(key, min, max)| {
            ApiVersion::default()
                .with_api_key(key as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect()
}

/// The answer to an ApiVersions of a version not served: UNSUPPORTED_VERSION with the list,
/// encoded at v0.
pub fn unsupported_answer() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(code(ErrorKind::UnsupportedVersion))
        .with_api_keys(api_list())
}

/// ApiVersions: the list above.
pub fn api_versions(request: &mut Request) -> Result<Reply, ConnectionError> {
    let _: ApiVersionsRequest = request.decode()?;
    Ok(reply(
        ApiVersionsResponse::default()
            .with_error_code(0)
            .with_api_keys(api_list()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Message;

    #[test]
    fn served_versions_are_within_the_codecs() {
        for &(key, min, max) in SERVED {
            let codec = key.valid_versions();
            assert!(min <= max, "{key:?}");
            assert!(
                codec.min <= min && max <= codec.max,
                "{key:?} {min}..={max} outside the codec's {codec}"
            );
        }
        assert_eq!(ApiVersionsResponse::VERSIONS.min, 0);
    }
}
