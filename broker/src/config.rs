//! The broker's settings: Kafka's names and defaults, read from a flat TOML file and/or
//! `--set key=value` pairs into one typed [`Config`]; per-topic overrides in [`TopicConfig`].
//!
//! Every setting is listed once in [`SETTINGS`] (name, default, meaning), which drives parsing,
//! `--help` and the reference table in `docs/configuration.md`. An unknown name or a value that
//! does not parse fails start-up with a message naming the setting.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::storage::LogConfig;

/// A setting that could not be applied: its name and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// No setting has this name.
    #[error("unknown setting {0:?} (see docs/configuration.md for the list)")]
    Unknown(String),
    /// The value does not parse or is out of range.
    #[error("invalid value {value:?} for setting {name:?}: {reason}")]
    Invalid {
        /// The setting's name.
        name: String,
        /// The value as given.
        value: String,
        /// What is expected.
        reason: String,
    },
    /// The config file could not be read or is not a flat TOML table.
    #[error("config file {path}: {reason}")]
    File {
        /// The file's path.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

/// What this process is: a broker (the default) or the cluster's controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Hosts partitions and serves the client API.
    Broker,
    /// Holds the cluster metadata (brokers, topics, leaders, ISRs).
    Controller,
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Role, String> {
        match s {
            "broker" => Ok(Role::Broker),
            "controller" => Ok(Role::Controller),
            _ => Err("expected \"broker\" or \"controller\"".to_string()),
        }
    }
}

/// Every broker setting, typed. Built by [`Config::from_settings`]; `Default` is Kafka's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `process.roles`: broker or controller (the CLI's `--role` overrides it).
    pub role: Role,
    /// `broker.id`: this node's id in metadata, ISRs and the controller's registry.
    pub broker_id: u32,
    /// `listeners`: the address the HTTP API binds (`http://HOST:PORT`, port 0 = any free port).
    pub listener: SocketAddr,
    /// `advertised.listeners`: the URL other nodes and clients use to reach this one; `None`
    /// means the bound address.
    pub advertised_listener: Option<String>,
    /// `log.dirs` (or `log.dir`): the directories holding partition logs; the first also holds
    /// the topic catalog.
    pub log_dirs: Vec<PathBuf>,
    /// `log.segment.bytes`: a segment rolls when it would grow past this size.
    pub log_segment_bytes: u64,
    /// `log.retention.ms` (or `.minutes`/`.hours`): segments older than this are deleted; -1 keeps
    /// them forever.
    pub log_retention_ms: i64,
    /// `log.retention.bytes`: a partition's log is trimmed (whole segments) to this size; -1 = no limit.
    pub log_retention_bytes: i64,
    /// `log.retention.check.interval.ms`: how often the retention task runs.
    pub log_retention_check_interval_ms: u64,
    /// `log.flush.interval.messages` (alias `flush.messages`): fsync after this many appended
    /// records; the default never fsyncs on append and leaves durability to replication, as Kafka.
    pub log_flush_interval_messages: u64,
    /// `log.index.interval.bytes`: bytes between offset index entries.
    pub log_index_interval_bytes: u64,
    /// `num.partitions`: partitions of a topic created without a count.
    pub num_partitions: u32,
    /// `default.replication.factor`: replication factor of a topic created without one.
    pub default_replication_factor: u16,
    /// `message.max.bytes`: the largest record batch the broker accepts (topic: `max.message.bytes`).
    pub message_max_bytes: u64,
    /// `min.insync.replicas`: with acks=all, the ISR size below which produce fails.
    pub min_insync_replicas: u16,
    /// `unclean.leader.election.enable`: elect an out-of-sync replica when no ISR member is alive.
    pub unclean_leader_election_enable: bool,
    /// `eligible.leader.replicas.enable`: KIP-966 (eligible leader replicas, unclean shutdown
    /// detection, no HW advance below min ISR); `false` gives the older rules.
    pub eligible_leader_replicas_enable: bool,
    /// `transaction.partition.verification.enable`: KIP-890 part 1, a partition leader asks
    /// the transaction coordinator whether a transactional produce that would open a
    /// transaction on the partition belongs to the producer's open transaction.
    pub transaction_partition_verification_enable: bool,
    /// `log.message.timestamp.difference.max.ms`: a produced record whose timestamp is further
    /// than this from the leader's clock is refused with INVALID_TIMESTAMP (topic:
    /// `message.timestamp.difference.max.ms`). Kafka's default, `i64::MAX`, accepts any.
    pub log_message_timestamp_difference_max_ms: i64,
    /// `replica.lag.time.max.ms`: a follower not caught up for this long leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// `replica.fetch.wait.max.ms`: long-poll bound of a follower's fetch.
    pub replica_fetch_wait_max_ms: u64,
    /// `replica.fetch.max.bytes`: bytes a follower asks for per partition fetch.
    pub replica_fetch_max_bytes: u64,
    /// `broker.session.timeout.ms`: a broker without heartbeat for this long is fenced.
    pub broker_session_timeout_ms: u64,
    /// `broker.heartbeat.interval.ms`: how often a broker heartbeats to the controller.
    pub broker_heartbeat_interval_ms: u64,
    /// `controller.address`: base URL of the controller (`http://HOST:PORT`); `None` runs a
    /// single broker without a controller.
    pub controller_address: Option<String>,
    /// `kafka.listeners`: where Kafka's binary protocol is served; `None` = off.
    pub kafka_listener: Option<SocketAddr>,
    /// `kafka.advertised.listeners`: `HOST:PORT` Kafka clients are told in metadata; `None` =
    /// the bound address (with the HTTP advertised host when bound to every interface).
    pub kafka_advertised_listener: Option<String>,
    /// `socket.request.max.bytes`: largest Kafka request frame accepted.
    pub socket_request_max_bytes: u64,
    /// `max.connections`: open client connections at most; more wait in the listen backlog.
    pub max_connections: usize,
    /// `connections.max.idle.ms`: a connection with no request in progress and no traffic for
    /// this long is closed (Kafka's name and default).
    pub connections_max_idle_ms: u64,
    /// `tidewater.request.header.timeout.ms`: a request head must arrive whole within this of
    /// its first byte (of the accept, for a new connection), else the connection is closed.
    pub request_header_timeout_ms: u64,
    /// `auto.create.topics.enable`: produce to an unknown topic creates it. Off by default here
    /// (Kafka's default is on) because a typo in a test would otherwise create a topic silently.
    pub auto_create_topics_enable: bool,
    /// `replica.high.watermark.checkpoint.interval.ms`: how often replicas checkpoint their HW.
    pub replica_high_watermark_checkpoint_interval_ms: u64,
    /// `tidewater.unsafe.truncate.to.hw.enable`: UNSAFE, pre-KIP-101 follower truncation to the
    /// HW instead of by leader epoch.
    pub unsafe_truncate_to_hw_enable: bool,
    /// `tidewater.unsafe.serve.lagging.hw.enable`: UNSAFE, pre-KIP-207 new leaders answer the
    /// latest offset with a HW below their epoch start instead of OFFSET_NOT_AVAILABLE.
    pub unsafe_serve_lagging_hw_enable: bool,
    /// `tidewater.bug.*`: deliberate bugs for `tidewater detect`, settable only in a build
    /// with the `deliberate-bugs` feature (see [`crate::bugs`]).
    pub bugs: crate::bugs::Bugs,
    /// `max.connections.per.ip`: connections one IP address may hold open, over both front
    /// doors together, so that one client cannot take every `max.connections` slot; a
    /// connection over it is closed at once (Kafka's name, default and behaviour).
    pub max_connections_per_ip: u32,
    /// `max.connections.per.ip.overrides`: per-address exceptions to `max.connections.per.ip`.
    pub max_connections_per_ip_overrides: BTreeMap<IpAddr, u32>,
    /// `tidewater.request.body.timeout.ms`: once a request has begun, the rest of it (an HTTP
    /// body, a Kafka frame) must arrive within this, else the connection is closed.
    pub request_body_timeout_ms: u64,
}

