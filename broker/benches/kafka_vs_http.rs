//! Produce throughput of the real broker binary over its two front doors, same machine, same
//! broker, same partition: the HTTP API (`POST .../records`, JSON, reqwest with keep-alive)
//! and Kafka's binary protocol (`kafka.listeners`, Produce v9 record batches encoded with the
//! `kafka-protocol` crate, one request in flight per connection as Kafka serves them).
//!
//! Scenarios: batches of 1 and of 100 records of 100 bytes, acks=1, at the same number of
//! requests in flight over each protocol.
//!
//! Run: `cargo bench -p tidewater-broker --bench kafka_vs_http`.
//! Knobs: `TIDEWATER_BENCH_SECS` (per scenario, default 3), `TIDEWATER_BENCH_CONCURRENCY`
//! (requests in flight, default 16).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, RequestHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Kills the broker when the benchmark ends or panics.
struct BrokerProcess(Child);

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the broker with both listeners; returns its HTTP URL and Kafka address.
fn start_broker(log_dir: &std::path::Path) -> (BrokerProcess, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidewater-broker"))
        .args(["--set", &format!("log.dirs={}", log_dir.display())])
        .args(["--set", "listeners=http://127.0.0.1:0"])
        .args(["--set", "kafka.listeners=PLAINTEXT://127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn tidewater-broker");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = |prefix: &str| {
        let line = lines.next().expect("a line").expect("broker stdout");
        line.strip_prefix(prefix)
            .unwrap_or_else(|| panic!("unexpected line {line:?}"))
            .to_string()
    };
    let http = next("listening on ");
    let kafka = next("kafka listening on ");
    (BrokerProcess(child), format!("http://{http}"), kafka)
}

struct Totals {
    requests: AtomicU64,
    latency_us: std::sync::Mutex<Vec<u64>>,
}

/// Lets the workers run for `secs`, stops them, waits for them and returns how long they ran.
async fn run_for(
    secs: f64,
    stop: &AtomicBool,
    started: Instant,
    workers: Vec<tokio::task::JoinHandle<()>>,
) -> f64 {
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    started.elapsed().as_secs_f64()
}

fn report(name: &str, records_per_request: u64, seconds: f64, totals: &Totals) -> f64 {
    let requests = totals.requests.load(Ordering::Relaxed);
    let mut latencies = totals.latency_us.lock().unwrap().clone();
    latencies.sort_unstable();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize] as f64 / 1000.0;
    let records = requests as f64 * records_per_request as f64 / seconds;
    println!(
        "{name:<36} {:>9.0} req/s {:>10.0} records/s  p50 {:>6.2} ms  p99 {:>6.2} ms",
        requests as f64 / seconds,
        records,
        pct(0.5),
        pct(0.99)
    );
    records
}

fn http_body(records: usize) -> String {
    let value = "x".repeat(100);
    let records: Vec<_> = (0..records).map(|_| json!({"value": value})).collect();
    json!({"acks": "1", "records": records}).to_string()
}

async fn http_scenario(url: &str, records: usize, secs: f64, concurrency: usize) -> f64 {
    let client = reqwest::Client::new();
    let body = http_body(records);
    let target = format!("{url}/v1/topics/bench/partitions/0/records");
    let totals = Arc::new(Totals {
        requests: AtomicU64::new(0),
        latency_us: Default::default(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (client, body, target) = (client.clone(), body.clone(), target.clone());
            let (totals, stop) = (totals.clone(), stop.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let answer = client
                        .post(&target)
                        .header("content-type", "application/json")
                        .body(body.clone())
                        .send()
                        .await
                        .expect("HTTP produce");
                    assert!(answer.status().is_success(), "{}", answer.status());
                    let _ = answer.bytes().await;
                    latencies.push(t.elapsed().as_micros() as u64);
                    totals.requests.fetch_add(1, Ordering::Relaxed);
                }
                totals.latency_us.lock().unwrap().extend(latencies);
            })
        })
        .collect();
    let seconds = run_for(secs, &stop, started, workers).await;
    report(
        &format!("http  produce {records:>3} record(s)"),
        records as u64,
        seconds,
        &totals,
    )
}

