//! HTTP fuzzing of the broker's front door (issue #22; `docs/testing.md`, "HTTP fuzzing"): a
//! proptest generator of random and mutated requests (every route of `docs/api.md`, wrong
//! methods, odd path segments and queries, extra header fields, valid, mutated and random
//! bodies, bodies announced far over the limit) sent over real sockets to a broker started
//! in-process with `tidewater_broker::run` on port 0. Every request must get a complete
//! answer below 500, every error answer must be the API's JSON error, and the broker must
//! still serve afterwards.
//!
//! Memory is capped by a counting global allocator: an allocation that would take this test
//! process (broker included) over [`MEMORY_CAP_BYTES`] fails, which aborts the test instead of
//! exhausting the machine. A fixed seed and case count keep the run short and reproducible.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use serde_json::Value;

/// Bytes this test process may hold allocated at once.
const MEMORY_CAP_BYTES: usize = 512 << 20;
/// Requests per run.
const CASES: u32 = 2000;
/// The generator's seed (change it to explore other requests; a failure prints its case).
const SEED: u64 = 22;
/// Bound on one request's answer: the slowest legitimate one is a group join, which waits at
/// most its `max_poll_interval_ms` (1 s in the templates) plus 5 s.
const ANSWER_BOUND: Duration = Duration::from_secs(40);

/// The system allocator, refusing allocations over the cap and keeping the peak.
struct Capped;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let before = ALLOCATED.fetch_add(layout.size(), Ordering::SeqCst);
        if before + layout.size() > MEMORY_CAP_BYTES {
            ALLOCATED.fetch_sub(layout.size(), Ordering::SeqCst);
            return std::ptr::null_mut(); // the caller aborts: the test fails, the machine lives
        }
        PEAK.fetch_max(before + layout.size(), Ordering::SeqCst);
        // SAFETY: the caller's contract for `layout` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        ALLOCATED.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: `ptr` was allocated by `alloc` above with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Capped = Capped;

/// One generated request, kept as parts so that a failure prints readably.
#[derive(Debug, Clone)]
struct Fuzzed {
    method: String,
    target: String,
    headers: Vec<String>,
    body: Vec<u8>,
    /// Announce 10^12 bytes instead of the body's length (the body is then not sent).
    announce_huge: bool,
}

impl Fuzzed {
    fn bytes(&self) -> Vec<u8> {
        let length = match self.announce_huge {
            true => 1_000_000_000_000,
            false => self.body.len() as u64,
        };
        let mut head = format!(
            "{} {} HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n",
            self.method, self.target
        );
        for header in &self.headers {
            head.push_str(header);
            head.push_str("\r\n");
        }
        head.push_str(&format!("Content-Length: {length}\r\n\r\n"));
        let mut bytes = head.into_bytes();
        if !self.announce_huge {
            bytes.extend_from_slice(&self.body);
        }
        bytes
    }
}

fn one_of(items: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(items).prop_map(str::to_string)
}

fn topic() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => one_of(&["t", "u"]),
        1 => one_of(&["missing", "..", ".", "a%20b", "t%00", "__consumer_offsets", "%FF"]),
        1 => Just("x".repeat(250)),
    ]
}

fn partition() -> impl Strategy<Value = String> {
    one_of(&["0", "0", "1", "2", "99", "-1", "x", "4294967296", ""])
}

fn group() -> impl Strategy<Value = String> {
    prop_oneof![4 => one_of(&["g", "h"]), 1 => one_of(&["%20", "g%2Fh"]), 1 => Just("g".repeat(300))]
}

fn query() -> impl Strategy<Value = String> {
    one_of(&[
        "",
        "?offset=0",
        "?offset=0&max_wait_ms=0",
        "?offset=-1",
        "?offset=18446744073709551616",
        "?offset=0&max_wait_ms=10&max_bytes=0",
        "?max_wait_ms=999999",
        "?spec=earliest",
        "?spec=latest",
        "?spec=x",
        "?leader_epoch=7&offset=0",
        "?max_bytes=0",
        "?offset=0&max_bytes=16777217",
        "?=&&=",
    ])
}

