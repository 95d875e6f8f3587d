//! Replication end to end: a real controller and three real brokers as processes on loopback
//! ports, faults by `kill -9`, SIGSTOP and SIGCONT, and every check from outside through the
//! HTTP API (issue 3). The processes are killed by Drop guards even when a test fails.
//!
//! Tests run one at a time (a file-wide lock): each starts four processes, and the timings of
//! failure detection should not depend on how busy the machine is with other tests.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

/// Serialises the tests of this file.
static ONE_CLUSTER_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Bound on every wait for the cluster to reach a state (liveness bound, not a timing check).
const CONVERGENCE_MAX: Duration = Duration::from_secs(40);

/// One process: the controller or a broker.
struct Node {
    /// `controller` or `broker-N`.
    name: String,
    /// Settings passed with `--set` (listeners excluded).
    settings: Vec<String>,
    /// `--role controller` or nothing.
    role: Option<&'static str>,
    /// Its log dir; survives restarts.
    dir: PathBuf,
    /// The port; fixed after the first start so restarts keep the address.
    port: u16,
    /// The running process, if any.
    child: Option<Child>,
    /// Number of starts, to name the stderr files.
    starts: u32,
}

impl Node {
    fn new(name: &str, role: Option<&'static str>, dir: PathBuf, settings: Vec<String>) -> Node {
        let mut node = Node {
            name: name.to_string(),
            settings,
            role,
            dir,
            port: 0,
            child: None,
            starts: 0,
        };
        node.start();
        node
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.as_ref().expect("node running").id() as i32)
    }

    /// Starts the process and waits for its `listening on` line.
    fn start(&mut self) {
        assert!(self.child.is_none(), "{} already running", self.name);
        std::fs::create_dir_all(&self.dir).unwrap();
        self.starts += 1;
        let stderr =
            std::fs::File::create(self.dir.with_extension(format!("stderr.{}", self.starts)))
                .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_tidewater-broker"));
        if let Some(role) = self.role {
            command.args(["--role", role]);
        }
        command.args([
            "--set",
            &format!("listeners=http://127.0.0.1:{}", self.port),
        ]);
        command.args(["--set", &format!("log.dirs={}", self.dir.display())]);
        for setting in &self.settings {
            command.args(["--set", setting]);
        }
        command.env("RUST_LOG", "info");
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .expect("broker binary starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        self.child = Some(child);
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{} did not start", self.name));
        let address = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected line {line:?}"));
        self.port = address.rsplit(':').next().unwrap().parse().unwrap();
    }

    /// SIGKILL (also works on a stopped process) and reap.
    fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn restart(&mut self) {
        self.kill9();
        self.start();
    }

    fn pause(&self) {
        kill(self.pid(), Signal::SIGSTOP).unwrap();
    }

    fn resume(&self) {
        kill(self.pid(), Signal::SIGCONT).unwrap();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A controller and brokers 1..=3.
struct Cluster {
    /// Dropped last: holds every node's directory.
    _dir: tempfile::TempDir,
    /// Kept for error messages: where the stderr files are.
    root: PathBuf,
    controller: Node,
    brokers: Vec<Node>,
    http: reqwest::Client,
    /// Held for the whole test.
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl Cluster {
    /// Starts the controller and three brokers with `broker_settings` (plus the controller's
    /// address) and waits until the three are registered.
    async fn start(session_timeout_ms: u64, broker_settings: &[(&str, &str)]) -> Cluster {
        let serial = ONE_CLUSTER_AT_A_TIME
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let controller = Node::new(
            "controller",
            Some("controller"),
            root.join("controller"),
            vec![format!("broker.session.timeout.ms={session_timeout_ms}")],
        );
        let mut brokers = Vec::new();
        for id in 1..=3 {
            let mut settings = vec![
                format!("broker.id={id}"),
                format!("controller.address={}", controller.url()),
            ];
            settings.extend(broker_settings.iter().map(|(k, v)| format!("{k}={v}")));
            brokers.push(Node::new(
                &format!("broker-{id}"),
                None,
                root.join(format!("broker-{id}")),
                settings,
            ));
        }
        let cluster = Cluster {
            _dir: dir,
            root,
            controller,
            brokers,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            _serial: serial,
        };
        cluster
            .wait_for("three live brokers", |c| async move {
                let metadata = c.controller_metadata().await?;
                let live = metadata["brokers"]
                    .as_array()?
                    .iter()
                    .filter(|b| b["fenced"] == false)
                    .count();
                (live == 3).then_some(())
            })
            .await;
        cluster
    }

    fn broker(&self, id: u64) -> &Node {
        &self.brokers[id as usize - 1]
    }

    fn broker_mut(&mut self, id: u64) -> &mut Node {
        &mut self.brokers[id as usize - 1]
    }

    async fn call(
        &self,
        method: reqwest::Method,
        url: String,
        body: Option<Value>,
    ) -> Option<(u16, Value)> {
        let mut request = self.http.request(method, &url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.ok()?;
        let status = response.status().as_u16();
        Some((status, response.json().await.unwrap_or(Value::Null)))
    }

    async fn get(&self, url: String) -> Option<Value> {
        match self.call(reqwest::Method::GET, url, None).await? {
            (200, body) => Some(body),
            _ => None,
        }
    }

    async fn controller_metadata(&self) -> Option<Value> {
        self.get(format!("{}/controller/v1/metadata", self.controller.url()))
            .await
    }

    /// The controller's view of partition `p` of `topic`.
    async fn partition(&self, topic: &str, p: usize) -> Option<Value> {
        let metadata = self.controller_metadata().await?;
        let topic = metadata["topics"]
            .as_array()?
            .iter()
            .find(|t| t["name"] == topic)?
            .clone();
        Some(topic["partitions"][p].clone())
    }

    /// Polls `check` every 50 ms until it returns `Some`, or panics after [`CONVERGENCE_MAX`].
    async fn wait_for<'a, T, F, Fut>(&'a self, what: &str, mut check: F) -> T
    where
        F: FnMut(&'a Cluster) -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let started = Instant::now();
        loop {
            if let Some(value) = check(self).await {
                return value;
            }
            if started.elapsed() > CONVERGENCE_MAX {
                panic!(
                    "timed out waiting for {what}; node logs in {}",
                    self.root.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn create_topic(&self, name: &str, replication_factor: u32, configs: Value) {
        let body = json!({"name": name, "partitions": 1, "replication_factor": replication_factor, "configs": configs});
        let (status, answer) = self
            .call(
                reqwest::Method::POST,
                format!("{}/v1/topics", self.broker(1).url()),
                Some(body),
            )
            .await
            .expect("create topic answered");
        assert_eq!(status, 201, "{answer}");
        // Every replica knows its role once each of its brokers reports it.
        let replicas: Vec<u64> = answer["partitions"][0]["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_u64().unwrap())
            .collect();
        self.wait_for("replicas to take their roles", |c| {
            let replicas = replicas.clone();
            async move {
                for &broker in &replicas {
                    let status = c
                        .get(format!("{}/v1/status", c.broker(broker).url()))
                        .await?;
                    let replica = status["replicas"]
                        .as_array()?
                        .iter()
                        .find(|r| r["topic"] == name)?
                        .clone();
                    if replica["role"] == "offline" {
                        return None;
                    }
                }
                Some(())
            }
        })
        .await;
    }

    /// Produces one record `value`; `Ok(offset)` or `Err((status, error name))`.
    async fn produce(
        &self,
        broker: u64,
        topic: &str,
        value: &str,
        acks: &str,
    ) -> Result<Option<u64>, (u16, String)> {
        let body =
            json!({"acks": acks, "timeout_ms": 10000, "records": [{"key": null, "value": value}]});
        let url = format!(
            "{}/v1/topics/{topic}/partitions/0/records",
            self.broker(broker).url()
        );
        match self.call(reqwest::Method::POST, url, Some(body)).await {
            Some((200, answer)) => Ok(answer["base_offset"].as_u64()),
            Some((status, answer)) => {
                Err((status, answer["error"].as_str().unwrap_or("?").to_string()))
            }
            None => Err((0, "CONNECTION".into())),
        }
    }

    /// A broker's own replica of `topic`/0: its records `(offset, value)` and its (HW, LEO),
    /// read page by page through `GET .../replica-log` (pages of 64 bytes, so every read
    /// takes several pages).
    async fn local_log(&self, broker: u64, topic: &str) -> Option<(Vec<(u64, String)>, u64, u64)> {
        let mut records = Vec::new();
        // The first page starts at the replica's log start offset.
        let mut from = String::new();
        loop {
            let url = format!(
                "{}/v1/topics/{topic}/partitions/0/replica-log?max_bytes=64{from}",
                self.broker(broker).url()
            );
            let page = self.get(url).await?;
            for r in page["records"].as_array()? {
                records.push((r["offset"].as_u64()?, r["value"].as_str()?.to_string()));
            }
            let (next, end) = (
                page["next_offset"].as_u64()?,
                page["log_end_offset"].as_u64()?,
            );
            if next >= end {
                return Some((records, page["high_watermark"].as_u64()?, end));
            }
            assert!(
                page["records"].as_array().is_some_and(|r| !r.is_empty()),
                "a page short of the log end holds records: {page}"
            );
            from = format!("&offset={next}");
        }
    }

    /// A broker's status entry for `topic`.
    async fn replica_status(&self, broker: u64, topic: &str) -> Option<Value> {
        let status = self
            .get(format!("{}/v1/status", self.broker(broker).url()))
            .await?;
        status["replicas"]
            .as_array()?
            .iter()
            .find(|r| r["topic"] == topic)
            .cloned()
    }

    /// A counter or gauge from a broker's `/metrics`.
    async fn metric(&self, broker: u64, name: &str) -> u64 {
        let url = format!("{}/metrics", self.broker(broker).url());
        let text = self
            .http
            .get(url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("tidewater_{name} ")))
            .unwrap_or_else(|| panic!("metric {name} missing"))
            .trim()
            .parse()
            .unwrap()
    }

    /// Waits until the ISR is `isr` with a leader, every ISR member has the leader's LEO, and
    /// then checks that they hold identical records (offsets and values), which include
    /// everything below the leader's HW. Returns the leader's records.
    async fn assert_converged(&self, topic: &str, isr: &[u64]) -> Vec<(u64, String)> {
        let expected_isr: Vec<Value> = isr.iter().map(|&b| json!(b)).collect();
        let logs = self
            .wait_for("the ISR to converge with identical logs", |c| {
                let expected_isr = expected_isr.clone();
                async move {
                    let partition = c.partition(topic, 0).await?;
                    if partition["isr"].as_array()? != &expected_isr
                        || partition["leader"].is_null()
                    {
                        return None;
                    }
                    let mut logs = Vec::new();
                    for &b in isr {
                        logs.push((b, c.local_log(b, topic).await?));
                    }
                    let leader_leo = logs
                        .iter()
                        .find(|(b, _)| json!(b) == partition["leader"])?
                        .1
                         .2;
                    logs.iter()
                        .all(|(_, (_, _, leo))| *leo == leader_leo)
                        .then_some(logs)
                }
            })
            .await;
        let (first, (reference, _, _)) = &logs[0];
        for (broker, (records, high_watermark, _)) in &logs {
            assert_eq!(
                records, reference,
                "replica on broker {broker} differs from broker {first}"
            );
            assert!(*high_watermark <= records.len() as u64);
        }
        reference.clone()
    }
}

fn values(records: &[(u64, String)]) -> Vec<&str> {
    records.iter().map(|(_, v)| v.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_write_survives_leader_kill_9_and_new_leader_has_higher_epoch() {
    let mut cluster = Cluster::start(3000, &[("replica.lag.time.max.ms", "3000")]).await;
    cluster
        .create_topic("t", 3, json!({"min.insync.replicas": "2"}))
        .await;
    let before = cluster.partition("t", 0).await.unwrap();
    let leader = before["leader"].as_u64().unwrap();
    let mut acked = Vec::new();
    for i in 0..20 {
        let value = format!("v{i}");
        let offset = cluster
            .produce(leader, "t", &value, "all")
            .await
            .expect("acks=all write")
            .unwrap();
        acked.push((offset, value));
    }
    cluster.broker_mut(leader).kill9();
    let after = cluster
        .wait_for("a new leader", |c| async move {
            let p = c.partition("t", 0).await?;
            (p["leader"].as_u64().is_some_and(|l| l != leader)).then_some(p)
        })
        .await;
    assert!(
        after["leader_epoch"].as_u64() > before["leader_epoch"].as_u64(),
        "{before} -> {after}"
    );
    let new_leader = after["leader"].as_u64().unwrap();
    let acked_count = acked.len();
    let records = cluster
        .wait_for(
            "the new leader to serve the committed records",
            |c| async move {
                let url = format!(
                    "{}/v1/topics/t/partitions/0/records?offset=0",
                    c.broker(new_leader).url()
                );
                let fetched = c.get(url).await?;
                let records: Vec<(u64, String)> = fetched["records"]
                    .as_array()?
                    .iter()
                    .map(|r| {
                        (
                            r["offset"].as_u64().unwrap(),
                            r["value"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect();
                (records.len() >= acked_count).then_some(records)
            },
        )
        .await;
    assert_eq!(
        records[..acked.len()],
        acked[..],
        "every acknowledged record at its offset"
    );
    // Clients that still carry the old leader epoch are fenced (KIP-320), nothing is written.
    let stale_epoch = before["leader_epoch"].clone();
    let url = format!(
        "{}/v1/topics/t/partitions/0/records",
        cluster.broker(new_leader).url()
    );
    let body = json!({"acks": "all", "leader_epoch": stale_epoch, "records": [{"value": "stale"}]});
    let (status, answer) = cluster
        .call(reqwest::Method::POST, url, Some(body))
        .await
        .unwrap();
    assert_eq!(
        (status, answer["error"].as_str()),
        (409, Some("FENCED_LEADER_EPOCH"))
    );
    let url = format!(
        "{}/v1/topics/t/partitions/0/records?offset=0&leader_epoch={stale_epoch}",
        cluster.broker(new_leader).url()
    );
    let (status, answer) = cluster.call(reqwest::Method::GET, url, None).await.unwrap();
    assert_eq!(
        (status, answer["error"].as_str()),
        (409, Some("FENCED_LEADER_EPOCH"))
    );
    // The old leader comes back as a follower and catches up; all replicas end identical.
    cluster.broker_mut(leader).start();
    let final_records = cluster.assert_converged("t", &[1, 2, 3]).await;
    assert_eq!(final_records, acked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_follower_leaves_and_rejoins_isr_and_min_isr_gates_acks_all() {
    let cluster = Cluster::start(15000, &[("replica.lag.time.max.ms", "1000")]).await;
    cluster
        .create_topic("t", 3, json!({"min.insync.replicas": "3"}))
        .await;
    cluster
        .produce(1, "t", "first", "all")
        .await
        .expect("full ISR accepts acks=all");
    let follower = 3;
    cluster.broker(follower).pause();
    // The follower falls behind only if the leader's log grows: keep writing with acks=1.
    let mut n = 0;
    cluster
        .wait_for("the paused follower to leave the ISR", |c| {
            n += 1;
            let value = format!("lag{n}");
            async move {
                c.produce(1, "t", &value, "1")
                    .await
                    .expect("acks=1 works with a lagging follower");
                let p = c.partition("t", 0).await?;
                (p["isr"] == json!([1, 2])).then_some(())
            }
        })
        .await;
    // As with the expansion below: the controller shows the new ISR before the leader has read
    // its AlterPartition answer, and the leader gates acks=all on the ISR it has read.
    cluster
        .wait_for("the leader to count the shrink", |c| async move {
            (c.metric(1, "isr_shrinks_total").await >= 1).then_some(())
        })
        .await;
    assert_eq!(cluster.metric(1, "under_replicated_partitions").await, 1);
    let leo_before = cluster.local_log(1, "t").await.unwrap().2;
    let refused = cluster.produce(1, "t", "refused", "all").await;
    assert_eq!(refused, Err((503, "NOT_ENOUGH_REPLICAS".to_string())));
    assert_eq!(
        cluster.local_log(1, "t").await.unwrap().2,
        leo_before,
        "nothing was appended"
    );

    cluster.broker(follower).resume();
    cluster
        .wait_for("the follower to rejoin the ISR", |c| async move {
            (c.partition("t", 0).await?["isr"] == json!([1, 2, 3])).then_some(())
        })
        .await;
    // The controller shows the new ISR before the leader has read its AlterPartition answer.
    cluster
        .wait_for("the leader to count the expansion", |c| async move {
            (c.metric(1, "isr_expands_total").await >= 1).then_some(())
        })
        .await;
    assert!(cluster.metric(1, "isr_expands_total").await >= 1);
    assert_eq!(cluster.metric(1, "under_replicated_partitions").await, 0);
    cluster
        .produce(1, "t", "accepted", "all")
        .await
        .expect("acks=all works again");
    let records = cluster.assert_converged("t", &[1, 2, 3]).await;
    assert_eq!(values(&records).last(), Some(&"accepted"));
    assert!(!values(&records).contains(&"refused"));
}

/// Settings of the unclean-election tests (short fetch waits: see `lose_the_only_isr_member`).
const UNCLEAN_SETTINGS: &[(&str, &str)] = &[
    ("replica.lag.time.max.ms", "1000"),
    ("replica.fetch.wait.max.ms", "200"),
];

/// Partition on brokers [1, 2]: r0..r4 replicated to both, then broker 2 paused until it left
/// the ISR, r5..r9 acknowledged by broker 1 alone, broker 1 killed and broker 2 resumed.
/// Returns the acknowledged `(offset, value)` pairs.
async fn lose_the_only_isr_member(cluster: &mut Cluster) -> Vec<(u64, String)> {
    let mut acked = Vec::new();
    for i in 0..5 {
        let value = format!("r{i}");
        acked.push((
            cluster
                .produce(1, "t", &value, "all")
                .await
                .expect("replicated write")
                .unwrap(),
            value,
        ));
    }
    cluster.broker(2).pause();
    // Broker 2's fetch parked at the leader would still carry r5 into its socket buffer; let
    // that long poll expire (replica.fetch.wait.max.ms = 200) so broker 2 truly misses r5.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let first_lagging = cluster
        .produce(1, "t", "r5", "1")
        .await
        .expect("acks=1 write")
        .unwrap();
    acked.push((first_lagging, "r5".to_string()));
    cluster
        .wait_for("broker 2 to leave the ISR", |c| async move {
            (c.partition("t", 0).await?["isr"] == json!([1])).then_some(())
        })
        .await;
    for i in 6..10 {
        let value = format!("r{i}");
        acked.push((
            cluster
                .produce(1, "t", &value, "all")
                .await
                .expect("ISR {1} commits")
                .unwrap(),
            value,
        ));
    }
    cluster.broker_mut(1).kill9();
    cluster.broker(2).resume();
    cluster
        .wait_for("broker 1 to be fenced", |c| async move {
            let metadata = c.controller_metadata().await?;
            let broker = metadata["brokers"]
                .as_array()?
                .iter()
                .find(|b| b["id"] == 1)?
                .clone();
            (broker["fenced"] == true).then_some(())
        })
        .await;
    acked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unclean_election_disabled_keeps_the_partition_offline_and_loses_nothing() {
    let mut cluster = Cluster::start(3000, UNCLEAN_SETTINGS).await;
    cluster.create_topic("t", 2, json!({})).await;
    let acked = lose_the_only_isr_member(&mut cluster).await;
    // Broker 2 is alive but out of sync: no leader while the ISR's last member is down.
    cluster
        .wait_for("broker 2 to be unfenced again", |c| async move {
            let metadata = c.controller_metadata().await?;
            let broker = metadata["brokers"]
                .as_array()?
                .iter()
                .find(|b| b["id"] == 2)?
                .clone();
            (broker["fenced"] == false).then_some(())
        })
        .await;
    let offline = cluster.partition("t", 0).await.unwrap();
    assert!(offline["leader"].is_null(), "{offline}");
    // KIP-966: the last ISR member moves to the ELR and is remembered as the last known
    // leader; it leads again when it returns (after its unclean restart it leaves the ELR,
    // which leaves it the only candidate).
    assert_eq!(offline["isr"], json!([]), "{offline}");
    assert_eq!(offline["elr"], json!([1]), "{offline}");
    assert_eq!(
        offline["last_known_leader"], 1,
        "the last ISR member is remembered"
    );
    let refused = cluster.produce(2, "t", "x", "1").await;
    assert_eq!(refused, Err((421, "NOT_LEADER_OR_FOLLOWER".to_string())));
    assert_eq!(
        cluster.local_log(2, "t").await.unwrap().2,
        5,
        "broker 2 still holds only r0..r4"
    );

    cluster.broker_mut(1).start();
    let records = cluster.assert_converged("t", &[1, 2]).await;
    assert_eq!(records, acked, "nothing acknowledged was lost");
    assert_eq!(cluster.partition("t", 0).await.unwrap()["leader"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unclean_election_enabled_elects_the_stale_replica_and_loses_its_missing_tail() {
    let mut cluster = Cluster::start(3000, UNCLEAN_SETTINGS).await;
    cluster
        .create_topic("t", 2, json!({"unclean.leader.election.enable": "true"}))
        .await;
    let acked = lose_the_only_isr_member(&mut cluster).await;
    let elected = cluster
        .wait_for("the stale replica to be elected", |c| async move {
            let p = c.partition("t", 0).await?;
            (p["leader"] == 2).then_some(p)
        })
        .await;
    assert_eq!(elected["isr"], json!([2]));
    let new_offset = cluster
        .wait_for("the unclean leader to take writes", |c| async move {
            c.produce(2, "t", "after", "1").await.ok().flatten()
        })
        .await;
    assert_eq!(new_offset, 5, "the new leader continues at its own log end");
    cluster.broker_mut(1).start();
    let records = cluster.assert_converged("t", &[1, 2]).await;
    let lost: Vec<u64> = acked
        .iter()
        .filter(|r| !records.contains(r))
        .map(|r| r.0)
        .collect();
    assert_eq!(
        lost,
        vec![5, 6, 7, 8, 9],
        "exactly the records broker 2 never had are gone"
    );
    assert_eq!(records[..5], acked[..5]);
    assert_eq!(records[5], (5, "after".to_string()));
}

/// KIP-101's lost-write scenario, made deterministic: broker 1 leads [1, 2, 3] and commits
/// `m` at offset 0; followers 2 and 3 have it but not yet the HW that covers it (their long
/// polls are parked for 20 s). Broker 2 is paused; broker 1 restarts, which elects the paused
/// broker 2; broker 3 becomes its follower (and, with truncation to the HW, drops `m`) but
/// cannot fetch from it. Then broker 2 restarts, which elects broker 3.
async fn kip101_scenario(unsafe_truncate_to_hw: bool) -> (Cluster, String) {
    let flag = unsafe_truncate_to_hw.to_string();
    let settings = [
        ("replica.lag.time.max.ms", "30000"),
        ("replica.fetch.wait.max.ms", "20000"),
        ("replica.high.watermark.checkpoint.interval.ms", "600000"),
        ("tidewater.unsafe.truncate.to.hw.enable", flag.as_str()),
    ];
    let mut cluster = Cluster::start(30000, &settings).await;
    cluster.create_topic("t", 3, json!({})).await;
    let m = "m".to_string();
    assert_eq!(
        cluster.produce(1, "t", &m, "all").await,
        Ok(Some(0)),
        "m is committed"
    );
    for follower in [2, 3] {
        let (_, high_watermark, leo) = cluster.local_log(follower, "t").await.unwrap();
        assert_eq!(
            (high_watermark, leo),
            (0, 1),
            "broker {follower} has m but not the HW yet"
        );
    }
    cluster.broker(2).pause();
    cluster.broker_mut(1).restart();
    cluster
        .wait_for(
            "paused broker 2 to be elected and 1 and 3 to follow it",
            |c| async move {
                let p = c.partition("t", 0).await?;
                if p["leader"] != 2 {
                    return None;
                }
                for b in [1, 3] {
                    let s = c.replica_status(b, "t").await?;
                    if s["role"] != "follower" || s["leader_epoch"] != p["leader_epoch"] {
                        return None;
                    }
                }
                Some(())
            },
        )
        .await;
    let expected_leo = if unsafe_truncate_to_hw { 0 } else { 1 };
    cluster
        .wait_for("broker 3 to finish its truncation", |c| async move {
            (c.local_log(3, "t").await?.2 == expected_leo).then_some(())
        })
        .await;
    cluster.broker_mut(2).restart();
    cluster
        .wait_for("broker 3 to be elected", |c| async move {
            (c.partition("t", 0).await?["leader"] == 3).then_some(())
        })
        .await;
    (cluster, m)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip101_truncation_by_leader_epoch_keeps_the_acknowledged_write() {
    let (cluster, m) = kip101_scenario(false).await;
    let records = cluster.assert_converged("t", &[1, 2, 3]).await;
    assert_eq!(records, vec![(0, m)], "m survives on every replica");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip101_unsafe_truncation_to_hw_loses_the_acknowledged_write() {
    let (cluster, m) = kip101_scenario(true).await;
    // The new leader holds nothing; the others truncate to their HW (0) and follow it.
    cluster
        .produce(3, "t", "next", "all")
        .await
        .expect("new leader takes writes");
    let records = cluster.assert_converged("t", &[1, 2, 3]).await;
    assert_eq!(
        records,
        vec![(0, "next".to_string())],
        "m was acknowledged and is gone"
    );
    assert!(!values(&records).contains(&m.as_str()));
}

/// A follower with a divergent suffix, as KIP-101 and KIP-279 describe it: the old leader
/// (`l`) appended `x1`, `x2` while it was the ISR's last member and its followers were down
/// (acks=1), then died; the followers came back and one of them was elected (unclean election,
/// the way a stale replica gets elected in practice) and took `y1`..`y3` at the same offsets.
/// Then the old leader returns as a follower of the new one. Every step is decided by which
/// processes are alive, so no fetch can race the scenario. Returns the cluster, the old and the
/// new leader once the old one has caught up with the new leader's log end offset, and the
/// values the new leader acknowledged.
async fn divergent_follower_scenario(
    keep_divergent_suffix: bool,
) -> (Cluster, u64, u64, Vec<(u64, String)>) {
    let bug = keep_divergent_suffix.to_string();
    let mut settings = vec![("replica.lag.time.max.ms", "30000")];
    if keep_divergent_suffix {
        settings.push(("tidewater.bug.keep.divergent.suffix.enable", bug.as_str()));
    }
    let mut cluster = Cluster::start(3000, &settings).await;
    cluster
        .create_topic("t", 3, json!({"unclean.leader.election.enable": "true"}))
        .await;
    let old = cluster.partition("t", 0).await.unwrap()["leader"]
        .as_u64()
        .unwrap();
    let followers: Vec<u64> = (1..=3).filter(|b| *b != old).collect();
    assert_eq!(cluster.produce(old, "t", "a", "all").await, Ok(Some(0)));
    for &f in &followers {
        cluster.broker_mut(f).kill9();
    }
    cluster
        .wait_for("the old leader alone in the ISR", |c| async move {
            let p = c.partition("t", 0).await?;
            (p["isr"] == json!([old])).then_some(())
        })
        .await;
    for (i, value) in ["x1", "x2"].iter().enumerate() {
        let offset = cluster.produce(old, "t", value, "1").await;
        assert_eq!(
            offset,
            Ok(Some(i as u64 + 1)),
            "{value} on the old leader only"
        );
    }
    cluster.broker_mut(old).kill9();
    for &f in &followers {
        cluster.broker_mut(f).start();
    }
    let new = cluster
        .wait_for("a follower elected (unclean)", |c| async move {
            let leader = c.partition("t", 0).await?["leader"].as_u64()?;
            (leader != old).then_some(leader)
        })
        .await;
    let mut acked = vec![(0, "a".to_string())];
    for value in ["y1", "y2", "y3"] {
        let offset = cluster.produce(new, "t", value, "all").await;
        acked.push((
            offset.expect("the new leader takes writes").unwrap(),
            value.into(),
        ));
    }
    assert_eq!(
        acked.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
        [0, 1, 2, 3],
        "y1 and y2 take the offsets of x1 and x2"
    );
    cluster.broker_mut(old).start();
    cluster
        .wait_for(
            "the old leader to follow and reach the log end",
            |c| async move {
                let status = c.replica_status(old, "t").await?;
                let (_, _, leo) = c.local_log(old, "t").await?;
                (status["role"] == "follower" && leo == 4).then_some(())
            },
        )
        .await;
    (cluster, old, new, acked)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn divergent_follower_truncates_by_leader_epoch_and_matches_the_leader() {
    let (cluster, old, new, acked) = divergent_follower_scenario(false).await;
    let (old_log, _, _) = cluster.local_log(old, "t").await.unwrap();
    let (new_log, _, _) = cluster.local_log(new, "t").await.unwrap();
    assert_eq!(new_log, acked);
    assert_eq!(old_log, new_log, "x1 and x2 truncated, y1..y3 fetched");
}

#[cfg(feature = "deliberate-bugs")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bug_keep_divergent_suffix_leaves_two_values_at_one_offset() {
    let (cluster, old, new, acked) = divergent_follower_scenario(true).await;
    let (old_log, _, _) = cluster.local_log(old, "t").await.unwrap();
    let (new_log, _, _) = cluster.local_log(new, "t").await.unwrap();
    assert_eq!(new_log, acked);
    // Same length, different records: offsets 1 and 2 hold x1, x2 on the old leader and the
    // acknowledged y1, y2 on the new one; electing the old leader would lose y1 and y2.
    assert_eq!(
        values(&old_log),
        ["a", "x1", "x2", "y3"],
        "the divergent suffix kept, fetched on from its log end"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_restart_keeps_topics_leaders_epochs_and_isrs() {
    let mut cluster = Cluster::start(5000, &[("replica.lag.time.max.ms", "3000")]).await;
    cluster
        .create_topic("a", 3, json!({"min.insync.replicas": "2"}))
        .await;
    cluster.create_topic("b", 2, json!({})).await;
    cluster.produce(1, "a", "x", "all").await.unwrap();
    // A leader change first, so the state holds epochs above zero.
    let a_leader = cluster.partition("a", 0).await.unwrap()["leader"]
        .as_u64()
        .unwrap();
    cluster.broker_mut(a_leader).restart();
    cluster.assert_converged("a", &[1, 2, 3]).await;
    cluster.assert_converged("b", &[1, 2]).await;
    let before = cluster.controller_metadata().await.unwrap();
    assert!(
        before["topics"][0]["partitions"][0]["leader_epoch"]
            .as_u64()
            .unwrap()
            >= 1
    );

    cluster.controller.restart();
    let after = cluster
        .wait_for("the controller to answer again", |c| async move {
            c.controller_metadata().await
        })
        .await;
    assert_eq!(after["topics"], before["topics"]);
    assert_eq!(after["version"], before["version"]);
    // The brokers keep their sessions across the restart and the cluster keeps working.
    let leader = after["topics"][0]["partitions"][0]["leader"]
        .as_u64()
        .unwrap();
    cluster
        .produce(leader, "a", "y", "all")
        .await
        .expect("acks=all after the restart");
    let metadata = cluster.controller_metadata().await.unwrap();
    assert!(metadata["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .all(|b| b["fenced"] == false));
    assert_eq!(metadata["topics"], before["topics"]);
}

/// KIP-207: broker 1 leads [1, 2, 3] and commits `m` (HW 1); the followers' HWs still lag (0).
/// Broker 3 is paused and broker 1 restarts, which elects broker 2 with HW 0 below its epoch
/// start 1, and its HW cannot move while paused broker 3 is in the ISR. Returns the cluster and
/// broker 2's answers at that moment to a consumer fetch at offset 0 and to list offsets
/// latest and earliest.
async fn kip207_scenario(unsafe_serve_lagging_hw: bool) -> (Cluster, [(u16, Value); 3]) {
    let flag = unsafe_serve_lagging_hw.to_string();
    let settings = [
        ("replica.lag.time.max.ms", "30000"),
        ("replica.fetch.wait.max.ms", "20000"),
        ("replica.high.watermark.checkpoint.interval.ms", "600000"),
        ("tidewater.unsafe.serve.lagging.hw.enable", flag.as_str()),
    ];
    let mut cluster = Cluster::start(30000, &settings).await;
    cluster.create_topic("t", 3, json!({})).await;
    assert_eq!(cluster.produce(1, "t", "m", "all").await, Ok(Some(0)));
    cluster.broker(3).pause();
    cluster.broker_mut(1).restart();
    cluster
        .wait_for("broker 2 to lead", |c| async move {
            (c.replica_status(2, "t").await?["role"] == "leader").then_some(())
        })
        .await;
    let base = format!("{}/v1/topics/t/partitions/0", cluster.broker(2).url());
    let mut answers = Vec::new();
    for path in [
        "records?offset=0",
        "offsets?spec=latest",
        "offsets?spec=earliest",
    ] {
        let url = format!("{base}/{path}");
        let answer = cluster.call(reqwest::Method::GET, url, None).await;
        answers.push(answer.unwrap_or_else(|| panic!("broker 2 answers {path}")));
    }
    (cluster, answers.try_into().unwrap())
}

/// As Kafka's `Partition.fetchRecords`: a new leader serves fetches below its own HW even
/// when that HW lags the start of its epoch, so a consumer sees the HW go back from 1 to 0
/// (a visibility-only regression); only the latest offset waits (KIP-207, Kafka's
/// `fetchOffsetForTimestamp`), and the earliest offset does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip207_a_lagging_new_leader_serves_reads_below_its_hw_and_withholds_only_the_latest_offset(
) {
    let (cluster, [fetch, latest, earliest]) = kip207_scenario(false).await;
    assert_eq!(fetch.0, 200, "{}", fetch.1);
    assert_eq!(
        (&fetch.1["high_watermark"], &fetch.1["records"]),
        (&json!(0), &json!([])),
        "HW 1 was acknowledged before, the new leader answers 0: {}",
        fetch.1
    );
    assert_eq!(
        (latest.0, latest.1["error"].as_str()),
        (503, Some("OFFSET_NOT_AVAILABLE")),
        "{}",
        latest.1
    );
    assert_eq!((earliest.0, &earliest.1["offset"]), (200, &json!(0)));
    cluster.broker(3).resume();
    let fetched = cluster
        .wait_for("the HW to catch up", |c| async move {
            let url = format!(
                "{}/v1/topics/t/partitions/0/records?offset=0",
                c.broker(2).url()
            );
            let body = c.get(url).await?;
            (body["high_watermark"] == 1).then_some(body)
        })
        .await;
    assert_eq!(fetched["records"][0]["value"], "m");
    let url = format!(
        "{}/v1/topics/t/partitions/0/offsets?spec=latest",
        cluster.broker(2).url()
    );
    assert_eq!(cluster.get(url).await.unwrap()["offset"], 1);
}

/// Before KIP-207 the lagging HW was the latest offset too: it goes back from 1 to 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip207_unsafe_serving_of_a_lagging_hw_answers_it_as_the_latest_offset() {
    let (cluster, [fetch, latest, _]) = kip207_scenario(true).await;
    assert_eq!((fetch.0, &fetch.1["high_watermark"]), (200, &json!(0)));
    assert_eq!(
        (latest.0, &latest.1["offset"]),
        (200, &json!(0)),
        "latest 1 was acknowledged before, now 0: {}",
        latest.1
    );
    cluster.broker(3).resume();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acks_all_writes_all_complete_and_are_all_replicated() {
    let cluster = Cluster::start(10000, &[("replica.lag.time.max.ms", "10000")]).await;
    cluster
        .create_topic("t", 3, json!({"min.insync.replicas": "2"}))
        .await;
    // 32 writers at once: delayed produces wait while appends and follower fetches publish
    // new offsets (this once deadlocked the leader).
    let writers = (0..32).map(|w| {
        let cluster = &cluster;
        async move {
            let mut acked = Vec::new();
            for i in 0..10 {
                let value = format!("w{w}-{i}");
                let offset = cluster
                    .produce(1, "t", &value, "all")
                    .await
                    .expect("acks=all write")
                    .unwrap();
                acked.push((offset, value));
            }
            acked
        }
    });
    let mut acked: Vec<(u64, String)> = futures::future::join_all(writers)
        .await
        .into_iter()
        .flatten()
        .collect();
    acked.sort();
    let records = cluster.assert_converged("t", &[1, 2, 3]).await;
    assert_eq!(
        records, acked,
        "every acknowledged write, each at its own offset"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_log_start_offset_on_every_replica() {
    let cluster = Cluster::start(10000, &[("replica.lag.time.max.ms", "10000")]).await;
    cluster.create_topic("t", 3, json!({})).await;
    for i in 0..10 {
        cluster
            .produce(1, "t", &format!("d{i}"), "all")
            .await
            .expect("acks=all write");
    }
    let url = format!(
        "{}/v1/topics/t/partitions/0/delete-records",
        cluster.broker(1).url()
    );
    let (status, answer) = cluster
        .call(reqwest::Method::POST, url, Some(json!({"offset": 4})))
        .await
        .unwrap();
    assert_eq!(
        (status, answer["low_watermark"].as_u64()),
        (200, Some(4)),
        "{answer}"
    );
    for broker in [1, 2, 3] {
        let status = cluster.replica_status(broker, "t").await.unwrap();
        assert_eq!(status["log_start_offset"], 4, "broker {broker}: {status}");
    }
    let url = format!(
        "{}/v1/topics/t/partitions/0/records?offset=2",
        cluster.broker(1).url()
    );
    let (status, answer) = cluster.call(reqwest::Method::GET, url, None).await.unwrap();
    assert_eq!(
        (status, answer["error"].as_str()),
        (416, Some("OFFSET_OUT_OF_RANGE"))
    );
    let leader = cluster.replica_status(1, "t").await.unwrap();
    assert_eq!(leader["low_watermark"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_controller_does_not_fence_brokers_when_it_resumes() {
    let cluster = Cluster::start(2000, &[("replica.lag.time.max.ms", "3000")]).await;
    cluster.create_topic("t", 3, json!({})).await;
    let before = cluster.controller_metadata().await.unwrap();
    cluster.controller.pause();
    // Longer than a session: every broker's heartbeats go unanswered meanwhile.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    cluster.controller.resume();
    // Two session timeouts of normal operation after the resume.
    tokio::time::sleep(Duration::from_millis(4000)).await;
    let after = cluster.controller_metadata().await.unwrap();
    assert_eq!(
        after["version"], before["version"],
        "nothing changed: {after}"
    );
    assert_eq!(after["topics"], before["topics"]);
}

impl Cluster {
    /// Produces one record with acks=all through broker 1 and returns the whole answer.
    async fn produce_answer(&self, topic: &str, value: &str) -> (u16, Value) {
        let body =
            json!({"acks": "all", "timeout_ms": 10000, "records": [{"key": null, "value": value}]});
        let url = format!(
            "{}/v1/topics/{topic}/partitions/0/records",
            self.broker(1).url()
        );
        self.call(reqwest::Method::POST, url, Some(body))
            .await
            .expect("broker 1 answers")
    }

    /// A cluster with `bug` switched on and the topic `t` (min.insync.replicas=3) whose ISR
    /// has shrunk to brokers 1 and 2, broker 3 paused (the caller resumes it).
    #[cfg(feature = "deliberate-bugs")]
    async fn with_short_isr(bug: &str) -> Cluster {
        let cluster =
            Cluster::start(15000, &[("replica.lag.time.max.ms", "1000"), (bug, "true")]).await;
        cluster
            .create_topic("t", 3, json!({"min.insync.replicas": "3"}))
            .await;
        cluster.shrink_isr_to_1_and_2("t").await;
        cluster
    }

    /// Pauses broker 3 and writes with acks=1 until it left the ISR of `topic` (led by 1) and
    /// the leader counts the shrink (the controller shows the new ISR before the leader has
    /// read its AlterPartition answer).
    #[cfg(feature = "deliberate-bugs")]
    async fn shrink_isr_to_1_and_2(&self, topic: &'static str) {
        self.broker(3).pause();
        let mut n = 0;
        self.wait_for("the paused follower to leave the ISR", |c| {
            n += 1;
            let value = format!("lag{n}");
            async move {
                c.produce(1, topic, &value, "1").await.ok()?;
                let p = c.partition(topic, 0).await?;
                (p["isr"] == json!([1, 2])).then_some(())
            }
        })
        .await;
        self.wait_for("the leader to count the shrink", |c| async move {
            (c.metric(1, "isr_shrinks_total").await >= 1).then_some(())
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_answer_reports_the_isr_size_it_was_counted_with() {
    let cluster = Cluster::start(15000, &[]).await;
    cluster
        .create_topic("t", 3, json!({"min.insync.replicas": "2"}))
        .await;
    let (status, answer) = cluster.produce_answer("t", "first").await;
    assert_eq!((status, answer["isr_size"].clone()), (200, json!(3)));
}

#[cfg(feature = "deliberate-bugs")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bug_ignore_min_insync_acknowledges_with_a_short_isr_and_says_so() {
    let cluster = Cluster::with_short_isr("tidewater.bug.ignore.min.insync.enable").await;
    // A correct broker answers NOT_ENOUGH_REPLICAS (see the test above with min ISR 3).
    let (status, answer) = cluster.produce_answer("t", "accepted").await;
    assert_eq!((status, answer["isr_size"].clone()), (200, json!(2)));
    cluster.broker(3).resume();
}

#[cfg(feature = "deliberate-bugs")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bug_min_insync_after_append_refuses_a_record_it_has_appended() {
    let cluster = Cluster::with_short_isr("tidewater.bug.min.insync.after.append.enable").await;
    let leo_before = cluster.local_log(1, "t").await.unwrap().2;
    // The answer a correct broker gives
    // (`paused_follower_leaves_and_rejoins_isr_and_min_isr_gates_acks_all`)...
    let refused = cluster.produce(1, "t", "refused", "all").await;
    assert_eq!(refused, Err((503, "NOT_ENOUGH_REPLICAS".to_string())));
    // ... but the record is in the leader's log, the one thing that answer rules out.
    let (records, _, leo_after) = cluster.local_log(1, "t").await.unwrap();
    assert_eq!(leo_after, leo_before + 1);
    assert_eq!(records.last(), Some(&(leo_before, "refused".to_string())));
    cluster.broker(3).resume();
}

#[cfg(feature = "deliberate-bugs")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bug_ack_before_replication_acknowledges_what_no_follower_has() {
    let cluster = Cluster::start(
        15000,
        &[("tidewater.bug.ack.before.replication.enable", "true")],
    )
    .await;
    cluster
        .create_topic("t", 3, json!({"min.insync.replicas": "2"}))
        .await;
    cluster.produce(1, "t", "first", "all").await.unwrap();
    cluster.broker(2).pause();
    cluster.broker(3).pause();
    // Both followers are stopped, the ISR is still whole: a correct leader would wait.
    let (status, answer) = cluster.produce_answer("t", "unreplicated").await;
    assert_eq!(status, 200, "{answer}");
    let (_, high_watermark, log_end_offset) = cluster.local_log(1, "t").await.unwrap();
    assert!(
        high_watermark < log_end_offset,
        "acknowledged above the HW: HW {high_watermark}, LEO {log_end_offset}"
    );
    cluster.broker(2).resume();
    cluster.broker(3).resume();
}

#[cfg(feature = "deliberate-bugs")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bug_serve_uncommitted_hands_consumers_records_above_the_hw() {
    let cluster =
        Cluster::start(15000, &[("tidewater.bug.serve.uncommitted.enable", "true")]).await;
    cluster
        .create_topic("t", 3, json!({"min.insync.replicas": "2"}))
        .await;
    cluster.produce(1, "t", "first", "all").await.unwrap();
    cluster.broker(2).pause();
    cluster.broker(3).pause();
    let offset = cluster.produce(1, "t", "uncommitted", "1").await.unwrap();
    let url = format!(
        "{}/v1/topics/t/partitions/0/records?offset={}",
        cluster.broker(1).url(),
        offset.unwrap()
    );
    let fetched = cluster.get(url).await.unwrap();
    // A correct leader returns nothing at or above its HW with the default isolation.
    assert_eq!(fetched["records"][0]["value"], "uncommitted", "{fetched}");
    assert!(fetched["high_watermark"].as_u64() <= offset);
    cluster.broker(2).resume();
    cluster.broker(3).resume();
}
