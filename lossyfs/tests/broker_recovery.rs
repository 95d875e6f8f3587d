//! The broker's storage on a lossyfs: a partition log appended with and without flushes
//! recovers, after a loss of unsynced state, with exactly the flushed records, whether the
//! loss is clean or tears the last writes (its CRC recovery cuts the torn tail).

mod common;

use std::path::Path;

use common::mount;
use tidewater_broker::storage::{Log, LogConfig, Record};
use tidewater_lossyfs::{LossReport, Mode, MountHandle};

/// Small segments so that the flushed part rolls several segments (sealing, index files,
/// recovery point checkpoints written by write + fsync + rename + directory fsync).
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

fn record(i: u64) -> Record {
    Record {
        key: Some(format!("k{i}").into_bytes()),
        value: format!("value-{i:05}-{}", "x".repeat((i % 37) as usize)).into_bytes(),
        timestamp_ms: 1_700_000_000_000 + i as i64,
    }
}

/// Appends records `from..to` one batch of up to three records at a time.
fn append(log: &mut Log, from: u64, to: u64) {
    let mut i = from;
    while i < to {
        let end = (i + 3).min(to);
        let (first, last) = log.append((i..end).map(record).collect(), 1).unwrap();
        assert_eq!((first, last), (i, end - 1));
        i = end;
    }
}

fn values(log: &Log) -> Vec<Vec<u8>> {
    let mut values = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let records = log.read(offset, 1 << 20, u64::MAX).unwrap();
        assert!(!records.is_empty());
        for r in &records {
            assert_eq!(r.offset, offset);
            values.push(r.value.clone());
            offset += 1;
        }
    }
    values
}

fn expected(to: u64) -> Vec<Vec<u8>> {
    (0..to).map(|i| record(i).value).collect()
}

/// One crash: `flushed` records appended and flushed, then `unflushed` more appended within
/// the active segment, then the process dies and the machine loses power.
fn crash_and_recover(dir: &Path, handle: &MountHandle, mode: Mode) -> LossReport {
    let flushed = 200;
    let mut log = Log::open(dir, config()).unwrap();
    assert_eq!(log.log_end_offset(), 0);
    append(&mut log, 0, flushed);
    log.flush().unwrap();
    let segments = log.segment_count();
    assert!(segments > 3, "the flushed part rolled segments: {segments}");
    append(&mut log, flushed, flushed + 7);
    assert_eq!(
        log.segment_count(),
        segments,
        "the unflushed records stay in the active segment (no roll, which would fsync)"
    );
    drop(log); // the broker is killed

    let report = handle.lose_unsynced(mode).unwrap();
    assert!(report.unsynced_files >= 1, "{report:?}");

    let log = Log::open(dir, config()).unwrap();
    assert_eq!(log.log_end_offset(), flushed, "mode {mode:?}: {report:?}");
    assert_eq!(values(&log), expected(flushed));
    report
}

#[test]
fn a_partition_log_recovers_exactly_the_flushed_records_after_a_clean_loss() {
    let m = mount(|_| {});
    crash_and_recover(&m.view("t0-0"), &m.handle, Mode::Clean);
}

#[test]
fn a_partition_log_recovers_exactly_the_flushed_records_after_torn_losses() {
    let mut torn_segment_tails = 0;
    for seed in 0..8 {
        let m = mount(|_| {});
        let report = crash_and_recover(&m.view("t0-0"), &m.handle, Mode::Torn { seed });
        torn_segment_tails += report
            .torn_writes
            .iter()
            .filter(|t| t.path.extension() == Some("log".as_ref()) && t.kept > 0)
            .count();
    }
    // The seeds did leave partial batches behind for the recovery to cut.
    assert!(torn_segment_tails >= 4, "{torn_segment_tails}");
}

#[test]
fn a_recovered_log_keeps_working_across_several_losses() {
    let m = mount(|_| {});
    let dir = m.view("t0-0");
    let mut log = Log::open(&dir, config()).unwrap();
    append(&mut log, 0, 50);
    log.flush().unwrap();
    append(&mut log, 50, 52);
    drop(log);
    m.handle.lose_unsynced(Mode::Torn { seed: 3 }).unwrap();

    let mut log = Log::open(&dir, config()).unwrap();
    assert_eq!(log.log_end_offset(), 50);
    append(&mut log, 50, 120);
    log.flush().unwrap();
    drop(log);
    m.handle.lose_unsynced(Mode::Clean).unwrap();

    let log = Log::open(&dir, config()).unwrap();
    assert_eq!(log.log_end_offset(), 120);
    assert_eq!(values(&log), expected(120));
}

#[test]
fn without_any_flush_the_partition_is_empty_after_a_loss() {
    let m = mount(|_| {});
    let dir = m.view("t0-0");
    let mut log = Log::open(&dir, LogConfig::default()).unwrap();
    append(&mut log, 0, 30);
    drop(log);
    m.handle.lose_unsynced(Mode::Clean).unwrap();
    // Log::open fsynced the new partition directory, so it and its first segment are durable.
    let log = Log::open(&dir, LogConfig::default()).unwrap();
    assert_eq!(log.log_end_offset(), 0);
}
