//! Helpers of the tests that compare with real Apache Kafka (`kafka_differential.rs`,
//! `kafka_clients_real.rs`): a small Kafka cluster (one KRaft controller and N brokers, the
//! harness's own `server.properties` writer and JVM options) on loopback addresses of its
//! own, a companion-broker cluster of the same shape, and one-request calls over Kafka's
//! protocol encoded with the `kafka-protocol` crate.
//!
//! Nothing here needs root: every node listens on its own `127.A.B.(10+i)` address (Linux
//! routes all of 127/8 to the loopback device), so Kafka's fixed ports 9092/9093 do not
//! collide between nodes. Each process is started in a process group of its own and killed
//! with the group when the cluster is dropped (also when a test fails), and with
//! `PR_SET_PDEATHSIG` should the test process die first.

#![allow(dead_code)] // each test file uses a different part of this module

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tidewater::cluster::local::kafka::{log_tail, KafkaProgram};
use tidewater::cluster::{node_list, NodeInfo, Role};
use tidewater::kafka::Release;

/// Bound on Kafka's JVMs coming up (the harness's own bound for a local run is 240 s: four
/// JVMs starting at once on two shared cores).
pub const KAFKA_START_MAX: Duration = Duration::from_secs(240);
/// Bound on the companion broker's processes coming up and registering.
pub const COMPANION_START_MAX: Duration = Duration::from_secs(60);
/// Bound on one request and its answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The Kafka release to test against (the default version, fetched or cached), or `None`
/// with the reason printed when it cannot be had here. Under `TIDEWATER_REQUIRE_KAFKA` a
/// missing Java or Kafka fails the test instead (CI fetches Kafka first).
pub fn kafka_release(test: &str) -> Option<Release> {
    let required = std::env::var_os("TIDEWATER_REQUIRE_KAFKA").is_some();
    let java = Command::new("java")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    let release = if java {
        tidewater::kafka::fetch::fetch(
            tidewater::kafka::DEFAULT_VERSION,
            &tidewater::kafka::fetch::default_cache_dir(),
        )
    } else {
        Err("no java on the PATH".to_string())
    };
    match release {
        Ok(release) => Some(release),
        Err(why) if required => {
            panic!("TIDEWATER_REQUIRE_KAFKA is set but Kafka cannot run here: {why}")
        }
        Err(why) => {
            eprintln!("skipping {test}: Kafka cannot run here (CI fetches it first): {why}");
            None
        }
    }
}

/// A child process in a process group of its own that dies with the test process.
fn spawn_group(command: &mut Command) -> std::io::Result<Child> {
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    command.process_group(0).spawn()
}

/// SIGKILL to the child's process group, then reap it.
fn kill_group(child: &mut Child) {
    // SAFETY: kill(2) of the group we created for our own, not yet reaped, child.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
}

/// Apache Kafka: `c1` a KRaft controller, `n1..nN` brokers, as `tidewater run --system
/// kafka` lays them out, on loopback.
pub struct KafkaCluster {
    /// The nodes: `c1` first.
    pub nodes: Vec<NodeInfo>,
    /// Each broker's `HOST:9092`, in node order.
    pub brokers: Vec<String>,
    /// The JVMs, by node name.
    children: Vec<(String, Child)>,
    /// Each node's directory (`server.properties`, `data/`, `broker.log`).
    dir: tempfile::TempDir,
}

