//! No byte sequence on the Kafka listener may crash, wedge or balloon the broker (issue 22).
//!
//! The broker runs in this test process (`run_with_kafka` on port-0 listeners) under a
//! global allocator that refuses any single allocation over [`ALLOCATION_CAP_BYTES`]: an
//! over-allocation then aborts this test binary with the case that caused it, instead of
//! paging the machine to death. Frames go over real loopback TCP, through the listener's
//! frame loop, the bounds walk and the crate's decoders to the handlers.
//!
//! - the corpus (`tests/corpus/kafka/*.hex`, the issue's frames byte for byte) is answered
//!   as Kafka answers it: the connection closed, or INVALID_RECORD for the partition;
//! - the crate's encoder is the oracle for the request descriptions: random requests
//!   generated from `kafka::schema` decode and re-encode through the crate byte for byte, and
//!   the bounds walk spans each exactly (a proptest);
//! - the fuzzer: random, schema-generated and mutated frames for every served API and
//!   version, then the broker must still answer ApiVersions and serve a produce and a fetch.
//!   `KAFKA_FUZZ_CASES` (default 20000) and `KAFKA_FUZZ_SEED` (default 22) set its size and
//!   seed; `seed=` is printed first and an over-allocation prints the case's seed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tidewater_broker::kafka::bounds::check_request;
use tidewater_broker::kafka::schema::{request_schema, Struct, Ty, REQUESTS};
use tidewater_broker::kafka::versions::SERVED;

/// Any single allocation above this aborts the test: far above what a 1 MiB frame or a
/// 64 MiB fetch needs, far below the gigabytes the issue's frames asked for.
const ALLOCATION_CAP_BYTES: usize = 128 << 20;

/// No fuzz case is being sent (a corpus test is).
const NO_CASE: u64 = u64::MAX;
/// The seed of the fuzz case being sent, for the allocator's report.
static CASE_SEED: AtomicU64 = AtomicU64::new(NO_CASE);
/// The index of the fuzz case being sent, for the allocator's report.
static CASE_INDEX: AtomicU64 = AtomicU64::new(NO_CASE);

/// The system allocator, refusing single allocations over the cap.
struct CappedAllocator;

