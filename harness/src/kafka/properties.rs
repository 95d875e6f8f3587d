//! Apache Kafka's configuration as the harness writes it, one home for the ssh backend's
//! `kind = "kafka"` hosts and the local backend's `--system kafka` nodes: the same
//! `server.properties` for both. Plain text, unit-tested without Kafka.
//!
//! - [`KafkaSpec`]: where Kafka lives and how the cluster is laid out (the cluster file's
//!   `[kafka]` table; the local backend fills one in): ports, quorum, cluster id, heap,
//!   extra properties.
//! - [`check_sets`] and [`broker_properties`]: Tidewater's `--set` names (the companion broker's,
//!   which are Kafka's) mapped to Kafka's broker properties; names Kafka has no equivalent for
//!   are refused before anything starts.
//! - [`server_properties`]: each node's `server.properties` (identity, listeners, quorum
//!   voters, log directory, then the harness's choices, the file's properties, the run's).

use crate::cluster::{NodeInfo, Role};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, SocketAddrV4};

/// The default KRaft cluster id: base64url (no padding) of the 16 bytes `TidewaterKafka01`,
/// as `kafka-storage.sh random-uuid` would print one. Fixed rather than random so a node whose
/// data is wiped during a run, or a cluster kept across runs (`wipe_on_setup = false`), is
/// formatted with the id its peers have.
pub const DEFAULT_CLUSTER_ID: &str = "VGlkZXdhdGVyS2Fma2EwMQ";

/// The name of the listener clients and brokers use.
const CLIENT_LISTENER: &str = "PLAINTEXT";

/// The name of the KRaft controllers' listener.
const CONTROLLER_LISTENER: &str = "CONTROLLER";

/// Which nodes vote in the KRaft metadata quorum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quorum {
    /// `c1` alone is the controller (`process.roles=controller`); `n1..nN` are brokers only.
    /// Like the companion broker's single controller: killing `c1` stops metadata changes.
    #[default]
    Dedicated,
    /// `c1` is a controller and every broker is one too (`process.roles=broker,controller`):
    /// the voters are `c1` and `n1..nN`, so killing a broker also takes a voter down.
    Combined,
}

fn default_home() -> String {
    "/opt/kafka".into()
}
fn default_port() -> u16 {
    9092
}
fn default_controller_port() -> u16 {
    9093
}
fn default_cluster_id() -> String {
    DEFAULT_CLUSTER_ID.into()
}
/// `KAFKA_HEAP_OPTS` when the cluster file sets none and the release's scripts start Kafka.
pub const SCRIPTS_HEAP_OPTS: &str = "-Xmx512m -Xms512m";

/// How the hosts of a `kind = "kafka"` cluster start Kafka's JVMs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Launch {
    /// Through the release's own scripts (`bin/kafka-storage.sh`, `bin/kafka-server-start.sh`,
    /// with `KAFKA_HEAP_OPTS` and `LOG_DIR`): a release tarball unpacked at `home`.
    #[default]
    Scripts,
    /// `java` itself, running the classes the scripts run (`kafka.tools.StorageTool`,
    /// `kafka.Kafka`) from `home/libs/` with the harness's JVM options, as the local backend
    /// does: the layout `tidewater kafka fetch` gathers (it has no `bin/`), or a tarball.
    Java,
}

/// The cluster file's `[kafka]` table: how Kafka is installed and laid out on the hosts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSpec {
    /// Where a Kafka release is unpacked on every host (`bin/kafka-server-start.sh` under
    /// it; with `launch = "java"`, `libs/`); `{node}` becomes the node's name.
    #[serde(default = "default_home")]
    pub home: String,
    /// How the JVMs are started: the release's scripts, or `java` with its `libs/`.
    #[serde(default)]
    pub launch: Launch,
    /// The brokers' client (and inter-broker) listener port, on the node's `ip`.
    #[serde(default = "default_port")]
    pub port: u16,
    /// The KRaft controllers' listener port, on the node's `ip`.
    #[serde(default = "default_controller_port")]
    pub controller_port: u16,
    /// Which nodes vote in the metadata quorum.
    #[serde(default)]
    pub quorum: Quorum,
    /// The KRaft cluster id every node is formatted with (22 characters of base64url, as
    /// `kafka-storage.sh random-uuid` prints).
    #[serde(default = "default_cluster_id")]
    pub cluster_id: String,
    /// `KAFKA_HEAP_OPTS` of every node ([`SCRIPTS_HEAP_OPTS`] when unset: Kafka's own
    /// default, 1 GiB, would not fit the default 1 GiB VMs); with `launch = "java"`, JVM
    /// options after the harness's own ([`crate::kafka::jvm::JVM_OPTIONS`], whose heap they
    /// override), none when unset.
    #[serde(default)]
    pub heap_opts: Option<String>,
    /// `JAVA_HOME` for Kafka's scripts; unset: the `java` on the hosts' `PATH`.
    #[serde(default)]
    pub java_home: Option<String>,
    /// More Kafka properties for every node (any Kafka name, e.g. `num.io.threads`), over the
    /// harness's choices and under the run's `--set`. Numbers and booleans may be written bare.
    #[serde(default, deserialize_with = "scalars_as_strings")]
    pub properties: BTreeMap<String, String>,
}