impl KafkaCluster {
    /// Formats and starts `brokers` brokers and a controller on `127.A.B.10..`, with the
    /// run `settings` (Tidewater's `--set` names); waits until every broker is listed in
    /// Metadata. Panics, quoting the node's log, when one does not come up in time.
    pub fn start(
        release: Release,
        loopback: [u8; 2],
        brokers: usize,
        settings: &[(&str, &str)],
    ) -> Self {
        let settings: Vec<(String, String)> = settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let program = KafkaProgram::new(release, &settings).expect("settings Kafka takes");
        let [a, b] = loopback;
        let nodes = node_list(brokers, 0, |i| Ipv4Addr::new(127, a, b, 10 + i as u8));
        let dir = tempfile::tempdir().expect("a directory for the nodes");
        let root = dir.path().to_path_buf();
        let node_dir = |node: &NodeInfo| root.join(&node.name);
        let log = |node: &NodeInfo| node_dir(node).join("broker.log");
        let log_file = |node: &NodeInfo| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log(node))
                .expect("the node's log")
        };
        for node in &nodes {
            std::fs::create_dir_all(node_dir(node)).unwrap();
            program
                .write_properties(node, &nodes, &node_dir(node))
                .unwrap();
        }
        // A listener already answering is another cluster on the same loopback net (another
        // test, or a run by hand): this one would pass for up at once and share its state.
        for node in nodes.iter().filter(|n| n.role == Role::Broker) {
            let listener = program.listener(node).to_string();
            if let Ok(addr) = listener.parse::<std::net::SocketAddr>() {
                assert!(
                    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err(),
                    "{listener} already answers: another cluster uses 127.{a}.{b}.0/24 \
                     (each test has its own)"
                );
            }
        }
        // Every node's format at once, as the harness formats them at setup.
        let mut formats: Vec<(&NodeInfo, Child)> = nodes
            .iter()
            .map(|node| {
                let argv = program.format_argv(&node_dir(node));
                let child = spawn_group(
                    Command::new(&argv[0])
                        .args(&argv[1..])
                        .stdin(Stdio::null())
                        .stdout(log_file(node))
                        .stderr(log_file(node)),
                )
                .expect("java starts");
                (node, child)
            })
            .collect();
        for (node, child) in &mut formats {
            let status = child.wait().unwrap();
            assert!(
                status.success(),
                "format of {} failed ({status}):\n{}",
                node.name,
                log_tail(&log(node), 15)
            );
        }
        let mut cluster = KafkaCluster {
            brokers: nodes
                .iter()
                .filter(|n| n.role == Role::Broker)
                .map(|n| program.listener(n).to_string())
                .collect(),
            children: vec![],
            nodes: nodes.clone(),
            dir,
        };
        for node in &nodes {
            let argv = program.server_argv(&node_dir(node));
            let child = spawn_group(
                Command::new(&argv[0])
                    .args(&argv[1..])
                    .stdin(Stdio::null())
                    .stdout(log_file(node))
                    .stderr(log_file(node)),
            )
            .expect("java starts");
            cluster.children.push((node.name.clone(), child));
        }
        let started = Instant::now();
        loop {
            let listed = cluster
                .brokers
                .iter()
                .all(|b| metadata(b, Some(vec![])).is_some_and(|m| m.brokers.len() == brokers));
            if listed {
                eprintln!(
                    "kafka cluster up in {:.1} s",
                    started.elapsed().as_secs_f64()
                );
                return cluster;
            }
            for (name, child) in &mut cluster.children {
                if let Ok(Some(status)) = child.try_wait() {
                    let node = nodes.iter().find(|n| &n.name == name).unwrap();
                    panic!("{name} exited ({status}):\n{}", log_tail(&log(node), 15));
                }
            }
            if started.elapsed() > KAFKA_START_MAX {
                let tails: Vec<String> = nodes
                    .iter()
                    .map(|n| format!("{}:\n{}", n.name, log_tail(&log(n), 15)))
                    .collect();
                panic!(
                    "Kafka did not list {brokers} brokers within {KAFKA_START_MAX:?}:\n{}",
                    tails.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// SIGKILL to node `name`'s JVM.
    pub fn kill(&mut self, name: &str) {
        let (_, child) = self
            .children
            .iter_mut()
            .find(|(n, _)| n == name)
            .expect("a node of this cluster");
        kill_group(child);
    }

    /// The process group of node `name`'s JVM, for signals sent while the test goes on
    /// (SIGSTOP and SIGCONT: a paused node; Drop's SIGKILL ends a paused one too).
    pub fn process_group(&self, name: &str) -> i32 {
        let (_, child) = self
            .children
            .iter()
            .find(|(n, _)| n == name)
            .expect("a node of this cluster");
        child.id() as i32
    }

    /// The node directory of `name` (for logs in failure messages).
    pub fn node_dir(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            kill_group(child);
        }
    }
}

/// The companion broker: a controller and N brokers with Kafka listeners, as
/// `broker/tests/kafka_clients.rs` starts them (processes on 127.0.0.1, free ports).
pub struct CompanionCluster {
    /// Each broker's Kafka `HOST:PORT`, broker `n(i+1)` at index i.
    pub brokers: Vec<String>,
    /// Each broker's HTTP base URL, in the same order.
    pub urls: Vec<String>,
    /// The controller first, then the brokers.
    children: Vec<Child>,
    dir: tempfile::TempDir,
}

impl CompanionCluster {
    /// Starts the controller and `brokers` brokers with `settings` (`key=value`) for every
    /// node; waits until Metadata lists every broker.
    pub fn start(brokers: usize, settings: &[&str]) -> CompanionCluster {
        let binary = tidewater::cluster::local::find_broker_binary().expect("tidewater-broker");
        let dir = tempfile::tempdir().unwrap();
        let mut cluster = CompanionCluster {
            brokers: vec![],
            urls: vec![],
            children: vec![],
            dir,
        };
        let mut controller_settings = vec![
            "process.roles=controller".to_string(),
            format!("default.replication.factor={}", brokers.min(3)),
        ];
        controller_settings.extend(settings.iter().map(|s| s.to_string()));
        let (url, _) = cluster.spawn(&binary, "controller", &controller_settings);
        for id in 1..=brokers {
            let mut node = vec![
                format!("broker.id={id}"),
                format!("controller.address={url}"),
                "kafka.listeners=PLAINTEXT://127.0.0.1:0".into(),
            ];
            node.extend(settings.iter().map(|s| s.to_string()));
            let (url, kafka) = cluster.spawn(&binary, &format!("n{id}"), &node);
            cluster.urls.push(url);
            cluster.brokers.push(kafka.expect("a Kafka listener"));
        }
        let started = Instant::now();
        while !cluster
            .brokers
            .iter()
            .all(|b| metadata(b, Some(vec![])).is_some_and(|m| m.brokers.len() == brokers))
        {
            assert!(
                started.elapsed() < COMPANION_START_MAX,
                "the companion brokers never all registered"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        cluster
    }

    /// Starts one node; its HTTP URL and Kafka address, from what it printed.
    fn spawn(
        &mut self,
        binary: &Path,
        name: &str,
        settings: &[String],
    ) -> (String, Option<String>) {
        let log_dir = self.dir.path().join(name);
        let stderr = std::fs::File::create(self.dir.path().join(format!("{name}.log"))).unwrap();
        let mut command = Command::new(binary);
        command
            .arg("--set")
            .arg(format!("log.dirs={}", log_dir.display()))
            .arg("--set")
            .arg("listeners=http://127.0.0.1:0");
        for s in settings {
            command.arg("--set").arg(s);
        }
        let mut child = spawn_group(
            command
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(stderr),
        )
        .expect("spawn tidewater-broker");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        self.children.push(child);
        let deadline = Instant::now() + COMPANION_START_MAX;
        let (mut url, mut kafka) = (None, None);
        while url.is_none() || (name != "controller" && kafka.is_none()) {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("{name} did not print its addresses"));
            if let Some(a) = line.strip_prefix("listening on ") {
                url = Some(format!("http://{a}"));
            }
            if let Some(a) = line.strip_prefix("kafka listening on ") {
                kafka = Some(a.to_string());
            }
        }
        (url.unwrap(), kafka)
    }

    /// SIGKILL to broker `nK` (index K-1).
    pub fn kill_broker(&mut self, id: usize) {
        kill_group(&mut self.children[id]);
    }
}

impl Drop for CompanionCluster {
    fn drop(&mut self) {
        for child in &mut self.children {
            kill_group(child);
        }
    }
}

/// One request to `address` on a new connection and its answer; `None` when the
/// connection fails, breaks or the answer does not decode.
pub fn try_call<Req: Encodable, Resp: Decodable + HeaderVersion>(
    address: &str,
    key: ApiKey,
    version: i16,
    request: &Req,
) -> Option<Resp> {
    let mut body = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(11)
        .with_client_id(Some(StrBytes::from_static_str("tidewater-differential")))
        .encode(&mut body, key.request_header_version(version))
        .unwrap();
    request.encode(&mut body, version).unwrap();
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(CALL_TIMEOUT)).unwrap();
    let mut frame = BytesMut::new();
    frame.put_i32(body.len() as i32);
    frame.put_slice(&body);
    stream.write_all(&frame).ok()?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).ok()?;
    let mut answer = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut answer).ok()?;
    let mut answer = Bytes::from(answer);
    assert_eq!(answer.get_i32(), 11, "correlation id");
    if Resp::header_version(version) >= 1 {
        assert_eq!(
            answer.get_u8(),
            0,
            "no tagged fields in the response header"
        );
    }
    Resp::decode(&mut answer, version).ok()
}