// SAFETY: every call is forwarded to `System` unchanged, or refused with a null pointer,
// which the `GlobalAlloc` contract allows.
unsafe impl GlobalAlloc for CappedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOCATION_CAP_BYTES {
            report_over_cap(layout.size());
            return std::ptr::null_mut();
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOCATION_CAP_BYTES {
            report_over_cap(layout.size());
            return std::ptr::null_mut();
        }
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > ALLOCATION_CAP_BYTES {
            report_over_cap(new_size);
            return std::ptr::null_mut();
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CappedAllocator = CappedAllocator;

/// Writes "allocation of N bytes over the cap (case seed S)" to stderr without allocating.
fn report_over_cap(size: usize) {
    let mut line = [0u8; 160];
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        for &b in bytes {
            if at < line.len() {
                line[at] = b;
                at += 1;
            }
        }
    };
    put(b"\nkafka_fuzz: an allocation of ");
    put(digits(size as u64, &mut [0u8; 20]));
    put(b" bytes is over the cap");
    let seed = CASE_SEED.load(Ordering::Relaxed);
    if seed != NO_CASE {
        put(b"; fuzz case ");
        put(digits(CASE_INDEX.load(Ordering::Relaxed), &mut [0u8; 20]));
        put(b", replay: KAFKA_FUZZ_SEED=");
        put(digits(seed, &mut [0u8; 20]));
        put(b" KAFKA_FUZZ_CASES=1");
    }
    put(b"\n");
    // SAFETY: writing a stack buffer to stderr.
    unsafe {
        libc::write(2, line.as_ptr().cast(), at);
    }
}

fn digits(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// A broker in this process with its Kafka listener; stopped and its log dir removed on drop.
struct InProcessBroker {
    kafka: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl InProcessBroker {
    fn start() -> InProcessBroker {
        let dir = tempfile::tempdir().unwrap();
        let settings = BTreeMap::from([
            ("log.dirs".to_string(), dir.path().display().to_string()),
            (
                "socket.request.max.bytes".to_string(),
                (1 << 20).to_string(),
            ),
        ]);
        let config = tidewater_broker::Config::from_settings(&settings).unwrap();
        let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let kafka = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = kafka.local_addr().unwrap();
        http.set_nonblocking(true).unwrap();
        kafka.set_nonblocking(true).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let http = tokio::net::TcpListener::from_std(http).unwrap();
                let kafka = tokio::net::TcpListener::from_std(kafka).unwrap();
                let shutdown = async move {
                    let _ = stopped.await;
                };
                tidewater_broker::server::run_with_kafka(http, Some(kafka), config, shutdown)
                    .await
                    .expect("broker run");
            });
        });
        let broker = InProcessBroker {
            kafka: address,
            stop: Some(stop),
            thread: Some(thread),
            _dir: dir,
        };
        broker.create_topic("t");
        broker
    }

    fn create_topic(&self, name: &str) {
        let topic = create_topics_request::CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.into())))
            .with_num_partitions(1)
            .with_replication_factor(1);
        let request = CreateTopicsRequest::default()
            .with_topics(vec![topic])
            .with_timeout_ms(5_000);
        let answer: CreateTopicsResponse = self
            .call(ApiKey::CreateTopics, 5, &request)
            .expect("an answer");
        assert_eq!(answer.topics[0].error_code, 0, "{answer:?}");
    }

    /// Sends `request` at `version` on a new connection and decodes the answer.
    fn call<Req: Encodable, Resp: Decodable>(
        &self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Option<Resp> {
        let frame = request_frame(key, version, request);
        let Exchange::Answered(answer) = exchange(self.kafka, &frame, Duration::from_secs(10))
        else {
            return None;
        };
        let mut body = Bytes::from(answer);
        // ApiVersions answers with header v0 whatever its version (KIP-511).
        let header_version = match key {
            ApiKey::ApiVersions => 0,
            _ => key.response_header_version(version),
        };
        ResponseHeader::decode(&mut body, header_version).unwrap();
        Some(Resp::decode(&mut body, version).unwrap())
    }

    /// Whether ApiVersions v0 is answered with the served list.
    fn answers_api_versions(&self) -> bool {
        let answer: Option<ApiVersionsResponse> =
            self.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
        answer.is_some_and(|a| a.error_code == 0 && a.api_keys.len() == SERVED.len())
    }
}

impl Drop for InProcessBroker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A request frame with its size prefix, encoded by the crate.
fn request_frame<T: Encodable>(key: ApiKey, version: i16, body: &T) -> Vec<u8> {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("fuzz")))
        .encode(&mut buf, key.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    sized(&buf)
}

fn sized(frame: &[u8]) -> Vec<u8> {
    let mut out = (frame.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(frame);
    out
}

/// What the listener did with one frame.
#[derive(Debug, PartialEq)]
enum Exchange {
    /// It answered (the answer without its size prefix).
    Answered(Vec<u8>),
    /// It closed the connection without an answer.
    Closed,
    /// Nothing came within the wait (a long poll, a join, acks=0).
    Pending,
}

/// Sends `frame` (size prefix included) on a new connection and reads one answer.
fn exchange(address: SocketAddr, frame: &[u8], wait: Duration) -> Exchange {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(wait)).unwrap();
    if stream.write_all(frame).is_err() {
        return Exchange::Closed;
    }
    let mut size = [0u8; 4];
    match stream.read_exact(&mut size) {
        Ok(()) => {}
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            return Exchange::Pending
        }
        Err(_) => return Exchange::Closed,
    }
    let mut answer = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut answer).unwrap();
    Exchange::Answered(answer)
}