impl Default for KafkaSpec {
    fn default() -> KafkaSpec {
        KafkaSpec {
            home: default_home(),
            launch: Launch::default(),
            port: default_port(),
            controller_port: default_controller_port(),
            quorum: Quorum::default(),
            cluster_id: default_cluster_id(),
            heap_opts: None,
            java_home: None,
            properties: BTreeMap::new(),
        }
    }
}

/// Reads a table of TOML scalars as strings (`"num.io.threads" = 8` is `"8"`).
fn scalars_as_strings<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<BTreeMap<String, String>, D::Error> {
    let table = BTreeMap::<String, toml::Value>::deserialize(deserializer)?;
    table
        .into_iter()
        .map(|(k, v)| {
            let text = match v {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(serde::de::Error::custom(format!(
                        "kafka property {k:?}: expected a string, number or boolean, got {}",
                        other.type_str()
                    )))
                }
            };
            Ok((k, text))
        })
        .collect()
}

impl KafkaSpec {
    /// Checks the table: distinct ports, a well-formed cluster id, and no property the
    /// harness sets itself.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.port == 0 || self.controller_port == 0 || self.port == self.controller_port {
            return Err(format!(
                "kafka.port ({}) and kafka.controller_port ({}) must be distinct and not 0",
                self.port, self.controller_port
            ));
        }
        if !is_cluster_id(&self.cluster_id) {
            return Err(format!(
                "kafka.cluster_id {:?} is not a Kafka cluster id (22 characters of base64url \
                 encoding 16 bytes, as `kafka-storage.sh random-uuid` prints)",
                self.cluster_id
            ));
        }
        let mut problems = vec![];
        for name in self.properties.keys() {
            if is_owned(name) {
                problems.push(format!(
                    "kafka.properties may not set {name:?}: the harness sets it from the \
                     cluster file (node names, ips, kafka.port, kafka.controller_port, \
                     remote_dir, kafka.quorum)"
                ));
            } else if !is_property_name(name) {
                problems.push(format!("kafka.properties: {name:?} is not a property name"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    /// The heap options the hosts' JVMs get beside the launcher's own: `KAFKA_HEAP_OPTS` for
    /// the scripts, extra JVM options for `launch = "java"`.
    pub fn heap_opts(&self) -> &str {
        match (&self.heap_opts, self.launch) {
            (Some(opts), _) => opts,
            (None, Launch::Scripts) => SCRIPTS_HEAP_OPTS,
            (None, Launch::Java) => "",
        }
    }

    /// The node's Kafka `node.id`: K for `nK`, 0 for the controller `c1`.
    pub fn node_id(node: &NodeInfo) -> u32 {
        node.broker_id.unwrap_or(0)
    }

    /// The node's `process.roles`.
    pub fn process_roles(&self, node: &NodeInfo) -> &'static str {
        match (node.role, self.quorum) {
            (Role::Controller, _) => "controller",
            (Role::Broker, Quorum::Dedicated) => "broker",
            (Role::Broker, Quorum::Combined) => "broker,controller",
        }
    }

    /// Whether the node votes in the metadata quorum.
    fn is_voter(&self, node: &NodeInfo) -> bool {
        node.role == Role::Controller || self.quorum == Quorum::Combined
    }

    /// `controller.quorum.voters`: `id@ip:controller_port` of every voter, `c1` first.
    pub fn quorum_voters(&self, nodes: &[NodeInfo]) -> String {
        nodes
            .iter()
            .filter(|n| self.is_voter(n))
            .map(|n| format!("{}@{}:{}", Self::node_id(n), n.ip, self.controller_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Where each broker serves Kafka's protocol (node name -> `ip:port`): the bootstrap
    /// addresses of a Kafka client, which maps a leader's `node.id` K back to `nK`.
    pub fn bootstrap(&self, nodes: &[NodeInfo]) -> BTreeMap<String, SocketAddr> {
        nodes
            .iter()
            .filter(|n| n.role == Role::Broker)
            .map(|n| {
                let addr = SocketAddr::V4(SocketAddrV4::new(n.ip, self.port));
                (n.name.clone(), addr)
            })
            .collect()
    }
}

/// Whether `id` is what Kafka's `Uuid.fromString` accepts: 16 bytes in base64url without
/// padding, i.e. 22 characters of its alphabet.
pub fn is_cluster_id(id: &str) -> bool {
    let alphabet = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    id.len() == 22 && id.bytes().all(alphabet)
}

fn is_property_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Properties the harness derives from the cluster file; neither `--set` nor
/// `kafka.properties` may set them, since a wrong one would split or silence the cluster.
const OWNED_PROPERTIES: &[&str] = &[
    "process.roles",
    "node.id",
    "broker.id",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "controller.listener.names",
    "listeners",
    "advertised.listeners",
    "inter.broker.listener.name",
    "listener.security.protocol.map",
    "log.dirs",
    "log.dir",
    "metadata.log.dir",
];

fn is_owned(name: &str) -> bool {
    OWNED_PROPERTIES.contains(&name)
}

/// The type Kafka's configuration gives a property, for checking a value before a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    /// Java `int`.
    Int,
    /// Java `long`.
    Long,
    /// `true` or `false`.
    Bool,
}

impl Type {
    fn check(self, name: &str, value: &str) -> std::result::Result<(), String> {
        let ok = match self {
            Type::Int => value.parse::<i32>().is_ok(),
            Type::Long => value.parse::<i64>().is_ok(),
            Type::Bool => matches!(value, "true" | "false"),
        };
        if ok {
            return Ok(());
        }
        let expected = match self {
            Type::Int => "an int (-2147483648 to 2147483647)",
            Type::Long => "a long (-9223372036854775808 to 9223372036854775807)",
            Type::Bool => "true or false",
        };
        Err(format!("{name}={value}: Kafka takes {expected}"))
    }
}

/// Where one of Tidewater's `--set` names goes in Kafka.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// A broker (and controller) property of this name and type. Topic-level settings that
    /// are also broker settings (`min.insync.replicas`, ...) are given as the test topic's
    /// configs too, by whoever creates the topic, as with the companion broker.
    Broker(&'static str, Type),
    /// A topic config only, of the same name in Kafka: the test topic's creation configs.
    TopicOnly(Type),
    /// A boolean that Kafka decides when a node's log directory is formatted, as the level
    /// of this feature (`kafka-storage.sh format --feature NAME=1` for true, `=0` for
    /// false), not with a property.
    Feature(&'static str),
    /// Set by the harness from the cluster file.
    Owned,
    /// Kafka has nothing like it; why.
    Absent(&'static str),
}

/// Every setting the companion broker knows (`docs/configuration.md`), and where it goes in
/// Kafka, plus the few of Kafka's own a run needs to route (marked). A test holds this table
/// to the harness's topic-level lists.
const ROUTES: &[(&str, Route)] = &[
    (
        "max.connections",
        Route::Broker("max.connections", Type::Int),
    ),
    (
        "connections.max.idle.ms",
        Route::Broker("connections.max.idle.ms", Type::Long),
    ),
    (
        "log.segment.bytes",
        Route::Broker("log.segment.bytes", Type::Int),
    ),
    (
        "log.retention.ms",
        Route::Broker("log.retention.ms", Type::Long),
    ),
    (
        "log.retention.minutes",
        Route::Broker("log.retention.minutes", Type::Int),
    ),
    (
        "log.retention.hours",
        Route::Broker("log.retention.hours", Type::Int),
    ),
    (
        "log.retention.bytes",
        Route::Broker("log.retention.bytes", Type::Long),
    ),
    (
        "log.retention.check.interval.ms",
        Route::Broker("log.retention.check.interval.ms", Type::Long),
    ),
    (
        "log.flush.interval.messages",
        Route::Broker("log.flush.interval.messages", Type::Long),
    ),
    // The topic-level name; Kafka's broker-level one differs.
    (
        "flush.messages",
        Route::Broker("log.flush.interval.messages", Type::Long),
    ),
    (
        "log.index.interval.bytes",
        Route::Broker("log.index.interval.bytes", Type::Int),
    ),
    ("num.partitions", Route::Broker("num.partitions", Type::Int)),
    (
        "default.replication.factor",
        Route::Broker("default.replication.factor", Type::Int),
    ),
    (
        "message.max.bytes",
        Route::Broker("message.max.bytes", Type::Int),
    ),
    (
        "min.insync.replicas",
        Route::Broker("min.insync.replicas", Type::Int),
    ),
    (
        "unclean.leader.election.enable",
        Route::Broker("unclean.leader.election.enable", Type::Bool),
    ),
    // Kafka's alone: how often a KRaft controller looks for leaderless partitions to elect
    // uncleanly (5 minutes by default in 3.9 and 4.x, an internal setting of
    // `ReplicationConfigs`); the companion broker elects at once. A run about unclean
    // election sets it shorter than its plan's wait (docs/real-kafka.md).
    (
        "unclean.leader.election.interval.ms",
        Route::Broker("unclean.leader.election.interval.ms", Type::Long),
    ),
    (
        "log.message.timestamp.difference.max.ms",
        Route::Broker("log.message.timestamp.difference.max.ms", Type::Long),
    ),
    (
        "replica.lag.time.max.ms",
        Route::Broker("replica.lag.time.max.ms", Type::Long),
    ),
    (
        "replica.fetch.wait.max.ms",
        Route::Broker("replica.fetch.wait.max.ms", Type::Int),
    ),
    (
        "replica.fetch.max.bytes",
        Route::Broker("replica.fetch.max.bytes", Type::Int),
    ),
    (
        "broker.session.timeout.ms",
        Route::Broker("broker.session.timeout.ms", Type::Int),
    ),
    (
        "broker.heartbeat.interval.ms",
        Route::Broker("broker.heartbeat.interval.ms", Type::Int),
    ),
    (
        "replica.high.watermark.checkpoint.interval.ms",
        Route::Broker("replica.high.watermark.checkpoint.interval.ms", Type::Long),
    ),
    (
        "auto.create.topics.enable",
        Route::Broker("auto.create.topics.enable", Type::Bool),
    ),
    ("retention.ms", Route::TopicOnly(Type::Long)),
    ("retention.bytes", Route::TopicOnly(Type::Long)),
    ("segment.bytes", Route::TopicOnly(Type::Int)),
    ("max.message.bytes", Route::TopicOnly(Type::Int)),
    ("index.interval.bytes", Route::TopicOnly(Type::Int)),
    (
        "message.timestamp.difference.max.ms",
        Route::TopicOnly(Type::Long),
    ),
    ("process.roles", Route::Owned),
    ("broker.id", Route::Owned),
    ("listeners", Route::Owned),
    ("advertised.listeners", Route::Owned),
    ("kafka.listeners", Route::Owned),
    ("kafka.advertised.listeners", Route::Owned),
    (
        "socket.request.max.bytes",
        Route::Broker("socket.request.max.bytes", Type::Int),
    ),
    ("log.dirs", Route::Owned),
    ("log.dir", Route::Owned),
    (
        "controller.address",
        Route::Absent(
            "the companion broker's HTTP controller address; Kafka's brokers find the KRaft \
             quorum through controller.quorum.voters, which the harness writes",
        ),
    ),
    (
        "transaction.partition.verification.enable",
        Route::Broker("transaction.partition.verification.enable", Type::Bool),
    ),
    (
        "eligible.leader.replicas.enable",
        // KIP-966: a feature level from 4.0 (on by default for new clusters from 4.1); Kafka
        // 3.9's format knows no such feature and fails, naming the ones it has.
        Route::Feature("eligible.leader.replicas.version"),
    ),
    (
        "tidewater.request.header.timeout.ms",
        Route::Absent("a bound of the companion broker's HTTP front door; Kafka has no HTTP"),
    ),
    (
        "tidewater.request.body.timeout.ms",
        Route::Absent("the companion broker's deadline on a begun request; Kafka has none"),
    ),
    (
        "max.connections.per.ip",
        Route::Broker("max.connections.per.ip", Type::Int),
    ),
    (
        "max.connections.per.ip.overrides",
        Route::Absent(
            "a host:count list this table cannot check; set Kafka's own in the cluster file's properties",
        ),
    ),
    (
        "tidewater.unsafe.truncate.to.hw.enable",
        Route::Absent(
            "truncation to the high watermark is the companion broker's switch for Kafka's \
             behaviour before KIP-101 (0.11); a KRaft Kafka always truncates by leader epoch",
        ),
    ),
    (
        "tidewater.unsafe.serve.lagging.hw.enable",
        Route::Absent(
            "answering the latest offset with a lagging high watermark is the companion \
             broker's switch for Kafka's behaviour before KIP-207 (2.2); a KRaft Kafka always \
             answers OFFSET_NOT_AVAILABLE there",
        ),
    ),
];

fn route(name: &str) -> Option<Route> {
    if name.starts_with("tidewater.bug.") {
        return Some(Route::Absent(
            "deliberate bugs exist only in the companion broker (docs/detection.md)",
        ));
    }
    ROUTES.iter().find(|(n, _)| *n == name).map(|(_, r)| *r)
}

/// Why a `--set` is refused for Kafka, if it is.
fn refusal(name: &str, value: &str) -> Option<String> {
    match route(name) {
        Some(Route::Broker(_, t) | Route::TopicOnly(t)) => t.check(name, value).err(),
        Some(Route::Feature(_)) => Type::Bool.check(name, value).err(),
        Some(Route::Owned) => Some(format!(
            "{name}: the harness sets it from the cluster file (node names, ips, kafka.port, \
             remote_dir)"
        )),
        Some(Route::Absent(why)) => Some(format!("{name}: Kafka has no equivalent ({why})")),
        None => Some(format!(
            "{name}: not a setting of Tidewater's --set (the companion broker's names, \
             docs/configuration.md); other Kafka properties go in the cluster file's \
             [kafka.properties] table"
        )),
    }
}

/// Checks a run's `--set` (and the harness defaults) for a Kafka cluster, before anything
/// starts: every name must have a Kafka equivalent and every value Kafka's type. One error
/// names every refused setting.
pub fn check_sets(sets: &BTreeMap<String, String>) -> std::result::Result<(), String> {
    let problems: Vec<String> = sets.iter().filter_map(|(k, v)| refusal(k, v)).collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "--set refused for a Kafka cluster: {}",
            problems.join("; ")
        ))
    }
}

/// The run's broker settings (Tidewater's names; topic-only ones are not among them) as
/// Kafka broker properties, in order. Errors as [`check_sets`].
pub fn broker_properties(
    settings: &[(String, String)],
) -> std::result::Result<Vec<(String, String)>, String> {
    let sets: BTreeMap<String, String> = settings.iter().cloned().collect();
    check_sets(&sets)?;
    Ok(settings
        .iter()
        .filter_map(|(k, v)| match route(k) {
            Some(Route::Broker(name, _)) => Some((name.to_string(), v.clone())),
            _ => None,
        })
        .collect())
}

/// The run's settings that Kafka takes as feature levels when a log directory is formatted
/// (`eligible.leader.replicas.enable`), as the `--feature` values of `kafka-storage.sh format`
/// (`eligible.leader.replicas.version=1`), in order; the last value of a name wins. Errors
/// as [`check_sets`].
pub fn format_features(settings: &[(String, String)]) -> std::result::Result<Vec<String>, String> {
    let sets: BTreeMap<String, String> = settings.iter().cloned().collect();
    check_sets(&sets)?;
    Ok(sets
        .iter()
        .filter_map(|(k, v)| match route(k) {
            Some(Route::Feature(feature)) => {
                let level = u8::from(v == "true");
                Some(format!("{feature}={level}"))
            }
            _ => None,
        })
        .collect())
}

/// The harness's choices for a Kafka test cluster of `brokers` brokers, each with why
/// (`docs/real-kafka.md`); `kafka.properties` and `--set` override them.
pub fn harness_choices(brokers: usize) -> Vec<(&'static str, String)> {
    let replicas = brokers.min(3);
    vec![
        // As the companion broker: the harness creates its topics explicitly, so a mistyped
        // topic fails loudly instead of being created with the defaults.
        ("auto.create.topics.enable", "false".into()),
        // Kafka's internal topics need this many live brokers; 3 is Kafka's default and
        // would stop a smaller cluster's group workload.
        ("offsets.topic.replication.factor", replicas.to_string()),
        (
            "transaction.state.log.replication.factor",
            replicas.to_string(),
        ),
        ("transaction.state.log.min.isr", replicas.min(2).to_string()),
        // Groups form at once: Kafka's 3 s wait for more members only delays a test.
        ("group.initial.rebalance.delay.ms", "0".into()),
        // The companion broker's heartbeat: with the harness's 4 s session timeout, Kafka's
        // 2 s would leave a broker two heartbeats from being fenced.
        ("broker.heartbeat.interval.ms", "500".into()),
    ]
}

/// Escapes a value for a Java properties file (backslashes, line breaks, leading blanks).
fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            ' ' | '\t' if i == 0 => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// The identity of `node` in the cluster: its roles, id, the quorum, its listeners and its
/// log directory.
fn identity(
    kafka: &KafkaSpec,
    node: &NodeInfo,
    nodes: &[NodeInfo],
    data_dir: &str,
) -> Vec<(String, String)> {
    let broker = node.role == Role::Broker;
    let voter = kafka.is_voter(node);
    let client = format!("{CLIENT_LISTENER}://{}:{}", node.ip, kafka.port);
    let controller = format!(
        "{CONTROLLER_LISTENER}://{}:{}",
        node.ip, kafka.controller_port
    );
    let listeners = match (broker, voter) {
        (true, true) => format!("{client},{controller}"),
        (true, false) => client.clone(),
        (false, _) => controller,
    };
    let mut out = vec![
        ("process.roles", kafka.process_roles(node).to_string()),
        ("node.id", KafkaSpec::node_id(node).to_string()),
        ("controller.quorum.voters", kafka.quorum_voters(nodes)),
        ("listeners", listeners),
        ("controller.listener.names", CONTROLLER_LISTENER.to_string()),
        (
            "listener.security.protocol.map",
            format!("{CONTROLLER_LISTENER}:PLAINTEXT,{CLIENT_LISTENER}:PLAINTEXT"),
        ),
    ];
    if broker {
        out.push(("advertised.listeners", client));
        out.push(("inter.broker.listener.name", CLIENT_LISTENER.to_string()));
    }
    out.push(("log.dirs", data_dir.to_string()));
    out.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// `node`'s `server.properties`: its identity (always the harness's), then the harness's
/// choices, the cluster file's `kafka.properties` and the run's `settings` (Kafka names,
/// from [`broker_properties`]), each property written once with the last layer's value.
pub fn server_properties(
    kafka: &KafkaSpec,
    node: &NodeInfo,
    nodes: &[NodeInfo],
    data_dir: &str,
    settings: &[(String, String)],
) -> String {
    let brokers = nodes.iter().filter(|n| n.role == Role::Broker).count();
    let owned = |pairs: Vec<(&str, String)>| -> Vec<(String, String)> {
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    };
    let layers: Vec<(&str, Vec<(String, String)>)> = vec![
        (
            "Identity, quorum and listeners (from the cluster file).",
            identity(kafka, node, nodes, data_dir),
        ),
        (
            "The harness's choices for a test cluster (docs/real-kafka.md).",
            owned(harness_choices(brokers)),
        ),
        (
            "The cluster file's [kafka.properties].",
            kafka.properties.clone().into_iter().collect(),
        ),
        (
            "This run's settings (--set and the harness's defaults, in Kafka's names).",
            settings.to_vec(),
        ),
    ];
    let mut out = format!(
        "# Written by the Tidewater harness for this run: node {} (Kafka node.id {}).\n",
        node.name,
        KafkaSpec::node_id(node)
    );
    for (i, (title, layer)) in layers.iter().enumerate() {
        let later: BTreeSet<&str> = layers[i + 1..]
            .iter()
            .flat_map(|(_, l)| l.iter().map(|(k, _)| k.as_str()))
            .collect();
        // Within a layer, too, the last value of a name wins.
        let mut last: Vec<(&str, &str)> = vec![];
        for (k, v) in layer {
            last.retain(|(name, _)| *name != k.as_str());
            last.push((k.as_str(), v.as_str()));
        }
        let lines: Vec<String> = last
            .iter()
            .filter(|(k, _)| !later.contains(k))
            .map(|(k, v)| format!("{k}={}\n", escape_value(v)))
            .collect();
        if !lines.is_empty() {
            out.push_str(&format!("# {title}\n"));
            out.extend(lines);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::node_list;
    use crate::runner::config::{HARNESS_DEFAULT_SETTINGS, TOPIC_ONLY_SETTINGS, TOPIC_SETTINGS};
    use std::net::Ipv4Addr;

    fn nodes(brokers: usize) -> Vec<NodeInfo> {
        node_list(brokers, 9092, |i| Ipv4Addr::new(192, 168, 56, 10 + i as u8))
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_dedicated_quorum_gives_c1_the_controller_and_the_brokers_its_address() {
        let kafka = KafkaSpec::default();
        let nodes = nodes(3);
        let settings = broker_properties(&pairs(&[
            ("min.insync.replicas", "2"),
            ("flush.messages", "1"),
        ]))
        .unwrap();
        let n2 = server_properties(
            &kafka,
            &nodes[2],
            &nodes,
            "/var/lib/tidewater/data",
            &settings,
        );
        assert_eq!(
            n2,
            "# Written by the Tidewater harness for this run: node n2 (Kafka node.id 2).\n\
             # Identity, quorum and listeners (from the cluster file).\n\
             process.roles=broker\n\
             node.id=2\n\
             controller.quorum.voters=0@192.168.56.10:9093\n\
             listeners=PLAINTEXT://192.168.56.12:9092\n\
             controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
             advertised.listeners=PLAINTEXT://192.168.56.12:9092\n\
             inter.broker.listener.name=PLAINTEXT\n\
             log.dirs=/var/lib/tidewater/data\n\
             # The harness's choices for a test cluster (docs/real-kafka.md).\n\
             auto.create.topics.enable=false\n\
             offsets.topic.replication.factor=3\n\
             transaction.state.log.replication.factor=3\n\
             transaction.state.log.min.isr=2\n\
             group.initial.rebalance.delay.ms=0\n\
             broker.heartbeat.interval.ms=500\n\
             # This run's settings (--set and the harness's defaults, in Kafka's names).\n\
             min.insync.replicas=2\n\
             log.flush.interval.messages=1\n"
        );
        let c1 = server_properties(&kafka, &nodes[0], &nodes, "/var/lib/tidewater/data", &[]);
        let identity: Vec<&str> = c1.lines().skip(2).take(7).collect();
        assert_eq!(
            identity,
            [
                "process.roles=controller",
                "node.id=0",
                "controller.quorum.voters=0@192.168.56.10:9093",
                "listeners=CONTROLLER://192.168.56.10:9093",
                "controller.listener.names=CONTROLLER",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "log.dirs=/var/lib/tidewater/data",
            ],
            "a controller advertises no client listener:\n{c1}"
        );
    }

    #[test]
    fn a_combined_quorum_makes_every_broker_a_voter_with_both_listeners() {
        let kafka = KafkaSpec {
            quorum: Quorum::Combined,
            port: 19092,
            controller_port: 19093,
            ..KafkaSpec::default()
        };
        let nodes = nodes(2);
        let n1 = server_properties(&kafka, &nodes[1], &nodes, "/d", &[]);
        for line in [
            "process.roles=broker,controller",
            "node.id=1",
            "controller.quorum.voters=0@192.168.56.10:19093,1@192.168.56.11:19093,2@192.168.56.12:19093",
            "listeners=PLAINTEXT://192.168.56.11:19092,CONTROLLER://192.168.56.11:19093",
            "advertised.listeners=PLAINTEXT://192.168.56.11:19092",
            "offsets.topic.replication.factor=2",
            "transaction.state.log.min.isr=2",
        ] {
            assert!(n1.lines().any(|l| l == line), "{line} missing:\n{n1}");
        }
        let c1 = server_properties(&kafka, &nodes[0], &nodes, "/d", &[]);
        assert!(c1.contains("\nprocess.roles=controller\n"), "{c1}");
        let bootstrap = kafka.bootstrap(&nodes);
        let addrs: Vec<String> = bootstrap.iter().map(|(n, a)| format!("{n}={a}")).collect();
        assert_eq!(addrs, ["n1=192.168.56.11:19092", "n2=192.168.56.12:19092"]);
    }

    #[test]
    fn the_files_properties_and_the_runs_settings_override_the_harness_and_appear_once() {
        let kafka: KafkaSpec = toml::from_str(
            r#"
            [properties]
            "group.initial.rebalance.delay.ms" = 3000
            "num.io.threads" = 4
            "log.flush.interval.messages" = 100
            "#,
        )
        .unwrap();
        kafka.validate().unwrap();
        let nodes = nodes(1);
        let settings = broker_properties(&pairs(&[
            ("broker.heartbeat.interval.ms", "1000"),
            ("log.flush.interval.messages", "5"),
            ("flush.messages", "7"),
        ]))
        .unwrap();
        let text = server_properties(&kafka, &nodes[1], &nodes, "/d", &settings);
        let value = |name: &str| -> Vec<&str> {
            text.lines()
                .filter_map(|l| l.strip_prefix(&format!("{name}=")))
                .collect()
        };
        assert_eq!(value("group.initial.rebalance.delay.ms"), ["3000"]);
        assert_eq!(value("num.io.threads"), ["4"]);
        assert_eq!(value("broker.heartbeat.interval.ms"), ["1000"]);
        assert_eq!(
            value("log.flush.interval.messages"),
            ["7"],
            "the last --set of a name wins, once:\n{text}"
        );
        assert_eq!(value("offsets.topic.replication.factor"), ["1"]);
    }

    #[test]
    fn sets_take_kafkas_names_and_every_refusal_is_named_at_once() {
        let mapped = broker_properties(&pairs(&[
            ("min.insync.replicas", "2"),
            ("unclean.leader.election.enable", "true"),
            ("flush.messages", "1"),
            ("replica.lag.time.max.ms", "2500"),
        ]))
        .unwrap();
        assert_eq!(
            mapped,
            pairs(&[
                ("min.insync.replicas", "2"),
                ("unclean.leader.election.enable", "true"),
                ("log.flush.interval.messages", "1"),
                ("replica.lag.time.max.ms", "2500"),
            ])
        );
        // Topic-only settings are the topic's configs, never a broker property.
        let sets: BTreeMap<String, String> =
            pairs(&[("retention.ms", "60000"), ("segment.bytes", "1048576")])
                .into_iter()
                .collect();
        check_sets(&sets).unwrap();
        let bad: BTreeMap<String, String> = pairs(&[
            ("tidewater.unsafe.truncate.to.hw.enable", "true"),
            ("tidewater.bug.skip.fsync", "true"),
            ("listeners", "PLAINTEXT://0.0.0.0:9092"),
            ("num.io.threads", "8"),
            ("min.insync.replicas", "two"),
            ("unclean.leader.election.enable", "yes"),
            ("log.flush.interval.messages", "18446744073709551615"),
            ("controller.address", "http://10.0.0.1:9092"),
        ])
        .into_iter()
        .collect();
        let err = check_sets(&bad).unwrap_err();
        for part in [
            "tidewater.unsafe.truncate.to.hw.enable: Kafka has no equivalent",
            "KIP-101",
            "tidewater.bug.skip.fsync: Kafka has no equivalent",
            "listeners: the harness sets it from the cluster file",
            "num.io.threads: not a setting of Tidewater's --set",
            "[kafka.properties]",
            "min.insync.replicas=two: Kafka takes an int",
            "unclean.leader.election.enable=yes: Kafka takes true or false",
            "log.flush.interval.messages=18446744073709551615: Kafka takes a long",
            "controller.address: Kafka has no equivalent",
        ] {
            assert!(err.contains(part), "{part:?} not in: {err}");
        }
        assert!(broker_properties(&pairs(&[("listeners", "x")])).is_err());
    }

    #[test]
    fn the_unclean_election_interval_is_kafkas_own_and_reaches_every_node() {
        let mapped =
            broker_properties(&pairs(&[("unclean.leader.election.interval.ms", "1000")])).unwrap();
        assert_eq!(
            mapped,
            pairs(&[("unclean.leader.election.interval.ms", "1000")])
        );
        let bad: BTreeMap<String, String> =
            pairs(&[("unclean.leader.election.interval.ms", "soon")])
                .into_iter()
                .collect();
        assert!(check_sets(&bad).unwrap_err().contains("Kafka takes a long"));
    }

    #[test]
    fn eligible_leader_replicas_are_a_feature_level_at_format_not_a_property() {
        let settings = pairs(&[
            ("eligible.leader.replicas.enable", "true"),
            ("min.insync.replicas", "2"),
            ("eligible.leader.replicas.enable", "false"),
        ]);
        assert_eq!(
            format_features(&settings).unwrap(),
            ["eligible.leader.replicas.version=0"],
            "the last value"
        );
        assert_eq!(
            broker_properties(&settings).unwrap(),
            pairs(&[("min.insync.replicas", "2")]),
            "no property"
        );
        let on = pairs(&[("eligible.leader.replicas.enable", "true")]);
        assert_eq!(
            format_features(&on).unwrap(),
            ["eligible.leader.replicas.version=1"]
        );
        let bad = pairs(&[("eligible.leader.replicas.enable", "yes")]);
        assert!(format_features(&bad).is_err());
        assert!(format_features(&[]).unwrap().is_empty());
    }

    #[test]
    fn the_harness_defaults_and_topic_settings_all_reach_kafka() {
        for (name, value, _) in HARNESS_DEFAULT_SETTINGS {
            assert!(
                matches!(route(name), Some(Route::Broker(..))),
                "{name} is a broker property"
            );
            assert!(refusal(name, value).is_none(), "{name}={value}");
        }
        for name in TOPIC_SETTINGS {
            let to_brokers = !TOPIC_ONLY_SETTINGS.contains(name);
            match route(name) {
                Some(Route::Broker(..)) => assert!(to_brokers, "{name}"),
                Some(Route::TopicOnly(_)) => assert!(!to_brokers, "{name}"),
                other => panic!("{name}: {other:?}"),
            }
        }
    }

    /// The companion broker's documented settings (`docs/configuration.md`, "Broker
    /// settings"): each must have a route, so a new one is decided for Kafka when it is added.
    #[test]
    fn every_documented_companion_setting_has_a_route_to_kafka() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
        let text = std::fs::read_to_string(path).unwrap();
        let mut section = "";
        let mut names: Vec<&str> = vec![];
        for line in text.lines() {
            if let Some(title) = line.strip_prefix("## ") {
                section = title;
            } else if let Some(row) = line.strip_prefix("| `") {
                if matches!(section, "Broker settings" | "Topic settings") {
                    names.extend(row.split('`').next());
                }
            }
        }
        assert!(
            names.len() > 30,
            "the settings tables were found: {names:?}"
        );
        let missing: Vec<&&str> = names.iter().filter(|n| route(n).is_none()).collect();
        assert!(missing.is_empty(), "no route to Kafka for {missing:?}");
    }

    #[test]
    fn the_kafka_table_refuses_owned_properties_shared_ports_and_bad_cluster_ids() {
        let mut kafka = KafkaSpec::default();
        kafka.properties.insert("node.id".into(), "7".into());
        kafka.properties.insert("bad name".into(), "1".into());
        let err = kafka.validate().unwrap_err();
        assert!(err.contains("may not set \"node.id\""), "{err}");
        assert!(err.contains("\"bad name\" is not a property name"), "{err}");
        let kafka = KafkaSpec {
            controller_port: 9092,
            ..KafkaSpec::default()
        };
        assert!(kafka.validate().unwrap_err().contains("distinct"));
        let kafka = KafkaSpec {
            cluster_id: "not-an-id".into(),
            ..KafkaSpec::default()
        };
        assert!(kafka.validate().unwrap_err().contains("random-uuid"));
        assert!(is_cluster_id(DEFAULT_CLUSTER_ID));
        // The id of Kafka's Docker examples.
        assert!(is_cluster_id("MkU3OEVBNTcwNTJENDM2Qk"));
        let err = toml::from_str::<KafkaSpec>("[properties]\n\"a.b\" = [1]\n").unwrap_err();
        assert!(err
            .to_string()
            .contains("expected a string, number or boolean"));
    }

    #[test]
    fn values_are_escaped_for_a_properties_file() {
        assert_eq!(
            escape_value("PLAINTEXT://1.2.3.4:9092"),
            "PLAINTEXT://1.2.3.4:9092"
        );
        assert_eq!(escape_value(r"C:\kafka"), r"C:\\kafka");
        assert_eq!(escape_value(" a\nb"), "\\ a\\nb");
    }
}
