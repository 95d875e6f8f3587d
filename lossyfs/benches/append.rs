//! Cost of lossyfs on sequential appends: the same writes to a file in the backing directory
//! and to a file through the mount, with and without periodic fsync, and the broker's own
//! partition log appending small batches on each; and sequential reads of a durable file.
//!
//! Run: `cargo bench -p tidewater-lossyfs --bench append` (needs /dev/fuse and root).
//! Knobs: `TIDEWATER_BENCH_MIB` (data per scenario, default 64), `TIDEWATER_BENCH_RUNS`
//! (runs per scenario, median reported, default 3). Without `--bench` (as under
//! `cargo test --benches`) it runs 1 MiB once as a smoke test.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use tidewater_broker::storage::{Log, LogConfig, Record};
use tidewater_lossyfs::{LossyFs, Mode, MountHandle};

/// One way of appending `total` bytes in `chunk`-byte writes to a file under `dir`.
#[derive(Clone, Copy)]
struct FileScenario {
    name: &'static str,
    chunk_bytes: usize,
    /// fsync after this many bytes (0: never).
    fsync_every_bytes: usize,
}

const FILE_SCENARIOS: [FileScenario; 4] = [
    FileScenario {
        name: "append 4 KiB writes",
        chunk_bytes: 4096,
        fsync_every_bytes: 0,
    },
    FileScenario {
        name: "append 512 B writes",
        chunk_bytes: 512,
        fsync_every_bytes: 0,
    },
    FileScenario {
        name: "append 1 MiB writes",
        chunk_bytes: 1 << 20,
        fsync_every_bytes: 0,
    },
    FileScenario {
        name: "append 4 KiB, fsync/MiB",
        chunk_bytes: 4096,
        fsync_every_bytes: 1 << 20,
    },
];

fn append_file(dir: &Path, total_bytes: usize, scenario: FileScenario) -> Duration {
    let path = dir.join("bench.data");
    let _ = fs::remove_file(&path);
    let chunk = vec![0x5au8; scenario.chunk_bytes];
    let start = Instant::now();
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap();
    let mut written = 0;
    let mut since_fsync = 0;
    while written < total_bytes {
        file.write_all(&chunk).unwrap();
        written += chunk.len();
        since_fsync += chunk.len();
        if scenario.fsync_every_bytes > 0 && since_fsync >= scenario.fsync_every_bytes {
            file.sync_data().unwrap();
            since_fsync = 0;
        }
    }
    if scenario.fsync_every_bytes > 0 {
        file.sync_data().unwrap();
    }
    let elapsed = start.elapsed();
    drop(file);
    fs::remove_file(&path).unwrap();
    elapsed
}

/// Sequential reads of a `total`-byte durable file in 128 KiB reads (page cache warm).
fn read_file(dir: &Path, total_bytes: usize, sync: impl Fn()) -> Duration {
    let path = dir.join("bench.read");
    let mut file = File::create(&path).unwrap();
    let chunk = vec![0x33u8; 1 << 20];
    for _ in 0..total_bytes >> 20 {
        file.write_all(&chunk).unwrap();
    }
    file.sync_all().unwrap();
    drop(file);
    sync();
    let mut buf = vec![0u8; 128 << 10];
    let start = Instant::now();
    let mut file = File::open(&path).unwrap();
    let mut read = 0;
    loop {
        let n = file.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        read += n;
    }
    let elapsed = start.elapsed();
    assert_eq!(read, total_bytes);
    fs::remove_file(&path).unwrap();
    elapsed
}

/// The broker's partition log: batches of one 100-byte record (no flush per append, Kafka's
/// default), then one flush. Returns the time and the bytes appended.
fn append_log(dir: &Path, total_bytes: usize) -> (Duration, usize) {
    let log_dir = dir.join("t0-0");
    let _ = fs::remove_dir_all(&log_dir);
    let value = vec![0x42u8; 100];
    let start = Instant::now();
    let mut log = Log::open(&log_dir, LogConfig::default()).unwrap();
    let batches = total_bytes / 100;
    for i in 0..batches {
        let record = Record {
            key: None,
            value: value.clone(),
            timestamp_ms: i as i64,
        };
        log.append(vec![record], 0).unwrap();
    }
    log.flush().unwrap();
    let elapsed = start.elapsed();
    let size = log.size_bytes() as usize;
    drop(log);
    fs::remove_dir_all(&log_dir).unwrap();
    (elapsed, size)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn mib_per_s(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / time.as_secs_f64()
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let (mib, runs) = if benchmarking {
        (
            env_usize("TIDEWATER_BENCH_MIB", 64),
            env_usize("TIDEWATER_BENCH_RUNS", 3),
        )
    } else {
        (1, 1)
    };
    let total_bytes = mib << 20;
    println!("lossyfs append benchmark: {mib} MiB per scenario, median of {runs} runs");

    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("backing");
    let mnt = dir.path().join("mnt");
    fs::create_dir(&backing).unwrap();
    fs::create_dir(&mnt).unwrap();
    let handle: MountHandle = LossyFs::mount(&backing, &mnt).expect("mount (needs /dev/fuse)");

    println!(
        "| {:<26} | {:>13} | {:>13} | {:>7} |",
        "scenario", "backing MiB/s", "lossyfs MiB/s", "ratio"
    );
    println!("|{:-<28}|{:->15}|{:->15}|{:->9}|", "", "", "", "");
    for scenario in FILE_SCENARIOS {
        let direct = median(
            (0..runs)
                .map(|_| append_file(&backing, total_bytes, scenario))
                .collect(),
        );
        let lossy = median(
            (0..runs)
                .map(|_| {
                    let time = append_file(&mnt, total_bytes, scenario);
                    // Unsynced pages of the removed file are already gone; keep runs apart.
                    handle.lose_unsynced(Mode::Clean).unwrap();
                    time
                })
                .collect(),
        );
        report(scenario.name, total_bytes, direct, total_bytes, lossy);
    }
    let direct = median(
        (0..runs)
            .map(|_| read_file(&backing, total_bytes, || {}))
            .collect(),
    );
    let lossy = median(
        (0..runs)
            .map(|_| {
                // Durable first (file and directory), so reads come from the backing file.
                read_file(&mnt, total_bytes, || handle.sync_all().unwrap())
            })
            .collect(),
    );
    report(
        "read 128 KiB (durable)",
        total_bytes,
        direct,
        total_bytes,
        lossy,
    );
    let mut direct = Vec::new();
    let mut lossy = Vec::new();
    let mut size = (0, 0);
    for _ in 0..runs {
        let (time, bytes) = append_log(&backing, total_bytes / 4);
        direct.push(time);
        size.0 = bytes;
        let (time, bytes) = append_log(&mnt, total_bytes / 4);
        handle.lose_unsynced(Mode::Clean).unwrap();
        lossy.push(time);
        size.1 = bytes;
    }
    report(
        "broker Log 1 x 100 B",
        size.0,
        median(direct),
        size.1,
        median(lossy),
    );
    handle.unmount().unwrap();
}

fn report(name: &str, direct_bytes: usize, direct: Duration, lossy_bytes: usize, lossy: Duration) {
    let direct = mib_per_s(direct_bytes, direct);
    let lossy = mib_per_s(lossy_bytes, lossy);
    println!(
        "| {name:<26} | {direct:>13.1} | {lossy:>13.1} | {:>6.2}x |",
        direct / lossy
    );
}