/// The corpus: each `.hex` file of `tests/corpus/kafka/` as bytes (`#` lines are comments).
fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/kafka");
    let mut frames: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "hex"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let hex: String = text
                .lines()
                .filter(|line| !line.starts_with('#'))
                .flat_map(|line| line.chars().filter(|c| !c.is_whitespace()))
                .collect();
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            (name, bytes)
        })
        .collect();
    frames.sort();
    assert!(frames.len() >= 9, "the corpus is in {}", dir.display());
    frames
}

/// Issue 22 item 1: each request frame of the corpus closes its connection (Kafka closes a
/// connection whose request does not parse), and the broker answers the next one. Before
/// the fix the first of them aborted the process.
#[test]
fn issue_22_request_frames_close_the_connection_and_the_broker_lives_on() {
    let broker = InProcessBroker::start();
    let requests: Vec<_> = corpus()
        .into_iter()
        .filter(|(name, _)| !name.starts_with("produce"))
        .collect();
    assert_eq!(requests.len(), 7);
    for (name, frame) in requests {
        assert_eq!(
            exchange(broker.kafka, &frame, Duration::from_secs(10)),
            Exchange::Closed,
            "{name}"
        );
        assert!(broker.answers_api_versions(), "after {name}");
    }
}

/// Issue 22 item 2: a batch with a correct CRC whose record count (0x7FFFFFFF) or header
/// count (2^30) exceeds its bytes is INVALID_RECORD for the partition, nothing is appended,
/// and the broker serves on. Before the fix each aborted the process.
#[test]
fn issue_22_record_and_header_counts_are_invalid_record() {
    let broker = InProcessBroker::start();
    let produces: Vec<_> = corpus()
        .into_iter()
        .filter(|(name, _)| name.starts_with("produce"))
        .collect();
    assert_eq!(produces.len(), 2);
    for (name, frame) in produces {
        let batch = &frame[frame.len() - produced_batch_len(&frame)..];
        let crc = u32::from_be_bytes(batch[17..21].try_into().unwrap());
        assert_eq!(
            crc,
            crc32c::crc32c(&batch[21..]),
            "{name}: the CRC is correct"
        );
        let Exchange::Answered(answer) = exchange(broker.kafka, &frame, Duration::from_secs(10))
        else {
            panic!("{name}: no answer");
        };
        let mut body = Bytes::from(answer);
        ResponseHeader::decode(&mut body, 0).unwrap();
        let answer = ProduceResponse::decode(&mut body, 3).unwrap();
        let partition = &answer.responses[0].partition_responses[0];
        assert_eq!(
            partition.error_code, 87,
            "{name}: INVALID_RECORD, {partition:?}"
        );
        assert_eq!(partition.base_offset, -1, "{name}");
    }
    assert_eq!(latest_offset(&broker, "t"), 0, "nothing was appended");
    assert!(broker.answers_api_versions());
}

/// The length of the record batch at the end of a corpus Produce v3 frame: its bytes field's
/// length sits just before it.
fn produced_batch_len(frame: &[u8]) -> usize {
    // size(4) header(key 2, version 2, correlation 4, client id 2 + 6) transactional id 2,
    // acks 2, timeout 4, topics 4, name 2 + 1, partitions 4, index 4, then the length.
    let at = 4 + 16 + 2 + 2 + 4 + 4 + 3 + 4 + 4;
    i32::from_be_bytes(frame[at..at + 4].try_into().unwrap()) as usize
}

/// The latest offset (the high watermark) of partition 0 of `topic`, over ListOffsets.
fn latest_offset(broker: &InProcessBroker, topic: &str) -> i64 {
    let partition = list_offsets_request::ListOffsetsPartition::default()
        .with_partition_index(0)
        .with_timestamp(-1);
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![partition])]);
    let answer: ListOffsetsResponse = broker
        .call(ApiKey::ListOffsets, 1, &request)
        .expect("an answer");
    let partition = &answer.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0, "{partition:?}");
    partition.offset
}

