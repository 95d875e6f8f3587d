//! Kafka's binary protocol (`kafka.listeners`, docs/kafka-protocol.md): a second front door
//! over the same operations as the HTTP routes ([`crate::ops`], the group coordinator), so
//! clients nobody here wrote (kcat, librdkafka, kafka-python) can produce, consume and join
//! groups. The handlers decode a request, call the operations, and encode the answer.
//!
//! # Layout
//!
//! - this file: the listener, the size-prefixed frames, and request dispatch by API key and
//!   version (codecs from the `kafka-protocol` crate);
//! - [`versions`]: which APIs and versions are served, as ApiVersions lists them;
//! - [`errors`]: the broker's errors as Kafka error codes;
//! - [`records`]: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords;
//! - [`admin`]: Metadata, CreateTopics, DeleteTopics;
//! - [`groups`]: the consumer group APIs.
//! - [`producers`]: InitProducerId for idempotent and transactional producers;
//! - [`txn`]: AddPartitionsToTxn, AddOffsetsToTxn and EndTxn, on the transaction coordinator,
//!   and TxnOffsetCommit on the group coordinator;
//! - [`schema`]: each served request's fields per version, for [`bounds`];
//! - [`bounds`]: the pass that bounds every count in a request body by the bytes that remain
//!   before the crate decodes it (issue 22: the crate pre-allocates from wire counts);
//! - [`batch_bounds`]: the same for a produced record batch's record and header counts, and
//!   its offset range against its record count (Kafka's `LogValidator.validateBatch`);
//! - [`decompress`]: a batch's records decompressed streaming, capped at `max.message.bytes`.
//!
//! As in Kafka, a connection's requests are handled one at a time and answered in order; a
//! frame larger than `socket.request.max.bytes`, an unknown API key, an unsupported version
//! (other than ApiVersions, which answers UNSUPPORTED_VERSION with the list) or a request
//! that does not decode (or whose counts exceed its bytes) closes the connection.

pub mod admin;
pub mod batch_bounds;
pub mod bounds;
pub mod decompress;
pub mod errors;
pub mod groups;
pub mod producers;
pub mod records;
pub mod schema;
pub mod txn;
pub mod versions;

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::broker::Broker;
use crate::http::ConnectionLimits;

/// What one connection's handlers share: the broker and this listener's advertised address.
pub struct KafkaContext {
    /// The broker's state.
    pub broker: Arc<Broker>,
    /// The group coordinator the HTTP API uses too.
    pub coordinator: Arc<crate::group::GroupCoordinator>,
    /// The transaction coordinator.
    pub transactions: Arc<crate::txn::TransactionCoordinator>,
    /// `HOST:PORT` this broker gives Kafka clients for itself.
    pub advertised: String,
}

/// Serves Kafka's protocol on `listener` until the broker shuts down. Connections are bounded
/// by `max.connections` and `max.connections.per.ip` (counted with the HTTP listener's, through
/// `limits.per_ip`), closed after `connections.max.idle.ms` without a request, and closed when
/// a request frame, once begun, is not whole within `tidewater.request.body.timeout.ms`.
pub async fn serve(listener: TcpListener, context: KafkaContext, limits: ConnectionLimits) {
    let broker = context.broker.clone();
    let context = Arc::new(context);
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, advertised = %context.advertised, "kafka listener started");
    }
    let mut connections = JoinSet::new();
    loop {
        // At the limit, stop accepting until a connection closes (clients wait in the backlog).
        while connections.len() >= limits.max_connections {
            connections.join_next().await;
        }
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // Over its address's limit: dropped here, which closes it unanswered.
                    let Some(ip_connection) = crate::http::admit(&limits.per_ip, &stream, peer)
                    else {
                        continue;
                    };
                    let context = context.clone();
                    let limits = limits.clone();
                    connections.spawn(async move {
                        if let Err(e) = connection(stream, &context, &limits).await {
                            tracing::debug!(%peer, error = %e, "kafka connection closed");
                        }
                        drop(ip_connection);
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "kafka accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = broker.shutdown_started() => break,
        }
    }
    // Dropping the set aborts every connection task.
}

/// Why a connection was closed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// The socket failed or the peer went away.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The peer sent something Kafka answers by closing the connection.
    #[error("{0}")]
    Protocol(String),
    /// No request within `connections.max.idle.ms`.
    #[error("idle for {0:?}")]
    Idle(Duration),
    /// A request frame begun and not whole within `tidewater.request.body.timeout.ms`.
    #[error("request frame not whole within {0:?} of its first byte")]
    Stalled(Duration),
}

fn protocol(message: impl Into<String>) -> ConnectionError {
    ConnectionError::Protocol(message.into())
}

