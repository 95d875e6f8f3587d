//! The harness's own calls over Kafka's protocol, for clusters that speak nothing else (Apache
//! Kafka, `docs/real-kafka.md`): partition metadata (leader, epoch, ISR, replicas, as the
//! nemesis and the setup need them) and topic creation with configs. The workload's own
//! traffic goes through rskafka ([`crate::kafka`]); these two calls need what rskafka does not
//! expose (leaders and ISRs, topic configs), so they are encoded here with the
//! `kafka-protocol` crate's codecs, one connection per call.
//!
//! Kafka's broker id K is the harness's node `nK` (both cluster kinds start them so).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, RequestHeader,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::RecordBatchDecoder;
use tidewater_kafka_model::ErrorCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client::{first_answer, split_key, ClientError, ErrorCause, PartitionMeta};
use crate::kafka::screaming_snake;
use crate::replicas::ReplicaRecord;

/// Metadata v7: the first with leader epochs, served by every KRaft Kafka and the companion
/// broker.
const METADATA_VERSION: i16 = 7;
/// CreateTopics v4: configs per topic, before the flexible encodings; Kafka 4 serves 2 and up.
const CREATE_TOPICS_VERSION: i16 = 4;
/// ListOffsets v4: leader epochs in the answer; every KRaft Kafka and the companion serve it.
const LIST_OFFSETS_VERSION: i16 = 4;
/// Fetch v12: the first with client metadata (a rack id), which lets a follower serve a
/// consumer's fetch from its own log (KIP-392); Kafka 4 serves 4 and up.
const FETCH_VERSION: i16 = 12;
/// Kafka's `DEBUGGING_REPLICA_ID`: a ListOffsets with it is answered by any replica, leader
/// or follower, for its own log, and `latest` is its log end offset rather than the HW.
const DEBUGGING_REPLICA_ID: i32 = -2;
/// ListOffsets' timestamps for the first and the next offset.
const EARLIEST_TIMESTAMP: i64 = -2;
const LATEST_TIMESTAMP: i64 = -1;
/// Bound on an answer's size: metadata of a test cluster is small.
const ANSWER_MAX_BYTES: usize = 64 << 20;

/// One request to `address` on a new connection and its answer, within `timeout`: the
/// connection fails as [`ErrorCause::Connect`], a broken one as [`ErrorCause::Transport`],
/// silence as [`ErrorCause::Timeout`].
pub async fn call<Req, Resp>(
    address: &str,
    key: ApiKey,
    version: i16,
    request: &Req,
    timeout: Duration,
) -> Result<Resp, ClientError>
where
    Req: Encodable,
    Resp: Decodable + HeaderVersion,
{
    let exchange = async {
        let mut body = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(1)
            .with_client_id(Some(StrBytes::from_static_str("tidewater-harness")))
            .encode(&mut body, key.request_header_version(version))
            .map_err(|e| error(ErrorCause::Transport, address, e.to_string()))?;
        request
            .encode(&mut body, version)
            .map_err(|e| error(ErrorCause::Transport, address, e.to_string()))?;
        let mut stream = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| error(ErrorCause::Connect, address, e.to_string()))?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(body.len() as i32);
        frame.put_slice(&body);
        let transport = |e: std::io::Error| error(ErrorCause::Transport, address, e.to_string());
        stream.write_all(&frame).await.map_err(transport)?;
        let size = stream.read_i32().await.map_err(transport)?;
        let size = usize::try_from(size)
            .ok()
            .filter(|s| (4..=ANSWER_MAX_BYTES).contains(s))
            .ok_or_else(|| {
                error(
                    ErrorCause::Transport,
                    address,
                    format!("answer size {size}"),
                )
            })?;
        let mut answer = vec![0u8; size];
        stream.read_exact(&mut answer).await.map_err(transport)?;
        let mut answer = Bytes::from(answer);
        answer.advance(4); // correlation id
        if Resp::header_version(version) >= 1 {
            // Tagged fields of a flexible header: none are sent to clients here.
            let tags = answer.get_u8();
            if tags != 0 {
                return Err(error(
                    ErrorCause::Transport,
                    address,
                    "tagged fields in the response header".into(),
                ));
            }
        }
        Resp::decode(&mut answer, version)
            .map_err(|e| error(ErrorCause::Transport, address, format!("decode: {e}")))
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(error(
            ErrorCause::Timeout,
            address,
            format!("no answer within {} ms", timeout.as_millis()),
        )),
    }
}

/// A page of one replica's own log, as the broker holding it answered a fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaPage {
    /// That replica's own high watermark: records are served up to it and not past it.
    pub high_watermark: u64,
    /// That replica's log start offset.
    pub log_start_offset: u64,
    /// Its records from the offset asked for, in offset order (control records too, their
    /// key and value bytes as text).
    pub records: Vec<ReplicaRecord>,
    /// Where the next page starts (the offset asked for when the page is empty).
    pub next_offset: u64,
}

