//! Consumer groups in a cluster: a controller and three brokers as real processes. The group's
//! coordinator is the leader of its `__consumer_offsets` partition (replication factor 3,
//! acks=all); after a `kill -9` of that broker, the partition's new leader becomes the
//! coordinator, loads the partition and serves the committed offsets. Processes are killed by
//! Drop guards even when the test fails.

mod common;

use std::time::{Duration, Instant};

use common::Node;

use serde_json::{json, Value};

/// Bound on every wait for the cluster to converge (a liveness bound, not a timing check).
const CONVERGENCE_MAX: Duration = Duration::from_secs(60);
const GROUP: &str = "g-cluster";

async fn call(
    http: &reqwest::Client,
    method: &str,
    url: &str,
    body: Option<Value>,
) -> Option<(u16, Value)> {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = http.request(method, url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.ok()?;
    let status = response.status().as_u16();
    Some((status, response.json().await.unwrap_or(Value::Null)))
}

/// Repeats `attempt` every 100 ms until it returns `Some`, or panics after the bound.
async fn eventually<T, F, Fut>(what: &str, mut attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(found) = attempt().await {
            return found;
        }
        assert!(started.elapsed() < CONVERGENCE_MAX, "never reached: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The coordinator's URL as broker `via` sees it, once the offsets partition has a leader.
async fn coordinator(http: &reqwest::Client, via: &str, not: Option<&str>) -> String {
    let url = format!("{via}/v1/groups/{GROUP}/coordinator");
    eventually("a coordinator", || async {
        let (status, answer) = call(http, "GET", &url, None).await?;
        let found = answer["url"]
            .as_str()
            .filter(|_| status == 200)?
            .to_string();
        let found = if found.contains("://") {
            found
        } else {
            format!("http://{found}")
        };
        (Some(found.as_str()) != not).then_some(found)
    })
    .await
}

/// Sends to the coordinator until it stops answering "not (yet) the coordinator".
async fn to_coordinator(
    http: &reqwest::Client,
    method: &str,
    url: &str,
    body: Option<Value>,
) -> (u16, Value) {
    eventually(url, || async {
        let (status, answer) = call(http, method, url, body.clone()).await?;
        let retriable = [
            "NOT_COORDINATOR",
            "COORDINATOR_LOAD_IN_PROGRESS",
            "COORDINATOR_NOT_AVAILABLE",
            "NOT_ENOUGH_REPLICAS",
        ];
        let error = answer["error"].as_str().unwrap_or("");
        (!retriable.contains(&error)).then_some((status, answer))
    })
    .await
}

#[tokio::test]
async fn a_new_coordinator_loads_the_offsets_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let controller = Node::start(
        &dir.path().join("controller"),
        &[
            "process.roles=controller".to_string(),
            "broker.session.timeout.ms=2000".to_string(),
        ],
    );
    let mut brokers: Vec<Node> = (1..=3)
        .map(|id| {
            let settings = [
                format!("broker.id={id}"),
                format!("controller.address={}", controller.url),
            ];
            Node::start(&dir.path().join(format!("broker-{id}")), &settings)
        })
        .collect();
    let metadata_url = format!("{}/controller/v1/metadata", controller.url);
    eventually("three live brokers", || async {
        let (_, metadata) = call(&http, "GET", &metadata_url, None).await?;
        let live = metadata["brokers"]
            .as_array()?
            .iter()
            .filter(|b| b["fenced"] == false)
            .count();
        (live == 3).then_some(())
    })
    .await;
    let (status, answer) = call(
        &http,
        "POST",
        &format!("{}/v1/topics", brokers[0].url),
        Some(json!({"name": "t0", "partitions": 2, "replication_factor": 3})),
    )
    .await
    .unwrap();
    assert_eq!(status, 201, "{answer}");

    let first = coordinator(&http, &brokers[0].url, None).await;
    let join =
        json!({"topics": ["t0"], "session_timeout_ms": 30000, "max_poll_interval_ms": 30000});
    let (status, joined) = to_coordinator(
        &http,
        "POST",
        &format!("{first}/v1/groups/{GROUP}/join"),
        Some(join.clone()),
    )
    .await;
    assert_eq!(status, 200, "{joined}");
    assert_eq!(joined["generation"], 1);
    let assignment = json!({ joined["member_id"].as_str().unwrap(): [{"topic": "t0", "partition": 0}, {"topic": "t0", "partition": 1}] });
    let sync = json!({"member_id": joined["member_id"], "generation": 1, "assignment": assignment});
    let (status, answer) = to_coordinator(
        &http,
        "POST",
        &format!("{first}/v1/groups/{GROUP}/sync"),
        Some(sync),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let commit = json!({"member_id": joined["member_id"], "generation": 1, "offsets": [{"topic": "t0", "partition": 0, "offset": 21}, {"topic": "t0", "partition": 1, "offset": 34}]});
    let (status, answer) = to_coordinator(
        &http,
        "POST",
        &format!("{first}/v1/groups/{GROUP}/offsets"),
        Some(commit),
    )
    .await;
    assert_eq!(status, 200, "{answer}");

    // kill -9 the coordinator; ask a survivor who coordinates now.
    let victim = brokers
        .iter()
        .position(|b| b.url == first)
        .expect("the coordinator is one of the brokers");
    brokers[victim].kill9();
    let survivor = brokers[(victim + 1) % 3].url.clone();
    let second = coordinator(&http, &survivor, Some(&first)).await;
    let (status, fetched) = to_coordinator(
        &http,
        "GET",
        &format!("{second}/v1/groups/{GROUP}/offsets"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{fetched}");
    let offsets: Vec<(u64, u64)> = fetched["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["partition"].as_u64().unwrap(),
                o["offset"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        offsets,
        [(0, 21), (1, 34)],
        "the new coordinator serves the committed offsets"
    );
    let (_, described) =
        to_coordinator(&http, "GET", &format!("{second}/v1/groups/{GROUP}"), None).await;
    assert_eq!(
        (
            described["state"].as_str(),
            described["generation"].as_u64()
        ),
        (Some("Empty"), Some(1))
    );
    let (status, rejoined) = to_coordinator(
        &http,
        "POST",
        &format!("{second}/v1/groups/{GROUP}/join"),
        Some(join),
    )
    .await;
    assert_eq!(
        (status, rejoined["generation"].as_u64()),
        (200, Some(2)),
        "{rejoined}"
    );
}