/// Reads frames and answers them in order until the peer closes or breaks the protocol.
async fn connection(
    mut stream: TcpStream,
    context: &KafkaContext,
    limits: &ConnectionLimits,
) -> Result<(), ConnectionError> {
    let _ = stream.set_nodelay(true);
    let max_bytes = context.broker.config.socket_request_max_bytes;
    loop {
        let Some(frame) = read_frame(&mut stream, limits, max_bytes).await? else {
            return Ok(());
        };
        if let Some(response) = handle_frame(frame, context).await? {
            let mut out = BytesMut::with_capacity(response.len() + 4);
            out.put_i32(response.len() as i32);
            out.put_slice(&response);
            stream.write_all(&out).await?;
        }
    }
}

/// Reads the next size-prefixed request frame; `None` when the peer closed between requests.
/// Between requests the connection may be idle for `connections.max.idle.ms`; from the first
/// byte of the size prefix on, the whole frame must arrive within the body deadline.
async fn read_frame(
    stream: &mut TcpStream,
    limits: &ConnectionLimits,
    max_bytes: u64,
) -> Result<Option<Bytes>, ConnectionError> {
    let mut size = [0u8; 4];
    match tokio::time::timeout(limits.idle_timeout, stream.read(&mut size[..1])).await {
        Err(_) => return Err(ConnectionError::Idle(limits.idle_timeout)),
        Ok(Ok(0)) => return Ok(None),
        Ok(result) => result?,
    };
    let rest = async {
        stream.read_exact(&mut size[1..]).await?;
        let size = i32::from_be_bytes(size);
        if size < 8 || size as u64 > max_bytes {
            return Err(protocol(format!(
                "request size {size} is outside 8..={max_bytes} (socket.request.max.bytes)"
            )));
        }
        read_body(stream, size as usize).await
    };
    match tokio::time::timeout(limits.body_timeout, rest).await {
        Err(_) => Err(ConnectionError::Stalled(limits.body_timeout)),
        Ok(frame) => frame.map(Some),
    }
}

/// Bytes of a frame buffered ahead of their arrival at most: memory follows the bytes that
/// arrived, not the size a client announced (up to `socket.request.max.bytes` per connection).
const FRAME_READ_AHEAD_BYTES: usize = 64 * 1024;

/// Reads `size` bytes, growing the buffer as they arrive.
async fn read_body(stream: &mut TcpStream, size: usize) -> Result<Bytes, ConnectionError> {
    let mut frame = BytesMut::with_capacity(size.min(FRAME_READ_AHEAD_BYTES));
    while frame.len() < size {
        let wanted = (size - frame.len()).min(FRAME_READ_AHEAD_BYTES);
        frame.reserve(wanted);
        let n = (&mut *stream)
            .take(wanted as u64)
            .read_buf(&mut frame)
            .await?;
        if n == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
    }
    Ok(frame.freeze())
}

/// A decoded request's header and body, for the handlers.
pub struct Request {
    /// The header (API key, version, correlation id, client id).
    pub header: RequestHeader,
    /// The body, positioned after the header.
    pub body: Bytes,
}

impl Request {
    /// The API version.
    pub fn version(&self) -> i16 {
        self.header.request_api_version
    }

    /// Decodes the body as `T` at this request's version.
    pub fn decode<T: Decodable>(&mut self) -> Result<T, ConnectionError> {
        let version = self.version();
        T::decode(&mut self.body, version).map_err(|e| {
            protocol(format!(
                "cannot decode {:?} v{version}: {e}",
                self.header.request_api_key
            ))
        })
    }
}

/// An encoded response body and the version to encode it at, or nothing (acks=0 produce).
pub enum Reply {
    /// Send this body.
    Body(Box<dyn EncodeBody + Send>),
    /// Send nothing (Kafka does not answer an acks=0 produce).
    Nothing,
}

/// A response body the dispatcher can encode with its header.
pub trait EncodeBody {
    /// Appends the body at `version`.
    fn encode_body(&self, buf: &mut BytesMut, version: i16) -> anyhow::Result<()>;
    /// The header version of this response at `version`.
    fn header_version(&self, version: i16) -> i16;
}

impl<T: Encodable + HeaderVersion> EncodeBody for T {
    fn encode_body(&self, buf: &mut BytesMut, version: i16) -> anyhow::Result<()> {
        self.encode(buf, version)
    }

    fn header_version(&self, version: i16) -> i16 {
        T::header_version(version)
    }
}

/// Wraps a response body into a [`Reply`].
pub fn reply<T: Encodable + HeaderVersion + Send + 'static>(body: T) -> Reply {
    Reply::Body(Box::new(body))
}