/// A Produce v9 request frame (size prefix included) with `records` records of 100 bytes.
fn kafka_frame(records: usize, correlation_id: i32) -> Bytes {
    let wire: Vec<Record> = (0..records)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1 + i as i32,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from(vec![b'x'; 100])),
            headers: Default::default(),
        })
        .collect();
    let mut batch = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut batch,
        &wire,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("bench")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch.freeze()))])]);
    let version = 9;
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Produce as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("bench")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, ApiKey::Produce.request_header_version(version))
        .unwrap();
    request.encode(&mut body, version).unwrap();
    let mut frame = BytesMut::with_capacity(body.len() + 4);
    frame.put_i32(body.len() as i32);
    frame.put_slice(&body);
    frame.freeze()
}

async fn kafka_scenario(address: &str, records: usize, secs: f64, concurrency: usize) -> f64 {
    let totals = Arc::new(Totals {
        requests: AtomicU64::new(0),
        latency_us: Default::default(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|worker| {
            let frame = kafka_frame(records, worker as i32);
            let address = address.to_string();
            let (totals, stop) = (totals.clone(), stop.clone());
            tokio::spawn(async move {
                let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
                stream.set_nodelay(true).unwrap();
                let mut latencies = Vec::new();
                let mut answer = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    stream.write_all(&frame).await.unwrap();
                    let size = stream.read_i32().await.unwrap() as usize;
                    answer.resize(size, 0);
                    stream.read_exact(&mut answer).await.unwrap();
                    let mut buf = Bytes::copy_from_slice(&answer);
                    buf.advance(4); // correlation id (response header v0)
                    buf.advance(1); // empty tagged fields (response header v1)
                    let response = ProduceResponse::decode(&mut buf, 9).unwrap();
                    let partition = &response.responses[0].partition_responses[0];
                    assert_eq!(partition.error_code, 0, "{partition:?}");
                    latencies.push(t.elapsed().as_micros() as u64);
                    totals.requests.fetch_add(1, Ordering::Relaxed);
                }
                totals.latency_us.lock().unwrap().extend(latencies);
            })
        })
        .collect();
    let seconds = run_for(secs, &stop, started, workers).await;
    report(
        &format!("kafka produce {records:>3} record(s)"),
        records as u64,
        seconds,
        &totals,
    )
}

async fn create_topic(url: &str) {
    let created = reqwest::Client::new()
        .post(format!("{url}/v1/topics"))
        .json(&json!({"name": "bench", "partitions": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let secs: f64 = std::env::var("TIDEWATER_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let concurrency: usize = std::env::var("TIDEWATER_BENCH_CONCURRENCY")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    println!("{concurrency} requests in flight, {secs} s per scenario, acks=1, 100-byte values");
    println!("each scenario on a fresh broker and log dir; pairs run HTTP first, then Kafka first");
    for records in [1, 100] {
        let mut ratios = Vec::new();
        for kafka_first in [false, true] {
            let mut measured = [0.0f64; 2];
            let order: [usize; 2] = if kafka_first { [1, 0] } else { [0, 1] };
            for which in order {
                let dir = tempfile::tempdir().unwrap();
                let (_broker, url, kafka) = start_broker(dir.path());
                measured[which] = runtime.block_on(async {
                    create_topic(&url).await;
                    if which == 0 {
                        http_scenario(&url, records, secs, concurrency).await
                    } else {
                        kafka_scenario(&kafka, records, secs, concurrency).await
                    }
                });
            }
            ratios.push(measured[1] / measured[0]);
        }
        println!(
            "kafka / http, {records} record(s): {}",
            ratios
                .iter()
                .map(|r| format!("{r:.2}x"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}
