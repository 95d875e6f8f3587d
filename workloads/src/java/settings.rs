//! The Java client's settings: the producer and consumer configs the driver gets, in Kafka's
//! names, chosen here once so that the run records exactly what the client ran with.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The `transactional.id` of logical client `w3` is this prefix followed by `w3`.
pub const TRANSACTIONAL_ID_PREFIX: &str = "tidewater-";

/// `delivery.timeout.ms`: the producer's bound on a send, its internal retries included.
/// Kafka's default is 120 s; a test's faults last seconds and a worker waits for its send.
pub const DELIVERY_TIMEOUT_MS: u64 = 8_000;

/// `request.timeout.ms` of producer and consumer (Kafka: 30 s).
pub const REQUEST_TIMEOUT_MS: u64 = 3_000;

// Kafka refuses delivery.timeout.ms below linger.ms (0 here) + request.timeout.ms.
const _: () = assert!(DELIVERY_TIMEOUT_MS >= REQUEST_TIMEOUT_MS);

/// `max.block.ms`: how long `send`, `initTransactions` and `commitTransaction` may block on
/// metadata or the coordinator (Kafka: 60 s).
pub const MAX_BLOCK_MS: u64 = 5_000;

/// `transaction.timeout.ms`: after this the coordinator aborts an open transaction whose
/// producer went silent, so a zombie holds the last stable offset back for at most this long
/// (Kafka: 60 s).
pub const TRANSACTION_TIMEOUT_MS: u64 = 10_000;

/// The producer and consumer configs of a run's Java client, in Kafka's names: what the
/// driver's clients are made with, stored in `config.json` (`java_client`) and handed to the
/// checker (`enable.idempotence`, `transactional.id`, `isolation.level`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClientConfigs {
    /// Producer configs. With transactions, `transactional.id` reads `tidewater-w*`: each
    /// worker `wN` has its own, `tidewater-wN`; the plain producer has none.
    pub producer: BTreeMap<String, String>,
    /// Consumer configs.
    pub consumer: BTreeMap<String, String>,
}

impl ClientConfigs {
    /// The configs of a run of `workload` (`txn`, or `queue` with `idempotence` on or off).
    /// Idempotence is always spelled out (the client's default is on from Kafka 3.0);
    /// retries are the client's (`retries` = 2147483647, bounded by `delivery.timeout.ms`).
    /// The transactional workload's producers are idempotent and its consumers read
    /// committed; the queue workload's consumers read as Kafka's default, uncommitted.
    pub fn for_run(workload: &str, acks: &str, idempotence: bool) -> ClientConfigs {
        let txn = workload == "txn";
        let s = |pairs: &[(&str, String)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect()
        };
        let mut producer = s(&[
            ("acks", acks.to_string()),
            ("enable.idempotence", (idempotence || txn).to_string()),
            ("retries", i32::MAX.to_string()),
            ("delivery.timeout.ms", DELIVERY_TIMEOUT_MS.to_string()),
            ("request.timeout.ms", REQUEST_TIMEOUT_MS.to_string()),
            ("max.block.ms", MAX_BLOCK_MS.to_string()),
            ("linger.ms", "0".into()),
            ("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS.to_string()),
        ]);
        if txn {
            producer.insert(
                "transactional.id".into(),
                format!("{TRANSACTIONAL_ID_PREFIX}w*"),
            );
        }
        let isolation = if txn {
            "read_committed"
        } else {
            "read_uncommitted"
        };
        // The queue workload's consumer does not reset itself: an OFFSET_OUT_OF_RANGE reaches
        // the history as a failed poll and the workload resets the position, as it does over
        // the other clients, so the checker knows why a later poll goes back (a reset inside
        // the client read the log again from its start unseen: nonmonotonic-poll and
        // poll-skip under leader-isolation, on Kafka 4.1.1 and the companion broker alike).
        // The txn workload has no reset of its own yet and keeps the client's.
        let reset = if txn { "earliest" } else { "none" };
        let consumer = s(&[
            ("isolation.level", isolation.to_string()),
            ("auto.offset.reset", reset.into()),
            ("request.timeout.ms", REQUEST_TIMEOUT_MS.to_string()),
            ("default.api.timeout.ms", MAX_BLOCK_MS.to_string()),
            ("fetch.max.wait.ms", "100".into()),
        ]);
        ClientConfigs { producer, consumer }
    }

    /// Producer and consumer configs in one map, for the checker's settings.
    pub fn merged(&self) -> BTreeMap<String, String> {
        let mut all = self.consumer.clone();
        all.extend(self.producer.clone());
        all
    }
}

/// What the driver starts with: where the brokers are and the clients' configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaClientSettings {
    /// The brokers' Kafka listeners, `HOST:PORT` each.
    pub bootstrap: Vec<String>,
    /// The clients' configs.
    pub configs: ClientConfigs,
}

impl JavaClientSettings {
    /// The settings the driver's first argument carries.
    pub fn to_json(&self) -> Value {
        json!({
            "bootstrap": self.bootstrap.join(","),
            "producer": self.configs.producer,
            "consumer": self.configs.consumer,
            "transactional_id_prefix": TRANSACTIONAL_ID_PREFIX,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotence_is_always_spelled_out_and_transactions_read_committed() {
        let queue = ClientConfigs::for_run("queue", "all", false);
        assert_eq!(queue.producer["enable.idempotence"], "false");
        assert_eq!(queue.producer["acks"], "all");
        assert!(!queue.producer.contains_key("transactional.id"));
        assert_eq!(queue.consumer["isolation.level"], "read_uncommitted");
        let txn = ClientConfigs::for_run("txn", "all", false);
        assert_eq!(txn.producer["enable.idempotence"], "true");
        assert_eq!(txn.merged()["transactional.id"], "tidewater-w*");
        assert_eq!(txn.merged()["isolation.level"], "read_committed");
    }
}