/// [`try_call`] that must be answered.
pub fn call<Req: Encodable, Resp: Decodable + HeaderVersion>(
    address: &str,
    key: ApiKey,
    version: i16,
    request: &Req,
) -> Resp {
    try_call(address, key, version, request)
        .unwrap_or_else(|| panic!("{address} did not answer {key:?} v{version}"))
}

/// Metadata v12 of `topics` (`None`: every topic), or `None` if not answered.
pub fn metadata(address: &str, topics: Option<Vec<&str>>) -> Option<MetadataResponse> {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::TopicName;
    let request = MetadataRequest::default().with_topics(topics.map(|names| {
        names
            .into_iter()
            .map(|n| {
                MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string(n.to_string()))))
            })
            .collect()
    }));
    try_call(address, ApiKey::Metadata, 12, &request)
}

/// A message's `Debug` text flattened to `path -> leaf`: `responses[diff].partitions[0]
/// .error_code -> 0`. Elements of a list are named by their first identifying field
/// (`name`, `topic`, `partition_index`, `node_id`, `api_key`, ...) when they have one, so
/// that two answers listing the same things in another order compare equal. `Some(x)` is
/// `x`; byte strings are their length (`len=N`).
pub fn flatten(debug: &str) -> BTreeMap<String, String> {
    let tokens = tokenize(debug);
    let mut out = BTreeMap::new();
    let mut at = 0;
    let value = parse(&tokens, &mut at);
    value.flatten_into("", &mut out);
    out
}

