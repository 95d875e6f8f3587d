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

    /// Every partition of every topic: leader, leader epoch, ISR and replicas by node name.
    pub async fn metadata(&self) -> Result<Vec<PartitionMeta>, ClientError> {
        let request = MetadataRequest::default().with_topics(None);
        let answer: MetadataResponse = self
            .first_answer(ApiKey::Metadata, METADATA_VERSION, &request)
            .await?;
        let mut out = Vec::new();
        for topic in &answer.topics {
            let Some(name) = &topic.name else { continue };
            for p in &topic.partitions {
                let names = |ids: &[kafka_protocol::messages::BrokerId]| {
                    ids.iter().filter_map(|id| node_of(id.0)).collect()
                };
                out.push(PartitionMeta {
                    key: format!("{}/{}", name.0.as_str(), p.partition_index),
                    leader: node_of(p.leader_id.0),
                    leader_epoch: (p.leader_epoch >= 0).then_some(i64::from(p.leader_epoch)),
                    isr: names(&p.isr_nodes),
                    replicas: names(&p.replica_nodes),
                });
            }
        }
        Ok(out)
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