impl Default for Config {
    fn default() -> Config {
        let log = LogConfig::default();
        Config {
            role: Role::Broker,
            broker_id: 0,
            listener: SocketAddr::from(([127, 0, 0, 1], 9092)),
            advertised_listener: None,
            log_dirs: vec![PathBuf::from("/tmp/tidewater-logs")],
            log_segment_bytes: log.segment_bytes,
            log_retention_ms: log.retention_ms,
            log_retention_bytes: log.retention_bytes,
            log_retention_check_interval_ms: 300_000,
            log_flush_interval_messages: log.flush_messages,
            log_index_interval_bytes: log.index_interval_bytes,
            num_partitions: 1,
            default_replication_factor: 1,
            message_max_bytes: log.max_message_bytes,
            min_insync_replicas: 1,
            unclean_leader_election_enable: false,
            eligible_leader_replicas_enable: true,
            transaction_partition_verification_enable: true,
            log_message_timestamp_difference_max_ms: i64::MAX,
            replica_lag_time_max_ms: 30_000,
            replica_fetch_wait_max_ms: 500,
            replica_fetch_max_bytes: 1_048_576,
            broker_session_timeout_ms: 9_000,
            broker_heartbeat_interval_ms: 500,
            controller_address: None,
            kafka_listener: None,
            kafka_advertised_listener: None,
            socket_request_max_bytes: 104_857_600,
            auto_create_topics_enable: false,
            max_connections: 4096,
            connections_max_idle_ms: 600_000,
            request_header_timeout_ms: 10_000,
            replica_high_watermark_checkpoint_interval_ms: 5_000,
            unsafe_truncate_to_hw_enable: false,
            unsafe_serve_lagging_hw_enable: false,
            bugs: crate::bugs::Bugs::default(),
            max_connections_per_ip: i32::MAX as u32,
            max_connections_per_ip_overrides: BTreeMap::new(),
            request_body_timeout_ms: 30_000,
        }
    }
}

/// One row of the settings reference: name, default as written in a config file, meaning.
pub struct Setting {
    /// Kafka's name of the setting.
    pub name: &'static str,
    /// The default, as a value that parses back to `Config::default()`'s field.
    pub default: &'static str,
    /// One sentence: what it controls.
    pub doc: &'static str,
}

const fn setting(name: &'static str, default: &'static str, doc: &'static str) -> Setting {
    Setting { name, default, doc }
}

/// Every broker setting; `docs/configuration.md` mirrors this table (a test checks it).
pub const SETTINGS: &[Setting] = &[
    setting("process.roles", "broker", "`broker` or `controller`; the CLI's `--role` overrides it."),
    setting("broker.id", "0", "This node's id in metadata, ISRs and the controller's registry."),
    setting("listeners", "http://127.0.0.1:9092", "Address the HTTP API binds, `http://HOST:PORT` (HOST: an IP, a resolvable name, or empty for all interfaces); port 0 picks a free port and the binary prints `listening on HOST:PORT` on stdout."),
    setting("max.connections", "4096", "Open connections at most; further clients wait in the listen backlog until one closes (Kafka: unlimited; bounded here so a client that leaks connections meets a clear limit, not the file descriptor limit)."),
    setting("connections.max.idle.ms", "600000", "Close a connection that has no request in progress and no traffic either way for this long (and one whose request body stalls this long), so idle connections cannot hold `max.connections` (Kafka's name and default)."),
    setting("tidewater.request.header.timeout.ms", "10000", "A request head must arrive whole within this of its first byte, and a new connection must send its first head within this of being accepted; else the connection is closed (Tidewater's own: Kafka's binary protocol has no request heads)."),
    setting("advertised.listeners", "", "URL others use to reach this node, `http://HOST:PORT` (HOST a name or an IP address; checked at start-up, as the controller refuses anything else); empty = the bound address."),
    setting("log.dirs", "/tmp/tidewater-logs", "Comma-separated directories for partition logs; the first also holds the topic catalog `topics.json`."),
    setting("log.dir", "/tmp/tidewater-logs", "A single log directory; used when `log.dirs` is not set."),
    setting("log.segment.bytes", "1073741824", "A segment rolls when the next batch would grow it past this size."),
    setting("log.retention.ms", "604800000", "Delete segments whose newest record is older than this; -1 = never. Takes precedence over `.minutes` and `.hours`."),
    setting("log.retention.minutes", "", "Retention in minutes, used when `log.retention.ms` is not set."),
    setting("log.retention.hours", "168", "Retention in hours, used when neither `.ms` nor `.minutes` is set."),
    setting("log.retention.bytes", "-1", "Trim each partition's log (whole segments) to this size; -1 = no limit."),
    setting("log.retention.check.interval.ms", "300000", "How often the retention task looks for segments to delete."),
    setting("log.flush.interval.messages", "9223372036854775807", "fsync the log after this many appended records; the default never fsyncs on append (as Kafka: durability comes from replication)."),
    setting("flush.messages", "9223372036854775807", "Alias of `log.flush.interval.messages` (the topic-level name)."),
    setting("log.index.interval.bytes", "4096", "Bytes of log between two offset index entries."),
    setting("num.partitions", "1", "Partitions of a topic created without a count."),
    setting("default.replication.factor", "1", "Replication factor of a topic created without one."),
    setting("message.max.bytes", "1048588", "Largest record batch accepted (topic override: `max.message.bytes`); larger produce requests get 413 MESSAGE_TOO_LARGE."),
    setting("min.insync.replicas", "1", "With acks=all, produce fails with NOT_ENOUGH_REPLICAS while the ISR is smaller than this."),
    setting("unclean.leader.election.enable", "false", "Elect an out-of-sync replica when no ISR member is alive (may lose acknowledged records)."),
    setting("eligible.leader.replicas.enable", "true", "KIP-966: a replica that leaves an ISR smaller than `min.insync.replicas` stays eligible to lead (ELR), the leader does not advance the HW while the ISR is below `min.insync.replicas`, and a broker that restarts without a clean shutdown leaves every ISR and ELR. `false` restores the rules before KIP-966: the last ISR member leads again after any restart, so a leader that lost unflushed records (power loss) can take acknowledged records with it."),
    setting("transaction.partition.verification.enable", "true", "KIP-890 part 1 (Kafka 3.6+): the first transactional batch a producer sends to a partition where it has no transaction open is appended only if the transaction coordinator confirms the partition is in the producer's open transaction; otherwise INVALID_TXN_STATE (a late produce of an ended transaction), or NOT_ENOUGH_REPLICAS when the coordinator cannot answer (retriable). `false` takes such a batch as the start of a transaction, as Kafka before 3.6 did."),
    setting("log.message.timestamp.difference.max.ms", "9223372036854775807", "Refuse (INVALID_TIMESTAMP, nothing written) a produce whose record timestamp is further than this from the leader's clock, either way (topic override: `message.timestamp.difference.max.ms`). Kafka's default accepts any timestamp; a bound keeps far-future timestamps from pinning segments against `log.retention.ms`."),
    setting("replica.lag.time.max.ms", "30000", "A follower that has not caught up for this long is removed from the ISR."),
    setting("replica.fetch.wait.max.ms", "500", "Long-poll bound of a follower's fetch."),
    setting("replica.fetch.max.bytes", "1048576", "Bytes a follower asks for per partition and fetch."),
    setting("broker.session.timeout.ms", "9000", "A broker that has not heartbeated for this long is fenced by the controller."),
    setting("broker.heartbeat.interval.ms", "500", "How often a broker heartbeats to the controller (Kafka: 2000; 500 here so fencing and metadata changes stay prompt with short session timeouts)."),
    setting("replica.high.watermark.checkpoint.interval.ms", "5000", "How often each replica writes its HW to `replication-offset-checkpoint` in its partition directory."),
    setting("tidewater.unsafe.truncate.to.hw.enable", "false", "UNSAFE (pre-KIP-101): a follower truncates to its HW on restart or leader change instead of by leader epoch; can lose acknowledged records and make replicas diverge."),
    setting("tidewater.unsafe.serve.lagging.hw.enable", "false", "UNSAFE (pre-KIP-207): a new leader whose HW is below its epoch start answers the latest offset (ListOffsets) with that HW instead of OFFSET_NOT_AVAILABLE. Fetches are served below the lagging HW either way, as in Kafka."),
    setting("kafka.listeners", "", "Address Kafka's binary protocol is served on, `PLAINTEXT://HOST:PORT` (docs/kafka-protocol.md); empty = off. Port 0 picks a free port and the binary prints `kafka listening on HOST:PORT` on stdout after the `listening on` line."),
    setting("kafka.advertised.listeners", "", "`PLAINTEXT://HOST:PORT` Kafka clients are given in metadata; empty = the bound address (the host of the HTTP advertised URL when bound to every interface)."),
    setting("socket.request.max.bytes", "104857600", "Largest Kafka request frame accepted; a larger size prefix closes the connection before the body is read (Kafka's name and default)."),
    setting("controller.address", "", "Base URL of the controller (`http://HOST:PORT`); empty = a single broker without controller."),
    setting("auto.create.topics.enable", "false", "Produce to an unknown topic creates it with the defaults. Off here (Kafka: on) so a mistyped topic fails loudly in a test instead of creating a new topic."),
    setting("max.connections.per.ip", "2147483647", "Connections one IP address may have open, HTTP and Kafka listeners together; a new connection over it is closed at once, unanswered (Kafka's name, default and behaviour). Set it below `max.connections` so that one client cannot take every slot; 0 admits only the addresses in the overrides."),
    setting("max.connections.per.ip.overrides", "", "Per-address exceptions to `max.connections.per.ip`, `IP:COUNT` separated by commas, e.g. `127.0.0.1:200,10.0.0.7:0` (Kafka's name; host names are resolved once at start-up)."),
    setting("tidewater.request.body.timeout.ms", "30000", "Once a request has begun, the rest of it must arrive within this, else the connection is closed unanswered: an HTTP body (`Content-Length`) counted from the end of its head, a Kafka request frame from the first byte of its size prefix (Tidewater's own: Kafka has no such deadline, and `connections.max.idle.ms` let a stalled request hold its connection for 10 minutes; 30 s is Kafka's client `request.timeout.ms`, after which the client has given up on the request anyway)."),
];