// ---------------------------------------------------------------------------------------
// Frames generated from the request descriptions.

/// Generates bodies from `kafka::schema`: valid encodings, with values that keep the broker
/// quick to answer when `hinted` (no long polls, acks 1 or -1, short timeouts).
struct Generator<'r> {
    rng: &'r mut StdRng,
    version: i16,
    flexible: bool,
    hinted: bool,
}

impl Generator<'_> {
    fn structure(&mut self, s: &Struct, out: &mut Vec<u8>) {
        let version = self.version;
        for field in s.fields.iter().filter(|f| f.at(version)) {
            self.value(field.name, field.ty, out);
        }
        if self.flexible {
            self.tagged(s, out);
        }
    }

    fn tagged(&mut self, s: &Struct, out: &mut Vec<u8>) {
        let mut fields: Vec<(u32, Vec<u8>)> = Vec::new();
        let version = self.version;
        for tagged in s.tagged.iter().filter(|t| t.field.at(version)) {
            if self.rng.gen_bool(0.3) {
                let mut value = Vec::new();
                self.value(tagged.field.name, tagged.field.ty, &mut value);
                fields.push((tagged.tag, value));
            }
        }
        // Unknown tags, above any known one, ascending (the crate keeps them sorted).
        let mut tag = 16;
        while self.rng.gen_bool(0.2) {
            tag += self.rng.gen_range(0..100);
            let value = (0..self.rng.gen_range(0..4))
                .map(|_| self.rng.gen())
                .collect();
            fields.push((tag, value));
            tag += 1;
        }
        uvarint(fields.len() as u32, out);
        for (tag, value) in fields {
            uvarint(tag, out);
            uvarint(value.len() as u32, out);
            out.extend_from_slice(&value);
        }
    }

    fn value(&mut self, name: &str, ty: Ty, out: &mut Vec<u8>) {
        match ty {
            Ty::Bool => out.push(self.rng.gen_range(0..=1)),
            Ty::I8 => out.push(self.rng.gen_range(0..=1)),
            Ty::I16 => out.extend_from_slice(&self.int16(name).to_be_bytes()),
            Ty::I32 => out.extend_from_slice(&self.int32(name).to_be_bytes()),
            Ty::I64 => out.extend_from_slice(&self.rng.gen_range(-2i64..100).to_be_bytes()),
            Ty::Uuid => out.extend((0..16).map(|_| self.rng.gen::<u8>())),
            Ty::Str => {
                let text = self.text(name);
                self.length(text.len(), 2, out);
                out.extend_from_slice(text.as_bytes());
            }
            Ty::Bytes => {
                let bytes: Vec<u8> = (0..self.rng.gen_range(0..6))
                    .map(|_| self.rng.gen())
                    .collect();
                self.length(bytes.len(), 4, out);
                out.extend_from_slice(&bytes);
            }
            Ty::Records => {
                let batch = random_batch(self.rng);
                self.length(batch.len(), 4, out);
                out.extend_from_slice(&batch);
            }
            Ty::List(element) => {
                let count = self.rng.gen_range(0..3);
                self.length(count, 4, out);
                for _ in 0..count {
                    self.value(name, *element, out);
                }
            }
            Ty::Structs(element) => {
                let count = self.rng.gen_range(0..3);
                self.length(count, 4, out);
                for _ in 0..count {
                    self.structure(element, out);
                }
            }
        }
    }

    /// A length or count: compact in flexible versions, else of `width` bytes.
    fn length(&self, n: usize, width: usize, out: &mut Vec<u8>) {
        if self.flexible {
            uvarint(n as u32 + 1, out);
        } else if width == 2 {
            out.extend_from_slice(&(n as i16).to_be_bytes());
        } else {
            out.extend_from_slice(&(n as i32).to_be_bytes());
        }
    }

    fn int16(&mut self, name: &str) -> i16 {
        match (self.hinted, name) {
            (true, "Acks") => [1, -1][self.rng.gen_range(0..2)],
            (true, "ReplicationFactor") => 1,
            _ => self.rng.gen_range(-2..10),
        }
    }

    fn int32(&mut self, name: &str) -> i32 {
        match (self.hinted, name) {
            (true, n) if n.ends_with("Ms") => self.rng.gen_range(0..20),
            (true, "NumPartitions") => self.rng.gen_range(-1..3),
            _ => *[-1, 0, 1, 2, 7, 1 << 20, i32::MAX]
                .get(self.rng.gen_range(0..7))
                .unwrap(),
        }
    }

    fn text(&mut self, name: &str) -> String {
        if self.hinted && (name == "Name" || name == "Topic") && self.rng.gen_bool(0.7) {
            return "t".into();
        }
        let length = self.rng.gen_range(0..6);
        (0..length)
            .map(|_| char::from(self.rng.gen_range(b'a'..=b'z')))
            .collect()
    }
}

