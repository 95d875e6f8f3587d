//! Consumer groups against the real binary: two members rebalance over HTTP, commit offsets,
//! the broker is killed with SIGKILL and restarted on its log dir, and the committed offsets
//! and the generation count come back from `__consumer_offsets`.

mod common;

use std::collections::BTreeMap;

use common::{Broker, Client};
use serde_json::{json, Value};
use tidewater_broker::group::assignor;

const GROUP: &str = "g0";

fn join_body(member_id: Option<&str>) -> Value {
    json!({
        "member_id": member_id,
        "client_id": "consumer",
        "topics": ["t0"],
        "assignors": ["range", "roundrobin"],
        "session_timeout_ms": 30000,
        "max_poll_interval_ms": 30000
    })
}

async fn join(client: &Client, member_id: Option<&str>) -> Value {
    let (status, answer) = client
        .post(&format!("/v1/groups/{GROUP}/join"), &join_body(member_id))
        .await;
    assert_eq!(status, 200, "join: {answer}");
    answer
}

/// The leader's sync: range over the members its join answer lists.
async fn lead_sync(client: &Client, joined: &Value) -> Value {
    let subscriptions: BTreeMap<String, Vec<String>> = joined["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let topics = serde_json::from_value(m["topics"].clone()).unwrap();
            (m["member_id"].as_str().unwrap().to_string(), topics)
        })
        .collect();
    let counts: BTreeMap<String, u32> =
        serde_json::from_value(joined["partition_counts"].clone()).unwrap();
    let assignment = assignor::range(&subscriptions, &counts);
    let body = json!({
        "member_id": joined["member_id"],
        "generation": joined["generation"],
        "assignment": assignment,
    });
    let (status, answer) = client
        .post(&format!("/v1/groups/{GROUP}/sync"), &body)
        .await;
    assert_eq!(status, 200, "leader sync: {answer}");
    answer
}

async fn sync(client: &Client, joined: &Value) -> Value {
    let body = json!({"member_id": joined["member_id"], "generation": joined["generation"]});
    let (status, answer) = client
        .post(&format!("/v1/groups/{GROUP}/sync"), &body)
        .await;
    assert_eq!(status, 200, "sync: {answer}");
    answer
}

async fn commit(client: &Client, joined: &Value, generation: u64, offsets: Value) -> (u16, Value) {
    let body = json!({
        "member_id": joined["member_id"],
        "generation": generation,
        "offsets": offsets,
    });
    client
        .post(&format!("/v1/groups/{GROUP}/offsets"), &body)
        .await
}

/// `topic/partition` -> committed offset.
async fn committed(client: &Client) -> BTreeMap<String, u64> {
    let (status, answer) = client.get(&format!("/v1/groups/{GROUP}/offsets")).await;
    assert_eq!(status, 200, "fetch offsets: {answer}");
    answer["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let key = format!("{}/{}", o["topic"].as_str().unwrap(), o["partition"]);
            (key, o["offset"].as_u64().unwrap())
        })
        .collect()
}

