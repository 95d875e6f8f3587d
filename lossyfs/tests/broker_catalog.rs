//! The broker's topic catalog on a lossyfs: the catalog file (write + fsync + rename + directory
//! fsync), the log directory lock (flock), partition directories, and topic deletion (rename
//! out of the way, then remove) keep their promises across losses of unsynced state.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::mount;
use tidewater_broker::storage::Record;
use tidewater_broker::topics::{TopicCatalog, TopicMeta};
use tidewater_broker::Config;
use tidewater_lossyfs::Mode;

fn config(log_dir: &Path) -> Config {
    Config {
        log_dirs: vec![log_dir.to_path_buf()],
        ..Config::default()
    }
}

fn meta(partitions: u32) -> TopicMeta {
    TopicMeta {
        partitions,
        replication_factor: 1,
        configs: BTreeMap::new(),
    }
}

fn records(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| Record {
            key: None,
            value: format!("v{i}").into_bytes(),
            timestamp_ms: 0,
        })
        .collect()
}

fn close(catalog: TopicCatalog) {
    catalog.release_dir_locks();
    drop(catalog);
}

#[tokio::test]
async fn a_created_topic_survives_a_loss_with_its_flushed_records_only() {
    let m = mount(|_| {});
    let config = config(&m.mnt);
    let catalog = TopicCatalog::open(&config).unwrap();
    catalog.create("t0", meta(2)).await.unwrap();
    let partition = catalog.partition("t0", 0).unwrap();
    partition.append(records(5), None).unwrap();
    partition.flush().unwrap();
    partition.append(records(3), None).unwrap();
    assert_eq!(partition.offsets().log_end_offset, 8);
    drop(partition);
    close(catalog);

    m.handle.lose_unsynced(Mode::Clean).unwrap();
    let catalog = TopicCatalog::open(&config).unwrap();
    let topic = catalog.get("t0").expect("the catalog write was durable");
    assert_eq!(topic.partitions.len(), 2);
    assert_eq!(
        catalog.partition("t0", 0).unwrap().offsets().log_end_offset,
        5
    );
    assert_eq!(
        catalog.partition("t0", 1).unwrap().offsets().log_end_offset,
        0
    );
    close(catalog);
}

#[tokio::test]
async fn a_deleted_topic_stays_deleted_and_a_recreated_one_starts_empty_after_a_loss() {
    let m = mount(|_| {});
    let config = config(&m.mnt);
    let catalog = TopicCatalog::open(&config).unwrap();
    catalog.create("t0", meta(1)).await.unwrap();
    let partition = catalog.partition("t0", 0).unwrap();
    partition.append(records(4), None).unwrap();
    partition.flush().unwrap();
    drop(partition);
    catalog.delete("t0").await.unwrap();
    close(catalog);

    let report = m.handle.lose_unsynced(Mode::Clean).unwrap();
    // Removing the partition directory was never made durable by a directory fsync: the
    // directory is back, but the catalog (written durably) no longer names the topic.
    assert!(report.namespace_ops > 0);
    assert!(m.view("t0-0").exists());
    let catalog = TopicCatalog::open(&config).unwrap();
    assert!(catalog.get("t0").is_none());
    catalog.create("t0", meta(1)).await.unwrap();
    assert_eq!(
        catalog.partition("t0", 0).unwrap().offsets().log_end_offset,
        0,
        "no record of the deleted topic comes back"
    );
    close(catalog);
}
