//! The harness's own overhead: ops recorded per second through the real worker loop and
//! recorder, with a client that does no I/O, so the harness is never the bottleneck of a run.
//!
//! `cargo bench -p tidewater --bench overhead` (release build). The history is serialised in
//! full (JSON, as in a run) but written to `io::sink()` so the disk is not measured; set
//! `OVERHEAD_HISTORY=path` to write a real file instead. Target: at least 100,000 ops/s.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidewater::recorder::Recorder;
use tidewater::runner::workload::{spawn_workers, WorkloadContext};
use tidewater_workloads::client::{Fetched, Outcome, Sent};
use tidewater_workloads::queue::{QueueClient, QueueSettings, ValueSource};

/// Acknowledges every send at an increasing offset and answers every poll with one record.
struct NoIoClient;

impl QueueClient for NoIoClient {
    async fn send(&self, _key: &str, _value: i64, _acks: &str) -> Outcome<Sent> {
        Outcome::Ok(Sent {
            offset: Some(17),
            high_watermark: Some(18),
            isr_size: None,
            node: "n1".into(),
        })
    }

    async fn fetch(&self, _key: &str, offset: u64, _max_wait_ms: u64) -> Outcome<Fetched> {
        Outcome::Ok(Fetched {
            records: vec![(offset, 907)],
            next_offset: offset + 1,
            high_watermark: Some(offset + 1),
            log_start_offset: Some(0),
            foreign_values: 0,
            node: "n2".into(),
        })
    }
}

fn measure(concurrency: usize, duration: Duration) -> (u64, f64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let recorder = match std::env::var_os("OVERHEAD_HISTORY") {
        Some(path) => Recorder::create(path.as_ref()).expect("create history file"),
        None => Recorder::with_writer(Box::new(std::io::sink())),
    };
    let keys = (0..6).map(|p| format!("t0/{p}")).collect();
    let ctx = WorkloadContext {
        client: Arc::new(NoIoClient),
        settings: Arc::new(QueueSettings::new(keys, "all")),
        recorder: recorder.clone(),
        seed: 42,
        values: ValueSource::default(),
        rate_ops: 0.0,
        stop: Arc::new(AtomicBool::new(false)),
        focus: None,
    };
    let started = Instant::now();
    let ops: u64 = runtime.block_on(async {
        let handles = spawn_workers(&ctx, concurrency);
        tokio::time::sleep(duration).await;
        ctx.stop.store(true, Ordering::Relaxed);
        let mut total = 0;
        for h in handles {
            total += h.await.expect("worker");
        }
        total
    });
    let lines = recorder.close().expect("close history");
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(
        lines,
        2 * ops,
        "every op is an invoke and a completion line"
    );
    (ops, ops as f64 / secs)
}

fn main() {
    // `cargo test --benches` runs this too, in a debug build: keep that quick.
    let quick = cfg!(debug_assertions);
    let duration = Duration::from_millis(if quick { 200 } else { 3_000 });
    for concurrency in [1, 10, 100] {
        let (ops, rate) = measure(concurrency, duration);
        println!(
            "overhead concurrency={concurrency:>3}: {ops:>9} ops in {:.1}s = {:>9.0} ops/s ({} history lines/s)",
            duration.as_secs_f64(),
            rate,
            (2.0 * rate) as u64
        );
    }
}
