//! Starts the real `tidewater-broker` binary on a free port with a temporary log dir, and kills
//! it (SIGKILL) when dropped, so a failing test never leaves a broker behind.

#![allow(dead_code)] // each test file uses a different part of this module

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// Bound on the broker's start-up (recovery of a small test log takes milliseconds).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running broker process.
pub struct Broker {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The log dir it was started with.
    pub log_dir: PathBuf,
}

/// Output of a broker run that was expected to fail at start-up.
pub struct Failed {
    pub code: Option<i32>,
    pub stderr: String,
}

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_tidewater-broker")
}

impl Broker {
    /// Starts a broker on `log_dir` with `settings` (`key=value`) on top of a free port.
    pub fn start(log_dir: &Path, settings: &[&str]) -> Broker {
        let args: Vec<String> = settings
            .iter()
            .flat_map(|s| ["--set".to_string(), s.to_string()])
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Broker::start_with_args(log_dir, &args)
    }

    /// Starts a broker on `log_dir` and a free port with more command-line `args`.
    pub fn start_with_args(log_dir: &Path, args: &[&str]) -> Broker {
        Broker::start_with_command(log_dir, args, |_| {})
    }

    /// Like [`Broker::start_with_args`], letting `prepare` adjust the command first (e.g. a
    /// resource limit for the child).
    pub fn start_with_command(
        log_dir: &Path,
        args: &[&str],
        prepare: impl FnOnce(&mut Command),
    ) -> Broker {
        let stderr_path = log_dir.with_extension("stderr.log");
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&stderr_path)
            .expect("broker stderr file");
        let mut command = Command::new(binary());
        command
            .arg("--set")
            .arg(format!("log.dirs={}", log_dir.display()))
            .arg("--set")
            .arg("listeners=http://127.0.0.1:0");
        command.args(args);
        prepare(&mut command);
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn tidewater-broker");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(address) = line.strip_prefix("listening on ") {
                    let _ = tx.send(address.to_string());
                }
            }
        });
        let mut broker = Broker {
            child,
            url: String::new(),
            log_dir: log_dir.to_path_buf(),
        };
        let address = rx.recv_timeout(START_TIMEOUT).unwrap_or_else(|_| {
            let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            panic!("broker did not print its address; stderr:\n{log}")
        });
        broker.url = format!("http://{address}");
        broker.wait_ready();
        broker
    }

    /// The listener is bound before the catalog is opened; wait until `/v1/ping` is served.
    fn wait_ready(&self) {
        let deadline = std::time::Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(mut stream) =
                std::net::TcpStream::connect(self.url.trim_start_matches("http://"))
            {
                use std::io::{Read, Write};
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let request = "GET /v1/ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
                let mut answer = String::new();
                // A broker answers "pong", a controller {"ok":true}: any 200 will do.
                if stream.write_all(request.as_bytes()).is_ok()
                    && stream.read_to_string(&mut answer).is_ok()
                    && answer.starts_with("HTTP/1.1 200")
                {
                    return;
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "broker never answered /v1/ping"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM (clean shutdown), then wait for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own, not yet reaped child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().expect("wait for broker")
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs the binary with `args` and expects it to exit by itself (bad settings, `--help`).
pub fn run_to_exit(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(binary())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run tidewater-broker");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A blocking-free JSON client over reqwest for the tests.
pub struct Client {
    http: reqwest::Client,
    pub url: String,
}

impl Client {
    pub fn new(url: &str) -> Client {
        Client {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
            url: url.to_string(),
        }
    }

    /// Sends a request and returns (status, JSON body or the text as a JSON string).
    pub async fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, format!("{}{path}", self.url));
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.expect("request sent");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.call("POST", path, Some(&body.to_string())).await
    }

    /// Creates a topic and asserts 201.
    pub async fn create_topic(&self, name: &str, partitions: u32, configs: Value) {
        let body = serde_json::json!({"name": name, "partitions": partitions, "configs": configs});
        let (status, answer) = self.post("/v1/topics", &body).await;
        assert_eq!(status, 201, "create {name}: {answer}");
    }

    /// Produces `values` (no keys) with `acks` and returns the response body (asserts 200).
    pub async fn produce(
        &self,
        topic: &str,
        partition: u32,
        values: &[String],
        acks: &str,
    ) -> Value {
        let records: Vec<Value> = values
            .iter()
            .map(|v| serde_json::json!({"key": null, "value": v}))
            .collect();
        let body = serde_json::json!({"acks": acks, "records": records});
        let path = format!("/v1/topics/{topic}/partitions/{partition}/records");
        let (status, answer) = self.post(&path, &body).await;
        assert_eq!(status, 200, "produce: {answer}");
        answer
    }

    /// Fetches every record from `offset` (committed), following pages; returns (offset, value).
    pub async fn read_all(
        &self,
        topic: &str,
        partition: u32,
        mut offset: u64,
    ) -> Vec<(u64, String)> {
        let mut out = Vec::new();
        loop {
            let path = format!("/v1/topics/{topic}/partitions/{partition}/records?offset={offset}");
            let (status, answer) = self.get(&path).await;
            assert_eq!(status, 200, "fetch at {offset}: {answer}");
            let records = answer["records"].as_array().unwrap();
            if records.is_empty() {
                return out;
            }
            for record in records {
                let at = record["offset"].as_u64().unwrap();
                out.push((at, record["value"].as_str().unwrap().to_string()));
                offset = at + 1;
            }
        }
    }

    /// `log_end_offset` of a partition, from a fetch at the log start.
    pub async fn offsets(&self, topic: &str, partition: u32) -> Value {
        let (status, answer) = self.get("/v1/status").await;
        assert_eq!(status, 200);
        answer["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["topic"] == topic && r["partition"] == partition)
            .cloned()
            .unwrap_or_else(|| panic!("no replica {topic}/{partition} in status: {answer}"))
    }
}

/// Every file under `dir` with its size, for "nothing changed on disk" checks.
pub fn files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
                out.push((path, size));
            }
        }
    }
    out.sort();
    out
}

