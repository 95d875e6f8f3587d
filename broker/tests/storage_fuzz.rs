//! Storage fuzz: damage every byte of a small log's segments and offset indexes, one at a time,
//! and check that every read returns exactly the records at the requested offsets or an error,
//! never later records in their place (docs/storage.md: a damaged byte is never served).
//!
//! Two modes per damaged byte: the log is open while the byte changes (the in-memory index is
//! intact, the data is not), and the log is reopened after the change (a damaged `.index` is
//! read back, damaged sealed segments are trusted without verification). Both read paths are
//! checked: `read` (consumer fetches) and `read_batch_bytes` (follower fetches).
//!
//! Size: five segments (four sealed) of about 150 bytes with a dense index, about 900 bytes in
//! all, so the run stays at seconds on two cores.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use tidewater_broker::storage::batch;
use tidewater_broker::storage::{Log, LogConfig, LogError, Record, StoredRecord};

/// XOR masks applied to each byte: the lowest bit (a length or offset one off), the highest
/// bit (a length or offset far off), and every bit.
const FLIPS: [u8; 3] = [0x01, 0x80, 0xff];
/// `max_bytes` of the reads: one record at a time, a few batches, everything.
const READ_SIZES: [usize; 3] = [1, 150, usize::MAX];

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 240,
        index_interval_bytes: 60,
        ..LogConfig::default()
    }
}

/// Builds the pristine log: batches of one to three records with and without keys, three
/// leader epochs, rolled into several segments; flushed, so every segment is below the
/// recovery point (sealed ones are trusted on open without verification).
fn build_log(dir: &Path) -> Vec<StoredRecord> {
    let mut log = Log::open(dir, config()).unwrap();
    let mut offset = 0u64;
    for batch_index in 0..9u64 {
        let epoch = 1 + (batch_index / 4) as u32;
        let count = 1 + batch_index % 3;
        let records: Vec<Record> = (0..count)
            .map(|i| Record {
                key: (offset + i)
                    .is_multiple_of(2)
                    .then(|| format!("k{}", offset + i).into_bytes()),
                value: format!(
                    "value-{}-{}",
                    offset + i,
                    "x".repeat((batch_index % 4) as usize)
                )
                .into_bytes(),
                timestamp_ms: 1_000 + (offset + i) as i64,
            })
            .collect();
        let (base, last) = log.append(records, epoch).unwrap();
        assert_eq!((base, last), (offset, offset + count - 1));
        offset += count;
    }
    log.flush().unwrap();
    assert!(
        log.segment_count() >= 4,
        "the fuzz needs several sealed segments, got {}",
        log.segment_count()
    );
    let records = log.read(0, usize::MAX, u64::MAX).unwrap();
    assert_eq!(records.len() as u64, offset);
    records
}

