//! Throughput of the real broker binary over HTTP, measured with one reqwest client at a fixed
//! number of requests in flight: `GET /v1/ping` (the HTTP baseline), produce of 1 and 100
//! records of 100 bytes, produce of 1 record to a topic with `flush.messages=1` (fsync per
//! append), and fetch of 1 MiB pages.
//!
//! Run: `cargo bench -p tidewater-broker` (uses the release-profile binary).
//! Knobs: `TIDEWATER_BENCH_SECS` (per scenario, default 3), `TIDEWATER_BENCH_CONCURRENCY`
//! (default 32). The target: produce requests/s with 1-record batches >= half the ping
//! rate.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Kills the broker when the benchmark ends or panics.
struct BrokerProcess(Child);

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_broker(log_dir: &std::path::Path) -> (BrokerProcess, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidewater-broker"))
        .args(["--set", &format!("log.dirs={}", log_dir.display())])
        .args(["--set", "listeners=http://127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn tidewater-broker");
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("broker stdout");
    let address = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (BrokerProcess(child), format!("http://{address}"))
}

/// What one scenario sends.
#[derive(Clone)]
enum Work {
    Ping,
    Produce {
        topic: &'static str,
        body: String,
        records: u64,
        payload_bytes: u64,
    },
    Fetch {
        log_end_offset: u64,
    },
}

/// Totals of one scenario.
struct Measured {
    name: String,
    seconds: f64,
    requests: u64,
    records: u64,
    payload_bytes: u64,
    latencies_us: Vec<u64>,
}

impl Measured {
    fn row(&self) -> String {
        let mut sorted = self.latencies_us.clone();
        sorted.sort_unstable();
        let pct = |p: f64| -> f64 {
            if sorted.is_empty() {
                return 0.0;
            }
            sorted[((sorted.len() - 1) as f64 * p) as usize] as f64 / 1000.0
        };
        format!(
            "| {:<23} | {:>10.0} | {:>11.0} | {:>8.1} | {:>7.2} | {:>7.2} |",
            self.name,
            self.requests as f64 / self.seconds,
            self.records as f64 / self.seconds,
            self.payload_bytes as f64 / self.seconds / 1e6,
            pct(0.5),
            pct(0.99)
        )
    }
}

async fn one_request(http: &reqwest::Client, url: &str, work: &Work, i: u64) -> (u64, u64) {
    match work {
        Work::Ping => {
            let response = http.get(format!("{url}/v1/ping")).send().await.unwrap();
            assert!(response.status().is_success());
            response.bytes().await.unwrap();
            (0, 0)
        }
        Work::Produce {
            topic,
            body,
            records,
            payload_bytes,
        } => {
            let response = http
                .post(format!("{url}/v1/topics/{topic}/partitions/0/records"))
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await
                .unwrap();
            assert!(response.status().is_success(), "{}", response.status());
            response.bytes().await.unwrap();
            (*records, *payload_bytes)
        }
        Work::Fetch { log_end_offset } => {
            // Spread reads over the log so the page cache, not one hot page, is measured.
            let offset = (i * 7919) % log_end_offset;
            let response = http
                .get(format!(
                    "{url}/v1/topics/bench/partitions/0/records?offset={offset}&max_bytes=1048576"
                ))
                .send()
                .await
                .unwrap();
            let body: Value = response.json().await.unwrap();
            let records = body["records"].as_array().unwrap();
            let bytes: usize = records
                .iter()
                .map(|r| r["value"].as_str().unwrap().len())
                .sum();
            (records.len() as u64, bytes as u64)
        }
    }
}

async fn measure(
    name: &str,
    url: &str,
    work: Work,
    concurrency: usize,
    duration: Duration,
) -> Measured {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency * 2)
        .build()
        .unwrap();
    let counter = Arc::new(AtomicU64::new(0));
    // Warm-up: open the connections.
    for i in 0..concurrency as u64 {
        one_request(&http, url, &work, i).await;
    }
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (http, url, work, counter) =
            (http.clone(), url.to_string(), work.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            let (mut records, mut bytes, mut latencies) = (0, 0, Vec::new());
            while Instant::now() < deadline {
                let i = counter.fetch_add(1, Ordering::Relaxed);
                let sent = Instant::now();
                let (r, b) = one_request(&http, &url, &work, i).await;
                latencies.push(sent.elapsed().as_micros() as u64);
                records += r;
                bytes += b;
            }
            (records, bytes, latencies)
        }));
    }
    let mut measured = Measured {
        name: name.to_string(),
        seconds: 0.0,
        requests: 0,
        records: 0,
        payload_bytes: 0,
        latencies_us: Vec::new(),
    };
    for task in tasks {
        let (records, bytes, latencies) = task.await.unwrap();
        measured.requests += latencies.len() as u64;
        measured.records += records;
        measured.payload_bytes += bytes;
        measured.latencies_us.extend(latencies);
    }
    measured.seconds = start.elapsed().as_secs_f64();
    measured
}

