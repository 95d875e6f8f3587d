//! Clients nobody here wrote against a three-broker cluster's Kafka listeners: kcat
//! (librdkafka) and kafka-python (`tests/kafka_clients/python_client.py`). Metadata, produce
//! with acks=all, consume from the start, a consumer group that joins, rebalances and commits,
//! and NOT_ENOUGH_REPLICAS when `min.insync.replicas` cannot be met. Each expectation is
//! computed from what the clients report (offsets acknowledged, values read), not from the
//! broker.
//!
//! Needs `kcat` and the `kafka` Python module. `.ci/run` installs both and sets
//! `TIDEWATER_REQUIRE_KAFKA_CLIENTS=1`, which turns their absence into a failure; elsewhere the
//! test says it skipped.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{Client, Node};
use serde_json::{json, Value};

/// Bound on the cluster forming (a liveness bound, not a timing check).
const CONVERGENCE_MAX: Duration = Duration::from_secs(60);

fn clients_present() -> bool {
    let kcat = Command::new("kcat")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    let python = Command::new("python3")
        .args(["-c", "import kafka"])
        .output()
        .is_ok_and(|o| o.status.success());
    if kcat && python {
        return true;
    }
    assert!(
        std::env::var_os("TIDEWATER_REQUIRE_KAFKA_CLIENTS").is_none(),
        "kcat present: {kcat}, kafka-python present: {python}; both are required here"
    );
    eprintln!("skipped: kcat ({kcat}) or kafka-python ({python}) missing");
    false
}

struct Cluster {
    _controller: Node,
    brokers: Vec<Node>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let controller = Node::start(
            &dir.path().join("controller"),
            &[
                "process.roles=controller".into(),
                "broker.session.timeout.ms=4000".into(),
                "default.replication.factor=3".into(),
            ],
        );
        let brokers = (1..=3)
            .map(|id| {
                Node::start(
                    &dir.path().join(format!("broker{id}")),
                    &[
                        format!("broker.id={id}"),
                        format!("controller.address={}", controller.url),
                        "kafka.listeners=PLAINTEXT://127.0.0.1:0".into(),
                    ],
                )
            })
            .collect();
        Cluster {
            _controller: controller,
            brokers,
            _dir: dir,
        }
    }

    fn bootstrap(&self) -> String {
        self.brokers[0].kafka.clone().expect("kafka listener")
    }

    fn kafka_addresses(&self) -> BTreeSet<String> {
        self.brokers
            .iter()
            .map(|b| b.kafka.clone().unwrap())
            .collect()
    }
}

