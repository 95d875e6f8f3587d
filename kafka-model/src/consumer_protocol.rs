//! Kafka's ConsumerProtocol: the bytes a consumer group's members exchange through the
//! coordinator without the coordinator reading them in Kafka (here the broker does read them,
//! to serve the same groups over HTTP). A member's Subscription (its topics) is the metadata
//! of its JoinGroup protocol; the leader's Assignment of each member (its partitions) travels
//! in SyncGroup. Each message is a big-endian `i16` version followed by the body at that
//! version; Tidewater writes version 0 and reads versions 0 to 3 (higher versions are read as
//! 3: they only add fields at the end).
//!
//! The broker's Kafka listener (JoinGroup, SyncGroup) and the workloads' Kafka group client use
//! these four functions, so the two sides cannot drift apart.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::TopicPartition;

/// The version Tidewater writes: the first, which every Kafka client and broker reads.
pub const VERSION_WRITTEN: i16 = 0;
/// The highest version whose body is read as such; a higher one is read as this one.
pub const VERSION_READ_MAX: i16 = 3;

/// A ConsumerProtocol message that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DecodeError {}

/// A member's Subscription to `topics`, as JoinGroup's protocol metadata.
pub fn encode_subscription(topics: &[String]) -> Bytes {
    let subscription = ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| wire(t)).collect());
    encode_versioned(&subscription)
}

/// The topics of a member's Subscription, in the order the member listed them.
pub fn decode_subscription(bytes: &Bytes) -> Result<Vec<String>, DecodeError> {
    let subscription: ConsumerProtocolSubscription = decode_versioned(bytes)?;
    Ok(subscription
        .topics
        .iter()
        .map(|t| t.as_str().to_string())
        .collect())
}

/// A member's Assignment of `partitions`: grouped by topic (topics in name order, each
/// topic's partitions in the order given), as SyncGroup carries it.
pub fn encode_assignment(partitions: &[TopicPartition]) -> Bytes {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        // Kafka's partition indexes are i32; no topic here has 2^31 partitions.
        by_topic
            .entry(&tp.topic)
            .or_default()
            .push(tp.partition as i32);
    }
    let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(
        by_topic
            .into_iter()
            .map(|(topic, partitions)| {
                AssignedTopic::default()
                    .with_topic(TopicName(wire(topic)))
                    .with_partitions(partitions)
            })
            .collect(),
    );
    encode_versioned(&assignment)
}

/// The partitions of a member's Assignment, topic by topic as encoded. A negative partition
/// index names no partition and is left out.
pub fn decode_assignment(bytes: &Bytes) -> Result<Vec<TopicPartition>, DecodeError> {
    let assignment: ConsumerProtocolAssignment = decode_versioned(bytes)?;
    Ok(assignment
        .assigned_partitions
        .iter()
        .flat_map(|tp| {
            tp.partitions.iter().filter_map(|&p| {
                Some(TopicPartition::new(
                    tp.topic.0.as_str(),
                    u32::try_from(p).ok()?,
                ))
            })
        })
        .collect())
}

fn wire(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

fn encode_versioned<T: Encodable>(message: &T) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(VERSION_WRITTEN);
    message
        .encode(&mut buf, VERSION_WRITTEN)
        .expect("consumer protocol messages encode");
    buf.freeze()
}

fn decode_versioned<T: Decodable>(bytes: &Bytes) -> Result<T, DecodeError> {
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return Err(DecodeError("shorter than its version".into()));
    }
    let version = buf.get_i16();
    T::decode(&mut buf, version.min(VERSION_READ_MAX)).map_err(|e| DecodeError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_is_version_0_bytes_and_reads_back() {
        let bytes = encode_subscription(&["t0".to_string()]);
        // version 0, one topic "t0", null user data.
        let expected = [0, 0, 0, 0, 0, 1, 0, 2, b't', b'0', 0xff, 0xff, 0xff, 0xff];
        assert_eq!(&bytes[..], &expected[..]);
        let topics = ["b".to_string(), "a".to_string()];
        assert_eq!(
            decode_subscription(&encode_subscription(&topics)).unwrap(),
            topics
        );
    }

    #[test]
    fn assignment_groups_by_topic_and_reads_back() {
        let partitions = [
            TopicPartition::new("t1", 0),
            TopicPartition::new("t0", 2),
            TopicPartition::new("t0", 1),
        ];
        let bytes = encode_assignment(&partitions);
        // version 0; two topics: "t0" [2, 1], "t1" [0]; null user data.
        let expected = [
            0, 0, 0, 0, 0, 2, 0, 2, b't', b'0', 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 1, 0, 2, b't',
            b'1', 0, 0, 0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
        ];
        assert_eq!(&bytes[..], &expected[..]);
        let read: Vec<String> = decode_assignment(&bytes)
            .unwrap()
            .iter()
            .map(|tp| tp.to_string())
            .collect();
        assert_eq!(read, ["t0/2", "t0/1", "t1/0"]);
    }

    #[test]
    fn later_versions_are_read_and_negative_partitions_dropped() {
        let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
            AssignedTopic::default()
                .with_topic(TopicName(wire("t0")))
                .with_partitions(vec![-1, 3]),
        ]);
        let mut buf = BytesMut::new();
        buf.put_i16(7);
        assignment.encode(&mut buf, VERSION_READ_MAX).unwrap();
        let read = decode_assignment(&buf.freeze()).unwrap();
        assert_eq!(read, [TopicPartition::new("t0", 3)]);
    }

    #[test]
    fn short_or_garbled_messages_are_errors() {
        let short = decode_subscription(&Bytes::from_static(&[0])).unwrap_err();
        assert_eq!(short.to_string(), "shorter than its version");
        assert!(decode_assignment(&Bytes::from_static(&[0, 0, 0, 0, 0, 9])).is_err());
    }
}