fn parse<T: FromStr>(name: &str, value: &str, expected: &str) -> Result<T, ConfigError> {
    value.trim().parse().map_err(|_| ConfigError::Invalid {
        name: name.to_string(),
        value: value.to_string(),
        reason: format!("expected {expected}"),
    })
}

fn invalid(name: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// Top of Kafka's `INT` type: a setting Kafka declares `INT` refuses anything larger.
const INT_MAX: i64 = i32::MAX as i64;
/// Top of Kafka's `LONG` type.
const LONG_MAX: i64 = i64::MAX;

/// Kafka's smallest `segment.bytes` / `log.segment.bytes` (`atLeast(1024 * 1024)` in its
/// `LogConfig` since 4.0): a tiny segment rolls on every batch and holds two files open per
/// batch, so a client could exhaust the broker's file descriptors.
pub const SEGMENT_BYTES_MIN: i64 = 1024 * 1024;

/// Kafka's range of every numeric setting: the `atLeast`/`between` of its `ConfigDef` (where
/// it has none, the smallest value that works here) and the top of its type (`INT` or
/// `LONG`). `docs/configuration.md` lists the same bounds; a test holds the two together.
pub const BOUNDS: &[(&str, i64, i64)] = &[
    ("broker.id", 0, INT_MAX),
    ("socket.request.max.bytes", 1, INT_MAX),
    ("log.segment.bytes", SEGMENT_BYTES_MIN, INT_MAX),
    ("segment.bytes", SEGMENT_BYTES_MIN, INT_MAX),
    ("internal.segment.bytes", 1, INT_MAX),
    ("log.retention.ms", -1, LONG_MAX),
    ("retention.ms", -1, LONG_MAX),
    ("log.retention.minutes", -1, INT_MAX),
    ("log.retention.hours", -1, INT_MAX),
    ("log.retention.bytes", -1, LONG_MAX),
    ("retention.bytes", -1, LONG_MAX),
    ("log.retention.check.interval.ms", 1, LONG_MAX),
    ("log.flush.interval.messages", 1, LONG_MAX),
    ("flush.messages", 1, LONG_MAX),
    ("log.index.interval.bytes", 0, INT_MAX),
    ("index.interval.bytes", 0, INT_MAX),
    ("num.partitions", 1, INT_MAX),
    ("default.replication.factor", 1, i16::MAX as i64),
    ("message.max.bytes", 0, INT_MAX),
    ("max.message.bytes", 0, INT_MAX),
    ("min.insync.replicas", 1, i16::MAX as i64),
    ("log.message.timestamp.difference.max.ms", 0, LONG_MAX),
    ("message.timestamp.difference.max.ms", 0, LONG_MAX),
    ("replica.lag.time.max.ms", 1, LONG_MAX),
    ("replica.fetch.wait.max.ms", 0, INT_MAX),
    ("replica.fetch.max.bytes", 0, INT_MAX),
    ("broker.session.timeout.ms", 1, INT_MAX),
    ("broker.heartbeat.interval.ms", 1, INT_MAX),
    ("max.connections", 1, INT_MAX),
    ("connections.max.idle.ms", 1, LONG_MAX),
    ("tidewater.request.header.timeout.ms", 1, LONG_MAX),
    ("replica.high.watermark.checkpoint.interval.ms", 1, LONG_MAX),
    ("max.connections.per.ip", 0, INT_MAX),
    ("tidewater.request.body.timeout.ms", 1, LONG_MAX),
];

/// The bounds of a numeric setting, from [`BOUNDS`].
pub fn bounds_of(name: &str) -> Option<(i64, i64)> {
    BOUNDS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|&(_, min, max)| (min, max))
}

