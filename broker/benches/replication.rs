//! Produce throughput and latency of a replicated cluster (issue 3): a controller and three
//! brokers (release binaries) on loopback, one partition with replication factor 3 and
//! `min.insync.replicas=2` written with `acks=all`, against one partition with replication
//! factor 1 written with `acks=1`, batches of 1 and 100 records of 100 bytes. Both partitions
//! are led by broker 1.
//!
//! 1. Closed loop: a fixed number of requests in flight (default 32) for a few seconds:
//!    records/s, requests/s, p50/p99 latency.
//! 2. Open loop at half of each acks=all scenario's maximum request rate: requests start on a
//!    fixed schedule (not when the previous one ends), so the latency includes queueing.
//!
//! Besides the client-side figures, each row gives the CPU time the three brokers used per
//! 1000 records (user + system, from `/proc/<pid>/stat`): on a shared machine that cost per
//! record varies far less with the load than throughput does.
//!
//! Run: `cargo bench -p tidewater-broker --bench replication`. Knobs: `TIDEWATER_BENCH_SECS`
//! (default 3), `TIDEWATER_BENCH_CONCURRENCY` (default 32), `TIDEWATER_BENCH_BROKER_BIN` (a
//! broker binary to run instead of this build's, for A/B comparisons), `TMPDIR` (where the
//! brokers' logs go; they write several GB per run). Targets: acks=all/RF=3 reaches at
//! least half the records/s of acks=1/RF=1 at batch 100, and its p99 stays under 20 ms at half
//! of its maximum throughput.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::Semaphore;

/// Kills the process when the benchmark ends or panics.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(args: &[String]) -> (Process, String) {
    let binary = std::env::var("TIDEWATER_BENCH_BROKER_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_tidewater-broker").to_string());
    let mut child = Command::new(binary)
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn tidewater-broker");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("stdout");
    let address = line
        .trim()
        .strip_prefix("listening on ")
        .expect("listening line")
        .to_string();
    (Process(child), format!("http://{address}"))
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU time (user + system) the processes used so far, in clock ticks.
fn cpu_ticks(processes: &[u32]) -> u64 {
    processes
        .iter()
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
            let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            let fields: Vec<&str> = after_name.split_whitespace().collect();
            let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
            field(11).unwrap_or(0) + field(12).unwrap_or(0)
        })
        .sum()
}

/// Clock ticks per second for `/proc/<pid>/stat` (`getconf CLK_TCK`, usually 100).
fn clock_ticks_per_s() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// One scenario's results.
struct Measured {
    name: String,
    seconds: f64,
    requests: u64,
    records_per_request: u64,
    failures: u64,
    latencies_us: Vec<u64>,
    /// CPU seconds the three brokers used during the scenario.
    broker_cpu_s: f64,
}

impl Measured {
    fn percentile_ms(&self, p: f64) -> f64 {
        let mut sorted = self.latencies_us.clone();
        sorted.sort_unstable();
        if sorted.is_empty() {
            return f64::NAN;
        }
        let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[index] as f64 / 1000.0
    }

    fn requests_per_s(&self) -> f64 {
        self.requests as f64 / self.seconds
    }

    fn records_per_s(&self) -> f64 {
        self.requests_per_s() * self.records_per_request as f64
    }

    fn cpu_ms_per_1000_records(&self) -> f64 {
        let records = (self.requests * self.records_per_request) as f64;
        self.broker_cpu_s * 1000.0 / (records / 1000.0)
    }

    fn row(&self) -> String {
        format!(
            "| {:<44} | {:>10.0} | {:>11.0} | {:>7.2} | {:>7.2} | {:>8} | {:>14.3} |",
            self.name,
            self.requests_per_s(),
            self.records_per_s(),
            self.percentile_ms(0.50),
            self.percentile_ms(0.99),
            self.failures,
            self.cpu_ms_per_1000_records()
        )
    }
}