#[derive(Debug)]
enum Value {
    Leaf(String),
    Struct(Vec<(String, Value)>),
    List(Vec<Value>),
}

/// Fields that name a list's element, in order of preference.
const ELEMENT_NAMES: &[&str] = &[
    "name",
    "topic",
    "partition_index",
    "partition",
    "node_id",
    "api_key",
    "key",
    "group_id",
];

impl Value {
    fn flatten_into(&self, path: &str, out: &mut BTreeMap<String, String>) {
        match self {
            Value::Leaf(s) => {
                out.insert(path.to_string(), s.clone());
            }
            Value::Struct(fields) => {
                if fields.is_empty() {
                    out.insert(path.to_string(), "{}".into());
                }
                for (name, v) in fields {
                    let p = if path.is_empty() {
                        name.clone()
                    } else {
                        format!("{path}.{name}")
                    };
                    v.flatten_into(&p, out);
                }
            }
            Value::List(items) => {
                out.insert(format!("{path}.len"), items.len().to_string());
                for (i, item) in items.iter().enumerate() {
                    let name = item.element_name().unwrap_or_else(|| i.to_string());
                    item.flatten_into(&format!("{path}[{name}]"), out);
                }
            }
        }
    }

    fn element_name(&self) -> Option<String> {
        let Value::Struct(fields) = self else {
            return None;
        };
        ELEMENT_NAMES.iter().find_map(|want| {
            fields.iter().find_map(|(n, v)| match v {
                Value::Leaf(s) if n == want => Some(s.clone()),
                _ => None,
            })
        })
    }
}

fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = vec![];
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() || c == ',' {
            i += 1;
        } else if "{}[]():".contains(c) {
            tokens.push(c.to_string());
            i += 1;
        } else if c == '"' || (c == 'b' && chars.get(i + 1) == Some(&'"')) {
            let bytes = c == 'b';
            let start = i;
            i += if bytes { 2 } else { 1 };
            let mut len = 0;
            while chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
                len += 1;
            }
            i += 1;
            tokens.push(if bytes {
                format!("len={len}")
            } else {
                chars[start..i].iter().collect()
            });
        } else {
            let start = i;
            while i < chars.len() && !"{}[]():, ".contains(chars[i]) && !chars[i].is_whitespace() {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        }
    }
    tokens
}

fn parse(tokens: &[String], at: &mut usize) -> Value {
    let token = tokens[*at].clone();
    *at += 1;
    match token.as_str() {
        "[" => {
            let mut items = vec![];
            while tokens[*at] != "]" {
                items.push(parse(tokens, at));
            }
            *at += 1;
            Value::List(items)
        }
        "{" => parse_fields(tokens, at),
        _ => match tokens.get(*at).map(String::as_str) {
            // A named struct, `Name { .. }`.
            Some("{") => {
                *at += 1;
                parse_fields(tokens, at)
            }
            // A tuple struct or `Some(..)`: its one value.
            Some("(") => {
                *at += 1;
                let inner = parse(tokens, at);
                while tokens[*at] != ")" {
                    parse(tokens, at);
                }
                *at += 1;
                inner
            }
            _ => Value::Leaf(token.trim_matches('"').to_string()),
        },
    }
}

fn parse_fields(tokens: &[String], at: &mut usize) -> Value {
    let mut fields = vec![];
    while tokens[*at] != "}" {
        let name = tokens[*at].clone();
        assert_eq!(
            tokens[*at + 1],
            ":",
            "a field name before {:?}",
            tokens.get(*at + 2)
        );
        *at += 2;
        fields.push((name, parse(tokens, at)));
    }
    *at += 1;
    Value::Struct(fields)
}