/// Metadata and topic creation over Kafka's protocol.
pub struct KafkaAdmin {
    /// `HOST:PORT` of the brokers, asked in turn until one answers.
    bootstrap: Vec<String>,
    /// Bound on one call (connect, request, answer).
    timeout: Duration,
}

fn error(cause: ErrorCause, node: &str, message: String) -> ClientError {
    ClientError {
        cause,
        node: Some(node.to_string()),
        message,
    }
}

/// `topic/partition` as Kafka's protocol names it.
fn parse_key<'a>(address: &str, key: &'a str) -> Result<(&'a str, i32), ClientError> {
    split_key(key)
        .map(|(topic, partition)| (topic, partition as i32))
        .ok_or_else(|| error(ErrorCause::NoLeader, address, format!("bad key {key}")))
}

/// A broker's error code as an error of the call, named as Kafka names it.
fn broker_error(address: &str, code: i16) -> Result<(), ClientError> {
    if code == 0 {
        return Ok(());
    }
    let name = kafka_protocol::ResponseError::try_from_code(code).map_or_else(
        || format!("ERROR_{code}"),
        |e| screaming_snake(&format!("{e:?}")),
    );
    Err(ClientError {
        cause: ErrorCause::Broker {
            name: name.clone(),
            status: 0,
        },
        node: Some(address.to_string()),
        message: name,
    })
}

/// The harness's node name for Kafka's broker id.
fn node_of(id: i32) -> Option<String> {
    (id >= 0).then(|| format!("n{id}"))
}

/// One broker's Metadata answer: the node that answered (the broker whose advertised
/// `host:port` is `address`, if it lists itself) and its partitions.
fn answer_partitions(address: &str, answer: &MetadataResponse) -> Answer {
    let answered_by = answer
        .brokers
        .iter()
        .find(|b| format!("{}:{}", b.host.as_str(), b.port) == address)
        .and_then(|b| node_of(b.node_id.0));
    let mut partitions = Vec::new();
    for topic in &answer.topics {
        let Some(name) = &topic.name else { continue };
        for p in &topic.partitions {
            let names = |ids: &[kafka_protocol::messages::BrokerId]| {
                ids.iter().filter_map(|id| node_of(id.0)).collect()
            };
            partitions.push(PartitionMeta {
                key: format!("{}/{}", name.0.as_str(), p.partition_index),
                leader: node_of(p.leader_id.0),
                leader_epoch: (p.leader_epoch >= 0).then_some(i64::from(p.leader_epoch)),
                isr: names(&p.isr_nodes),
                replicas: names(&p.replica_nodes),
            });
        }
    }
    Answer {
        answered_by,
        partitions,
    }
}

/// The partitions of one broker's Metadata answer.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    /// The node that answered, when its answer names it.
    answered_by: Option<String>,
    partitions: Vec<PartitionMeta>,
}

/// Per partition, the freshest of the brokers' answers (in the order asked): the highest
/// leader epoch (a new election reaches the new leader first), and among equal epochs the
/// answer of the leader itself, which learns of every ISR change of its partition (it
/// proposes the shrinks and expansions, and replays the controller's fencing), where a
/// follower cut from the controller does not. Otherwise the first answer.
fn freshest(answers: Vec<Answer>) -> Vec<PartitionMeta> {
    let mut best: Vec<(PartitionMeta, bool)> = Vec::new();
    for answer in answers {
        for p in answer.partitions {
            let own = p.leader.is_some() && p.leader == answer.answered_by;
            match best.iter_mut().find(|(b, _)| b.key == p.key) {
                None => best.push((p, own)),
                Some((b, b_own)) => {
                    if (p.leader_epoch, own) > (b.leader_epoch, *b_own) {
                        *b = p;
                        *b_own = own;
                    }
                }
            }
        }
    }
    best.into_iter().map(|(p, _)| p).collect()
}

impl KafkaAdmin {
    /// An admin client over `bootstrap`.
    pub fn new(bootstrap: Vec<String>, timeout: Duration) -> KafkaAdmin {
        KafkaAdmin { bootstrap, timeout }
    }