fn body(acks: &str, records: usize) -> String {
    let value = "x".repeat(100);
    let records: Vec<_> = (0..records)
        .map(|_| json!({"key": null, "value": value}))
        .collect();
    json!({"acks": acks, "timeout_ms": 30000, "records": records}).to_string()
}

async fn send(http: &reqwest::Client, url: &str, body: &str) -> (bool, u64) {
    let started = Instant::now();
    let ok = match http
        .post(url)
        .timeout(Duration::from_secs(60))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
    {
        Ok(response) => {
            let ok = response.status().is_success();
            let _ = response.bytes().await;
            ok
        }
        Err(_) => false,
    };
    (ok, started.elapsed().as_micros() as u64)
}

/// Closed loop: `concurrency` workers each sending back to back for `seconds`.
async fn closed_loop(
    name: String,
    url: String,
    body: String,
    records: u64,
    concurrency: u64,
    seconds: u64,
) -> Measured {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (http, url, body) = (http.clone(), url.clone(), body.clone());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut failures = 0;
            while Instant::now() < deadline {
                let (ok, us) = send(&http, &url, &body).await;
                if ok {
                    latencies.push(us);
                } else {
                    failures += 1;
                }
            }
            (latencies, failures)
        }));
    }
    let mut latencies_us = Vec::new();
    let mut failures = 0;
    for worker in workers {
        let (l, f) = worker.await.unwrap();
        latencies_us.extend(l);
        failures += f;
    }
    Measured {
        name,
        seconds: started.elapsed().as_secs_f64(),
        requests: latencies_us.len() as u64,
        records_per_request: records,
        failures,
        latencies_us,
        broker_cpu_s: 0.0,
    }
}

