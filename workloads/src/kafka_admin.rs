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
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, MetadataRequest, MetadataResponse,
    RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tidewater_kafka_model::ErrorCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client::{first_answer, split_key, ClientError, ErrorCause, PartitionMeta};
use crate::kafka::screaming_snake;

/// Metadata v7: the first with leader epochs, served by every KRaft Kafka and the companion
/// broker.
const METADATA_VERSION: i16 = 7;
/// CreateTopics v4: configs per topic, before the flexible encodings; Kafka 4 serves 2 and up.
const CREATE_TOPICS_VERSION: i16 = 4;
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
        split_key(key)?;
        self.metadata()
            .await
            .ok()?
            .into_iter()
            .find(|p| p.key == key)
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