    /// One request to `address` and its answer, within this client's timeout.
    async fn call<Req, Resp>(
        &self,
        address: &str,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, ClientError>
    where
        Req: Encodable,
        Resp: Decodable + HeaderVersion,
    {
        call(address, key, version, request, self.timeout).await
    }

    /// Asks each broker in turn until one answers.
    async fn first_answer<Req, Resp>(
        &self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, ClientError>
    where
        Req: Encodable,
        Resp: Decodable + HeaderVersion,
    {
        first_answer(&self.bootstrap, "no Kafka brokers configured", |address| {
            self.call(address, key, version, request)
        })
        .await
    }

    /// Every partition of every topic: leader, leader epoch, ISR and replicas by node name,
    /// as the quorum last decided it. Each broker answers from its own metadata cache, and a
    /// broker cut off from the controller keeps what it knew when the cut began (an ISR the
    /// controller has since shrunk, a leader it has since replaced), so every broker is
    /// asked at once and the answers are merged by [`freshest`].
    pub async fn metadata(&self) -> Result<Vec<PartitionMeta>, ClientError> {
        if self.bootstrap.is_empty() {
            return Err(ClientError {
                cause: ErrorCause::NoLeader,
                node: None,
                message: "no Kafka brokers configured".into(),
            });
        }
        let request = MetadataRequest::default().with_topics(None);
        let asked = self.bootstrap.iter().map(|address| async {
            let answer: Result<MetadataResponse, ClientError> = self
                .call(address, ApiKey::Metadata, METADATA_VERSION, &request)
                .await;
            answer.map(|answer| answer_partitions(address, &answer))
        });
        let mut answers = Vec::new();
        let mut last_error = None;
        for answer in futures::future::join_all(asked).await {
            match answer {
                Ok(answer) => answers.push(answer),
                Err(e) => last_error = Some(e),
            }
        }
        match (answers.is_empty(), last_error) {
            (true, Some(e)) => Err(e),
            _ => Ok(freshest(answers)),
        }
    }

    /// The log start and log end offsets of the replica of `key` held by the broker at
    /// `address`, as that replica knows them (ListOffsets with [`DEBUGGING_REPLICA_ID`]).
    pub async fn replica_bounds(
        &self,
        address: &str,
        key: &str,
    ) -> Result<(u64, u64), ClientError> {
        let start = self
            .replica_offset(address, key, EARLIEST_TIMESTAMP)
            .await?;
        let end = self.replica_offset(address, key, LATEST_TIMESTAMP).await?;
        Ok((start, end))
    }

    async fn replica_offset(
        &self,
        address: &str,
        key: &str,
        timestamp: i64,
    ) -> Result<u64, ClientError> {
        use kafka_protocol::messages::list_offsets_request::{
            ListOffsetsPartition, ListOffsetsTopic,
        };
        let (topic, partition) = parse_key(address, key)?;
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(DEBUGGING_REPLICA_ID))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(timestamp)])]);
        let answer: ListOffsetsResponse = self
            .call(address, ApiKey::ListOffsets, LIST_OFFSETS_VERSION, &request)
            .await?;
        let p = answer
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or_else(|| {
                error(
                    ErrorCause::Transport,
                    address,
                    "no partition in ListOffsets".into(),
                )
            })?;
        broker_error(address, p.error_code)?;
        u64::try_from(p.offset).map_err(|_| {
            error(
                ErrorCause::Transport,
                address,
                format!("offset {}", p.offset),
            )
        })
    }

    /// Records of the replica of `key` held by the broker at `address`, from `offset`, about
    /// `max_bytes` of them: a consumer's fetch sent to that broker, which a follower serves
    /// from its own log as a leader does, up to its own high watermark.
    pub async fn replica_fetch(
        &self,
        address: &str,
        key: &str,
        offset: u64,
        max_bytes: i32,
    ) -> Result<ReplicaPage, ClientError> {
        use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
        let (topic, partition) = parse_key(address, key)?;
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(0)
            .with_max_bytes(max_bytes)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(offset as i64)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(max_bytes)])]);
        let answer: FetchResponse = self
            .call(address, ApiKey::Fetch, FETCH_VERSION, &request)
            .await?;
        broker_error(address, answer.error_code)?;
        let p = answer
            .responses
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or_else(|| {
                error(
                    ErrorCause::Transport,
                    address,
                    "no partition in Fetch".into(),
                )
            })?;
        broker_error(address, p.error_code)?;
        let mut page = ReplicaPage {
            high_watermark: u64::try_from(p.high_watermark).unwrap_or(0),
            log_start_offset: u64::try_from(p.log_start_offset).unwrap_or(0),
            records: Vec::new(),
            next_offset: offset,
        };
        let mut bytes = p.records.clone().unwrap_or_default();
        let text = |b: &Option<Bytes>| {
            b.as_deref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
        };
        while !bytes.is_empty() {
            // The last batch may be cut at max_bytes: what decoded before it is the page.
            let Ok(set) = RecordBatchDecoder::decode(&mut bytes) else {
                break;
            };
            for r in set.records {
                let Ok(at) = u64::try_from(r.offset) else {
                    continue;
                };
                if at < offset {
                    continue; // a batch begins before the offset asked for
                }
                page.records.push(ReplicaRecord {
                    offset: at,
                    leader_epoch: u32::try_from(r.partition_leader_epoch).unwrap_or(0),
                    key: text(&r.key),
                    value: text(&r.value).unwrap_or_default(),
                });
                page.next_offset = at + 1;
            }
        }
        Ok(page)
    }

    /// Creates `name` with its configs; an existing topic counts as created, so setup can be
    /// retried.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: u32,
        replication_factor: u32,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), ClientError> {
        let topic = CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_string())))
            .with_num_partitions(partitions as i32)
            .with_replication_factor(replication_factor as i16)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string(k.clone()))
                            .with_value(Some(StrBytes::from_string(v.clone())))
                    })
                    .collect(),
            );
        let request = CreateTopicsRequest::default()
            .with_topics(vec![topic])
            .with_timeout_ms(30_000);
        let answer: CreateTopicsResponse = self
            .first_answer(ApiKey::CreateTopics, CREATE_TOPICS_VERSION, &request)
            .await?;
        match answer.topics.first() {
            Some(t)
                if t.error_code == 0 || t.error_code == ErrorCode::TopicAlreadyExists.code() =>
            {
                Ok(())
            }
            Some(t) => Err(ClientError {
                cause: ErrorCause::Broker {
                    name: kafka_protocol::ResponseError::try_from_code(t.error_code)
                        .map_or_else(|| "NONE".into(), |e| screaming_snake(&format!("{e:?}"))),
                    status: 0,
                },
                node: None,
                message: t
                    .error_message
                    .as_ref()
                    .map_or(String::new(), |m| m.as_str().to_string()),
            }),
            None => Err(ClientError {
                cause: ErrorCause::Transport,
                node: None,
                message: "CreateTopics answered no topic".into(),
            }),
        }
    }

    /// The state of one partition, `None` when no broker could tell.
    pub async fn partition(&self, key: &str) -> Option<PartitionMeta> {
        self.partition_meta(key).await.ok().flatten()
    }

    /// The state of one partition (`None`: no such partition), or why no broker told.
    pub async fn partition_meta(&self, key: &str) -> Result<Option<PartitionMeta>, ClientError> {
        if split_key(key).is_none() {
            return Ok(None);
        }
        Ok(self.metadata().await?.into_iter().find(|p| p.key == key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(key: &str, leader: &str, epoch: i64, isr: &[&str]) -> PartitionMeta {
        PartitionMeta {
            key: key.into(),
            leader: Some(leader.into()),
            leader_epoch: Some(epoch),
            isr: isr.iter().map(|n| n.to_string()).collect(),
            replicas: vec!["n1".into(), "n2".into(), "n3".into()],
        }
    }

    fn answer(by: &str, partitions: Vec<PartitionMeta>) -> Answer {
        Answer {
            answered_by: Some(by.into()),
            partitions,
        }
    }

    /// The power-loss-leader plan's shape: both followers of t0/0 cut from the leader and the
    /// controller. They still answer, with the ISR from before the cut; the leader, which
    /// the controller shrank to itself, answers first only by its own account.
    #[test]
    fn an_isr_shrink_known_to_the_leader_wins_over_stale_followers() {
        let stale = || vec![meta("t0/0", "n2", 0, &["n1", "n2", "n3"])];
        let merged = freshest(vec![
            answer("n1", stale()),
            answer("n2", vec![meta("t0/0", "n2", 0, &["n2"])]),
            answer("n3", stale()),
        ]);
        assert_eq!(merged, vec![meta("t0/0", "n2", 0, &["n2"])]);
    }

    #[test]
    fn a_newer_leader_epoch_wins_over_a_deposed_leader_claiming_itself() {
        let merged = freshest(vec![
            answer("n1", vec![meta("t0/0", "n1", 3, &["n1", "n2", "n3"])]),
            answer("n2", vec![meta("t0/0", "n3", 4, &["n2", "n3"])]),
            answer("n3", vec![meta("t0/1", "n3", 0, &["n3"])]),
        ]);
        assert_eq!(
            merged,
            vec![
                meta("t0/0", "n3", 4, &["n2", "n3"]),
                meta("t0/1", "n3", 0, &["n3"])
            ]
        );
    }

    #[test]
    fn equal_answers_from_followers_keep_the_first_asked() {
        let merged = freshest(vec![
            answer("n1", vec![meta("t0/0", "n3", 2, &["n1", "n3"])]),
            answer("n2", vec![meta("t0/0", "n3", 2, &["n3"])]),
        ]);
        assert_eq!(merged, vec![meta("t0/0", "n3", 2, &["n1", "n3"])]);
    }
}