fn produce_body(topic: &'static str, records: usize) -> Work {
    let value = "x".repeat(100);
    let batch: Vec<Value> = (0..records)
        .map(|_| json!({"key": null, "value": value}))
        .collect();
    Work::Produce {
        topic,
        body: json!({"acks": "1", "records": batch}).to_string(),
        records: records as u64,
        payload_bytes: records as u64 * 100,
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run a short smoke.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let seconds = if smoke {
        0
    } else {
        env_number("TIDEWATER_BENCH_SECS", 3)
    };
    let duration = Duration::from_millis(if smoke { 200 } else { seconds * 1000 });
    let concurrency = env_number("TIDEWATER_BENCH_CONCURRENCY", 32) as usize;
    let dir = tempfile::tempdir().unwrap();
    let (_broker, url) = start_broker(&dir.path().join("logs"));
    let http = reqwest::Client::new();
    // `bench` has the defaults (no fsync per append); `bench-fsync` fsyncs every record.
    for topic in [
        json!({"name": "bench", "partitions": 1}),
        json!({"name": "bench-fsync", "partitions": 1, "configs": {"flush.messages": "1"}}),
    ] {
        let created = http
            .post(format!("{url}/v1/topics"))
            .body(topic.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(created.status().as_u16(), 201);
    }

    println!(
        "concurrency={concurrency} seconds_per_scenario={:.1}",
        duration.as_secs_f64()
    );
    let mut rows = Vec::new();
    rows.push(measure("ping", &url, Work::Ping, concurrency, duration).await);
    rows.push(
        measure(
            "produce 1 x 100 B",
            &url,
            produce_body("bench", 1),
            concurrency,
            duration,
        )
        .await,
    );
    rows.push(
        measure(
            "produce 100 x 100 B",
            &url,
            produce_body("bench", 100),
            concurrency,
            duration,
        )
        .await,
    );
    rows.push(
        measure(
            "produce 1 x 100 B fsync",
            &url,
            produce_body("bench-fsync", 1),
            concurrency,
            duration,
        )
        .await,
    );
    let status: Value = http
        .get(format!("{url}/v1/status"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bench = status["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["topic"] == "bench");
    let log_end_offset = bench.unwrap()["log_end_offset"].as_u64().unwrap();
    rows.push(
        measure(
            "fetch 1 MiB pages",
            &url,
            Work::Fetch { log_end_offset },
            concurrency,
            duration,
        )
        .await,
    );

    println!(
        "| scenario                | requests/s |   records/s |     MB/s |  p50 ms |  p99 ms |"
    );
    println!(
        "|-------------------------|-----------:|------------:|---------:|--------:|--------:|"
    );
    for row in &rows {
        println!("{}", row.row());
    }
    let ping = rows[0].requests as f64 / rows[0].seconds;
    let produce = rows[1].requests as f64 / rows[1].seconds;
    println!(
        "produce(1 record) / ping request rate = {:.2} (target >= 0.50); log end offset {log_end_offset}",
        produce / ping
    );
}
