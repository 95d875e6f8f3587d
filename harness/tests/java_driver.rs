//! The Java client's driver against a real Kafka (4.1.1: one KRaft controller and one broker
//! on loopback 127.248.1.x, no root): the JSON-lines protocol and how the client's outcomes
//! map to ok / fail / info. Each expectation is a specific answer, checked against what a
//! second, read_uncommitted driver finds in the log.
//!
//! Skipped with a message when Java or Kafka is not available, unless
//! `TIDEWATER_REQUIRE_KAFKA` is set.

mod kafka_support;

use kafka_support::{kafka_release, KafkaCluster};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tidewater::kafka::driver::Driver;
use tidewater_workloads::client::{ErrorCause, Outcome};
use tidewater_workloads::history::MicroOp;
use tidewater_workloads::java::{
    Answer, ClientConfigs, JavaClientSettings, JavaDriver, JavaQueueClient,
};
use tidewater_workloads::kafka_admin::KafkaAdmin;
use tidewater_workloads::queue::QueueClient;
use tidewater_workloads::txn::{Ending, TxnClient, TxnLimits, TxnOutcome};

/// A transaction's bounds without retries of its end: polls wait 500 ms.
const ONE_END: TxnLimits = TxnLimits {
    poll_max_wait_ms: 500,
    end_attempts_max: 1,
};

async fn start(
    driver: &Driver,
    bootstrap: &str,
    workload: &str,
    dir: &std::path::Path,
    name: &str,
) -> JavaQueueClient {
    let configs = ClientConfigs::for_run(workload, "all", true);
    start_with(
        driver,
        bootstrap,
        configs,
        workload == "txn",
        &dir.join(format!("{name}.log")),
    )
    .await
}

/// A driver with these client configs, its log at `log`.
async fn start_with(
    driver: &Driver,
    bootstrap: &str,
    configs: ClientConfigs,
    transactional: bool,
    log: &std::path::Path,
) -> JavaQueueClient {
    let settings = JavaClientSettings {
        bootstrap: vec![bootstrap.to_string()],
        configs,
    };
    let process = JavaDriver::start(&driver.argv(), &settings, log)
        .await
        .unwrap_or_else(|e| panic!("{e}: {}", std::fs::read_to_string(log).unwrap_or_default()));
    JavaQueueClient::new(Arc::new(process), transactional)
}

/// A one-broker Kafka on loopback `127.A.B.x` with topic `topic` (2 partitions), and the
/// driver compiled against it (in `cache`, which must outlive the driver's use).
async fn kafka_with_topic(
    release: tidewater::kafka::Release,
    loopback: [u8; 2],
    topic: &str,
    cache: &std::path::Path,
) -> (Driver, KafkaCluster, String) {
    let driver = Driver::prepare(&release, cache).expect("the driver compiles");
    let cluster = KafkaCluster::start(release, loopback, 1, &[]);
    let bootstrap = cluster.brokers[0].clone();
    let admin = KafkaAdmin::new(vec![bootstrap.clone()], Duration::from_secs(10));
    admin
        .create_topic(topic, 2, 1, &BTreeMap::new())
        .await
        .unwrap_or_else(|e| panic!("topic {topic}: {e:?}"));
    (driver, cluster, bootstrap)
}

fn send(key: &str, value: i64) -> MicroOp {
    MicroOp::Send {
        key: key.into(),
        offset: None,
        value,
    }
}

