//! The controller's routes against bad input (issue #15): a broker address that is not
//! `http://HOST:PORT` is refused and registers nothing, an oversized body is 413
//! MESSAGE_TOO_LARGE, and malformed HTTP gets the JSON error, as on the brokers.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::{Broker, Client};
use serde_json::{json, Value};

/// Bound on every wait for an answer.
const BOUND: Duration = Duration::from_secs(30);

fn start_controller(dir: &tempfile::TempDir) -> Broker {
    Broker::start_with_args(&dir.path().join("controller"), &["--role", "controller"])
}

/// Sends `head` and then `body_bytes` bytes of body on a raw connection (writing from another
/// thread, so an early answer is read while the body is still going out) and returns the
/// status and JSON body of the answer.
fn raw_answer(controller: &Broker, head: String, body_bytes: usize) -> (u16, Value) {
    let mut stream = TcpStream::connect(controller.url.trim_start_matches("http://")).unwrap();
    stream.set_read_timeout(Some(BOUND)).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let sending = std::thread::spawn(move || {
        writer.write_all(head.as_bytes())?;
        let chunk = vec![b' '; 64 * 1024];
        let mut sent = 0;
        while sent < body_bytes {
            let n = chunk.len().min(body_bytes - sent);
            writer.write_all(&chunk[..n])?;
            sent += n;
        }
        Ok::<(), std::io::Error>(())
    });
    let (status, body) = common::read_answer(&mut stream);
    let answer = (status, serde_json::from_str(&body).unwrap());
    drop(stream);
    // The broker may close before the whole body went out; the writer then fails, which is fine.
    let _ = sending.join();
    answer
}

#[tokio::test]
async fn broker_addresses_must_be_http_host_port() {
    let dir = tempfile::tempdir().unwrap();
    let controller = start_controller(&dir);
    let client = Client::new(&controller.url);
    for bad in [
        "",
        "not an address",
        "127.0.0.1:9092",
        "http://127.0.0.1",
        "http://127.0.0.1:0",
        "http://127.0.0.1:70000",
        "http://host:9092/path",
        "http://a b:9092",
    ] {
        let (status, answer) = client
            .post(
                "/controller/v1/brokers/register",
                &json!({"broker_id": 1, "address": bad}),
            )
            .await;
        assert_eq!(
            (status, answer["error"].clone()),
            (400, json!("INVALID_REQUEST")),
            "{bad:?}: {answer}"
        );
    }
    let (_, metadata) = client.get("/controller/v1/metadata").await;
    assert_eq!(metadata["brokers"], json!([]), "nothing was registered");
    let (status, answer) = client
        .post(
            "/controller/v1/brokers/register",
            &json!({"broker_id": 1, "address": "http://127.0.0.1:19092"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let (_, metadata) = client.get("/controller/v1/metadata").await;
    assert_eq!(metadata["brokers"][0]["address"], "http://127.0.0.1:19092");
}

#[tokio::test]
async fn an_oversized_body_is_message_too_large() {
    let dir = tempfile::tempdir().unwrap();
    let controller = start_controller(&dir);
    // A 50 MB body is announced; the controller answers once it has read past its 1 MiB bound.
    let declared = 50_000_000;
    let head = format!(
        "POST /controller/v1/topics HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n\
         Content-Length: {declared}\r\n\r\n"
    );
    let (status, answer) = raw_answer(&controller, head, 2 << 20);
    assert_eq!(
        (status, answer["error"].clone()),
        (413, json!("MESSAGE_TOO_LARGE")),
        "{answer}"
    );
    // Nothing was created, and the controller still serves.
    let client = Client::new(&controller.url);
    let (_, metadata) = client.get("/controller/v1/metadata").await;
    assert_eq!(metadata["topics"], json!([]));
}

#[tokio::test]
async fn malformed_http_gets_the_json_error() {
    let dir = tempfile::tempdir().unwrap();
    let controller = start_controller(&dir);
    let head = "POST /controller/v1/topics HTTP/1.1\r\nContent-Length: x\r\n\r\n".to_string();
    let (status, answer) = raw_answer(&controller, head, 0);
    assert_eq!(
        (status, answer["error"].clone()),
        (400, json!("INVALID_REQUEST")),
        "{answer}"
    );
}