/// Reads one answer with a `content-length` body; returns (status, body).
pub fn read_answer(stream: &mut std::net::TcpStream) -> (u16, String) {
    let mut seen = Vec::new();
    use std::io::Read;
    let mut buffer = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&seen).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap_or_else(|| panic!("no content-length in {head:?}"));
            if body.len() >= length {
                let status = head.split(' ').nth(1).unwrap().parse().unwrap();
                return (status, body[..length].to_string());
            }
        }
        let n = stream
            .read(&mut buffer)
            .unwrap_or_else(|e| panic!("no whole answer ({e}); read so far: {text:?}"));
        assert!(n > 0, "closed before a whole answer; read so far: {text:?}");
        seen.extend_from_slice(&buffer[..n]);
    }
}

/// A controller or broker process of a test cluster, with the addresses it printed (HTTP and,
/// when `kafka.listeners` is set, Kafka), killed with SIGKILL when dropped.
pub struct Node {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// `127.0.0.1:PORT` of its Kafka listener, when on.
    pub kafka: Option<String>,
}

impl Node {
    /// Starts the binary on `dir` and a free HTTP port with `settings` (`key=value`); waits
    /// for the `listening on` line, and for `kafka listening on` when `kafka.listeners` is set.
    pub fn start(dir: &Path, settings: &[String]) -> Node {
        std::fs::create_dir_all(dir).unwrap();
        let stderr = std::fs::File::create(dir.with_extension("stderr")).unwrap();
        let mut command = Command::new(binary());
        command
            .args(["--set", "listeners=http://127.0.0.1:0"])
            .args(["--set", &format!("log.dirs={}", dir.display())]);
        for setting in settings {
            command.args(["--set", setting]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .expect("broker binary starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut node = Node {
            child,
            url: String::new(),
            kafka: None,
        };
        let line = rx.recv_timeout(START_TIMEOUT).expect("listening line");
        let address = line.strip_prefix("listening on ").expect("listening line");
        node.url = format!("http://{address}");
        if settings.iter().any(|s| s.starts_with("kafka.listeners=")) {
            let line = rx
                .recv_timeout(START_TIMEOUT)
                .expect("kafka listening line");
            let address = line
                .strip_prefix("kafka listening on ")
                .expect("kafka listening line");
            node.kafka = Some(address.to_string());
        }
        node
    }

    /// SIGKILL, then reap.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}