/// An integer within the setting's bounds in [`BOUNDS`]; the error names the bound it broke.
fn parse_bounded(name: &str, value: &str) -> Result<i64, ConfigError> {
    let (min, max) = bounds_of(name).expect("every numeric setting has bounds");
    assert!(min <= max, "bounds of {name}");
    // i128 so that a value past i64 is reported as too large, not as "not an integer".
    let n: i128 = parse(name, value, &format!("an integer in [{min}, {max}]"))?;
    if n < i128::from(min) {
        return Err(invalid(
            name,
            value,
            &format!("must be at least {min} (Kafka's minimum)"),
        ));
    }
    if n > i128::from(max) {
        return Err(invalid(
            name,
            value,
            &format!("must be at most {max} (Kafka's maximum)"),
        ));
    }
    Ok(n as i64)
}

/// [`parse_bounded`] for a setting whose lower bound is not negative.
fn parse_count(name: &str, value: &str) -> Result<u64, ConfigError> {
    let n = parse_bounded(name, value)?;
    Ok(u64::try_from(n).expect("a count's lower bound is not negative"))
}

/// [`parse_count`] into a narrower integer type (its bounds in [`BOUNDS`] fit the type).
fn parse_narrow<T: TryFrom<u64>>(name: &str, value: &str) -> Result<T, ConfigError> {
    let n = parse_count(name, value)?;
    Ok(T::try_from(n).unwrap_or_else(|_| panic!("bounds of {name} fit its type")))
}

/// The value a stored topic config must take to be within [`BOUNDS`]: `Some` (the nearest
/// bound) for an integer outside them, `None` for anything else. Topics created before the
/// bounds existed are opened with the nearest bound rather than refused, so that a restart
/// always brings their records back.
pub fn clamp_to_bounds(name: &str, value: &str) -> Option<String> {
    let (min, max) = bounds_of(name)?;
    let n: i128 = value.trim().parse().ok()?;
    let clamped = n.clamp(i128::from(min), i128::from(max));
    (clamped != n).then(|| clamped.to_string())
}

fn parse_bool(name: &str, value: &str) -> Result<bool, ConfigError> {
    parse(name, value, "true or false")
}

/// An `http://HOST:PORT` URL (the scheme may be left out). HOST is an IP address, a name that
/// resolves (the first address is used), or empty for every interface (Kafka's `PLAINTEXT://:9092`).
fn parse_listener(name: &str, value: &str) -> Result<SocketAddr, ConfigError> {
    if value.contains(',') {
        return Err(invalid(name, value, "only one listener is supported"));
    }
    let expected = "expected http://HOST:PORT, e.g. http://127.0.0.1:9092";
    let address = value.trim().strip_prefix("http://").unwrap_or(value.trim());
    if let Ok(address) = address.parse() {
        return Ok(address);
    }
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| invalid(name, value, expected))?;
    let port: u16 = port.parse().map_err(|_| invalid(name, value, expected))?;
    if host.is_empty() {
        return Ok(SocketAddr::from(([0, 0, 0, 0], port)));
    }
    use std::net::ToSocketAddrs;
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .ok_or_else(|| invalid(name, value, &format!("cannot resolve host {host:?}")))
}

/// The Kafka listener's `HOST:PORT` from `PLAINTEXT://HOST:PORT` (the only security protocol
/// served); empty = off.
fn kafka_host_port<'a>(name: &str, value: &'a str) -> Result<Option<&'a str>, ConfigError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    if value.contains(',') {
        return Err(invalid(name, value, "only one Kafka listener is supported"));
    }
    match value.split_once("://") {
        Some(("PLAINTEXT", address)) => Ok(Some(address)),
        Some((protocol, _)) => Err(invalid(
            name,
            value,
            &format!("security protocol {protocol} is not supported, only PLAINTEXT"),
        )),
        None => Err(invalid(
            name,
            value,
            "expected PLAINTEXT://HOST:PORT, e.g. PLAINTEXT://127.0.0.1:19092",
        )),
    }
}

fn parse_kafka_listener(name: &str, value: &str) -> Result<Option<SocketAddr>, ConfigError> {
    match kafka_host_port(name, value)? {
        None => Ok(None),
        Some(address) => parse_listener(name, address).map(Some),
    }
}

fn parse_kafka_advertised(name: &str, value: &str) -> Result<Option<String>, ConfigError> {
    match kafka_host_port(name, value)? {
        None => Ok(None),
        Some(address) => {
            check_node_url(&format!("http://{address}"))
                .map_err(|why| invalid(name, value, &why))?;
            Ok(Some(address.to_string()))
        }
    }
}

fn optional_url(name: &str, value: &str) -> Result<Option<String>, ConfigError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    let url = value.trim_end_matches('/');
    check_node_url(url).map_err(|why| invalid(name, value, &why))?;
    Ok(Some(url.to_string()))
}

/// `IP:COUNT,...` (`max.connections.per.ip.overrides`); a host name in place of the IP is
/// resolved now, to its first address, as Kafka resolves it when the setting is read.
fn parse_ip_counts(name: &str, value: &str) -> Result<BTreeMap<IpAddr, u32>, ConfigError> {
    let mut counts = BTreeMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (host, count) = entry
            .rsplit_once(':')
            .ok_or_else(|| invalid(name, value, "expected IP:COUNT, e.g. 127.0.0.1:200"))?;
        let count: u32 = parse(name, count, "a non-negative connection count")?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let ip = match host.parse::<IpAddr>() {
            Ok(ip) => ip,
            Err(_) => parse_listener(name, &format!("{host}:0"))?.ip(),
        };
        counts.insert(ip, count);
    }
    Ok(counts)
}

/// Longest host name DNS allows.
const HOST_NAME_LEN_MAX: usize = 253;

/// Checks a node's base URL as brokers advertise it and the controller stores it:
/// `http://HOST:PORT`, HOST a DNS name, an IPv4 address or a bracketed IPv6 address, PORT
/// 1..=65535, nothing after the port. Says what is wrong otherwise.
pub fn check_node_url(url: &str) -> Result<(), String> {
    let expected = || format!("expected http://HOST:PORT, got {url:?}");
    let address = url.strip_prefix("http://").ok_or_else(expected)?;
    let (host, port) = address.rsplit_once(':').ok_or_else(expected)?;
    match port.parse::<u16>() {
        Ok(port) if port > 0 => {}
        _ => return Err(format!("port {port:?} is not 1..=65535 in {url:?}")),
    }
    let valid_host = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(ipv6) => ipv6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => {
            !host.is_empty()
                && host.len() <= HOST_NAME_LEN_MAX
                && host
                    .split('.')
                    .all(|label| !label.is_empty() && label.len() <= 63)
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        }
    };
    if !valid_host {
        return Err(format!(
            "host {host:?} is not a host name or IP address in {url:?}"
        ));
    }
    Ok(())
}

/// Settings whose value depends on others (Kafka's precedence rules) are collected here first.
#[derive(Default)]
struct Pending {
    log_dir: Option<Vec<PathBuf>>,
    log_dirs: Option<Vec<PathBuf>>,
    retention_ms: Option<i64>,
    retention_minutes: Option<i64>,
    retention_hours: Option<i64>,
}