/// (method, path) of every route in `docs/api.md`, with generated segments.
fn route() -> impl Strategy<Value = (String, String)> {
    fn partition_path() -> impl Strategy<Value = String> {
        (topic(), partition()).prop_map(|(t, p)| format!("/v1/topics/{t}/partitions/{p}"))
    }
    prop_oneof![
        Just(("GET".to_string(), "/v1/ping".to_string())),
        Just(("POST".to_string(), "/v1/topics".to_string())),
        Just(("GET".to_string(), "/v1/topics".to_string())),
        topic().prop_map(|t| ("GET".to_string(), format!("/v1/topics/{t}"))),
        topic().prop_map(|t| ("DELETE".to_string(), format!("/v1/topics/{t}"))),
        partition_path().prop_map(|p| ("POST".to_string(), format!("{p}/records"))),
        (partition_path(), query())
            .prop_map(|(p, q)| ("GET".to_string(), format!("{p}/records{q}"))),
        (partition_path(), query())
            .prop_map(|(p, q)| ("GET".to_string(), format!("{p}/offsets{q}"))),
        partition_path().prop_map(|p| ("POST".to_string(), format!("{p}/delete-records"))),
        (partition_path(), query())
            .prop_map(|(p, q)| ("GET".to_string(), format!("{p}/replica-log{q}"))),
        Just(("GET".to_string(), "/v1/metadata".to_string())),
        Just(("GET".to_string(), "/v1/status".to_string())),
        Just(("GET".to_string(), "/metrics".to_string())),
        Just(("GET".to_string(), "/v1/groups".to_string())),
        group().prop_map(|g| ("GET".to_string(), format!("/v1/groups/{g}"))),
        group().prop_map(|g| ("GET".to_string(), format!("/v1/groups/{g}/coordinator"))),
        (
            group(),
            one_of(&["join", "sync", "heartbeat", "leave", "offsets"])
        )
            .prop_map(|(g, what)| ("POST".to_string(), format!("/v1/groups/{g}/{what}"))),
        group().prop_map(|g| ("GET".to_string(), format!("/v1/groups/{g}/offsets"))),
        one_of(&[
            "/",
            "/v2/topics",
            "/v1/topics/t/partitions",
            "/internal/v1/fetch",
            "/controller/v1/metadata",
            "//v1//ping",
            "/v1/ping?x=%"
        ])
        .prop_map(|p| ("GET".to_string(), p)),
    ]
}

/// Bodies the routes accept, to mutate.
fn template() -> impl Strategy<Value = Value> {
    use serde_json::json;
    prop_oneof![
        (topic(), 1..4u32).prop_map(|(t, p)| json!({"name": t, "partitions": p, "replication_factor": 1, "configs": {"retention.ms": "60000"}})),
        one_of(&["all", "1", "0", "2"]).prop_map(|acks| json!({"acks": acks, "timeout_ms": 100, "records": [{"key": null, "value": "v"}, {"key": "k", "value": "w", "timestamp_ms": 0}]})),
        (-2..20i64).prop_map(|o| json!({"offset": o})),
        topic().prop_map(|t| json!({"client_id": "c", "topics": [t], "session_timeout_ms": 6000, "max_poll_interval_ms": 1000})),
        Just(json!({"member_id": "m", "generation": 1, "assignment": {"m": [{"topic": "t", "partition": 0}]}})),
        Just(json!({"member_id": "m", "generation": 1, "polled": true})),
        Just(json!({"member_id": "m"})),
        (topic(), 0..3u32, -1..30i64).prop_map(|(t, p, o)| json!({"offsets": [{"topic": t, "partition": p, "offset": o, "metadata": ""}]})),
    ]
}

/// Arbitrary JSON values, small.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[ -~]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_]{1,10}", inner, 0..6)
                .prop_map(|m: BTreeMap<String, Value>| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A byte-level mutation of `bytes`: truncation, a flipped byte, or an inserted one.
fn mutate(bytes: Vec<u8>, at: usize, byte: u8, how: u8) -> Vec<u8> {
    let mut bytes = bytes;
    let at = at % (bytes.len() + 1);
    match how % 3 {
        0 => bytes.truncate(at),
        1 if at < bytes.len() => bytes[at] ^= byte | 1,
        _ => bytes.insert(at, byte),
    }
    bytes
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => Just(Vec::new()),
        4 => template().prop_map(|v| v.to_string().into_bytes()),
        3 => (template(), any::<usize>(), any::<u8>(), any::<u8>())
            .prop_map(|(v, at, byte, how)| mutate(v.to_string().into_bytes(), at, byte, how)),
        2 => any_json().prop_map(|v| v.to_string().into_bytes()),
        1 => proptest::collection::vec(any::<u8>(), 0..200),
        1 => Just(format!("{}1{}", "[".repeat(200), "]".repeat(200)).into_bytes()),
    ]
}