/// Decodes the header, dispatches, and encodes the answer with its header. `frame` is one
/// request without its size prefix; `Ok(None)` means no answer is due (acks=0), an error
/// means the connection is to be closed.
async fn handle_frame(
    mut frame: Bytes,
    context: &KafkaContext,
) -> Result<Option<Bytes>, ConnectionError> {
    if frame.len() < 8 {
        return Err(protocol(format!(
            "a request of {} bytes has no room for its header",
            frame.len()
        )));
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let key =
        ApiKey::try_from(api_key).map_err(|_| protocol(format!("unknown API key {api_key}")))?;
    let Some(range) = versions::served(key) else {
        return Err(protocol(format!(
            "{key:?} is not served (docs/kafka-protocol.md)"
        )));
    };
    if api_version < range.min || api_version > range.max {
        if key == ApiKey::ApiVersions {
            // KIP-511: answer with v0 and the list, so the client can pick a version.
            let body = versions::unsupported_answer();
            return encode(correlation_id, 0, &body, 0).map(Some);
        }
        return Err(protocol(format!(
            "{key:?} v{api_version} is not served (versions {}..={})",
            range.min, range.max
        )));
    }
    let header_version = key.request_header_version(api_version);
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| protocol(format!("cannot decode the request header: {e}")))?;
    // Every served API is described; the walk bounds each count the crate will trust.
    let schema = schema::request_schema(key)
        .ok_or_else(|| protocol(format!("{key:?} has no request description")))?;
    bounds::check_request(schema, api_version, &frame)
        .map_err(|e| protocol(format!("refusing {key:?} v{api_version}: {e}")))?;
    let mut request = Request {
        header,
        body: frame,
    };
    let answer = match key {
        ApiKey::ApiVersions => versions::api_versions(&mut request)?,
        ApiKey::Metadata => admin::metadata(&mut request, context)?,
        ApiKey::CreateTopics => admin::create_topics(&mut request, context).await?,
        ApiKey::DeleteTopics => admin::delete_topics(&mut request, context).await?,
        ApiKey::Produce => records::produce(&mut request, context).await?,
        ApiKey::Fetch => records::fetch(&mut request, context).await?,
        ApiKey::ListOffsets => records::list_offsets(&mut request, context).await?,
        ApiKey::OffsetForLeaderEpoch => records::offset_for_leader_epoch(&mut request, context)?,
        ApiKey::DeleteRecords => records::delete_records(&mut request, context).await?,
        ApiKey::InitProducerId => producers::init_producer_id(&mut request, context).await?,
        ApiKey::FindCoordinator => groups::find_coordinator(&mut request, context).await?,
        ApiKey::JoinGroup => groups::join_group(&mut request, context).await?,
        ApiKey::SyncGroup => groups::sync_group(&mut request, context).await?,
        ApiKey::Heartbeat => groups::heartbeat(&mut request, context).await?,
        ApiKey::LeaveGroup => groups::leave_group(&mut request, context).await?,
        ApiKey::OffsetCommit => groups::offset_commit(&mut request, context).await?,
        ApiKey::OffsetFetch => groups::offset_fetch(&mut request, context).await?,
        ApiKey::AddPartitionsToTxn => txn::add_partitions_to_txn(&mut request, context).await?,
        ApiKey::EndTxn => txn::end_txn(&mut request, context).await?,
        ApiKey::AddOffsetsToTxn => txn::add_offsets_to_txn(&mut request, context).await?,
        ApiKey::TxnOffsetCommit => txn::txn_offset_commit(&mut request, context).await?,
        ApiKey::WriteTxnMarkers => txn::write_txn_markers(&mut request, context).await?,
        other => return Err(protocol(format!("{other:?} is not served"))),
    };
    match answer {
        Reply::Nothing => Ok(None),
        Reply::Body(body) => {
            // ApiVersions answers with header v0 whatever its version (KIP-511).
            let header_version = if key == ApiKey::ApiVersions {
                0
            } else {
                body.header_version(api_version)
            };
            encode(correlation_id, header_version, body.as_ref(), api_version)
                .map(Some)
                .map_err(|e| protocol(format!("{key:?} v{api_version}: {e}")))
        }
    }
}

fn encode(
    correlation_id: i32,
    header_version: i16,
    body: &(dyn EncodeBody + Send),
    version: i16,
) -> Result<Bytes, ConnectionError> {
    let mut buf = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, header_version)
        .map_err(|e| protocol(format!("cannot encode the response header: {e}")))?;
    body.encode_body(&mut buf, version)
        .map_err(|e| protocol(format!("cannot encode the response: {e}")))?;
    Ok(buf.freeze())
}

/// Reads a topic name from the wire as UTF-8 text.
pub fn topic_text(name: &kafka_protocol::messages::TopicName) -> String {
    name.0.as_str().to_string()
}

/// A wire string from text.
pub fn wire(text: impl Into<String>) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(text.into())
}

/// A partition index from the wire, or `None` when negative.
pub fn partition_index(index: i32) -> Option<u32> {
    u32::try_from(index).ok()
}