fn parse_dirs(name: &str, value: &str) -> Result<Vec<PathBuf>, ConfigError> {
    let dirs: Vec<PathBuf> = value
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect();
    if dirs.is_empty() {
        return Err(invalid(name, value, "expected at least one directory"));
    }
    Ok(dirs)
}

impl Config {
    /// Builds a config from `name -> value` settings (later sources already merged in), starting
    /// from Kafka's defaults. Fails on the first unknown or invalid setting.
    pub fn from_settings(settings: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        let mut pending = Pending::default();
        for (name, value) in settings {
            config.apply(&mut pending, name, value)?;
        }
        if let Some(dirs) = pending.log_dirs.or(pending.log_dir) {
            config.log_dirs = dirs;
        }
        let minute_ms = 60_000;
        config.log_retention_ms = match (
            pending.retention_ms,
            pending.retention_minutes,
            pending.retention_hours,
        ) {
            (Some(ms), _, _) => ms,
            (None, Some(minutes), _) if minutes < 0 => -1,
            (None, Some(minutes), _) => minutes.saturating_mul(minute_ms),
            (None, None, Some(hours)) if hours < 0 => -1,
            (None, None, Some(hours)) => hours.saturating_mul(60 * minute_ms),
            (None, None, None) => config.log_retention_ms,
        };
        if config.max_connections_per_ip == 0 && config.max_connections_per_ip_overrides.is_empty()
        {
            // Kafka refuses this too: it would admit no client at all.
            return Err(invalid(
                "max.connections.per.ip",
                "0",
                "0 admits no connection unless max.connections.per.ip.overrides names some addresses",
            ));
        }
        Ok(config)
    }

    fn apply(&mut self, pending: &mut Pending, name: &str, value: &str) -> Result<(), ConfigError> {
        match name {
            "process.roles" => {
                self.role = value
                    .trim()
                    .parse()
                    .map_err(|e: String| invalid(name, value, &e))?
            }
            "broker.id" => self.broker_id = parse_narrow(name, value)?,
            "listeners" => self.listener = parse_listener(name, value)?,
            "advertised.listeners" => self.advertised_listener = optional_url(name, value)?,
            "kafka.listeners" => self.kafka_listener = parse_kafka_listener(name, value)?,
            "kafka.advertised.listeners" => {
                self.kafka_advertised_listener = parse_kafka_advertised(name, value)?
            }
            "socket.request.max.bytes" => self.socket_request_max_bytes = parse_count(name, value)?,
            "log.dirs" => pending.log_dirs = Some(parse_dirs(name, value)?),
            "log.dir" => pending.log_dir = Some(parse_dirs(name, value)?),
            "log.segment.bytes" => self.log_segment_bytes = parse_count(name, value)?,
            "log.retention.ms" => pending.retention_ms = Some(parse_bounded(name, value)?),
            "log.retention.minutes" if value.trim().is_empty() => {}
            "log.retention.minutes" => {
                pending.retention_minutes = Some(parse_bounded(name, value)?)
            }
            "log.retention.hours" => pending.retention_hours = Some(parse_bounded(name, value)?),
            "log.retention.bytes" => self.log_retention_bytes = parse_bounded(name, value)?,
            "log.retention.check.interval.ms" => {
                self.log_retention_check_interval_ms = parse_count(name, value)?
            }
            "log.flush.interval.messages" | "flush.messages" => {
                self.log_flush_interval_messages = parse_count(name, value)?
            }
            "log.index.interval.bytes" => self.log_index_interval_bytes = parse_count(name, value)?,
            "num.partitions" => self.num_partitions = parse_narrow(name, value)?,
            "default.replication.factor" => {
                self.default_replication_factor = parse_narrow(name, value)?
            }
            "message.max.bytes" => self.message_max_bytes = parse_count(name, value)?,
            "min.insync.replicas" => self.min_insync_replicas = parse_narrow(name, value)?,
            "unclean.leader.election.enable" => {
                self.unclean_leader_election_enable = parse_bool(name, value)?
            }
            "eligible.leader.replicas.enable" => {
                self.eligible_leader_replicas_enable = parse_bool(name, value)?
            }
            "transaction.partition.verification.enable" => {
                self.transaction_partition_verification_enable = parse_bool(name, value)?
            }
            "log.message.timestamp.difference.max.ms" => {
                self.log_message_timestamp_difference_max_ms = parse_bounded(name, value)?
            }
            "replica.lag.time.max.ms" => self.replica_lag_time_max_ms = parse_count(name, value)?,
            "replica.fetch.wait.max.ms" => {
                self.replica_fetch_wait_max_ms = parse_count(name, value)?
            }
            "replica.fetch.max.bytes" => self.replica_fetch_max_bytes = parse_count(name, value)?,
            "broker.session.timeout.ms" => {
                self.broker_session_timeout_ms = parse_count(name, value)?
            }
            "broker.heartbeat.interval.ms" => {
                self.broker_heartbeat_interval_ms = parse_count(name, value)?
            }
            "controller.address" => self.controller_address = optional_url(name, value)?,
            "max.connections" => self.max_connections = parse_narrow(name, value)?,
            "connections.max.idle.ms" => self.connections_max_idle_ms = parse_count(name, value)?,
            "tidewater.request.header.timeout.ms" => {
                self.request_header_timeout_ms = parse_count(name, value)?
            }
            "auto.create.topics.enable" => {
                self.auto_create_topics_enable = parse_bool(name, value)?
            }
            "replica.high.watermark.checkpoint.interval.ms" => {
                self.replica_high_watermark_checkpoint_interval_ms = parse_count(name, value)?
            }
            "tidewater.unsafe.truncate.to.hw.enable" => {
                self.unsafe_truncate_to_hw_enable = parse_bool(name, value)?
            }
            "tidewater.unsafe.serve.lagging.hw.enable" => {
                self.unsafe_serve_lagging_hw_enable = parse_bool(name, value)?
            }
            "max.connections.per.ip" => self.max_connections_per_ip = parse_narrow(name, value)?,
            "max.connections.per.ip.overrides" => {
                self.max_connections_per_ip_overrides = parse_ip_counts(name, value)?
            }
            "tidewater.request.body.timeout.ms" => {
                self.request_body_timeout_ms = parse_count(name, value)?
            }
            _ => return self.apply_bug(name, value),
        }
        Ok(())
    }

    /// A `tidewater.bug.*` setting in a build with the `deliberate-bugs` feature; an unknown
    /// setting otherwise.
    fn apply_bug(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        match crate::bugs::Bug::parse(name) {
            Some(bug) if cfg!(feature = "deliberate-bugs") && name == bug.setting() => {
                self.bugs.set(bug, parse_bool(name, value)?);
                Ok(())
            }
            _ => Err(ConfigError::Unknown(name.to_string())),
        }
    }

