//! The library entry point `tidewater_broker::run`, as an embedding test harness uses it: start
//! on a port-0 listener, serve, stop through the shutdown future, and find the data again after
//! a second start on the same log dir.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use tidewater_broker::Config;

async fn start(
    log_dir: &std::path::Path,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let settings = BTreeMap::from([("log.dirs".to_string(), log_dir.display().to_string())]);
    let config = Config::from_settings(&settings).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.await;
        };
        tidewater_broker::run(listener, config, shutdown)
            .await
            .expect("broker run");
    });
    (url, stop, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_until_the_shutdown_future_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();

    let (url, stop, server) = start(dir.path()).await;
    let created = http
        .post(format!("{url}/v1/topics"))
        .body(r#"{"name": "e"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let produced: Value = http
        .post(format!("{url}/v1/topics/e/partitions/0/records"))
        .body(json!({"acks": "all", "records": [{"value": "embedded"}]}).to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(produced["offsets"], json!([0]));
    // A long poll in flight must not hold up the shutdown: it ends when shutdown starts.
    let poll = tokio::spawn({
        let http = http.clone();
        let url = url.clone();
        async move {
            http.get(format!(
                "{url}/v1/topics/e/partitions/0/records?offset=1&max_wait_ms=30000"
            ))
            .send()
            .await
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    stop.send(()).unwrap();
    server.await.unwrap();
    let polled = poll.await.unwrap().unwrap();
    assert_eq!(polled.status().as_u16(), 200);

    let (url, stop, server) = start(dir.path()).await;
    let fetched: Value = http
        .get(format!("{url}/v1/topics/e/partitions/0/records?offset=0"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(fetched["records"][0]["value"], "embedded");
    stop.send(()).unwrap();
    server.await.unwrap();
}
