//! The unclean-election plan against real Apache Kafka (issue 24, item 5; root only, and
//! skipped with a message when Java or Kafka cannot be had, a failure under
//! `TIDEWATER_REQUIRE_KAFKA=1`):
//!
//! `tidewater run --system kafka --client java --acks 1 --plan unclean-election` with
//! `unclean.leader.election.enable=true` loses acknowledged writes: it exits 1, prints "DATA
//! LOST: N of M acknowledged writes" with N and M counted here straight from history.jsonl,
//! and keeps the promise (acks=1 and unclean election both allow the loss). The writes go
//! through Kafka's own Java client, the only client of the harness that sends acks=1 to
//! Kafka (rskafka always asks for acks=-1; docs/real-kafka.md). Kafka's controller also
//! elects uncleanly on a timer (`unclean.leader.election.interval.ms`, 5 minutes by default);
//! the run sets it to 1 s so that the election cannot fall outside the plan.
//!
//! LONG: Kafka's four JVMs and the client's driver JVM come up (20 s to minutes on two shared
//! cores), then a 45-second main phase. Subnet 10.242.2.0/24.

mod run_support;

use run_support::{
    acked_absent_from_final_reads, can_run, kafka_available, latest, run_into, KeptStore,
};

const SUBNET: &str = "10.242.2.0/24";

#[test]
fn unclean_election_with_acks_1_on_kafka_loses_acknowledged_writes_counted_from_the_history() {
    if !can_run("kafka_unclean_election") || !kafka_available("kafka_unclean_election") {
        return;
    }
    let store = KeptStore::new("kafka_unclean_election");
    let (outcome, results) = run_into(
        store.path(),
        SUBNET,
        &[
            "--system",
            "kafka",
            "--client",
            "java",
            "--plan",
            "unclean-election",
            "--time-limit",
            "45",
            "--seed",
            "5",
            "--rate",
            "100",
            "--acks",
            "1",
            "--set",
            "unclean.leader.election.enable=true",
            "--set",
            "unclean.leader.election.interval.ms=1000",
        ],
    );
    let run_dir = latest(store.path());
    let keep = |what: &str| store.explain(&outcome, what);
    // Data was lost: a fact, so exit 1, whatever the settings allow.
    assert_eq!(outcome.code, 1, "{}", keep("exit"));
    let (acked, absent) = acked_absent_from_final_reads(&run_dir);
    assert!(absent > 0, "{}", keep("no acknowledged write lost"));
    assert_eq!(
        results["stats"]["lost_acknowledged"]["total"],
        absent,
        "{}",
        keep("the stored lost count is the history's")
    );
    let headline = format!("DATA LOST: {absent} of {acked} acknowledged writes");
    assert!(outcome.stdout.contains(&headline), "{}", keep(&headline));
    assert_eq!(results["valid"], false);
    assert_eq!(results["promise"], "kept", "{}", results["promise_reason"]);
    assert!(
        results["promise_reason"]
            .as_str()
            .unwrap()
            .contains("unclean.leader.election.enable=true"),
        "{}",
        results["promise_reason"]
    );
    let lost = &results["anomalies"]["lost-write"];
    assert_eq!(lost["breaks_promise"], false, "{lost}");
    assert_eq!(
        results["stats"]["lost_writes_by_acks"]["1"], absent,
        "every lost write was sent with acks=1: {}",
        results["stats"]
    );
    for example in lost["examples"].as_array().unwrap() {
        assert!(example["offset"].is_u64(), "{example}");
        assert_eq!(example["acks"], "1", "{example}");
    }
    let config = run_support::json(&run_dir.join("config.json"));
    assert_eq!(
        config["system"],
        format!("kafka:{}", tidewater::kafka::DEFAULT_VERSION)
    );
    assert_eq!(
        config["java_client"]["producer"]["acks"], "1",
        "the producer the Java client ran with: {}",
        config["java_client"]
    );
    let properties = std::fs::read_to_string(run_dir.join("nodes/c1/server.properties")).unwrap();
    assert!(
        properties.contains("unclean.leader.election.interval.ms=1000\n"),
        "the interval reaches the controller:\n{properties}"
    );
    eprintln!("kafka unclean election: lost {absent} of {acked} acknowledged");
}