    /// Reads a flat TOML file (`"log.dirs" = "/var/lib/tw"`, numbers and booleans allowed) into
    /// `name -> value` strings.
    pub fn read_file(path: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
        let file_error = |reason: String| ConfigError::File {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| file_error(e.to_string()))?;
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| file_error(e.to_string()))?;
        let mut settings = BTreeMap::new();
        for (name, value) in table {
            let value = match value {
                toml::Value::String(s) => s,
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                toml::Value::Float(f) => f.to_string(),
                other => {
                    return Err(file_error(format!(
                        "setting {name:?} must be a string, number or boolean, not {}",
                        other.type_str()
                    )))
                }
            };
            settings.insert(name, value);
        }
        Ok(settings)
    }

    /// Splits a `--set key=value` argument.
    pub fn parse_assignment(arg: &str) -> Result<(String, String), ConfigError> {
        match arg.split_once('=') {
            Some((name, value)) if !name.trim().is_empty() => {
                Ok((name.trim().to_string(), value.to_string()))
            }
            _ => Err(invalid("--set", arg, "expected key=value")),
        }
    }

    /// The log settings of a topic with no overrides.
    pub fn log_config(&self) -> LogConfig {
        LogConfig {
            segment_bytes: self.log_segment_bytes,
            retention_ms: self.log_retention_ms,
            retention_bytes: self.log_retention_bytes,
            flush_messages: self.log_flush_interval_messages,
            index_interval_bytes: self.log_index_interval_bytes,
            max_message_bytes: self.message_max_bytes,
            follower_appends_uncounted: self.bugs.on(crate::bugs::Bug::FollowerFlushUncounted),
            recovery_cuts_at_checkpoint: self.bugs.on(crate::bugs::Bug::RecoveryCutsAtCheckpoint),
        }
    }

    /// The `HOST:PORT` Kafka clients are given: `kafka.advertised.listeners`, or the bound
    /// Kafka address, with the host of `advertised_url` when bound to every interface.
    pub fn kafka_advertised(&self, bound: SocketAddr, advertised_url: &str) -> String {
        if let Some(address) = &self.kafka_advertised_listener {
            return address.clone();
        }
        if !bound.ip().is_unspecified() {
            return bound.to_string();
        }
        let host = advertised_url
            .trim_start_matches("http://")
            .rsplit_once(':')
            .map_or("127.0.0.1", |(host, _)| host);
        format!("{host}:{}", bound.port())
    }

    /// The URL this node advertises: `advertised.listeners`, or the bound address.
    pub fn advertised_url(&self, bound: SocketAddr) -> String {
        self.advertised_listener
            .clone()
            .unwrap_or_else(|| format!("http://{bound}"))
    }
}

/// Per-topic overrides of the broker's settings, under Kafka's topic-level names. `None` means
/// "use the broker's value", so changing the broker default later changes the topic too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicConfig {
    /// `segment.bytes`
    pub segment_bytes: Option<u64>,
    /// `internal.segment.bytes`: Kafka's internal, testing-only override of `segment.bytes`
    /// below its 1 MiB minimum, so tests can roll segments with a few records.
    pub internal_segment_bytes: Option<u64>,
    /// `retention.ms`
    pub retention_ms: Option<i64>,
    /// `retention.bytes`
    pub retention_bytes: Option<i64>,
    /// `flush.messages`
    pub flush_messages: Option<u64>,
    /// `index.interval.bytes`
    pub index_interval_bytes: Option<u64>,
    /// `max.message.bytes`
    pub max_message_bytes: Option<u64>,
    /// `min.insync.replicas`
    pub min_insync_replicas: Option<u16>,
    /// `unclean.leader.election.enable`
    pub unclean_leader_election_enable: Option<bool>,
    /// `message.timestamp.difference.max.ms`
    pub message_timestamp_difference_max_ms: Option<i64>,
}

/// Topic-level setting names, with the broker setting each one overrides.
pub const TOPIC_SETTINGS: &[(&str, &str)] = &[
    ("segment.bytes", "log.segment.bytes"),
    ("retention.ms", "log.retention.ms"),
    ("retention.bytes", "log.retention.bytes"),
    ("flush.messages", "log.flush.interval.messages"),
    ("index.interval.bytes", "log.index.interval.bytes"),
    ("max.message.bytes", "message.max.bytes"),
    ("min.insync.replicas", "min.insync.replicas"),
    (
        "unclean.leader.election.enable",
        "unclean.leader.election.enable",
    ),
    (
        "message.timestamp.difference.max.ms",
        "log.message.timestamp.difference.max.ms",
    ),
];

/// Where each setting of a test run goes: to every broker's settings, to the test topic's
/// `configs`, or both (a name that is both, such as `min.insync.replicas`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Routing {
    /// Settings every broker starts with.
    pub broker: BTreeMap<String, String>,
    /// Settings of the test topic.
    pub topic: BTreeMap<String, String>,
}

/// Checks a test run's settings with the broker's own schema and says where each goes: a
/// broker setting goes to the brokers, a topic-level one (see [`TOPIC_SETTINGS`]) to the
/// topic, a name that is both to both. An unknown name, or a value that the broker or the
/// topic would refuse, is an error naming the setting.
pub fn route_settings(settings: &BTreeMap<String, String>) -> Result<Routing, ConfigError> {
    let mut routing = Routing::default();
    for (name, value) in settings {
        let single = BTreeMap::from([(name.clone(), value.clone())]);
        let is_topic = TOPIC_SETTINGS.iter().any(|(topic, _)| topic == name);
        let broker = Config::from_settings(&single);
        match (&broker, is_topic) {
            (Err(ConfigError::Unknown(_)), false) => {
                return Err(ConfigError::Unknown(name.clone()))
            }
            (Err(e @ ConfigError::Invalid { .. }), _) => return Err(e.clone()),
            (Err(e), _) if !is_topic => return Err(e.clone()),
            (Ok(_), _) => {
                routing.broker.insert(name.clone(), value.clone());
            }
            _ => {}
        }
        if is_topic {
            TopicConfig::from_map(&single)?;
            routing.topic.insert(name.clone(), value.clone());
        }
    }
    // Together, too: some settings only fail in combination.
    Config::from_settings(&routing.broker)?;
    TopicConfig::from_map(&routing.topic)?;
    Ok(routing)
}

impl TopicConfig {
    /// Parses a topic's `configs` map; fails on an unknown name or a bad value.
    pub fn from_map(configs: &BTreeMap<String, String>) -> Result<TopicConfig, ConfigError> {
        let mut topic = TopicConfig::default();
        for (name, value) in configs {
            match name.as_str() {
                "segment.bytes" => topic.segment_bytes = Some(parse_count(name, value)?),
                "internal.segment.bytes" => {
                    topic.internal_segment_bytes = Some(parse_count(name, value)?)
                }
                "retention.ms" => topic.retention_ms = Some(parse_bounded(name, value)?),
                "retention.bytes" => topic.retention_bytes = Some(parse_bounded(name, value)?),
                "flush.messages" => topic.flush_messages = Some(parse_count(name, value)?),
                "index.interval.bytes" => {
                    topic.index_interval_bytes = Some(parse_count(name, value)?)
                }
                "max.message.bytes" => topic.max_message_bytes = Some(parse_count(name, value)?),
                "min.insync.replicas" => {
                    topic.min_insync_replicas = Some(parse_narrow(name, value)?)
                }
                "unclean.leader.election.enable" => {
                    topic.unclean_leader_election_enable = Some(parse_bool(name, value)?)
                }
                "message.timestamp.difference.max.ms" => {
                    topic.message_timestamp_difference_max_ms = Some(parse_bounded(name, value)?)
                }
                _ => return Err(ConfigError::Unknown(name.clone())),
            }
        }
        Ok(topic)
    }