/// Every `.log` and `.index` file of the log directory, with its content.
fn segment_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| ext == "log" || ext == "index")
        })
        .map(|path| {
            let bytes = fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Checks one read's outcome: an error, or a non-empty run of records starting exactly at
/// `offset`, each equal to the pristine record at its offset.
fn check_records(
    what: &str,
    offset: u64,
    outcome: Result<Vec<StoredRecord>, LogError>,
    pristine: &[StoredRecord],
) {
    let Ok(records) = outcome else { return };
    assert!(
        !records.is_empty(),
        "{what}: read at {offset} returned no records and no error"
    );
    for (i, record) in records.iter().enumerate() {
        let want = offset + i as u64;
        assert_eq!(
            record.offset, want,
            "{what}: read at {offset} returned offset {} in place of {want} (a gap)",
            record.offset
        );
        assert_eq!(
            Some(record),
            pristine.get(want as usize),
            "{what}: read at {offset} returned a different record at {want}"
        );
    }
}

/// The records of `read_batch_bytes`' answer, decoded (a decode failure fails the test: the
/// follower would refuse the bytes, but the leader must never send damaged batches).
fn decode_all(what: &str, bytes: &[u8]) -> Vec<StoredRecord> {
    let mut records = Vec::new();
    let mut position = 0;
    while position < bytes.len() {
        let (batch, len) = batch::decode(&bytes[position..])
            .unwrap_or_else(|e| panic!("{what}: the log served a damaged batch: {e:?}"));
        records.extend(batch.records);
        position += len;
    }
    records
}

/// Reads every offset of the pristine range through both read paths and checks each answer.
fn check_every_read(what: &str, log: &Log, pristine: &[StoredRecord]) {
    let log_end_offset = log.log_end_offset();
    assert!(
        log_end_offset <= pristine.len() as u64,
        "{what}: the log end offset grew to {log_end_offset}"
    );
    // Recovery may cut a damaged active segment: reading at the new end finds nothing (as at
    // any log end) and beyond it is out of range.
    let at_end = log.read(log_end_offset, usize::MAX, u64::MAX);
    assert!(
        at_end.as_ref().is_ok_and(Vec::is_empty),
        "{what}: read at the log end {log_end_offset}: {at_end:?}"
    );
    for offset in 0..log_end_offset {
        for max_bytes in READ_SIZES {
            let what = format!("{what}, max_bytes {max_bytes}");
            let read = log.read(offset, max_bytes, u64::MAX);
            check_records(&format!("{what}, read"), offset, read, pristine);
            let raw = log
                .read_batch_bytes(offset, max_bytes, u64::MAX)
                .map(|bytes| decode_all(&what, &bytes));
            check_records(&format!("{what}, read_batch_bytes"), offset, raw, pristine);
        }
    }
}

#[test]
fn no_single_damaged_byte_makes_a_read_skip_records() {
    let pristine_dir = tempfile::tempdir().unwrap();
    let pristine = build_log(pristine_dir.path());
    let files = segment_files(pristine_dir.path());
    let others: BTreeMap<PathBuf, Vec<u8>> = fs::read_dir(pristine_dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| files.iter().all(|(p, _)| p != path))
        .map(|path| {
            let bytes = fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    let total_bytes: usize = files.iter().map(|(_, bytes)| bytes.len()).sum();
    println!(
        "fuzzing {} files, {total_bytes} bytes, {} records, flips {FLIPS:02x?}",
        files.len(),
        pristine.len()
    );

    let started = std::time::Instant::now();
    // Live: damage under an open log, then restore the byte.
    let live = Log::open(pristine_dir.path(), config()).unwrap();
    for (path, bytes) in &files {
        let file = fs::OpenOptions::new().write(true).open(path).unwrap();
        for (at, &original) in bytes.iter().enumerate() {
            for flip in FLIPS {
                file.write_all_at(&[original ^ flip], at as u64).unwrap();
                let what = format!("live, {} byte {at} ^ {flip:#04x}", name(path));
                check_every_read(&what, &live, &pristine);
                file.write_all_at(&[original], at as u64).unwrap();
            }
        }
    }
    drop(live);
    println!("live damage checked in {:?}", started.elapsed());

    // Reopened: a fresh copy of the directory per damaged byte.
    for (damaged_path, bytes) in &files {
        for at in 0..bytes.len() {
            for flip in FLIPS {
                let work = scratch_dir();
                for (path, content) in files.iter().map(|(p, c)| (p, c)).chain(&others) {
                    let mut content = content.clone();
                    if path == damaged_path {
                        content[at] ^= flip;
                    }
                    fs::write(work.path().join(path.file_name().unwrap()), content).unwrap();
                }
                let what = format!("reopened, {} byte {at} ^ {flip:#04x}", name(damaged_path));
                let log = Log::open(work.path(), config())
                    .unwrap_or_else(|e| panic!("{what}: the log did not open: {e:?}"));
                check_every_read(&what, &log, &pristine);
            }
        }
    }
    println!(
        "live and reopened damage checked in {:?}",
        started.elapsed()
    );
}

/// A directory for one reopened copy: in `/dev/shm` where there is one, as opening a log
/// fsyncs its checkpoints and thousands of fsyncs on a disk would dominate the run.
fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

fn name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}
