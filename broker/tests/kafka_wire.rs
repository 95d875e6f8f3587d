//! The Kafka listener's edges, byte for byte, against the real binary: ApiVersions (served
//! list, and KIP-511's answer to a version it does not know), frames over
//! `socket.request.max.bytes`, APIs not served, refused record batches that append nothing,
//! acks=0 without an answer, and KIP-320 epochs on fetch. Requests are encoded with the
//! `kafka-protocol` crate's client-side codecs.

#[path = "kafka_wire/client.rs"]
mod client;
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use bytes::{BufMut, Bytes, BytesMut};
use client::{batch, call, connect, receive, send};
use common::Node;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse, ProduceRequest,
    ProduceResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::records::{Record, TimestampType};

/// True when the broker closed the connection (EOF) rather than answering.
fn closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(stream.read(&mut byte), Ok(0))
}

fn record(value: &str) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: -1,
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Default::default(),
    }
}

fn produce(acks: i16, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("w")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])])
}

fn fetch(offset: i64, current_leader_epoch: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("w")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_current_leader_epoch(current_leader_epoch)
                .with_partition_max_bytes(1 << 20)])])
}

#[tokio::test]
async fn the_kafka_listener_answers_and_refuses_as_kafka_does() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(
        &dir.path().join("b"),
        &[
            "kafka.listeners=PLAINTEXT://127.0.0.1:0".into(),
            "socket.request.max.bytes=4096".into(),
        ],
    );
    let address = node.kafka.clone().unwrap();
    common::Client::new(&node.url)
        .create_topic("w", 1, serde_json::json!({}))
        .await;
    let mut s = connect(&address);

    // ApiVersions v3 lists what is served; a version it does not know gets v0 with
    // UNSUPPORTED_VERSION and the same list (KIP-511).
    let served: ApiVersionsResponse = call(
        &mut s,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    );
    assert_eq!(served.error_code, 0);
    let produce_range = served
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Produce as i16)
        .map(|k| (k.min_version, k.max_version));
    assert_eq!(produce_range, Some((3, 9)));
    let init_producer_id_range = served
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::InitProducerId as i16)
        .map(|k| (k.min_version, k.max_version));
    assert_eq!(init_producer_id_range, Some((0, 5)));
    let mut frame = BytesMut::new();
    frame.put_i32(10);
    frame.put_i16(ApiKey::ApiVersions as i16);
    frame.put_i16(99);
    frame.put_i32(42);
    frame.put_i16(-1);
    s.write_all(&frame).unwrap();
    let (correlation, mut body) = receive(&mut s, 0).unwrap();
    assert_eq!(correlation, 42);
    let unsupported = ApiVersionsResponse::decode(&mut body, 0).unwrap();
    assert_eq!(unsupported.error_code, 35);
    assert_eq!(unsupported.api_keys, served.api_keys);

    // Refused batches append nothing: headers, a null value, lz4.
    let mut with_header = record("h");
    with_header.headers.insert(
        StrBytes::from_static_str("trace"),
        Some(Bytes::from_static(b"1")),
    );
    let mut tombstone = record("t");
    tombstone.value = None;
    let mut lz4 = BytesMut::from(&batch(&[record("z")])[..]);
    lz4[22] |= 3; // attributes: compression lz4
    for (records, code) in [
        (batch(&[with_header]), 87),
        (batch(&[tombstone]), 87),
        (lz4.freeze(), 76),
    ] {
        let answer: ProduceResponse = call(&mut s, ApiKey::Produce, 9, &produce(-1, records));
        let p = &answer.responses[0].partition_responses[0];
        assert_eq!(p.error_code, code, "{p:?}");
        assert_eq!(p.base_offset, -1);
    }
    let nothing: FetchResponse = call(&mut s, ApiKey::Fetch, 12, &fetch(0, -1));
    assert_eq!(nothing.responses[0].partitions[0].high_watermark, 0);

    // acks=0 is not answered; the next request on the connection is.
    send(
        &mut s,
        ApiKey::Produce,
        9,
        8,
        &produce(0, batch(&[record("quiet")])),
    );
    let acked: ProduceResponse = call(
        &mut s,
        ApiKey::Produce,
        9,
        &produce(-1, batch(&[record("loud")])),
    );
    assert_eq!(acked.responses[0].partition_responses[0].base_offset, 1);

    // KIP-320: a leader epoch from the future is UNKNOWN_LEADER_EPOCH; the current one reads.
    let future: FetchResponse = call(&mut s, ApiKey::Fetch, 12, &fetch(0, 5));
    assert_eq!(future.responses[0].partitions[0].error_code, 75);
    let read: FetchResponse = call(&mut s, ApiKey::Fetch, 12, &fetch(0, 0));
    let p = &read.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 2));
    let mut records = p.records.clone().unwrap();
    let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut records).unwrap();
    let values: Vec<_> = set
        .records
        .iter()
        .map(|r| (r.offset, r.value.clone().unwrap()))
        .collect();
    assert_eq!(
        values,
        [
            (0, Bytes::from_static(b"quiet")),
            (1, Bytes::from_static(b"loud"))
        ]
    );

    // An API not served closes the connection (SaslHandshake here).
    let mut sasl = connect(&address);
    send(
        &mut sasl,
        ApiKey::SaslHandshake,
        1,
        1,
        &kafka_protocol::messages::SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str("PLAIN")),
    );
    assert!(closed(&mut sasl));

    // A frame over socket.request.max.bytes closes the connection before its body is read;
    // the broker goes on serving others.
    let mut big = connect(&address);
    big.write_all(&5000i32.to_be_bytes()).unwrap();
    assert!(closed(&mut big));
    let again: ApiVersionsResponse = call(
        &mut connect(&address),
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    );
    assert_eq!(again.error_code, 0);
}
