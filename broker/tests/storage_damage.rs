//! The three damaged sealed segments of issue #15, through the real binary: each used to make a
//! fetch answer 200 with later records in place of the requested ones. Now every fetch answers
//! exactly the records from the requested offset, or 500 KAFKA_STORAGE_ERROR with a warning in
//! the broker's log; a damaged index is rebuilt and serves everything again.

mod common;

use std::path::{Path, PathBuf};

use common::{Broker, Client};
use serde_json::json;

/// Records produced, one batch each.
const RECORDS: u64 = 120;

/// A stopped broker's partition `t-0` holding [`RECORDS`] one-record batches in several
/// segments, each with a few index entries.
struct Stopped {
    _dir: tempfile::TempDir,
    log_dir: PathBuf,
}

impl Stopped {
    async fn new() -> Stopped {
        let dir = tempfile::tempdir().unwrap();
        let log_dir = dir.path().join("logs");
        let mut broker = Broker::start(&log_dir, &[]);
        let client = Client::new(&broker.url);
        let configs = json!({"internal.segment.bytes": "2400", "index.interval.bytes": "500"});
        client.create_topic("t", 1, configs).await;
        for offset in 0..RECORDS {
            client
                .produce("t", 0, &[format!("value-{offset:04}")], "1")
                .await;
        }
        assert!(broker.terminate().success(), "clean shutdown");
        Stopped { _dir: dir, log_dir }
    }

    fn partition_dir(&self) -> PathBuf {
        self.log_dir.join("t-0")
    }

    /// Base offsets of the segments, oldest first.
    fn segments(&self) -> Vec<u64> {
        let mut bases: Vec<u64> = std::fs::read_dir(self.partition_dir())
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.strip_suffix(".log")?.parse().ok()
            })
            .collect();
        bases.sort_unstable();
        assert!(bases.len() >= 3, "several segments: {bases:?}");
        bases
    }

    fn log_path(&self, base: u64) -> PathBuf {
        self.partition_dir().join(format!("{base:020}.log"))
    }

    fn index_path(&self, base: u64) -> PathBuf {
        self.partition_dir().join(format!("{base:020}.index"))
    }
}

/// (position, base offset, total length) of every batch of a segment file.
fn batches(path: &Path) -> Vec<(usize, u64, usize)> {
    let bytes = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut position = 0;
    while position < bytes.len() {
        let base = u64::from_be_bytes(bytes[position..position + 8].try_into().unwrap());
        let length = u32::from_be_bytes(bytes[position + 8..position + 12].try_into().unwrap());
        let total = 12 + length as usize;
        out.push((position, base, total));
        position += total;
    }
    out
}

fn write_u32_at(path: &Path, at: usize, value: u32) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at..at + 4].copy_from_slice(&value.to_be_bytes());
    std::fs::write(path, bytes).unwrap();
}

/// Fetches at every offset and checks each answer: 200 with records starting exactly at the
/// offset, in order, with their values, or 500 KAFKA_STORAGE_ERROR. Returns the offsets that
/// failed.
async fn fetch_every_offset(client: &Client) -> Vec<u64> {
    let mut failed = Vec::new();
    for offset in 0..RECORDS {
        let path = format!("/v1/topics/t/partitions/0/records?offset={offset}&max_bytes=400");
        let (status, answer) = client.get(&path).await;
        if status == 500 {
            assert_eq!(
                answer["error"], "KAFKA_STORAGE_ERROR",
                "at {offset}: {answer}"
            );
            failed.push(offset);
            continue;
        }
        assert_eq!(status, 200, "fetch at {offset}: {answer}");
        let records = answer["records"].as_array().unwrap();
        assert!(!records.is_empty(), "fetch at {offset} returned nothing");
        for (i, record) in records.iter().enumerate() {
            let want = offset + i as u64;
            assert_eq!(
                record["offset"], want,
                "fetch at {offset} skipped to {} (a gap): {answer}",
                record["offset"]
            );
            assert_eq!(record["value"], format!("value-{want:04}"), "at {want}");
        }
    }
    failed
}

fn broker_log(log_dir: &Path) -> String {
    std::fs::read_to_string(log_dir.with_extension("stderr.log")).unwrap_or_default()
}

#[tokio::test]
async fn an_index_entry_pointing_ten_batches_later_is_rebuilt() {
    let stopped = Stopped::new().await;
    let base = stopped.segments()[0];
    let index_path = stopped.index_path(base);
    let index = std::fs::read(&index_path).unwrap();
    let entries = index.len() / 16;
    assert!(entries >= 3, "two entries and the sealing one: {entries}");
    // The last entry before the sealing one: point it ten batches later (still before the
    // end of the segment, so the index stays well-formed and is loaded).
    let entry = entries - 2;
    let position = u32::from_be_bytes(index[entry * 16 + 4..entry * 16 + 8].try_into().unwrap());
    let layout = batches(&stopped.log_path(base));
    let at = layout
        .iter()
        .position(|&(p, _, _)| p == position as usize)
        .expect("the entry points at a batch");
    let later = (at + 10).min(layout.len() - 1);
    assert!(later > at, "a later batch in the segment");
    write_u32_at(&index_path, entry * 16 + 4, layout[later].0 as u32);

    let broker = Broker::start(&stopped.log_dir, &[]);
    let client = Client::new(&broker.url);
    let failed = fetch_every_offset(&client).await;
    assert_eq!(
        failed,
        Vec::<u64>::new(),
        "the rebuilt index serves every offset"
    );
    let log = broker_log(&stopped.log_dir);
    assert!(
        log.contains("rebuilding"),
        "the broker logs the rebuild:\n{log}"
    );
}

#[tokio::test]
async fn a_batch_length_widened_over_the_next_batch_is_a_storage_error() {
    let stopped = Stopped::new().await;
    let base = stopped.segments()[1];
    let log_path = stopped.log_path(base);
    let layout = batches(&log_path);
    let (position, damaged, total) = layout[3];
    let (_, next, next_total) = layout[4];
    write_u32_at(&log_path, position + 8, (total + next_total - 12) as u32);

    let broker = Broker::start(&stopped.log_dir, &[]);
    let client = Client::new(&broker.url);
    let failed = fetch_every_offset(&client).await;
    assert!(
        failed.contains(&damaged) && failed.contains(&next),
        "fetches at the damaged batch {damaged} and the one it covers {next} fail: {failed:?}"
    );
    let log = broker_log(&stopped.log_dir);
    assert!(
        log.contains("WARN") && log.contains(&format!("{base:020}.log")),
        "the broker logs the damaged segment:\n{log}"
    );
}

#[tokio::test]
async fn a_batch_length_of_i32_max_is_a_storage_error() {
    let stopped = Stopped::new().await;
    let base = stopped.segments()[1];
    let log_path = stopped.log_path(base);
    let layout = batches(&log_path);
    let (position, damaged, _) = layout[2];
    let (_, after, _) = layout[3];
    write_u32_at(&log_path, position + 8, 0x7fff_ffff);

    let broker = Broker::start(&stopped.log_dir, &[]);
    let client = Client::new(&broker.url);
    let failed = fetch_every_offset(&client).await;
    assert!(
        failed.contains(&damaged) && failed.contains(&after),
        "fetches at the damaged batch {damaged} and after it {after} fail: {failed:?}"
    );
    // Fetches before the damage answer the records up to it.
    assert!(!failed.contains(&(damaged - 1)), "{failed:?}");
    let log = broker_log(&stopped.log_dir);
    assert!(
        log.contains("WARN") && log.contains(&format!("{base:020}.log")),
        "the broker logs the damaged segment:\n{log}"
    );
}
