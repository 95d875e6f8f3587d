//! Benchmark: check a generated history of 1,000,000 ops, against merely parsing the same
//! JSON Lines file into `serde_json::Value`.
//!
//! ```text
//! cargo bench -p tidewater-workloads --bench check            # 1,000,000 ops
//! TIDEWATER_BENCH_OPS=200000 cargo bench -p tidewater-workloads --bench check
//! ```
//!
//! Prints ops/s for both, their ratio (target: checking <= 3x parsing) and the peak resident
//! memory (VmHWM from /proc/self/status) after each phase. Generation streams to the file,
//! so the peak after parsing is the baseline the checker's peak compares to.

use std::io::{BufRead, BufWriter, Write};
use std::time::Instant;
use tidewater_workloads::checker::gen::{GenConfig, Generator};
use tidewater_workloads::checker::{check_file, CheckSettings};

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn parse_only(path: &std::path::Path) -> u64 {
    let file = std::fs::File::open(path).expect("open history");
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut line = String::new();
    let mut ops = 0u64;
    while reader.read_line(&mut line).expect("read") > 0 {
        let v: serde_json::Value = serde_json::from_str(&line).expect("valid JSON");
        ops += v.is_object() as u64;
        line.clear();
    }
    ops
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let ops: u64 = std::env::var("TIDEWATER_BENCH_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let cfg = GenConfig {
        seed: 42,
        ops,
        ..GenConfig::default()
    };
    println!(
        "seed={} ops={} keys={} producers={} consumers={}",
        cfg.seed, cfg.ops, cfg.keys, cfg.producers, cfg.consumers
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("history.jsonl");

    let t = Instant::now();
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).expect("create"));
    let mut written = 0u64;
    for op in Generator::new(cfg) {
        serde_json::to_writer(&mut out, &op).expect("write");
        out.write_all(b"\n").expect("write");
        written += 1;
    }
    out.flush().expect("flush");
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "generated {written} ops, {:.1} MiB, in {:.2}s; VmHWM {} KiB",
        bytes as f64 / (1 << 20) as f64,
        t.elapsed().as_secs_f64(),
        vm_hwm_kib().unwrap_or(0)
    );

    // Parse twice and keep the faster, so the page cache favours parsing, not checking.
    let mut parse_s = f64::MAX;
    for _ in 0..2 {
        let t = Instant::now();
        let n = parse_only(&path);
        assert_eq!(n, written);
        parse_s = parse_s.min(t.elapsed().as_secs_f64());
    }
    let hwm_parse = vm_hwm_kib().unwrap_or(0);
    println!(
        "parse (serde_json::Value): {parse_s:.3}s, {:.0} ops/s; VmHWM {hwm_parse} KiB",
        written as f64 / parse_s
    );

    let t = Instant::now();
    let results = check_file(&path, &CheckSettings::default()).expect("check");
    let check_s = t.elapsed().as_secs_f64();
    let hwm_check = vm_hwm_kib().unwrap_or(0);
    println!(
        "check (streaming file):    {check_s:.3}s, {:.0} ops/s; VmHWM {hwm_check} KiB",
        written as f64 / check_s
    );
    println!(
        "ratio check/parse: {:.2} (target <= 3.00)",
        check_s / parse_s
    );
    println!(
        "verdict {} anomalies {} acked {} records read {}",
        results.valid.as_str(),
        results.anomalies.len(),
        results.stats["sends"]["acked"],
        results.stats["reads"]["records"]
    );
    assert!(
        results.anomalies.is_empty(),
        "a generated history must have no anomaly: {:?}",
        results.anomalies.keys()
    );
}
