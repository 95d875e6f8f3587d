//! A compact description of each served request's fields, per version, as Kafka's message
//! definitions (`clients/src/main/resources/common/message/*Request.json`) give them: what
//! [`super::bounds`] walks before the `kafka-protocol` crate decodes a body.
//!
//! Only what the walk needs is described: each field's wire type and the versions it is on
//! the wire, each struct's known tagged fields, and the first flexible version of each API
//! (from which strings, bytes and arrays are compact and every struct ends with tagged
//! fields). Nullability is left out on purpose: the walk accepts a null wherever one can be
//! encoded, and the crate's decoder refuses a null where the field is not nullable, so the
//! walk is never stricter than the protocol. Fields are described up to the newest version
//! served (`versions::SERVED`); a unit test and `broker/tests/kafka_fuzz.rs` hold these
//! descriptions to the crate's own codecs.

use kafka_protocol::messages::ApiKey;

/// A field's type on the wire.
#[derive(Clone, Copy, Debug)]
pub enum Ty {
    /// BOOLEAN (one byte).
    Bool,
    /// INT8.
    I8,
    /// INT16.
    I16,
    /// INT32.
    I32,
    /// INT64.
    I64,
    /// UUID (16 bytes).
    Uuid,
    /// STRING or NULLABLE_STRING (COMPACT_ in flexible versions).
    Str,
    /// BYTES or NULLABLE_BYTES (COMPACT_ in flexible versions).
    Bytes,
    /// RECORDS: nullable bytes holding record batches, checked later by
    /// [`super::batch_bounds`].
    Records,
    /// ARRAY of a plain type (COMPACT_ARRAY in flexible versions).
    List(&'static Ty),
    /// ARRAY of structs (COMPACT_ARRAY in flexible versions).
    Structs(&'static Struct),
}

/// One field and the versions it is on the wire.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// Kafka's name for it, for error messages.
    pub name: &'static str,
    /// Its wire type.
    pub ty: Ty,
    /// The first version with the field.
    pub min: i16,
    /// The last version with the field.
    pub max: i16,
}

impl Field {
    /// Whether the field is on the wire at `version`.
    pub fn at(&self, version: i16) -> bool {
        self.min <= version && version <= self.max
    }
}

/// A struct: its fields in wire order and its known tagged fields.
#[derive(Clone, Copy, Debug)]
pub struct Struct {
    /// The fields, in the order they are encoded.
    pub fields: &'static [Field],
    /// The tagged fields the crate decodes itself; any other tag is skipped as unknown bytes.
    pub tagged: &'static [Tagged],
}

/// A tagged field the crate decodes (rather than keeping as unknown bytes).
#[derive(Clone, Copy, Debug)]
pub struct Tagged {
    /// Its tag.
    pub tag: u32,
    /// The field, with the versions it may appear in.
    pub field: Field,
}

/// One API's request body.
#[derive(Clone, Copy, Debug)]
pub struct RequestSchema {
    /// The API.
    pub key: ApiKey,
    /// The first flexible version (KIP-482): compact lengths and tagged fields from here.
    pub flexible_from: i16,
    /// The body's top-level struct.
    pub body: Struct,
}

const ALL: i16 = i16::MAX;

/// A field present from version `min` on.
const fn from(name: &'static str, ty: Ty, min: i16) -> Field {
    Field {
        name,
        ty,
        min,
        max: ALL,
    }
}

/// A field present in versions `min..=max`.
const fn span(name: &'static str, ty: Ty, min: i16, max: i16) -> Field {
    Field { name, ty, min, max }
}

/// A struct without known tagged fields.
const fn fields(fields: &'static [Field]) -> Struct {
    Struct {
        fields,
        tagged: &[],
    }
}

const PRODUCE_PARTITION: Struct =
    fields(&[from("Index", Ty::I32, 0), from("Records", Ty::Records, 0)]);
const PRODUCE_TOPIC: Struct = fields(&[
    span("Name", Ty::Str, 0, 12),
    from("TopicId", Ty::Uuid, 13),
    from("PartitionData", Ty::Structs(&PRODUCE_PARTITION), 0),
]);
const PRODUCE: Struct = fields(&[
    from("TransactionalId", Ty::Str, 3),
    from("Acks", Ty::I16, 0),
    from("TimeoutMs", Ty::I32, 0),
    from("TopicData", Ty::Structs(&PRODUCE_TOPIC), 0),
]);

const FETCH_PARTITION: Struct = fields(&[
    from("Partition", Ty::I32, 0),
    from("CurrentLeaderEpoch", Ty::I32, 9),
    from("FetchOffset", Ty::I64, 0),
    from("LastFetchedEpoch", Ty::I32, 12),
    from("LogStartOffset", Ty::I64, 5),
    from("PartitionMaxBytes", Ty::I32, 0),
]);
const FETCH_TOPIC: Struct = fields(&[
    span("Topic", Ty::Str, 0, 12),
    from("TopicId", Ty::Uuid, 13),
    from("Partitions", Ty::Structs(&FETCH_PARTITION), 0),
]);
const FETCH_FORGOTTEN: Struct = fields(&[
    span("Topic", Ty::Str, 7, 12),
    from("TopicId", Ty::Uuid, 13),
    from("Partitions", Ty::List(&Ty::I32), 7),
]);
const FETCH: Struct = Struct {
    fields: &[
        span("ReplicaId", Ty::I32, 0, 14),
        from("MaxWaitMs", Ty::I32, 0),
        from("MinBytes", Ty::I32, 0),
        from("MaxBytes", Ty::I32, 3),
        from("IsolationLevel", Ty::I8, 4),
        from("SessionId", Ty::I32, 7),
        from("SessionEpoch", Ty::I32, 7),
        from("Topics", Ty::Structs(&FETCH_TOPIC), 0),
        from("ForgottenTopicsData", Ty::Structs(&FETCH_FORGOTTEN), 7),
        from("RackId", Ty::Str, 11),
    ],
    tagged: &[Tagged {
        tag: 0,
        field: from("ClusterId", Ty::Str, 12),
    }],
};

const LIST_OFFSETS_PARTITION: Struct = fields(&[
    from("PartitionIndex", Ty::I32, 0),
    from("CurrentLeaderEpoch", Ty::I32, 4),
    from("Timestamp", Ty::I64, 0),
    span("MaxNumOffsets", Ty::I32, 0, 0),
]);
const LIST_OFFSETS_TOPIC: Struct = fields(&[
    from("Name", Ty::Str, 0),
    from("Partitions", Ty::Structs(&LIST_OFFSETS_PARTITION), 0),
]);
const LIST_OFFSETS: Struct = fields(&[
    from("ReplicaId", Ty::I32, 0),
    from("IsolationLevel", Ty::I8, 2),
    from("Topics", Ty::Structs(&LIST_OFFSETS_TOPIC), 0),
    from("TimeoutMs", Ty::I32, 10),
]);

const METADATA_TOPIC: Struct = fields(&[from("TopicId", Ty::Uuid, 10), from("Name", Ty::Str, 0)]);
const METADATA: Struct = fields(&[
    from("Topics", Ty::Structs(&METADATA_TOPIC), 0),
    from("AllowAutoTopicCreation", Ty::Bool, 4),
    span("IncludeClusterAuthorizedOperations", Ty::Bool, 8, 10),
    from("IncludeTopicAuthorizedOperations", Ty::Bool, 8),
]);

const OFFSET_COMMIT_PARTITION: Struct = fields(&[
    from("PartitionIndex", Ty::I32, 0),
    from("CommittedOffset", Ty::I64, 0),
    from("CommittedLeaderEpoch", Ty::I32, 6),
    span("CommitTimestamp", Ty::I64, 1, 1),
    from("CommittedMetadata", Ty::Str, 0),
]);
const OFFSET_COMMIT_TOPIC: Struct = fields(&[
    from("Name", Ty::Str, 0),
    from("Partitions", Ty::Structs(&OFFSET_COMMIT_PARTITION), 0),
]);
const OFFSET_COMMIT: Struct = fields(&[
    from("GroupId", Ty::Str, 0),
    from("GenerationIdOrMemberEpoch", Ty::I32, 1),
    from("MemberId", Ty::Str, 1),
    from("GroupInstanceId", Ty::Str, 7),
    span("RetentionTimeMs", Ty::I64, 2, 4),
    from("Topics", Ty::Structs(&OFFSET_COMMIT_TOPIC), 0),
]);

const OFFSET_FETCH_TOPIC: Struct = fields(&[
    span("Name", Ty::Str, 0, 7),
    span("PartitionIndexes", Ty::List(&Ty::I32), 0, 7),
]);
const OFFSET_FETCH: Struct = fields(&[
    span("GroupId", Ty::Str, 0, 7),
    span("Topics", Ty::Structs(&OFFSET_FETCH_TOPIC), 0, 7),
    from("RequireStable", Ty::Bool, 7),
]);

const FIND_COORDINATOR: Struct = fields(&[
    span("Key", Ty::Str, 0, 3),
    from("KeyType", Ty::I8, 1),
    from("CoordinatorKeys", Ty::List(&Ty::Str), 4),
]);

const JOIN_GROUP_PROTOCOL: Struct =
    fields(&[from("Name", Ty::Str, 0), from("Metadata", Ty::Bytes, 0)]);
const JOIN_GROUP: Struct = fields(&[
    from("GroupId", Ty::Str, 0),
    from("SessionTimeoutMs", Ty::I32, 0),
    from("RebalanceTimeoutMs", Ty::I32, 1),
    from("MemberId", Ty::Str, 0),
    from("GroupInstanceId", Ty::Str, 5),
    from("ProtocolType", Ty::Str, 0),
    from("Protocols", Ty::Structs(&JOIN_GROUP_PROTOCOL), 0),
    from("Reason", Ty::Str, 8),
]);

const HEARTBEAT: Struct = fields(&[
    from("GroupId", Ty::Str, 0),
    from("GenerationId", Ty::I32, 0),
    from("MemberId", Ty::Str, 0),
    from("GroupInstanceId", Ty::Str, 3),
]);

const LEAVE_GROUP_MEMBER: Struct = fields(&[
    from("MemberId", Ty::Str, 3),
    from("GroupInstanceId", Ty::Str, 3),
    from("Reason", Ty::Str, 5),
]);
const LEAVE_GROUP: Struct = fields(&[
    from("GroupId", Ty::Str, 0),
    span("MemberId", Ty::Str, 0, 2),
    from("Members", Ty::Structs(&LEAVE_GROUP_MEMBER), 3),
]);

const SYNC_GROUP_ASSIGNMENT: Struct = fields(&[
    from("MemberId", Ty::Str, 0),
    from("Assignment", Ty::Bytes, 0),
]);
const SYNC_GROUP: Struct = fields(&[
    from("GroupId", Ty::Str, 0),
    from("GenerationId", Ty::I32, 0),
    from("MemberId", Ty::Str, 0),
    from("GroupInstanceId", Ty::Str, 3),
    from("ProtocolType", Ty::Str, 5),
    from("ProtocolName", Ty::Str, 5),
    from("Assignments", Ty::Structs(&SYNC_GROUP_ASSIGNMENT), 0),
]);

const API_VERSIONS: Struct = fields(&[
    from("ClientSoftwareName", Ty::Str, 3),
    from("ClientSoftwareVersion", Ty::Str, 3),
]);

const CREATE_TOPICS_ASSIGNMENT: Struct = fields(&[
    from("PartitionIndex", Ty::I32, 0),
    from("BrokerIds", Ty::List(&Ty::I32), 0),
]);
const CREATE_TOPICS_CONFIG: Struct = fields(&[from("Name", Ty::Str, 0), from("Value", Ty::Str, 0)]);
const CREATE_TOPICS_TOPIC: Struct = fields(&[
    from("Name", Ty::Str, 0),
    from("NumPartitions", Ty::I32, 0),
    from("ReplicationFactor", Ty::I16, 0),
    from("Assignments", Ty::Structs(&CREATE_TOPICS_ASSIGNMENT), 0),
    from("Configs", Ty::Structs(&CREATE_TOPICS_CONFIG), 0),
]);
const CREATE_TOPICS: Struct = fields(&[
    from("Topics", Ty::Structs(&CREATE_TOPICS_TOPIC), 0),
    from("TimeoutMs", Ty::I32, 0),
    from("ValidateOnly", Ty::Bool, 1),
]);

const DELETE_TOPICS_TOPIC: Struct =
    fields(&[from("Name", Ty::Str, 6), from("TopicId", Ty::Uuid, 6)]);
const DELETE_TOPICS: Struct = fields(&[
    from("Topics", Ty::Structs(&DELETE_TOPICS_TOPIC), 6),
    span("TopicNames", Ty::List(&Ty::Str), 0, 5),
    from("TimeoutMs", Ty::I32, 0),
]);

const DELETE_RECORDS_PARTITION: Struct = fields(&[
    from("PartitionIndex", Ty::I32, 0),
    from("Offset", Ty::I64, 0),
]);
const DELETE_RECORDS_TOPIC: Struct = fields(&[
    from("Name", Ty::Str, 0),
    from("Partitions", Ty::Structs(&DELETE_RECORDS_PARTITION), 0),
]);
const DELETE_RECORDS: Struct = fields(&[
    from("Topics", Ty::Structs(&DELETE_RECORDS_TOPIC), 0),
    from("TimeoutMs", Ty::I32, 0),
]);

const INIT_PRODUCER_ID: Struct = fields(&[
    from("TransactionalId", Ty::Str, 0),
    from("TransactionTimeoutMs", Ty::I32, 0),
    from("ProducerId", Ty::I64, 3),
    from("ProducerEpoch", Ty::I16, 3),
]);

// AddPartitionsToTxn's client form (v0-3, the versions served; v4+ batch transactions).
const ADD_PARTITIONS_TOPIC: Struct = fields(&[
    from("Name", Ty::Str, 0),
    from("Partitions", Ty::List(&Ty::I32), 0),
]);
const ADD_PARTITIONS_TO_TXN: Struct = fields(&[
    from("V3AndBelowTransactionalId", Ty::Str, 0),
    from("V3AndBelowProducerId", Ty::I64, 0),
    from("V3AndBelowProducerEpoch", Ty::I16, 0),
    from("V3AndBelowTopics", Ty::Structs(&ADD_PARTITIONS_TOPIC), 0),
]);

const END_TXN: Struct = fields(&[
    from("TransactionalId", Ty::Str, 0),
    from("ProducerId", Ty::I64, 0),
    from("ProducerEpoch", Ty::I16, 0),
    from("Committed", Ty::Bool, 0),
]);

const ADD_OFFSETS_TO_TXN: Struct = fields(&[
    from("TransactionalId", Ty::Str, 0),
    from("ProducerId", Ty::I64, 0),
    from("ProducerEpoch", Ty::I16, 0),
    from("GroupId", Ty::Str, 0),
]);

const WRITE_TXN_MARKERS_TOPIC: Struct = fields(&[
    from("Name", Ty::Str, 0),
    from("PartitionIndexes", Ty::List(&Ty::I32), 0),
]);
const WRITE_TXN_MARKERS_MARKER: Struct = fields(&[
    from("ProducerId", Ty::I64, 0),
    from("ProducerEpoch", Ty::I16, 0),
    from("TransactionResult", Ty::Bool, 0),
    from("Topics", Ty::Structs(&WRITE_TXN_MARKERS_TOPIC), 0),
    from("CoordinatorEpoch", Ty::I32, 0),
]);
const WRITE_TXN_MARKERS: Struct =
    fields(&[from("Markers", Ty::Structs(&WRITE_TXN_MARKERS_MARKER), 0)]);

const TXN_OFFSET_COMMIT_PARTITION: Struct = fields(&[
    from("PartitionIndex", Ty::I32, 0),
    from("CommittedOffset", Ty::I64, 0),
    from("CommittedLeaderEpoch", Ty::I32, 2),
    from("CommittedMetadata", Ty::Str, 0),
]);
const TXN_OFFSET_COMMIT_TOPIC: Struct = fields(&[
    from("Name", Ty::Str, 0),
    from("Partitions", Ty::Structs(&TXN_OFFSET_COMMIT_PARTITION), 0),
]);
const TXN_OFFSET_COMMIT: Struct = fields(&[
    from("TransactionalId", Ty::Str, 0),
    from("GroupId", Ty::Str, 0),
    from("ProducerId", Ty::I64, 0),
    from("ProducerEpoch", Ty::I16, 0),
    from("GenerationId", Ty::I32, 3),
    from("MemberId", Ty::Str, 3),
    from("GroupInstanceId", Ty::Str, 3),
    from("Topics", Ty::Structs(&TXN_OFFSET_COMMIT_TOPIC), 0),
]);

const EPOCH_PARTITION: Struct = fields(&[
    from("Partition", Ty::I32, 0),
    from("CurrentLeaderEpoch", Ty::I32, 2),
    from("LeaderEpoch", Ty::I32, 0),
]);
const EPOCH_TOPIC: Struct = fields(&[
    from("Topic", Ty::Str, 0),
    from("Partitions", Ty::Structs(&EPOCH_PARTITION), 0),
]);
const OFFSET_FOR_LEADER_EPOCH: Struct = fields(&[
    from("ReplicaId", Ty::I32, 3),
    from("Topics", Ty::Structs(&EPOCH_TOPIC), 0),
]);

const fn request(key: ApiKey, flexible_from: i16, body: Struct) -> RequestSchema {
    RequestSchema {
        key,
        flexible_from,
        body,
    }
}

/// Every served API's request, in API key order.
pub const REQUESTS: &[RequestSchema] = &[
    request(ApiKey::Produce, 9, PRODUCE),
    request(ApiKey::Fetch, 12, FETCH),
    request(ApiKey::ListOffsets, 6, LIST_OFFSETS),
    request(ApiKey::Metadata, 9, METADATA),
    request(ApiKey::OffsetCommit, 8, OFFSET_COMMIT),
    request(ApiKey::OffsetFetch, 6, OFFSET_FETCH),
    request(ApiKey::FindCoordinator, 3, FIND_COORDINATOR),
    request(ApiKey::JoinGroup, 6, JOIN_GROUP),
    request(ApiKey::Heartbeat, 4, HEARTBEAT),
    request(ApiKey::LeaveGroup, 4, LEAVE_GROUP),
    request(ApiKey::SyncGroup, 4, SYNC_GROUP),
    request(ApiKey::ApiVersions, 3, API_VERSIONS),
    request(ApiKey::CreateTopics, 5, CREATE_TOPICS),
    request(ApiKey::DeleteTopics, 4, DELETE_TOPICS),
    request(ApiKey::DeleteRecords, 2, DELETE_RECORDS),
    request(ApiKey::InitProducerId, 2, INIT_PRODUCER_ID),
    request(ApiKey::OffsetForLeaderEpoch, 4, OFFSET_FOR_LEADER_EPOCH),
    request(ApiKey::AddPartitionsToTxn, 3, ADD_PARTITIONS_TO_TXN),
    request(ApiKey::AddOffsetsToTxn, 3, ADD_OFFSETS_TO_TXN),
    request(ApiKey::EndTxn, 3, END_TXN),
    // Kafka 4 serves v1 only, flexible; the crate (and so the header) counts the API as
    // flexible from its first version.
    request(ApiKey::WriteTxnMarkers, 0, WRITE_TXN_MARKERS),
    request(ApiKey::TxnOffsetCommit, 3, TXN_OFFSET_COMMIT),
];

/// The request description of `key`, or `None` for an API not described (not served).
pub fn request_schema(key: ApiKey) -> Option<&'static RequestSchema> {
    REQUESTS.iter().find(|schema| schema.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::versions::SERVED;

    #[test]
    fn every_served_api_is_described_and_nothing_else() {
        for &(key, _, _) in SERVED {
            assert!(request_schema(key).is_some(), "{key:?} has no description");
        }
        assert_eq!(REQUESTS.len(), SERVED.len());
    }

    #[test]
    fn the_first_flexible_version_is_the_crates() {
        for schema in REQUESTS {
            assert_eq!(
                schema.key.request_header_version(schema.flexible_from),
                2,
                "{:?} v{} is flexible",
                schema.key,
                schema.flexible_from
            );
            assert!(
                schema.flexible_from == 0
                    || schema.key.request_header_version(schema.flexible_from - 1) < 2,
                "{:?} v{} is not flexible",
                schema.key,
                schema.flexible_from - 1
            );
        }
    }
}