    /// The log settings of a partition of this topic on a broker with `broker`'s settings.
    pub fn log_config(&self, broker: &Config) -> LogConfig {
        let base = broker.log_config();
        LogConfig {
            segment_bytes: self
                .internal_segment_bytes
                .or(self.segment_bytes)
                .unwrap_or(base.segment_bytes),
            retention_ms: self.retention_ms.unwrap_or(base.retention_ms),
            retention_bytes: self.retention_bytes.unwrap_or(base.retention_bytes),
            flush_messages: self.flush_messages.unwrap_or(base.flush_messages),
            index_interval_bytes: self
                .index_interval_bytes
                .unwrap_or(base.index_interval_bytes),
            max_message_bytes: self.max_message_bytes.unwrap_or(base.max_message_bytes),
            follower_appends_uncounted: base.follower_appends_uncounted,
            recovery_cuts_at_checkpoint: base.recovery_cuts_at_checkpoint,
        }
    }

    /// `min.insync.replicas` in effect for the topic.
    pub fn min_insync_replicas(&self, broker: &Config) -> u16 {
        self.min_insync_replicas
            .unwrap_or(broker.min_insync_replicas)
    }

    /// `unclean.leader.election.enable` in effect for the topic.
    pub fn unclean_leader_election_enable(&self, broker: &Config) -> bool {
        self.unclean_leader_election_enable
            .unwrap_or(broker.unclean_leader_election_enable)
    }