fn headers() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(
        one_of(&[
            "Content-Type: application/json",
            "Content-Type: text/plain",
            "Accept: */*",
            "X-Junk: \u{1}",
            "Content-Length: 3",
            "Upgrade: websocket",
            "Connection: keep-alive",
            "Accept-Encoding: gzip",
        ]),
        0..3,
    )
}

fn request() -> impl Strategy<Value = Fuzzed> {
    let method = prop_oneof![
        6 => Just(None),
        1 => one_of(&["GET", "POST", "DELETE", "PUT", "PATCH", "OPTIONS", "BREW"]).prop_map(Some),
    ];
    (
        route(),
        method,
        headers(),
        body(),
        proptest::bool::weighted(0.05),
    )
        .prop_map(
            |((route_method, target), method, headers, body, announce_huge)| Fuzzed {
                method: method.unwrap_or(route_method),
                target,
                headers,
                body,
                announce_huge,
            },
        )
}

/// Sends `request` on a new connection and reads the answer to the close: (status, body).
fn send(address: &str, request: &Fuzzed) -> Result<(u16, Vec<u8>), String> {
    let mut stream = TcpStream::connect(address).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(ANSWER_BOUND)).unwrap();
    // The broker may answer and close before it read everything (a malformed head, 413).
    let _ = stream.write_all(&request.bytes());
    let mut answer = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && !answer.is_empty() => {
                break
            }
            Err(e) => return Err(format!("no complete answer: {e}; read {answer:?}")),
        }
    }
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no HTTP answer: {:?}", String::from_utf8_lossy(&answer)))?;
    let head = String::from_utf8_lossy(&answer[..split]).into_owned();
    let status = head
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("no status line: {head:?}"))?;
    Ok((status, answer[split + 4..].to_vec()))
}

/// The checks on one answer.
fn check(request: &Fuzzed, answer: Result<(u16, Vec<u8>), String>) -> Result<(), TestCaseError> {
    let (status, body) = answer.map_err(TestCaseError::fail)?;
    prop_assert!(
        status < 500,
        "{status} {:?}",
        String::from_utf8_lossy(&body)
    );
    if request.announce_huge
        && matches!(request.method.as_str(), "POST")
        && status != 404
        && status != 405
    {
        prop_assert!(
            status == 413 || status == 400,
            "{status} for a 10^12-byte body"
        );
    }
    if status >= 400 && request.method != "HEAD" {
        let error: Value = serde_json::from_slice(&body).map_err(|e| {
            TestCaseError::fail(format!(
                "{status}: error body is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&body)
            ))
        })?;
        prop_assert!(error["error"].is_string(), "{status}: {error}");
    }
    Ok(())
}

#[test]
fn random_and_mutated_http_requests_get_json_answers_below_500_and_the_broker_lives() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let settings = BTreeMap::from([
        ("log.dirs".to_string(), dir.path().display().to_string()),
        ("log.segment.bytes".to_string(), "1048576".to_string()),
    ]);
    let config = tidewater_broker::Config::from_settings(&settings).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = runtime.spawn(async move {
        let shutdown = async move {
            let _ = stopped.await;
        };
        tidewater_broker::run(listener, config, shutdown).await
    });

    let config = Config {
        cases: CASES,
        rng_seed: RngSeed::Fixed(SEED),
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let statuses: std::sync::Mutex<BTreeMap<u16, u32>> = Default::default();
    let outcome = runner.run(&request(), |request| {
        let answer = send(&address, &request);
        if let Ok((status, _)) = &answer {
            *statuses.lock().unwrap().entry(*status).or_default() += 1;
        }
        check(&request, answer)
    });
    // Still serving, whatever came before.
    let ping = send(
        &address,
        &Fuzzed {
            method: "GET".into(),
            target: "/v1/ping".into(),
            headers: vec![],
            body: vec![],
            announce_huge: false,
        },
    );
    println!(
        "seed={SEED} cases={CASES} statuses={:?} peak_allocated_bytes={}",
        statuses.lock().unwrap(),
        PEAK.load(Ordering::SeqCst)
    );
    let _ = stop.send(());
    let stopped = runtime
        .block_on(server)
        .expect("the broker task did not panic");
    outcome.unwrap();
    assert_eq!(
        ping.map(|(status, _)| status),
        Ok(200),
        "the broker still answers"
    );
    stopped.expect("the broker stopped cleanly");
}