fn owned(sync_answer: &Value) -> Vec<u64> {
    sync_answer["assignment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tp| tp["partition"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn committed_offsets_survive_kill_9_of_the_coordinator() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("broker");
    let mut broker = Broker::start(&log_dir, &[]);
    let client = Client::new(&broker.url);
    client.create_topic("t0", 4, json!({})).await;

    // a joins alone: generation 1, leader, all four partitions.
    let a1 = join(&client, None).await;
    assert_eq!(a1["generation"], 1);
    assert_eq!(a1["leader_id"], a1["member_id"]);
    let a_id = a1["member_id"].as_str().unwrap().to_string();
    assert_eq!(owned(&lead_sync(&client, &a1).await), [0, 1, 2, 3]);

    // b joins; its join waits until a rejoins, which a learns from its heartbeat.
    let b_join = {
        let client = Client::new(&broker.url);
        tokio::spawn(async move { join(&client, None).await })
    };
    let heartbeat = json!({"member_id": a_id, "generation": 1, "polled": true});
    let rebalancing = loop {
        let (status, answer) = client
            .post(&format!("/v1/groups/{GROUP}/heartbeat"), &heartbeat)
            .await;
        if status != 200 {
            break answer;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(rebalancing["error"], "REBALANCE_IN_PROGRESS");
    // The revoking member may still commit in its generation (Kafka's onPartitionsRevoked).
    let (status, answer) = commit(
        &client,
        &a1,
        1,
        json!([{"topic": "t0", "partition": 3, "offset": 5}]),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let a2 = join(&client, Some(&a_id)).await;
    let b2 = b_join.await.unwrap();
    assert_eq!(
        (a2["generation"].as_u64(), b2["generation"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(a2["leader_id"], a_id, "the leader stays when it rejoins");
    assert_eq!(a2["members"].as_array().unwrap().len(), 2);
    // b's sync waits for the leader's assignment.
    let b_sync = {
        let client = Client::new(&broker.url);
        let b2 = b2.clone();
        tokio::spawn(async move { sync(&client, &b2).await })
    };
    assert_eq!(owned(&lead_sync(&client, &a2).await), [0, 1]);
    assert_eq!(owned(&b_sync.await.unwrap()), [2, 3]);

    // Commits: the old generation is refused, the current one accepted.
    let (status, answer) = commit(
        &client,
        &a1,
        1,
        json!([{"topic": "t0", "partition": 0, "offset": 99}]),
    )
    .await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (409, Some("ILLEGAL_GENERATION"))
    );
    let (status, answer) = commit(
        &client,
        &json!({"member_id": "stranger"}),
        2,
        json!([{"topic": "t0", "partition": 0, "offset": 99}]),
    )
    .await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (409, Some("UNKNOWN_MEMBER_ID"))
    );
    let (status, answer) = commit(&client, &a2, 2, json!([{"topic": "t0", "partition": 0, "offset": 7}, {"topic": "t0", "partition": 1, "offset": 11}])).await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = commit(&client, &b2, 2, json!([{"topic": "t0", "partition": 2, "offset": 13}, {"topic": "t0", "partition": 3, "offset": 17}])).await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = commit(
        &client,
        &b2,
        2,
        json!([{"topic": "t0", "partition": 2, "offset": -1}]),
    )
    .await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (416, Some("OFFSET_OUT_OF_RANGE"))
    );
    let expected: BTreeMap<String, u64> = [("t0/0", 7), ("t0/1", 11), ("t0/2", 13), ("t0/3", 17)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    assert_eq!(committed(&client).await, expected);

    let (status, described) = client.get(&format!("/v1/groups/{GROUP}")).await;
    assert_eq!(status, 200);
    assert_eq!(described["state"], "Stable");
    assert_eq!(described["members"].as_array().unwrap().len(), 2);
    let (_, listed) = client.get("/v1/groups").await;
    assert_eq!(
        listed["groups"],
        json!([{"group_id": GROUP, "state": "Stable"}])
    );
    let (_, coordinator) = client.get(&format!("/v1/groups/{GROUP}/coordinator")).await;
    assert_eq!(coordinator["url"], broker.url.as_str());

    // The internal topic keeps every record: it has no compaction, so it must not expire.
    let (status, topic) = client.get("/v1/topics/__consumer_offsets").await;
    assert_eq!(status, 200, "{topic}");
    assert_eq!(topic["configs"]["retention.ms"], "-1", "{topic}");

    // kill -9 and restart on the same log dir.
    broker.kill();
    let broker = Broker::start(&log_dir, &[]);
    let client = Client::new(&broker.url);
    assert_eq!(
        committed(&client).await,
        expected,
        "offsets survive kill -9"
    );
    let (_, described) = client.get(&format!("/v1/groups/{GROUP}")).await;
    assert_eq!(
        (
            described["state"].as_str(),
            described["generation"].as_u64()
        ),
        (Some("Empty"), Some(2))
    );
    // The members are gone with the old process; generations carry on from the stored one.
    let (status, answer) = client
        .post(&format!("/v1/groups/{GROUP}/heartbeat"), &heartbeat)
        .await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (409, Some("UNKNOWN_MEMBER_ID"))
    );
    let c = join(&client, None).await;
    assert_eq!(c["generation"], 3);
    assert_ne!(
        c["member_id"],
        a_id.as_str(),
        "member ids differ across incarnations"
    );
}

#[tokio::test]
async fn bad_group_requests_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("broker"), &[]);
    let client = Client::new(&broker.url);
    let mut body = join_body(None);
    body["session_timeout_ms"] = json!(1);
    let (status, answer) = client.post("/v1/groups/g/join", &body).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("INVALID_SESSION_TIMEOUT"))
    );
    let (status, answer) = client
        .call("POST", "/v1/groups/g/join", Some("{not json"))
        .await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("INVALID_REQUEST"))
    );
    let (status, answer) = client
        .post(
            "/v1/groups/g/heartbeat",
            &json!({"member_id": "x", "generation": 1}),
        )
        .await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (409, Some("UNKNOWN_MEMBER_ID"))
    );
    // A client outside the group commits with generation -1 while the group is Empty (to a
    // partition that exists: others are UNKNOWN_TOPIC_OR_PARTITION, tests/api_refusals.rs).
    client.create_topic("t0", 1, json!({})).await;
    let offsets =
        json!({"offsets": [{"topic": "t0", "partition": 0, "offset": 4, "metadata": "m"}]});
    let (status, answer) = client.post("/v1/groups/g/offsets", &offsets).await;
    assert_eq!(status, 200, "{answer}");
    let (_, fetched) = client.get("/v1/groups/g/offsets").await;
    assert_eq!(fetched["offsets"][0]["offset"], 4);
    assert_eq!(fetched["offsets"][0]["metadata"], "m");
    let (_, described) = client.get("/v1/groups/never-seen").await;
    assert_eq!(described["state"], "Dead");
}