/// Open loop: one request every `1 / rate` seconds for `seconds`, at most 1024 in flight.
async fn open_loop(
    name: String,
    url: String,
    body: String,
    records: u64,
    rate: f64,
    seconds: u64,
) -> Measured {
    let http = reqwest::Client::new();
    let in_flight = Arc::new(Semaphore::new(1024));
    let period = Duration::from_secs_f64(1.0 / rate.max(1.0));
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut tasks = Vec::new();
    while started.elapsed() < Duration::from_secs(seconds) {
        ticks.tick().await;
        let permit = in_flight.clone().acquire_owned().await.unwrap();
        let (http, url, body) = (http.clone(), url.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let result = send(&http, &url, &body).await;
            drop(permit);
            result
        }));
    }
    let mut latencies_us = Vec::new();
    let mut failures = 0;
    for task in tasks {
        match task.await.unwrap() {
            (true, us) => latencies_us.push(us),
            (false, _) => failures += 1,
        }
    }
    Measured {
        name,
        seconds: started.elapsed().as_secs_f64(),
        requests: latencies_us.len() as u64,
        records_per_request: records,
        failures,
        latencies_us,
        broker_cpu_s: 0.0,
    }
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: a short smoke run.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let seconds = if smoke {
        1
    } else {
        env_number("TIDEWATER_BENCH_SECS", 3)
    };
    let concurrency = env_number("TIDEWATER_BENCH_CONCURRENCY", 32);
    let dir = tempfile::tempdir().unwrap();
    let (_controller, controller_url) = start(&[
        "--role".into(),
        "controller".into(),
        "--set".into(),
        "listeners=http://127.0.0.1:0".into(),
        "--set".into(),
        format!("log.dirs={}", dir.path().join("controller").display()),
    ]);
    let mut brokers = Vec::new();
    for id in 1..=3 {
        let args: Vec<String> = [
            format!("broker.id={id}"),
            "listeners=http://127.0.0.1:0".into(),
            format!(
                "log.dirs={}",
                dir.path().join(format!("broker-{id}")).display()
            ),
            format!("controller.address={controller_url}"),
        ]
        .into_iter()
        .flat_map(|s| ["--set".to_string(), s])
        .collect();
        brokers.push(start(&args));
    }
    let leader = brokers[0].1.clone();
    let http = reqwest::Client::new();
    // Wait for the three registrations, then create both topics through broker 1.
    for _ in 0..200 {
        let metadata: serde_json::Value = http
            .get(format!("{controller_url}/controller/v1/metadata"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if metadata["brokers"].as_array().map_or(0, |b| b.len()) == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (name, rf) in [("rf1", 1), ("rf3", 3)] {
        let created = http
            .post(format!("{leader}/v1/topics"))
            .json(&json!({"name": name, "partitions": 1, "replication_factor": rf, "configs": {"min.insync.replicas": if rf == 3 { "2" } else { "1" }}}))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status().as_u16(), 201, "{:?}", created.text().await);
    }
    // Until the followers fetch, acks=all waits for them: warm up until it answers.
    let rf3_url = format!("{leader}/v1/topics/rf3/partitions/0/records");
    let rf1_url = format!("{leader}/v1/topics/rf1/partitions/0/records");
    for url in [&rf1_url, &rf3_url] {
        for _ in 0..100 {
            if send(&http, url, &body("all", 1)).await.0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let broker_pids: Vec<u32> = brokers.iter().map(|(p, _)| p.0.id()).collect();
    let ticks_per_s = clock_ticks_per_s();
    println!("seed=none seconds={seconds} concurrency={concurrency} record_bytes=100");
    println!("| scenario                                     | requests/s |   records/s |  p50 ms |  p99 ms | failures | CPU ms/1k rec  |");
    println!("|----------------------------------------------|-----------:|------------:|--------:|--------:|---------:|---------------:|");
    let mut closed = Vec::new();
    for (acks, url, rf) in [("1", &rf1_url, 1), ("all", &rf3_url, 3)] {
        for batch in [1u64, 100] {
            let name = format!("acks={acks} RF={rf} batch {batch} (closed)");
            let ticks_before = cpu_ticks(&broker_pids);
            let mut measured = closed_loop(
                name,
                url.clone(),
                body(acks, batch as usize),
                batch,
                concurrency,
                seconds,
            )
            .await;
            measured.broker_cpu_s = (cpu_ticks(&broker_pids) - ticks_before) as f64 / ticks_per_s;
            println!("{}", measured.row());
            closed.push((acks, batch, measured));
        }
    }
    let rate_of = |acks: &str, batch: u64| {
        closed
            .iter()
            .find(|(a, b, _)| *a == acks && *b == batch)
            .map(|(_, _, m)| m)
            .unwrap()
    };
    let mut half_load = Vec::new();
    for batch in [1u64, 100] {
        let max = rate_of("all", batch);
        let rate = max.requests_per_s() / 2.0;
        let name = format!("acks=all RF=3 batch {batch} @ {rate:.0} req/s (open)");
        let ticks_before = cpu_ticks(&broker_pids);
        let mut measured = open_loop(
            name,
            rf3_url.clone(),
            body("all", batch as usize),
            batch,
            rate,
            seconds,
        )
        .await;
        measured.broker_cpu_s = (cpu_ticks(&broker_pids) - ticks_before) as f64 / ticks_per_s;
        println!("{}", measured.row());
        half_load.push(measured);
    }
    let ratio = rate_of("all", 100).records_per_s() / rate_of("1", 100).records_per_s();
    let p99_ms = half_load[1].percentile_ms(0.99);
    println!();
    println!("acks=all RF=3 / acks=1 RF=1 records/s at batch 100: {ratio:.2} (target >= 0.5)");
    let cost_ratio =
        rate_of("all", 100).cpu_ms_per_1000_records() / rate_of("1", 100).cpu_ms_per_1000_records();
    println!("broker CPU per record, acks=all RF=3 / acks=1 RF=1 at batch 100: {cost_ratio:.2} (three brokers against one)");
    println!("acks=all RF=3 batch 100 p99 at half of its max throughput: {p99_ms:.2} ms (target < 20 ms)");
}