    /// `message.timestamp.difference.max.ms` in effect for the topic.
    pub fn message_timestamp_difference_max_ms(&self, broker: &Config) -> i64 {
        self.message_timestamp_difference_max_ms
            .unwrap_or(broker.log_message_timestamp_difference_max_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_listed_default_parses_back_to_the_default_config() {
        for setting in SETTINGS {
            let one = settings(&[(setting.name, setting.default)]);
            let config =
                Config::from_settings(&one).unwrap_or_else(|e| panic!("{}: {e}", setting.name));
            assert_eq!(config, Config::default(), "setting {}", setting.name);
        }
    }

    #[test]
    fn run_settings_are_routed_to_brokers_topics_or_both_and_typos_are_refused() {
        let r = route_settings(&settings(&[
            ("min.insync.replicas", "2"),
            ("retention.ms", "1000"),
            ("replica.lag.time.max.ms", "3000"),
        ]))
        .unwrap();
        assert_eq!(
            r.broker.keys().collect::<Vec<_>>(),
            ["min.insync.replicas", "replica.lag.time.max.ms"]
        );
        assert_eq!(
            r.topic.keys().collect::<Vec<_>>(),
            ["min.insync.replicas", "retention.ms"]
        );
        assert_eq!(
            route_settings(&settings(&[("min.insync.replica", "2")])).unwrap_err(),
            ConfigError::Unknown("min.insync.replica".into())
        );
        let bad = route_settings(&settings(&[("min.insync.replicas", "abc")])).unwrap_err();
        assert!(
            matches!(bad, ConfigError::Invalid { ref name, .. } if name == "min.insync.replicas"),
            "{bad}"
        );
        assert!(route_settings(&settings(&[("retention.ms", "soon")])).is_err());
    }

    /// Applies one setting as a broker setting, or else as a topic-level one.
    fn apply_one(name: &str, value: &str) -> Result<(), ConfigError> {
        // A setting whose lowest value needs a companion, as in Kafka: 0 connections per IP
        // only with overrides naming some addresses.
        let one = match name {
            "max.connections.per.ip" => settings(&[
                (name, value),
                ("max.connections.per.ip.overrides", "127.0.0.1:1"),
            ]),
            _ => settings(&[(name, value)]),
        };
        match Config::from_settings(&one) {
            Err(ConfigError::Unknown(_)) => TopicConfig::from_map(&one).map(|_| ()),
            other => other.map(|_| ()),
        }
    }

    #[test]
    fn every_bounded_setting_takes_its_bounds_and_refuses_one_past_them_by_name() {
        for &(name, min, max) in BOUNDS {
            assert_eq!(apply_one(name, &min.to_string()), Ok(()), "{name}={min}");
            assert_eq!(apply_one(name, &max.to_string()), Ok(()), "{name}={max}");
            for (past, why) in [
                (i128::from(min) - 1, "at least"),
                (i128::from(max) + 1, "at most"),
            ] {
                let error = apply_one(name, &past.to_string()).unwrap_err();
                assert!(
                    matches!(&error, ConfigError::Invalid { name: n, .. } if n == name),
                    "{name}={past}: {error}"
                );
                assert!(error.to_string().contains(why), "{name}={past}: {error}");
            }
        }
    }

    #[test]
    fn tiny_segments_are_refused_at_kafkas_minimum_on_broker_and_topic() {
        // Issue 22: segment.bytes=1 rolled a segment per batch until file descriptors ran out.
        let broker = Config::from_settings(&settings(&[("log.segment.bytes", "1")])).unwrap_err();
        assert!(
            broker.to_string().contains("\"log.segment.bytes\""),
            "{broker}"
        );
        assert!(broker.to_string().contains("at least 1048576"), "{broker}");
        let topic = TopicConfig::from_map(&settings(&[("segment.bytes", "1048575")])).unwrap_err();
        assert!(topic.to_string().contains("\"segment.bytes\""), "{topic}");
        let routed = route_settings(&settings(&[("segment.bytes", "1")])).unwrap_err();
        assert!(routed.to_string().contains("\"segment.bytes\""), "{routed}");
        let ok = TopicConfig::from_map(&settings(&[("segment.bytes", "1048576")])).unwrap();
        assert_eq!(ok.log_config(&Config::default()).segment_bytes, 1_048_576);
        // Above Kafka's INT, and flush.messages above its LONG, are refused too.
        let big = TopicConfig::from_map(&settings(&[("segment.bytes", "2147483648")]));
        assert!(big.unwrap_err().to_string().contains("at most 2147483647"));
        let flush = Config::from_settings(&settings(&[("flush.messages", "18446744073709551615")]));
        assert!(flush.unwrap_err().to_string().contains("at most"));
    }

    #[test]
    fn internal_segment_bytes_overrides_segment_bytes_for_tests_only() {
        let topic = TopicConfig::from_map(&settings(&[
            ("segment.bytes", "1048576"),
            ("internal.segment.bytes", "300"),
        ]))
        .unwrap();
        assert_eq!(topic.log_config(&Config::default()).segment_bytes, 300);
        // Not a setting of a run: it is internal, as in Kafka.
        assert_eq!(
            route_settings(&settings(&[("internal.segment.bytes", "300")])),
            Err(ConfigError::Unknown("internal.segment.bytes".into()))
        );
    }

    #[test]
    fn stored_values_outside_the_bounds_are_clamped_to_the_nearest_one() {
        assert_eq!(
            clamp_to_bounds("segment.bytes", "1").as_deref(),
            Some("1048576")
        );
        assert_eq!(
            clamp_to_bounds("flush.messages", "18446744073709551615").as_deref(),
            Some("9223372036854775807")
        );
        assert_eq!(clamp_to_bounds("segment.bytes", "1048576"), None);
        assert_eq!(clamp_to_bounds("segment.bytes", "big"), None);
        assert_eq!(
            clamp_to_bounds("unclean.leader.election.enable", "true"),
            None
        );
    }

    #[test]
    fn configuration_doc_lists_every_bound() {
        let doc = include_str!("../../docs/configuration.md");
        for &(name, min, max) in BOUNDS {
            let row = format!("| `{name}` | {min} | {max} |");
            assert!(doc.contains(&row), "{row} missing");
        }
    }

    #[test]
    fn unknown_setting_is_named_in_the_error() {
        let error = Config::from_settings(&settings(&[("log.segmnet.bytes", "10")])).unwrap_err();
        assert_eq!(error, ConfigError::Unknown("log.segmnet.bytes".into()));
        assert!(error.to_string().contains("log.segmnet.bytes"));
    }

    #[test]
    fn invalid_value_is_named_in_the_error() {
        let error = Config::from_settings(&settings(&[("num.partitions", "zero")])).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("num.partitions") && text.contains("zero"),
            "{text}"
        );
        assert!(Config::from_settings(&settings(&[("num.partitions", "0")])).is_err());
        assert!(Config::from_settings(&settings(&[("log.retention.ms", "-2")])).is_err());
        assert!(Config::from_settings(&settings(&[("listeners", "localhost")])).is_err());
        assert!(
            Config::from_settings(&settings(&[("listeners", "http://127.0.0.1:99999")])).is_err()
        );
        let any = Config::from_settings(&settings(&[("listeners", "http://:9093")])).unwrap();
        assert_eq!(any.listener, "0.0.0.0:9093".parse().unwrap());
        let named = Config::from_settings(&settings(&[("listeners", "localhost:9094")])).unwrap();
        assert!(named.listener.ip().is_loopback() && named.listener.port() == 9094);
    }

    #[test]
    fn node_urls_are_http_host_port() {
        for good in [
            "http://127.0.0.1:9092",
            "http://broker-1.example.com:1",
            "http://[::1]:65535",
            "http://n1:9092",
        ] {
            assert_eq!(check_node_url(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "127.0.0.1:9092",
            "http://127.0.0.1",
            "http://127.0.0.1:0",
            "http://127.0.0.1:99999",
            "http://:9092",
            "http://a b:9092",
            "http://host:9092/path",
            "http://[nonsense]:9092",
            "http://a..b:9092",
            "https://host:9092",
            &format!("http://{}:9092", "h".repeat(254)),
        ] {
            assert!(check_node_url(bad).is_err(), "{bad:?} accepted");
        }
        let error = Config::from_settings(&settings(&[("advertised.listeners", "http://x")]));
        assert!(error.is_err());
    }

    #[test]
    fn retention_precedence_is_ms_then_minutes_then_hours() {
        let hours = Config::from_settings(&settings(&[("log.retention.hours", "2")])).unwrap();
        assert_eq!(hours.log_retention_ms, 7_200_000);
        let minutes = settings(&[("log.retention.hours", "2"), ("log.retention.minutes", "3")]);
        assert_eq!(
            Config::from_settings(&minutes).unwrap().log_retention_ms,
            180_000
        );
        let all = settings(&[
            ("log.retention.hours", "2"),
            ("log.retention.minutes", "3"),
            ("log.retention.ms", "-1"),
        ]);
        assert_eq!(Config::from_settings(&all).unwrap().log_retention_ms, -1);
    }

    #[test]
    fn log_dirs_wins_over_log_dir_and_listener_accepts_port_zero() {
        let config = Config::from_settings(&settings(&[
            ("log.dir", "/a"),
            ("log.dirs", "/b, /c"),
            ("listeners", "http://127.0.0.1:0"),
        ]))
        .unwrap();
        assert_eq!(
            config.log_dirs,
            vec![PathBuf::from("/b"), PathBuf::from("/c")]
        );
        assert_eq!(config.listener, "127.0.0.1:0".parse().unwrap());
    }

    #[test]
    fn config_file_accepts_strings_numbers_and_booleans() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.toml");
        let text = "\"log.dirs\" = \"/var/lib/tw\"\n\"num.partitions\" = 3\n\
                    \"auto.create.topics.enable\" = true\n";
        std::fs::write(&path, text).unwrap();
        let config = Config::from_settings(&Config::read_file(&path).unwrap()).unwrap();
        assert_eq!(config.log_dirs, vec![PathBuf::from("/var/lib/tw")]);
        assert_eq!(config.num_partitions, 3);
        assert!(config.auto_create_topics_enable);
    }

    #[test]
    fn topic_overrides_replace_only_what_they_name() {
        let broker = Config::default();
        let topic = TopicConfig::from_map(&settings(&[
            ("segment.bytes", "2097152"),
            ("min.insync.replicas", "2"),
        ]))
        .unwrap();
        let log = topic.log_config(&broker);
        assert_eq!(log.segment_bytes, 2_097_152);
        assert_eq!(log.retention_ms, broker.log_retention_ms);
        assert_eq!(topic.min_insync_replicas(&broker), 2);
        let unknown = TopicConfig::from_map(&settings(&[("log.segment.bytes", "1")]));
        assert_eq!(
            unknown,
            Err(ConfigError::Unknown("log.segment.bytes".into()))
        );
    }

    #[test]
    fn bug_settings_exist_only_with_the_deliberate_bugs_feature() {
        use crate::bugs::Bug;
        for bug in Bug::ALL {
            let result = Config::from_settings(&settings(&[(bug.setting(), "true")]));
            if cfg!(feature = "deliberate-bugs") {
                assert!(result.unwrap().bugs.on(bug), "{}", bug.setting());
            } else {
                assert_eq!(result, Err(ConfigError::Unknown(bug.setting().to_string())));
            }
        }
        // The short name is for `tidewater detect`, never a setting.
        let short = Bug::NoEpochBump.name();
        assert_eq!(
            Config::from_settings(&settings(&[(short, "true")])),
            Err(ConfigError::Unknown(short.to_string()))
        );
    }

    #[test]
    fn per_ip_overrides_are_ip_count_pairs_and_zero_needs_them() {
        let config = Config::from_settings(&settings(&[
            ("max.connections.per.ip", "0"),
            ("max.connections.per.ip.overrides", "127.0.0.2:200, [::1]:3"),
        ]))
        .unwrap();
        let expected = BTreeMap::from([
            ("127.0.0.2".parse().unwrap(), 200),
            ("::1".parse().unwrap(), 3),
        ]);
        assert_eq!(config.max_connections_per_ip_overrides, expected);
        let named = settings(&[("max.connections.per.ip.overrides", "localhost:7")]);
        let named = Config::from_settings(&named).unwrap();
        let (ip, count) = named
            .max_connections_per_ip_overrides
            .into_iter()
            .next()
            .unwrap();
        assert!(ip.is_loopback() && count == 7, "{ip} {count}");
        for bad in ["127.0.0.1", "127.0.0.1:x", "127.0.0.1:-1"] {
            let one = settings(&[("max.connections.per.ip.overrides", bad)]);
            assert!(Config::from_settings(&one).is_err(), "{bad:?} accepted");
        }
        let zero = Config::from_settings(&settings(&[("max.connections.per.ip", "0")]));
        assert!(zero.is_err());
    }

    #[test]
    fn configuration_doc_lists_every_setting() {
        let doc = include_str!("../../docs/configuration.md");
        for setting in SETTINGS {
            assert!(
                doc.contains(&format!("`{}`", setting.name)),
                "{} missing",
                setting.name
            );
        }
        for (name, _) in TOPIC_SETTINGS {
            assert!(
                doc.contains(&format!("`{name}`")),
                "topic setting {name} missing"
            );
        }
    }
}