fn uvarint(mut value: u32, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A v2 batch the crate encodes: 1-3 records, sometimes with headers or null values,
/// uncompressed, gzip or snappy.
fn random_batch(rng: &mut StdRng) -> Vec<u8> {
    let records: Vec<Record> = (0..rng.gen_range(1..4i64))
        .map(|offset| {
            let mut headers = IndexMap::new();
            if rng.gen_bool(0.1) {
                headers.insert(
                    StrBytes::from_static_str("h"),
                    Some(Bytes::from_static(b"v")),
                );
            }
            Record {
                transactional: false,
                control: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset,
                sequence: offset as i32 - 1,
                timestamp: 1_000 + offset,
                key: rng.gen_bool(0.5).then(|| Bytes::from_static(b"k")),
                value: (!rng.gen_bool(0.05)).then(|| Bytes::from(format!("v{offset}"))),
                headers,
                delete_horizon: false,
            }
        })
        .collect();
    let compression =
        [Compression::None, Compression::Gzip, Compression::Snappy][rng.gen_range(0..3)];
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf.to_vec()
}

/// One served API and version, and a request body for it, generated from its description.
fn generated_body(rng: &mut StdRng, hinted: bool) -> (ApiKey, i16, Vec<u8>) {
    let &(key, min, max) = &SERVED[rng.gen_range(0..SERVED.len())];
    let version = rng.gen_range(min..=max);
    let schema = request_schema(key).unwrap();
    let mut body = Vec::new();
    Generator {
        rng,
        version,
        flexible: version >= schema.flexible_from,
        hinted,
    }
    .structure(&schema.body, &mut body);
    (key, version, body)
}

/// The crate decodes `body` at `version` (consuming all of it) and encodes it again.
fn crate_round_trip(key: ApiKey, version: i16, body: &[u8]) -> anyhow::Result<Vec<u8>> {
    macro_rules! round_trip {
        ($t:ty) => {{
            let mut buf = Bytes::copy_from_slice(body);
            let message = <$t>::decode(&mut buf, version)?;
            anyhow::ensure!(buf.is_empty(), "{} bytes not decoded", buf.len());
            let mut out = BytesMut::new();
            message.encode(&mut out, version)?;
            Ok(out.to_vec())
        }};
    }
    match key {
        ApiKey::Produce => round_trip!(ProduceRequest),
        ApiKey::Fetch => round_trip!(FetchRequest),
        ApiKey::ListOffsets => round_trip!(ListOffsetsRequest),
        ApiKey::Metadata => round_trip!(MetadataRequest),
        ApiKey::OffsetCommit => round_trip!(OffsetCommitRequest),
        ApiKey::OffsetFetch => round_trip!(OffsetFetchRequest),
        ApiKey::FindCoordinator => round_trip!(FindCoordinatorRequest),
        ApiKey::JoinGroup => round_trip!(JoinGroupRequest),
        ApiKey::Heartbeat => round_trip!(HeartbeatRequest),
        ApiKey::LeaveGroup => round_trip!(LeaveGroupRequest),
        ApiKey::SyncGroup => round_trip!(SyncGroupRequest),
        ApiKey::ApiVersions => round_trip!(ApiVersionsRequest),
        ApiKey::CreateTopics => round_trip!(CreateTopicsRequest),
        ApiKey::DeleteTopics => round_trip!(DeleteTopicsRequest),
        ApiKey::DeleteRecords => round_trip!(DeleteRecordsRequest),
        ApiKey::InitProducerId => round_trip!(InitProducerIdRequest),
        ApiKey::OffsetForLeaderEpoch => round_trip!(OffsetForLeaderEpochRequest),
        ApiKey::AddPartitionsToTxn => {
            round_trip!(kafka_protocol::messages::AddPartitionsToTxnRequest)
        }
        ApiKey::EndTxn => round_trip!(kafka_protocol::messages::EndTxnRequest),
        ApiKey::AddOffsetsToTxn => {
            round_trip!(kafka_protocol::messages::AddOffsetsToTxnRequest)
        }
        ApiKey::TxnOffsetCommit => {
            round_trip!(kafka_protocol::messages::TxnOffsetCommitRequest)
        }
        ApiKey::WriteTxnMarkers => {
            round_trip!(kafka_protocol::messages::WriteTxnMarkersRequest)
        }
        other => anyhow::bail!("{other:?} is not served"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 3000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The crate is the oracle for the descriptions: what they generate, the crate decodes
    /// whole and encodes back byte for byte, and the bounds walk spans exactly. A field
    /// missing, extra or at the wrong versions in `kafka::schema` breaks one of the three,
    /// and a real client's request would be refused or misread.
    #[test]
    fn described_requests_round_trip_through_the_crate(seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (key, version, body) = generated_body(&mut rng, false);
        let again = crate_round_trip(key, version, &body)
            .map_err(|e| TestCaseError::fail(format!("{key:?} v{version}: {e}")))?;
        prop_assert_eq!(&again, &body, "{:?} v{}", key, version);
        let schema = request_schema(key).unwrap();
        prop_assert_eq!(check_request(schema, version, &body), Ok(body.len()));
    }
}

#[test]
fn every_served_version_is_generated() {
    let mut rng = StdRng::seed_from_u64(1);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..5_000 {
        let (key, version, _) = generated_body(&mut rng, false);
        seen.insert((key as i16, version));
    }
    let served: usize = SERVED
        .iter()
        .map(|&(_, min, max)| (max - min + 1) as usize)
        .sum();
    assert_eq!(seen.len(), served);
    assert_eq!(REQUESTS.len(), SERVED.len());
}

// ---------------------------------------------------------------------------------------
// The fuzzer.

/// Values that break counts and lengths when they land on one.
const INTERESTING_I32: [i32; 6] = [i32::MAX, -1, i32::MIN, 0xFFFF, 0x7FFF_FFFE, -2];

/// A frame without its size prefix: a generated request (mostly), a corpus frame, or noise,
/// then up to four mutations.
fn fuzz_frame(rng: &mut StdRng, corpus: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut frame = match rng.gen_range(0..10) {
        0 if !corpus.is_empty() => corpus[rng.gen_range(0..corpus.len())].1[4..].to_vec(),
        1 => (0..rng.gen_range(0..64)).map(|_| rng.gen()).collect(),
        _ => {
            let (key, version, body) = generated_body(rng, true);
            let mut frame = header(key, version, rng.gen());
            frame.extend_from_slice(&body);
            frame
        }
    };
    for _ in 0..rng.gen_range(0..=4) {
        mutate(rng, &mut frame);
    }
    frame
}

fn header(key: ApiKey, version: i16, correlation_id: i32) -> Vec<u8> {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("fuzz")))
        .encode(&mut buf, key.request_header_version(version))
        .unwrap();
    buf.to_vec()
}

fn mutate(rng: &mut StdRng, frame: &mut Vec<u8>) {
    if frame.is_empty() {
        frame.push(rng.gen());
        return;
    }
    let at = rng.gen_range(0..frame.len());
    match rng.gen_range(0..7) {
        0 => frame[at] ^= 1 << rng.gen_range(0..8),
        1 => frame[at] = rng.gen(),
        2 => {
            let value = INTERESTING_I32[rng.gen_range(0..INTERESTING_I32.len())].to_be_bytes();
            let end = (at + 4).min(frame.len());
            frame[at..end].copy_from_slice(&value[..end - at]);
        }
        3 => {
            let end = (at + 2).min(frame.len());
            frame[at..end].copy_from_slice(&[0x7F, 0xFF][..end - at]);
        }
        4 => {
            // A compact count or length of 2^32 - 2.
            for (i, b) in [0xFF, 0xFF, 0xFF, 0xFF, 0x0F].into_iter().enumerate() {
                frame.insert(at + i, b);
            }
        }
        5 => frame.truncate(at),
        _ => fix_batch_crcs(frame),
    }
}

/// Recomputes the CRC of anything in `frame` that looks like a v2 batch, so mutations inside
/// a batch reach the record checks instead of stopping at the CRC.
fn fix_batch_crcs(frame: &mut [u8]) {
    for start in 0..frame.len().saturating_sub(61) {
        let length = i32::from_be_bytes(frame[start + 8..start + 12].try_into().unwrap());
        let Some(end) = usize::try_from(length).ok().map(|l| start + 12 + l) else {
            continue;
        };
        if frame[start + 16] == 2 && length >= 49 && end <= frame.len() {
            let crc = crc32c::crc32c(&frame[start + 21..end]);
            frame[start + 17..start + 21].copy_from_slice(&crc.to_be_bytes());
        }
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Case `i`'s seed from the run's seed (splitmix64), so any case replays alone.
fn case_seed(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Random and mutated frames for every served API; after them (and every 100) the broker
/// answers ApiVersions, and at the end it still appends and reads. An over-allocation
/// anywhere aborts the test with the case's seed.
#[test]
fn fuzzed_frames_neither_crash_wedge_nor_balloon_the_broker() {
    let seed = env_number("KAFKA_FUZZ_SEED", 22);
    let cases = env_number("KAFKA_FUZZ_CASES", 20_000);
    eprintln!("seed={seed} cases={cases} allocation_cap_bytes={ALLOCATION_CAP_BYTES}");
    let broker = InProcessBroker::start();
    // A topic the generator cannot name (it writes a-z only), so no fuzzed DeleteTopics or
    // DeleteRecords touches what the last check reads.
    broker.create_topic("after_fuzz");
    // KAFKA_FUZZ_CORPUS=0 leaves the corpus out, to see what the generator finds alone.
    let corpus = match env_number("KAFKA_FUZZ_CORPUS", 1) {
        0 => Vec::new(),
        _ => corpus(),
    };
    let started = Instant::now();
    let mut outcomes = [0u64; 3];
    for i in 0..cases {
        // With one case asked for, the seed is that case's own (as the report prints it).
        let this = if cases == 1 { seed } else { case_seed(seed, i) };
        CASE_SEED.store(this, Ordering::Relaxed);
        CASE_INDEX.store(i, Ordering::Relaxed);
        let frame = fuzz_frame(&mut StdRng::seed_from_u64(this), &corpus);
        let outcome = exchange(broker.kafka, &sized(&frame), Duration::from_millis(50));
        outcomes[match outcome {
            Exchange::Answered(_) => 0,
            Exchange::Closed => 1,
            Exchange::Pending => 2,
        }] += 1;
        if i % 100 == 99 {
            assert!(
                broker.answers_api_versions(),
                "wedged after case seed {this}"
            );
        }
    }
    CASE_SEED.store(NO_CASE, Ordering::Relaxed);
    let elapsed = started.elapsed();
    eprintln!(
        "kafka_fuzz: {cases} executions in {:.1} s ({:.0}/s): {} answered, {} closed, {} \
         pending after 50 ms",
        elapsed.as_secs_f64(),
        cases as f64 / elapsed.as_secs_f64(),
        outcomes[0],
        outcomes[1],
        outcomes[2]
    );
    assert!(broker.answers_api_versions());
    assert!(
        outcomes[0] > 0 && outcomes[1] > 0,
        "{outcomes:?}: both paths exercised"
    );
    // Still serving: a produce appends and ListOffsets sees it.
    let before = latest_offset(&broker, "after_fuzz");
    let mut rng = StdRng::seed_from_u64(seed);
    let answer = produce_one(&broker, "after_fuzz", 3, plain_batch(&mut rng));
    assert_eq!(answer.error_code, 0, "{answer:?}");
    assert_eq!(latest_offset(&broker, "after_fuzz"), before + 1);
}

/// Produces `batch` to partition 0 of `topic` with acks=1 over Produce `version`, and gives
/// the partition's answer.
fn produce_one(
    broker: &InProcessBroker,
    topic: &'static str,
    version: i16,
    batch: Vec<u8>,
) -> produce_response::PartitionProduceResponse {
    let partition = produce_request::PartitionProduceData::default()
        .with_index(0)
        .with_records(Some(Bytes::from(batch)));
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str(topic)))
            .with_partition_data(vec![partition])]);
    let answer: ProduceResponse = broker
        .call(ApiKey::Produce, version, &request)
        .expect("an answer");
    answer.responses[0].partition_responses[0].clone()
}

