//! Crash safety of acknowledged records: produce acknowledged batches, `kill -9` the broker with
//! a request in flight, then tear (truncate) or corrupt (flip a byte of) the active segment at a
//! random position, restart, and check that
//!
//! - every acknowledged record that lies wholly before the damage is served, at its offset,
//!   with its value;
//! - nothing from the first damaged batch on is served (apart from the in-flight batch, which
//!   may survive when the damage lies after it);
//! - new appends continue at the next offset after the last record served.
//!
//! Positions come from the segment file's size after each acknowledged produce, so the test needs
//! no knowledge of the batch format. The seed is printed first; rerun one case with
//! `TIDEWATER_SEED=<seed> cargo test -p tidewater-broker --test crash`.

mod common;

use std::path::{Path, PathBuf};

use common::{Broker, Client};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

const TOPIC: &str = "crash";
const ROUNDS: usize = 6;

/// One record in the log as the test knows it.
#[derive(Debug, Clone)]
struct Known {
    offset: u64,
    value: String,
    /// File name of the segment its batch ended in, and the file's size right after the ack.
    segment: String,
    end: u64,
}

fn partition_dir(log_dir: &Path) -> PathBuf {
    log_dir.join(format!("{TOPIC}-0"))
}

/// The newest segment (largest base offset; names are zero-padded) and its size.
fn active_segment(dir: &Path) -> (String, u64) {
    let mut logs: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    logs.sort();
    logs.pop().expect("a partition has at least one segment")
}

#[derive(Debug, Clone, Copy)]
#[allow(dead_code)] // the mask is only printed (Debug), to reproduce a failure by hand
enum Damage {
    /// A torn write: the file ends at this byte.
    Truncate(u64),
    /// Bit rot: the byte at this position is XORed with a non-zero mask.
    Flip(u64, u8),
}

fn damage(path: &Path, rng: &mut StdRng) -> Option<Damage> {
    let len = std::fs::metadata(path).unwrap().len();
    if len == 0 {
        return None;
    }
    let position = rng.gen_range(0..len);
    if rng.gen_bool(0.5) {
        let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        file.set_len(position).unwrap();
        Some(Damage::Truncate(position))
    } else {
        let mask = rng.gen_range(1..=255u8);
        let mut bytes = std::fs::read(path).unwrap();
        bytes[position as usize] ^= mask;
        std::fs::write(path, bytes).unwrap();
        Some(Damage::Flip(position, mask))
    }
}

#[tokio::test]
async fn acknowledged_records_survive_kill_and_damaged_tail() {
    let seed: u64 = std::env::var("TIDEWATER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x7106_5eed);
    println!("seed={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("logs");
    let mut broker = Broker::start(&log_dir, &[]);
    let client = Client::new(&broker.url);
    // Small segments, so damage hits the active segment while older ones must stay intact.
    client
        .create_topic(TOPIC, 1, json!({"internal.segment.bytes": "4096"}))
        .await;
    let partition = partition_dir(&log_dir);
    let mut known: Vec<Known> = Vec::new();
    let mut next_value = 0u64;

    for round in 0..ROUNDS {
        let batches = rng.gen_range(10..40);
        println!("round={round} batches={batches}");
        let client = Client::new(&broker.url);
        for _ in 0..batches {
            let size = rng.gen_range(1..6);
            let values: Vec<String> = (0..size)
                .map(|i| format!("r{round}-v{}", next_value + i))
                .collect();
            next_value += size;
            let answer = client.produce(TOPIC, 0, &values, "1").await;
            let base = answer["base_offset"].as_u64().unwrap();
            assert_eq!(
                base,
                known.len() as u64,
                "appends continue after the last record"
            );
            let (segment, end) = active_segment(&partition);
            for (i, value) in values.into_iter().enumerate() {
                known.push(Known {
                    offset: base + i as u64,
                    value,
                    segment: segment.clone(),
                    end,
                });
            }
        }
        // One more batch in flight while the broker is killed: it may or may not be on disk.
        let in_flight: Vec<String> = (0..3).map(|i| format!("r{round}-inflight{i}")).collect();
        let request = {
            let client = Client::new(&broker.url);
            let values = in_flight.clone();
            tokio::spawn(async move {
                let records: Vec<_> = values.iter().map(|v| json!({"value": v})).collect();
                let path = format!("/v1/topics/{TOPIC}/partitions/0/records");
                client
                    .call(
                        "POST",
                        &path,
                        Some(&json!({"acks": "1", "records": records}).to_string()),
                    )
                    .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(rng.gen_range(0..3))).await;
        broker.kill();
        request.abort();

        let (active, _) = active_segment(&partition);
        let damaged = damage(&partition.join(&active), &mut rng);
        println!("round={round} active={active} damage={damaged:?}");
        let limit = match damaged {
            Some(Damage::Truncate(p)) | Some(Damage::Flip(p, _)) => p,
            None => u64::MAX,
        };
        // Acknowledged records that must survive: all in older segments, and those whose batch
        // ended at or before the damaged byte.
        let survivors: Vec<Known> = known
            .iter()
            .filter(|k| k.segment != active || k.end <= limit)
            .cloned()
            .collect();
        assert!(
            survivors
                .iter()
                .enumerate()
                .all(|(i, k)| k.offset == i as u64),
            "survivors form a prefix"
        );

        broker = Broker::start(&log_dir, &[]);
        let client = Client::new(&broker.url);
        let served = client.read_all(TOPIC, 0, 0).await;
        for (known, (offset, value)) in survivors.iter().zip(&served) {
            assert_eq!(
                (known.offset, &known.value),
                (*offset, value),
                "seed={seed} round={round}"
            );
        }
        assert!(
            served.len() >= survivors.len(),
            "seed={seed} round={round}: lost acknowledged records before the damage: served {} of {}",
            served.len(),
            survivors.len()
        );
        let extra = &served[survivors.len()..];
        let all_acked_survived = survivors.len() == known.len();
        assert!(
            extra.is_empty() || all_acked_survived,
            "seed={seed} round={round}: served records after a damaged batch: {extra:?}"
        );
        let extra_values: Vec<&String> = extra.iter().map(|(_, v)| v).collect();
        let expected_in_flight: Vec<&String> = in_flight.iter().collect();
        assert!(
            extra.is_empty() || extra_values == expected_in_flight,
            "seed={seed} round={round}: unexpected records {extra:?}"
        );
        known = survivors;
        if !extra.is_empty() {
            let (segment, end) = active_segment(&partition);
            for (offset, value) in extra {
                known.push(Known {
                    offset: *offset,
                    value: value.clone(),
                    segment: segment.clone(),
                    end,
                });
            }
        }
        let status = client.offsets(TOPIC, 0).await;
        assert_eq!(
            status["log_end_offset"],
            known.len() as u64,
            "seed={seed} round={round}"
        );
        assert_eq!(
            status["high_watermark"],
            known.len() as u64,
            "seed={seed} round={round}"
        );
    }
}