/// Every value `client` reads from `key`, from offset 0 until a poll brings nothing new.
async fn read_all(client: &JavaQueueClient, key: &str) -> Vec<(u64, i64)> {
    let mut out = Vec::new();
    let mut position = 0;
    for _ in 0..20 {
        match client.fetch(key, position, 500).await {
            Outcome::Ok(f) => {
                out.extend(f.records);
                if f.next_offset == position && f.high_watermark.is_some_and(|hw| hw <= position) {
                    break;
                }
                position = f.next_offset;
            }
            other => panic!("poll of {key}: {other:?}"),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_maps_the_java_clients_outcomes() {
    let Some(release) = kafka_release("java_driver") else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let (driver, cluster, bootstrap) =
        kafka_with_topic(release, [248, 1], "jd", cache.path()).await;
    let admin = KafkaAdmin::new(vec![bootstrap.clone()], Duration::from_secs(10));
    let logs = tempfile::tempdir().unwrap();
    let committed = start(&driver, &bootstrap, "txn", logs.path(), "committed").await;
    let uncommitted = start(&driver, &bootstrap, "queue", logs.path(), "uncommitted").await;

    // Plain sends: the offsets the client reported, in order.
    for (i, v) in [10, 11].into_iter().enumerate() {
        let sent = match committed.send("jd/0", v, "all").await {
            Outcome::Ok(s) => s,
            other => panic!("send {v}: {other:?}"),
        };
        assert_eq!(sent.offset, Some(i as u64));
    }
    // A partition the topic does not have: refused by the client before any request, so
    // certainly not written (fail), under the client's exception name.
    match committed.send("jd/9", 12, "all").await {
        Outcome::Fail(e) => assert!(
            matches!(&e.cause, ErrorCause::Broker { name, .. } if name.ends_with("Exception")),
            "{e:?}"
        ),
        other => panic!("send to jd/9: {other:?}"),
    }

    // A poll past the log end: the queue workload's consumer does not reset itself
    // (auto.offset.reset=none), so the poll fails with Kafka's error name, which the workload
    // resets on in the history's sight.
    // (The first polls may end before the fetch is answered: empty, the position kept.)
    let mut past_end = None;
    for _ in 0..10 {
        match uncommitted.fetch("jd/0", 1_000, 500).await {
            Outcome::Ok(f) if f.records.is_empty() && f.next_offset == 1_000 => continue,
            other => {
                past_end = Some(other);
                break;
            }
        }
    }
    match past_end {
        Some(Outcome::Fail(e)) => assert!(
            matches!(&e.cause, ErrorCause::Broker { name, .. } if name == "OFFSET_OUT_OF_RANGE"),
            "{e:?}"
        ),
        other => panic!("a poll past the end: {other:?}"),
    }

    // A committed transaction over two partitions with a poll: ok, each send's offset.
    let positions = BTreeMap::from([("jd/0".to_string(), 0)]);
    let micro = [
        send("jd/0", 20),
        MicroOp::Poll(BTreeMap::new()),
        send("jd/1", 21),
    ];
    let ok = committed
        .txn("w0", &micro, &positions, Ending::Commit, ONE_END)
        .await
        .outcome;
    let TxnOutcome::Committed {
        micro: done,
        positions: after,
    } = ok
    else {
        panic!("txn: {ok:?}");
    };
    assert_eq!(done.len(), 3);
    assert_eq!(
        done[0],
        MicroOp::Send {
            key: "jd/0".into(),
            offset: Some(2),
            value: 20
        }
    );
    assert_eq!(
        done[2],
        MicroOp::Send {
            key: "jd/1".into(),
            offset: Some(0),
            value: 21
        }
    );
    // The poll inside the transaction read the two plain sends (its own send is not yet
    // committed), and moved the position past them.
    assert_eq!(
        done[1],
        MicroOp::Poll(BTreeMap::from([("jd/0".into(), vec![(0, 10), (1, 11)])]))
    );
    assert_eq!(after["jd/0"], 2);

    // A deliberate abort: fail, error "aborted"; the records reach the log (a
    // read_uncommitted consumer sees them) but no read_committed consumer does.
    let aborted = committed
        .txn(
            "w0",
            &[send("jd/1", 30), send("jd/1", 31)],
            &BTreeMap::new(),
            Ending::Abort,
            ONE_END,
        )
        .await
        .outcome;
    assert_eq!(
        aborted,
        TxnOutcome::Aborted {
            error: "aborted".into()
        }
    );
    let seen_committed: Vec<i64> = read_all(&committed, "jd/1")
        .await
        .iter()
        .map(|r| r.1)
        .collect();
    let seen_uncommitted: Vec<i64> = read_all(&uncommitted, "jd/1")
        .await
        .iter()
        .map(|r| r.1)
        .collect();
    assert_eq!(seen_committed, vec![21]);
    assert_eq!(seen_uncommitted, vec![21, 30, 31]);

    // Fencing: another producer of the same transactional.id (another driver's w0) commits;
    // the first one's next transaction is refused (fail: it never committed) and its value
    // is never read; the one after that, with a fresh producer, commits again.
    let zombie_killer = start(&driver, &bootstrap, "txn", logs.path(), "second").await;
    let second = zombie_killer
        .txn(
            "w0",
            &[send("jd/0", 40)],
            &BTreeMap::new(),
            Ending::Commit,
            ONE_END,
        )
        .await
        .outcome;
    assert!(matches!(second, TxnOutcome::Committed { .. }), "{second:?}");
    let fenced = committed
        .txn(
            "w0",
            &[send("jd/0", 41)],
            &BTreeMap::new(),
            Ending::Commit,
            ONE_END,
        )
        .await
        .outcome;
    let TxnOutcome::Aborted { error } = &fenced else {
        panic!("a fenced producer's transaction: {fenced:?}");
    };
    eprintln!("fenced producer's error: {error}");
    let again = committed
        .txn(
            "w0",
            &[send("jd/0", 42)],
            &BTreeMap::new(),
            Ending::Commit,
            ONE_END,
        )
        .await
        .outcome;
    assert!(matches!(again, TxnOutcome::Committed { .. }), "{again:?}");
    let values: Vec<i64> = read_all(&committed, "jd/0")
        .await
        .iter()
        .map(|r| r.1)
        .collect();
    assert_eq!(values, vec![10, 11, 20, 40, 42]);

    // A zombie: after its first send a successor of the same transactional.id is initialised;
    // the old producer's second send (to the partition it already added) and its commit are
    // refused, so the transaction is a certain fail and none of its values is ever read. The
    // successor is w0's producer from then on and commits.
    let zombie = committed
        .txn(
            "w0",
            &[send("jd/1", 50), send("jd/1", 51)],
            &BTreeMap::new(),
            Ending::Zombie,
            ONE_END,
        )
        .await
        .outcome;
    assert_eq!(
        zombie,
        TxnOutcome::Aborted {
            error: "FencedBySuccessor".into()
        }
    );
    let successor = committed
        .txn(
            "w0",
            &[send("jd/1", 52)],
            &BTreeMap::new(),
            Ending::Commit,
            ONE_END,
        )
        .await
        .outcome;
    assert!(
        matches!(successor, TxnOutcome::Committed { .. }),
        "{successor:?}"
    );
    let values: Vec<i64> = read_all(&committed, "jd/1")
        .await
        .iter()
        .map(|r| r.1)
        .collect();
    assert_eq!(values, vec![21, 52]);

    // --txn-retry-commit: the commit's first call times out while the only broker (the
    // transaction coordinator) is paused; the second call, on the same producer, returns after
    // the resume, so the transaction is ok and its calls are in the answer; the same producer
    // then commits the next transaction with one call.
    admin
        .create_topic("jr", 1, 1, &BTreeMap::new())
        .await
        .expect("topic jr");
    let retrying = TxnLimits {
        poll_max_wait_ms: 2_000,
        end_attempts_max: 3,
    };
    let broker = cluster.process_group("n1");
    let pauser = tokio::spawn(async move {
        // After the send (acknowledged within ms), during the 2 s poll of the empty jr/0; the
        // commit's first call then waits max.block.ms (5 s) for a coordinator that is paused
        // until 7.4 s, shorter than the 9 s broker session timeout.
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        // SAFETY: kill(2) of the broker's process group, which the cluster made and owns.
        unsafe { libc::kill(-broker, libc::SIGSTOP) };
        tokio::time::sleep(Duration::from_millis(6_400)).await;
        unsafe { libc::kill(-broker, libc::SIGCONT) };
    });
    let retried = committed
        .txn(
            "w0",
            &[send("jd/1", 60), MicroOp::Poll(BTreeMap::new())],
            &BTreeMap::from([("jr/0".to_string(), 0)]),
            Ending::Commit,
            retrying,
        )
        .await;
    pauser.await.unwrap();
    assert!(
        matches!(retried.outcome, TxnOutcome::Committed { .. }),
        "{retried:?}"
    );
    let end = retried.end.expect("the calls of a retried commit");
    assert_eq!(
        (end.call.as_str(), end.attempts),
        ("commitTransaction", 2),
        "{end:?}"
    );
    assert_eq!(end.errors, vec!["TimeoutException".to_string()]);
    let next = committed
        .txn(
            "w0",
            &[send("jd/1", 61)],
            &BTreeMap::new(),
            Ending::Commit,
            retrying,
        )
        .await;
    assert!(
        matches!(next.outcome, TxnOutcome::Committed { .. }),
        "{next:?}"
    );
    assert_eq!(next.end.map(|e| (e.attempts, e.errors.len())), Some((1, 0)));
    let values: Vec<i64> = read_all(&committed, "jd/1")
        .await
        .iter()
        .map(|r| r.1)
        .collect();
    assert_eq!(values, vec![21, 52, 60, 61]);

    // The protocol: an unknown op is a fail of the driver's own; a driver that is gone
    // answers info (the request may have reached it).
    let bad = committed.driver().call("w5", "frobnicate", json!({})).await;
    assert!(
        matches!(&bad, Answer::Fail { error, .. } if error == "BadRequest"),
        "{bad:?}"
    );
    committed.driver().shutdown(Duration::from_secs(10)).await;
    let gone = committed.driver().call("w0", "close", json!({})).await;
    assert!(
        matches!(&gone, Answer::Info { error, .. } if error == "driver-exited"),
        "{gone:?}"
    );
    uncommitted.driver().shutdown(Duration::from_secs(10)).await;
    zombie_killer
        .driver()
        .shutdown(Duration::from_secs(10))
        .await;
    drop(cluster);
}

/// A commit the coordinator refuses is a certain fail. The transaction outlives its
/// `transaction.timeout.ms` (1 s) inside a 15 s poll, the coordinator aborts it (Kafka 10 s
/// check), and the commit that follows is answered INVALID_TXN_STATE, the client's fatal
/// InvalidTxnStateException: nothing was committed, so the answer is fail, not info. The
/// value is in the log behind an abort marker (read_uncommitted reads it, read_committed does
/// not), and the worker's next producer commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_the_coordinator_refuses_is_a_certain_fail() {
    let Some(release) = kafka_release("java_driver") else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let (driver, cluster, bootstrap) =
        kafka_with_topic(release, [248, 6], "jt", cache.path()).await;
    let logs = tempfile::tempdir().unwrap();
    let mut configs = ClientConfigs::for_run("txn", "all", true);
    configs
        .producer
        .insert("transaction.timeout.ms".into(), "1000".into());
    let log = logs.path().join("short-timeout.log");
    let committed = start_with(&driver, &bootstrap, configs, true, &log).await;
    let uncommitted = start(&driver, &bootstrap, "queue", logs.path(), "uncommitted").await;
    let long_poll = TxnLimits {
        poll_max_wait_ms: 15_000,
        end_attempts_max: 1,
    };
    let refused = committed
        .txn(
            "w0",
            &[send("jt/0", 70), MicroOp::Poll(BTreeMap::new())],
            &BTreeMap::from([("jt/1".to_string(), 0)]),
            Ending::Commit,
            long_poll,
        )
        .await
        .outcome;
    assert_eq!(
        refused,
        TxnOutcome::Aborted {
            error: "InvalidTxnStateException".into()
        }
    );
    let next = committed
        .txn(
            "w0",
            &[send("jt/0", 71)],
            &BTreeMap::new(),
            Ending::Commit,
            ONE_END,
        )
        .await
        .outcome;
    assert!(matches!(next, TxnOutcome::Committed { .. }), "{next:?}");
    let values = |records: Vec<(u64, i64)>| records.iter().map(|r| r.1).collect::<Vec<i64>>();
    assert_eq!(values(read_all(&committed, "jt/0").await), vec![71]);
    assert_eq!(values(read_all(&uncommitted, "jt/0").await), vec![70, 71]);
    // The history keeps the exception's name; the driver's log has its message too.
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged
            .lines()
            .any(|l| l.starts_with("tidewater-driver: w0 txn fail InvalidTxnStateException: ")),
        "{logged}"
    );
    committed.driver().shutdown(Duration::from_secs(10)).await;
    uncommitted.driver().shutdown(Duration::from_secs(10)).await;
    drop(cluster);
}