/// One uncompressed record the broker accepts (a key and a value, no headers).
fn plain_batch(rng: &mut StdRng) -> Vec<u8> {
    one_record_batch(
        Bytes::from(format!("after-fuzz-{}", rng.gen::<u32>())),
        Compression::None,
    )
}

/// A v2 batch of one record with `value` (no key, no headers), compressed with `compression`.
fn one_record_batch(value: Bytes, compression: Compression) -> Vec<u8> {
    let record = Record {
        transactional: false,
        control: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_000,
        key: None,
        value: Some(value),
        headers: IndexMap::new(),
        delete_horizon: false,
    };
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &[record], &options).unwrap();
    buf.to_vec()
}

/// Issue 22 item 3: a compressed batch is held to `max.message.bytes` of *uncompressed*
/// records. A gzip batch of 16 MiB of zeros (about 16 KiB on the wire) was decompressed whole
/// and appended, its compressed size checked; it is MESSAGE_TOO_LARGE now, nothing appended,
/// and the same records compressed within the limit are still accepted.
#[test]
fn issue_22_a_gzip_bomb_is_message_too_large_and_appends_nothing() {
    let broker = InProcessBroker::start();
    let produce = |value_bytes: usize| {
        let batch = one_record_batch(Bytes::from(vec![0u8; value_bytes]), Compression::Gzip);
        (batch.len(), produce_one(&broker, "t", 8, batch))
    };
    let (wire_bytes, bomb) = produce(16 << 20);
    assert!(
        wire_bytes < 100_000,
        "the bomb is small on the wire: {wire_bytes}"
    );
    assert_eq!(bomb.error_code, 10, "MESSAGE_TOO_LARGE: {bomb:?}");
    assert!(
        bomb.error_message
            .as_ref()
            .is_some_and(|m| m.contains("decompressed")),
        "{bomb:?}"
    );
    assert_eq!(latest_offset(&broker, "t"), 0, "nothing was appended");
    let (_, fits) = produce(100_000);
    assert_eq!(fits.error_code, 0, "{fits:?}");
    assert_eq!(latest_offset(&broker, "t"), 1);
}