fn run(command: &mut Command) -> Output {
    let output = command.output().expect("client runs");
    eprintln!(
        "{:?}: {}\nstdout: {}\nstderr: {}",
        command,
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn kcat(bootstrap: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = Command::new("kcat");
    command.args(["-b", bootstrap]).args(args);
    match stdin {
        None => run(&mut command),
        Some(input) => {
            use std::io::Write;
            use std::process::Stdio;
            let mut child = command
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("kcat starts");
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
            let output = child.wait_with_output().unwrap();
            eprintln!(
                "kcat {args:?}: {}\nstderr: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
            output
        }
    }
}

/// kcat's JSON metadata, once all three brokers are in it.
fn metadata_with_three_brokers(bootstrap: &str) -> Value {
    let started = Instant::now();
    loop {
        let output = kcat(bootstrap, &["-L", "-J", "-m", "10"], None);
        if let Ok(metadata) = serde_json::from_slice::<Value>(&output.stdout) {
            if metadata["brokers"].as_array().is_some_and(|b| b.len() == 3) {
                return metadata;
            }
        }
        assert!(
            started.elapsed() < CONVERGENCE_MAX,
            "three brokers never listed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn python(bootstrap: &str, step: &str, topic: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka_clients/python_client.py");
    let output = run(Command::new("python3")
        .arg(script)
        .args([bootstrap, step, topic]));
    assert!(output.status.success(), "python {step} failed");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().expect("a JSON line");
    serde_json::from_str(last).expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_and_kafka_python_against_a_three_broker_cluster() {
    if !clients_present() {
        return;
    }
    let cluster = Cluster::start();
    let bootstrap = cluster.bootstrap();

    // Metadata: every broker with the Kafka address it printed.
    let metadata = metadata_with_three_brokers(&bootstrap);
    let listed: BTreeSet<String> = metadata["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, cluster.kafka_addresses());

    // kcat: produce 90 values with acks=all over three partitions, read them back from the
    // start; the topic is created over HTTP, as the harness does.
    let http = Client::new(&cluster.brokers[0].url);
    http.create_topic("kc", 3, json!({})).await;
    let values: Vec<String> = (0..90).map(|i| format!("kc-{i}")).collect();
    for partition in 0..3 {
        let part: Vec<&str> = values
            .iter()
            .skip(partition)
            .step_by(3)
            .map(String::as_str)
            .collect();
        let input = part.join("\n") + "\n";
        let p = partition.to_string();
        let produced = kcat(
            &bootstrap,
            &["-P", "-t", "kc", "-p", &p, "-X", "acks=all"],
            Some(&input),
        );
        assert!(produced.status.success(), "kcat produce to partition {p}");
    }
    let consumed = kcat(
        &bootstrap,
        &[
            "-C",
            "-t",
            "kc",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%p %o %s\\n",
        ],
        None,
    );
    assert!(consumed.status.success());
    let mut read: BTreeMap<usize, Vec<(u64, String)>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&consumed.stdout).lines() {
        let mut fields = line.splitn(3, ' ');
        let partition: usize = fields.next().unwrap().parse().unwrap();
        let offset: u64 = fields.next().unwrap().parse().unwrap();
        read.entry(partition)
            .or_default()
            .push((offset, fields.next().unwrap().to_string()));
    }
    for partition in 0..3 {
        let expected: Vec<(u64, String)> = values
            .iter()
            .skip(partition)
            .step_by(3)
            .enumerate()
            .map(|(offset, v)| (offset as u64, v.clone()))
            .collect();
        assert_eq!(
            read.get(&partition),
            Some(&expected),
            "partition {partition}"
        );
    }

    // kcat: acks=all on a topic whose min.insync.replicas (4) exceeds its replicas (3).
    http.create_topic("kc-strict", 1, json!({"min.insync.replicas": "4"}))
        .await;
    let refused = kcat(
        &bootstrap,
        &[
            "-P",
            "-t",
            "kc-strict",
            "-X",
            "acks=all",
            "-X",
            "message.send.max.retries=0",
        ],
        Some("x\n"),
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("Not enough in-sync replicas"),
        "kcat names NOT_ENOUGH_REPLICAS"
    );

    // kafka-python: admin create, acks=all produce, group read from the start and commit.
    let answer = python(&bootstrap, "produce-consume", "py");
    assert!(answer["topics"].as_array().unwrap().contains(&json!("py")));
    let acked: BTreeSet<(u64, u64)> = answer["acked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| (pair[0].as_u64().unwrap(), pair[1].as_u64().unwrap()))
        .collect();
    assert_eq!(acked.len(), 60, "60 distinct acknowledged offsets");
    let read: BTreeSet<(u64, u64)> = answer["read"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_u64().unwrap(), r[1].as_u64().unwrap()))
        .collect();
    assert_eq!(
        read, acked,
        "every acknowledged offset read back, nothing else"
    );
    let mut ends: BTreeMap<String, u64> = BTreeMap::new();
    for (partition, offset) in &acked {
        let end = ends.entry(partition.to_string()).or_default();
        *end = (*end).max(offset + 1);
    }
    let committed: BTreeMap<String, u64> = answer["committed"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(p, o)| (p.clone(), o.as_u64().unwrap()))
        .filter(|(p, _)| ends.contains_key(p))
        .collect();
    assert_eq!(
        committed, ends,
        "the group committed the end of each partition"
    );

    // kafka-python: a second member joins and the partitions are split; commits read back.
    let answer = python(&bootstrap, "group", "py-group");
    assert_eq!(answer["alone"], json!([0, 1, 2]));
    let first: BTreeSet<u64> = serde_json::from_value(answer["split"][0].clone()).unwrap();
    let second: BTreeSet<u64> = serde_json::from_value(answer["split"][1].clone()).unwrap();
    assert!(
        !first.is_empty() && !second.is_empty(),
        "both members own partitions"
    );
    assert!(first.is_disjoint(&second));
    assert_eq!(first.union(&second).count(), 3);
    let mut expected = serde_json::Map::new();
    for p in &first {
        expected.insert(p.to_string(), json!(7));
    }
    for p in &second {
        expected.insert(p.to_string(), json!(9));
    }
    assert_eq!(answer["committed"], Value::Object(expected));

    // kafka-python: the same refusal as kcat saw, as the client's own error type.
    let answer = python(&bootstrap, "not-enough", "py-strict");
    assert_eq!(answer, json!({"error": "NotEnoughReplicasError"}));
}
