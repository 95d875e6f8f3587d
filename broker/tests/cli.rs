//! The binary's command line: help, settings from a file and `--set`, start-up failures that
//! name the offending setting or role, and the log-dir lock.

mod common;

use common::{run_to_exit, Broker, Client};

#[test]
fn help_lists_the_options() {
    let (code, stdout, _) = run_to_exit(&["--help"]);
    assert_eq!(code, Some(0));
    for option in ["--config", "--set", "--role"] {
        assert!(
            stdout.contains(option),
            "{option} missing from --help:\n{stdout}"
        );
    }
}

#[test]
fn unknown_and_invalid_settings_fail_naming_the_setting() {
    let (code, _, stderr) = run_to_exit(&["--set", "log.segmnet.bytes=10"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("log.segmnet.bytes"), "{stderr}");
    let (code, _, stderr) = run_to_exit(&["--set", "min.insync.replicas=two"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("min.insync.replicas") && stderr.contains("two"),
        "{stderr}"
    );
    let (code, _, stderr) = run_to_exit(&["--set", "novalue"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("novalue"), "{stderr}");
    let (code, _, stderr) = run_to_exit(&["--config", "/nonexistent/broker.toml"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("/nonexistent/broker.toml"), "{stderr}");
}

#[tokio::test]
async fn config_file_is_read_and_set_overrides_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broker.toml");
    std::fs::write(
        &file,
        "\"broker.id\" = 3\n\"num.partitions\" = 2\n\"auto.create.topics.enable\" = true\n",
    )
    .unwrap();
    let log_dir = dir.path().join("logs");
    let config = format!("--config={}", file.display());
    let broker = Broker::start_with_args(&log_dir, &["--set", "num.partitions=5", &config]);
    let client = Client::new(&broker.url);
    client.produce("auto", 0, &["x".to_string()], "1").await;
    let (_, described) = client.get("/v1/topics/auto").await;
    assert_eq!(
        described["partitions"].as_array().unwrap().len(),
        5,
        "--set wins over the file"
    );
    assert_eq!(
        described["partitions"][0]["leader"], 3,
        "broker.id from the file"
    );
}

#[test]
fn unknown_role_is_refused() {
    // The controller role itself is tested by the replication helper's cluster tests.
    let (code, _, stderr) = run_to_exit(&["--role", "janitor"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("process.roles") && stderr.contains("janitor"),
        "{stderr}"
    );
}

#[test]
fn second_broker_on_the_same_log_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("logs");
    let _first = Broker::start(&log_dir, &[]);
    let (code, _, stderr) = run_to_exit(&[
        "--set",
        &format!("log.dirs={}", log_dir.display()),
        "--set",
        "listeners=http://127.0.0.1:0",
    ]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("already locked"), "{stderr}");
}

/// Sends one keep-alive request on a raw connection and waits for its answer, so the broker has
/// certainly accepted the connection; the connection stays open.
fn held_connection(address: &str) -> std::net::TcpStream {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .write_all(b"GET /v1/ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 512];
    while !String::from_utf8_lossy(&answer).contains("pong") {
        let n = stream.read(&mut buffer).unwrap();
        assert!(n > 0, "connection closed before the answer");
        answer.extend_from_slice(&buffer[..n]);
    }
    stream
}

#[tokio::test]
async fn connections_beyond_max_connections_wait_until_one_closes() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("logs"), &["max.connections=2"]);
    let address = broker.url.trim_start_matches("http://").to_string();
    // `Broker::start` used (and closed) one connection to check readiness; hold both permits now.
    let first = held_connection(&address);
    let _second = held_connection(&address);
    let third = tokio::spawn({
        let client = Client::new(&broker.url);
        async move { client.get("/v1/ping").await }
    });
    // A correct broker never answers while both connections are open; a broken one answers at
    // once, which this check catches (a slow machine can only make it pass, never fail).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !third.is_finished(),
        "a third connection was served beyond max.connections=2"
    );
    drop(first);
    let (status, body) = third.await.unwrap();
    assert_eq!((status, body), (200, serde_json::json!("pong")));
}
