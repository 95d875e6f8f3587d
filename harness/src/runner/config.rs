//! `config.json`: every setting of a run, its seed and its resolved fault schedule, so that
//! `tidewater run --replay RUN_DIR` can repeat it and a report can show it.

use crate::nemesis::plan::number_text;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use tidewater_workloads::group::GroupSettings;

/// Topic-level settings (the broker's topic config names, Kafka's): passed in the test
/// topic's `configs`, and to every broker as well unless listed in [`TOPIC_ONLY_SETTINGS`].
/// A test (`broker_config`) holds both lists to the broker's own schema.
pub const TOPIC_SETTINGS: &[&str] = &[
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "flush.messages",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "max.message.bytes",
    "index.interval.bytes",
    "message.timestamp.difference.max.ms",
];

/// Topic-level settings that are not broker settings (the broker names them `log.*` or
/// `message.max.bytes`): never passed to brokers, which would refuse to start.
pub const TOPIC_ONLY_SETTINGS: &[&str] = &[
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "max.message.bytes",
    "index.interval.bytes",
    "message.timestamp.difference.max.ms",
];

/// Longest main phase, recovery wait or final-read bound a run may ask for, in seconds (one
/// week): a longer one is a typo, and a far longer one would overflow the runner's clocks.
pub const TIME_LIMIT_MAX_S: u64 = 604_800;

/// Highest `--rate`, in ops per second over all workers: one op per microsecond, well above
/// what any cluster under test serves (use 0 for "as fast as possible").
pub const RATE_MAX_OPS: f64 = 1_000_000.0;

/// Lowest non-zero `--rate`, in ops per second: one op every 1000 s. Slower is a typo (the
/// spacing of 1/rate would not fit the runner's clock for 1e-300).
pub const RATE_MIN_OPS: f64 = 0.001;

/// Most client workers of a run.
pub const CONCURRENCY_MAX: usize = 10_000;

/// Most partitions of the test topic: the companion broker's limit per topic, so a run that
/// asks for more is refused before its cluster starts rather than when the topic is created.
pub const PARTITIONS_MAX: u32 = 1_000;

/// The settings of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Test name: the store directory `store/<name>/`.
    pub name: String,
    /// Drives every random choice of the run.
    pub seed: u64,
    /// Length of the main phase (workload + faults), in seconds.
    pub time_limit_s: u64,
    /// Number of brokers (plus one controller node).
    pub nodes: usize,
    /// Fault families (`kill`, `pause`, `partition`) and fault kinds (`isolate-leader`, ...)
    /// of the random schedule; empty for none.
    pub nemesis: Vec<String>,
    /// Recovery gap between two faults of the random schedule, in seconds (each gap drawn
    /// from 0.75 to 1.5 times this); fault lengths follow the cluster's timeouts.
    pub nemesis_interval_s: f64,
    /// A fault plan (name of a shipped plan or a file) instead of the random schedule.
    pub plan: Option<String>,
    /// The workload: `queue` (producers and independent consumers), `group` (producers and
    /// consumer groups, `docs/groups.md`) or `txn` (transactions of sends and polls over
    /// the Java client, `docs/real-kafka.md`). Older runs without the field ran the queue
    /// workload.
    #[serde(default = "default_workload")]
    pub workload: String,
    /// How the workload talks to the brokers: `http` (the companion broker's HTTP API),
    /// `kafka` (Kafka's binary protocol: rskafka, and Kafka's group protocol for the group
    /// workload; docs/kafka-protocol.md) or `java` (Apache Kafka's own Java client behind
    /// the harness's driver: idempotence and transactions; docs/real-kafka.md). Older runs
    /// without the field used HTTP.
    #[serde(default = "default_client")]
    pub client: String,
    /// Worker tasks issuing ops.
    pub concurrency: usize,
    /// Ops per second over all workers (0 = unlimited).
    pub rate: f64,
    /// `--focus`: the share of the queue workload's rate and workers given to
    /// [`RunConfig::fault_key`], the partition the faults aim at; the other partitions share
    /// the rest alike. 0: every partition alike (runs stored without the field ran so).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub focus: f64,
    /// Producer acks: "0", "1" or "all".
    pub acks: String,
    /// The test topic.
    pub topic: String,
    /// Partitions of the test topic.
    pub partitions: u32,
    /// Replication factor of the test topic.
    pub replication_factor: u32,
    /// `--set key=value` broker/topic settings.
    pub sets: BTreeMap<String, String>,
    /// Bound on waiting for the cluster to answer after heal, in seconds.
    pub recovery_time_limit_s: u64,
    /// Bound on the final reads, in seconds.
    pub final_time_limit_s: u64,
    /// The resolved fault schedule (the nemesis' steps with their times), stored so a replay
    /// repeats exactly these faults. Filled in at setup.
    #[serde(default)]
    pub schedule: Value,
    /// The run directory this run replays, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<String>,
    /// The matrix cell this run belongs to (`tidewater matrix`), e.g. `acks=all
    /// min.insync.replicas=2`; the index groups runs by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix_cell: Option<String>,
    /// The names in `sets` that the harness filled in ([`HARNESS_DEFAULT_SETTINGS`]) rather
    /// than the user, so the report can tell them apart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub harness_defaults: Vec<String>,
    /// Mount a lossy filesystem over every node's data directory even when no fault cuts
    /// power (to measure its cost); runs that cut power get one anyway.
    #[serde(default)]
    pub lossy_fs: bool,
    /// The system under test of a local run: `tidewater` (the companion broker) or
    /// `kafka:X.Y.Z` (Apache Kafka's JVMs; `--system`, docs/real-kafka.md). Older runs
    /// without the field ran the companion broker.
    #[serde(default = "default_system", skip_serializing_if = "is_default_system")]
    pub system: String,
    /// `--idempotence`: the queue workload's producers are idempotent (`enable.idempotence`
    /// of the Java client; the transactional workload's always are).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idempotence: bool,
    /// `--txn-retry-commit`: the txn workload's client calls `commitTransaction` (or
    /// `abortTransaction`) again after a timeout, on the same producer, at most this many
    /// calls in all, and goes on with that producer when a call returned. 1 (the default,
    /// not stored): an unknown commit retires the producer.
    #[serde(
        default = "one_end_attempt",
        skip_serializing_if = "is_one_end_attempt"
    )]
    pub txn_end_attempts_max: u32,
    /// The Java client's producer and consumer configs (`--client java`), Kafka's names,
    /// fixed when the run is made: what the driver's clients ran with, and what the checker
    /// reads `enable.idempotence`, `transactional.id` and `isolation.level` from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub java_client: Option<tidewater_workloads::java::ClientConfigs>,
}

/// Bound on `txn_end_attempts_max` (a config.json edited by hand): each call may block
/// `max.block.ms`.
const TXN_END_ATTEMPTS_LIMIT: u32 = 10;

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn one_end_attempt() -> u32 {
    1
}

fn is_one_end_attempt(n: &u32) -> bool {
    *n == 1
}

/// The system under test of a run whose config does not name one.
pub fn default_system() -> String {
    "tidewater".into()
}

fn is_default_system(system: &str) -> bool {
    system == "tidewater"
}

/// Broker settings the harness gives every run that does not set them itself: Kafka's
/// durable `min.insync.replicas=2`, and timeouts sized for a test whose faults last seconds, not Kafka's production defaults (a 9 s session
/// timeout, a 30 s replica lag bound), so that leadership moves and ISRs shrink well within
/// one fault. Each with why.
pub const HARNESS_DEFAULT_SETTINGS: &[(&str, &str, &str)] = &[
    (
        "min.insync.replicas",
        "2",
        "Kafka's durable configuration with acks=all (the broker's default is 1): a run tests \
         the promise users rely on unless it sets another value",
    ),
    (
        "broker.session.timeout.ms",
        "4000",
        "a silent broker is fenced and its partitions move within a third of the shortest \
         leadership fault (1.5 x this)",
    ),
    (
        "replica.lag.time.max.ms",
        "2500",
        "a stalled follower leaves the ISR well before a fault ends, so acks=all writes go on \
         and the ISR shrinks and expands during the run",
    ),
];

/// The client of a run whose config does not name one.
pub fn default_client() -> String {
    "http".into()
}

/// The workload of a run whose config does not name one.
pub fn default_workload() -> String {
    "queue".into()
}

impl RunConfig {
    /// The partition the random schedule's partition-relative faults aim at (the shipped
    /// plans name it too), and the one `--focus` gives its share of the writes: `t0/0`.
    pub fn fault_key(&self) -> String {
        format!("{}/0", self.topic)
    }

    /// The keys of the test topic: `t0/0 .. t0/{partitions-1}`.
    pub fn keys(&self) -> Vec<String> {
        (0..self.partitions)
            .map(|p| format!("{}/{p}", self.topic))
            .collect()
    }

    /// The test topic as setup creates it: name, partitions, replication factor, its
    /// topic-level settings and its keys.
    pub fn topic(&self) -> crate::system::Topic {
        crate::system::Topic {
            name: self.topic.clone(),
            partitions: self.partitions,
            replication_factor: self.replication_factor,
            configs: self.topic_configs(),
            keys: self.keys(),
        }
    }

    /// The `--set` entries that are topic-level settings.
    pub fn topic_configs(&self) -> BTreeMap<String, String> {
        self.sets
            .iter()
            .filter(|(k, _)| TOPIC_SETTINGS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The `--set` entries every broker starts with: all but the topic-only ones.
    pub fn broker_settings(&self) -> BTreeMap<String, String> {
        self.sets
            .iter()
            .filter(|(k, _)| !TOPIC_ONLY_SETTINGS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The Java client's configs of a run over `--client java`: the stored ones, or for a
    /// config made without them (a matrix cell's overlay), the ones its settings give.
    pub fn java_client_configs(&self) -> Option<tidewater_workloads::java::ClientConfigs> {
        if self.client != "java" {
            return None;
        }
        Some(self.java_client.clone().unwrap_or_else(|| {
            tidewater_workloads::java::ClientConfigs::for_run(
                &self.workload,
                &self.acks,
                self.idempotence,
            )
        }))
    }

    /// Adds the [`HARNESS_DEFAULT_SETTINGS`] the run does not set itself, so they are stored
    /// in `config.json` (named in `harness_defaults` too), shown in the report and given to
    /// every node. Returns the names added.
    pub fn apply_harness_defaults(&mut self) -> Vec<&'static str> {
        let mut added = vec![];
        for (name, value, _) in HARNESS_DEFAULT_SETTINGS {
            if !self.sets.contains_key(*name) {
                self.sets.insert(name.to_string(), value.to_string());
                self.harness_defaults.push(name.to_string());
                added.push(*name);
            }
        }
        added
    }

    /// Checks settings that would make the run meaningless before anything starts.
    pub fn validate(&self) -> Result<(), String> {
        self.validate_numbers()?;
        if self.nodes == 0 {
            return Err("--nodes must be at least 1".into());
        }
        if self.replication_factor == 0 || self.replication_factor as usize > self.nodes {
            return Err(format!(
                "--replication-factor {} must be between 1 and --nodes {}",
                self.replication_factor, self.nodes
            ));
        }
        if !(1..=PARTITIONS_MAX).contains(&self.partitions) {
            return Err(format!(
                "--partitions {} must be between 1 and {PARTITIONS_MAX}",
                self.partitions
            ));
        }
        if !(1..=CONCURRENCY_MAX).contains(&self.concurrency) {
            return Err(format!(
                "--concurrency {} must be between 1 and {CONCURRENCY_MAX}",
                self.concurrency
            ));
        }
        if !(0.0..1.0).contains(&self.focus) {
            return Err(format!(
                "--focus {} must be at least 0 and below 1 (the share of the writes given to \
                 {}; the other partitions keep the rest)",
                self.focus,
                self.fault_key()
            ));
        }
        if self.focus != 0.0 && self.workload != "queue" {
            return Err(format!(
                "--focus is for the queue workload: --workload {} chooses its partitions itself",
                self.workload
            ));
        }
        if !matches!(self.workload.as_str(), "queue" | "group" | "txn") {
            return Err(format!(
                "--workload must be queue, group or txn, not {:?}",
                self.workload
            ));
        }
        let producers = GroupSettings::new(Vec::new(), &self.acks).producers;
        if self.workload == "group" && self.concurrency <= producers {
            return Err(format!(
                "--workload group needs --concurrency above {producers}: the first {producers} \
                 workers produce, the others are the group's members"
            ));
        }
        if !matches!(self.acks.as_str(), "0" | "1" | "all") {
            return Err(format!("--acks must be 0, 1 or all, not {:?}", self.acks));
        }
        match self.client.as_str() {
            "http" => {}
            "kafka" if self.acks != "all" => {
                return Err(format!(
                    "--client kafka sends acks=all only (rskafka always asks for it), not \
                     --acks {}",
                    self.acks
                ))
            }
            "kafka" | "java" => {}
            other => {
                return Err(format!(
                    "--client must be http, kafka or java, not {other:?}"
                ))
            }
        }
        let kafka = matches!(
            crate::kafka::System::parse(&self.system)?,
            crate::kafka::System::Kafka { .. }
        );
        if kafka && self.client == "http" {
            return Err(format!(
                "--system {} speaks only Kafka's protocol: it needs --client kafka or java, \
                 not --client http",
                self.system
            ));
        }
        self.validate_java_client(kafka)?;
        if !self.nemesis.is_empty() {
            crate::nemesis::parse_faults(&self.nemesis.join(",")).map_err(|e| e.0)?;
        }
        if !self.nemesis.is_empty() && self.nemesis_interval_s <= 0.0 {
            return Err("--nemesis-interval must be positive".into());
        }
        Ok(())
    }

    /// Refuses the combinations the Java client, idempotence and transactions cannot run:
    /// each says what would work instead.
    fn validate_java_client(&self, kafka: bool) -> Result<(), String> {
        if self.txn_end_attempts_max == 0 || self.txn_end_attempts_max > TXN_END_ATTEMPTS_LIMIT {
            return Err(format!(
                "txn_end_attempts_max must be 1 to {TXN_END_ATTEMPTS_LIMIT}, not {}",
                self.txn_end_attempts_max
            ));
        }
        if self.txn_end_attempts_max != 1 && self.workload != "txn" {
            return Err(
                "--txn-retry-commit is for the txn workload (--workload txn): only transactions \
                 have a commit to retry"
                    .into(),
            );
        }
        if self.workload == "txn" && self.client != "java" {
            let why = if kafka {
                "rskafka speaks no transactions"
            } else {
                "only the Java client speaks transactions"
            };
            return Err(format!(
                "--workload txn runs over the Java client (--client java), not --client {}: {why}",
                self.client
            ));
        }
        if self.idempotence && self.client != "java" {
            return Err(format!(
                "--idempotence needs the Java client (--client java): --client {} has no \
                 idempotent producer",
                self.client
            ));
        }
        if self.client != "java" {
            return Ok(());
        }
        if self.workload == "group" {
            return Err(
                "--workload group does not run over --client java yet (its members use Kafka's \
                 group protocol through rskafka: --client kafka)"
                    .into(),
            );
        }
        if (self.idempotence || self.workload == "txn") && self.acks != "all" {
            return Err(format!(
                "idempotent and transactional producers need --acks all (Kafka's client refuses \
                 enable.idempotence with acks={})",
                self.acks
            ));
        }
        if self.idempotence && self.workload == "txn" {
            return Err(
                "--idempotence is for the queue workload: the txn workload's producers are \
                 transactional, hence idempotent, already"
                    .into(),
            );
        }
        Ok(())
    }

    /// Refuses numbers the runner could not use: time bounds beyond [`TIME_LIMIT_MAX_S`], and
    /// rates and intervals that are not finite, negative or absurd (a NaN `--rate` used to
    /// mean "unlimited", 1e-300 panicked after setup). Each error names its flag.
    fn validate_numbers(&self) -> Result<(), String> {
        for (flag, secs) in [
            ("--time-limit", self.time_limit_s),
            ("--recovery-time-limit", self.recovery_time_limit_s),
            ("--final-time-limit", self.final_time_limit_s),
        ] {
            if secs > TIME_LIMIT_MAX_S {
                return Err(format!(
                    "{flag} {secs} is longer than {TIME_LIMIT_MAX_S} s (one week)"
                ));
            }
        }
        let rate_ok = self.rate == 0.0 || (RATE_MIN_OPS..=RATE_MAX_OPS).contains(&self.rate);
        if !rate_ok {
            return Err(format!(
                "--rate {} must be 0 (as fast as possible) or from {RATE_MIN_OPS} to \
                 {RATE_MAX_OPS} ops per second",
                number_text(self.rate)
            ));
        }
        let interval_max_s = TIME_LIMIT_MAX_S as f64;
        if !(0.0..=interval_max_s).contains(&self.nemesis_interval_s) {
            return Err(format!(
                "--nemesis-interval {} must be a number of seconds from 0 to {interval_max_s}",
                number_text(self.nemesis_interval_s)
            ));
        }
        Ok(())
    }

    /// The command line that repeats this run from its directory.
    pub fn replay_command(run_dir: &Path) -> String {
        format!("tidewater run --replay {}", run_dir.display())
    }

    /// The full command line with every setting spelled out.
    pub fn command_line(&self) -> String {
        format!("tidewater run {}", self.run_args().join(" "))
    }

    /// The flags of `tidewater run` that make this config (what [`RunConfig::command_line`]
    /// prints), one argument each, for starting the run as a process.
    pub fn run_args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            ("--name", self.name.clone()),
            ("--seed", self.seed.to_string()),
            ("--time-limit", self.time_limit_s.to_string()),
            ("--nodes", self.nodes.to_string()),
            ("--concurrency", self.concurrency.to_string()),
            ("--rate", self.rate.to_string()),
            ("--acks", self.acks.clone()),
            ("--partitions", self.partitions.to_string()),
            ("--replication-factor", self.replication_factor.to_string()),
        ]
        .into_iter()
        .flat_map(|(flag, value)| [flag.to_string(), value])
        .collect();
        let flag = |args: &mut Vec<String>, name: &str, value: String| {
            args.push(name.to_string());
            args.push(value);
        };
        if self.workload != "queue" {
            flag(&mut args, "--workload", self.workload.clone());
        } else {
            // Spelled out even at 0: without it the command would run the default focus.
            flag(&mut args, "--focus", self.focus.to_string());
        }
        if !is_default_system(&self.system) {
            flag(&mut args, "--system", self.system.clone());
        }
        if self.client != "http" {
            flag(&mut args, "--client", self.client.clone());
        }
        if self.lossy_fs {
            args.push("--lossy-fs".into());
        }
        if self.idempotence {
            args.push("--idempotence".into());
        }
        if self.txn_end_attempts_max > 1 {
            args.push("--txn-retry-commit".into());
        }
        match &self.plan {
            Some(plan) => flag(&mut args, "--plan", plan.clone()),
            None if self.nemesis.is_empty() => flag(&mut args, "--nemesis", "none".into()),
            None => {
                flag(&mut args, "--nemesis", self.nemesis.join(","));
                flag(
                    &mut args,
                    "--nemesis-interval",
                    self.nemesis_interval_s.to_string(),
                );
            }
        }
        for (k, v) in &self.sets {
            flag(&mut args, "--set", format!("{k}={v}"));
        }
        args
    }

    /// This config with the fields of `overrides` (RunConfig's field names, as in a matrix
    /// file's `[run]` table) replacing its own; unknown fields are errors.
    pub fn overlay(&self, overrides: &serde_json::Map<String, Value>) -> Result<RunConfig, String> {
        let mut value = serde_json::to_value(self).expect("config serializes");
        let fields = value.as_object_mut().expect("config is an object");
        for (k, v) in overrides {
            // Fields left out of config.json at their defaults (`system` too: the companion).
            let optional = matches!(
                k.as_str(),
                "replay_of" | "matrix_cell" | "harness_defaults" | "system"
            );
            if !fields.contains_key(k) && !optional {
                return Err(format!("unknown run setting {k:?}"));
            }
            fields.insert(k.clone(), v.clone());
        }
        // A cell of another workload has no lanes to focus, unless it says otherwise (and
        // is refused for it below).
        let other_workload = overrides
            .get("workload")
            .is_some_and(|w| w.as_str() != Some("queue"));
        if other_workload && !overrides.contains_key("focus") {
            fields.insert("focus".into(), Value::from(0.0));
        }
        let config: RunConfig =
            serde_json::from_value(value).map_err(|e| format!("run settings: {e}"))?;
        config.validate()?;
        Ok(config)
    }

    /// Writes `config.json`.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).expect("config serializes");
        std::fs::write(path, text + "\n")
    }

    /// Reads `config.json`.
    pub fn load(path: &Path) -> Result<RunConfig, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("bad {}: {e}", path.display()))
    }
}

#[cfg(test)]
pub(crate) fn example() -> RunConfig {
    RunConfig {
        name: "queue".into(),
        seed: 42,
        time_limit_s: 30,
        nodes: 3,
        nemesis: vec!["kill".into(), "partition".into()],
        nemesis_interval_s: 10.0,
        plan: None,
        workload: "queue".into(),
        client: "http".into(),
        concurrency: 10,
        rate: 200.0,
        focus: 0.0,
        acks: "all".into(),
        topic: "t0".into(),
        partitions: 3,
        replication_factor: 3,
        sets: BTreeMap::from([("min.insync.replicas".into(), "2".into())]),
        recovery_time_limit_s: 60,
        final_time_limit_s: 60,
        schedule: Value::Null,
        replay_of: None,
        matrix_cell: None,
        harness_defaults: Vec::new(),
        lossy_fs: false,
        system: default_system(),
        idempotence: false,
        txn_end_attempts_max: 1,
        java_client: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_java_client_runs_transactions_on_either_system_and_its_settings_are_spelled_out() {
        let mut c = example();
        c.workload = "txn".into();
        let e = c.validate().unwrap_err();
        assert!(
            e.contains("only the Java client speaks transactions"),
            "{e}"
        );
        c.client = "java".into();
        c.validate().unwrap();
        c.system = "kafka:3.9.1".into();
        c.validate().unwrap();
        c.txn_end_attempts_max = 3;
        c.validate().unwrap();
        assert!(c.command_line().contains(" --txn-retry-commit"));
        let stored = serde_json::to_value(&c).unwrap();
        assert_eq!(stored["txn_end_attempts_max"], 3);
        c.txn_end_attempts_max = 1;
        let stored = serde_json::to_value(&c).unwrap();
        assert!(
            stored.get("txn_end_attempts_max").is_none(),
            "the default is not stored"
        );
        let back: RunConfig = serde_json::from_value(stored).unwrap();
        assert_eq!(back.txn_end_attempts_max, 1);
        let java = c.java_client_configs().unwrap();
        assert_eq!(java.merged()["isolation.level"], "read_committed");
        c.acks = "1".into();
        assert!(c.validate().unwrap_err().contains("need --acks all"));
        c.acks = "all".into();
        c.workload = "queue".into();
        c.txn_end_attempts_max = 3;
        assert!(c
            .validate()
            .unwrap_err()
            .contains("--txn-retry-commit is for the txn workload"));
        c.txn_end_attempts_max = 1;
        c.idempotence = true;
        c.validate().unwrap();
        assert!(c.command_line().contains(" --idempotence"));
        assert!(c.command_line().contains(" --client java"));
        c.client = "kafka".into();
        assert!(c
            .validate()
            .unwrap_err()
            .contains("--idempotence needs the Java client"));
    }

    #[test]
    fn a_kafka_system_needs_the_kafka_client_and_is_spelled_out_for_replay() {
        let mut c = example();
        let json = serde_json::to_value(&c).unwrap();
        assert!(json.get("system").is_none(), "the default is not written");
        c.system = "kafka:4.1.1".into();
        assert!(c.validate().unwrap_err().contains("needs --client kafka"));
        c.client = "kafka".into();
        c.validate().unwrap();
        assert!(c
            .command_line()
            .contains(" --system kafka:4.1.1 --client kafka"));
        c.system = "kafka:latest".into();
        assert!(c
            .validate()
            .unwrap_err()
            .contains("expected tidewater (or companion), kafka"));
    }

    #[test]
    fn config_round_trips_through_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        let mut c = example();
        c.schedule = serde_json::json!([{"at_s": 5, "action": "kill", "nodes": ["n2"]}]);
        c.save(&path).unwrap();
        assert_eq!(RunConfig::load(&path).unwrap(), c);
    }

    #[test]
    fn keys_topic_configs_and_command_line() {
        let mut c = example();
        c.sets
            .insert("replica.lag.time.max.ms".into(), "3000".into());
        assert_eq!(c.keys(), vec!["t0/0", "t0/1", "t0/2"]);
        assert_eq!(
            c.topic_configs(),
            BTreeMap::from([("min.insync.replicas".to_string(), "2".to_string())])
        );
        let cmd = c.command_line();
        assert!(cmd.contains("--seed 42"), "{cmd}");
        assert!(
            cmd.contains("--nemesis kill,partition --nemesis-interval 10"),
            "{cmd}"
        );
        assert!(cmd.contains("--set replica.lag.time.max.ms=3000"), "{cmd}");
        assert!(!cmd.contains("--workload"), "queue is the default: {cmd}");
        assert!(!cmd.contains("--client"), "http is the default: {cmd}");
        c.client = "kafka".into();
        assert!(c.command_line().contains(" --client kafka"));
        c.client = "http".into();
        c.workload = "group".into();
        assert!(c.command_line().contains(" --workload group"));
    }

    #[test]
    fn harness_defaults_fill_in_only_what_the_run_does_not_set() {
        let mut c = example();
        c.sets
            .insert("replica.lag.time.max.ms".into(), "30000".into());
        assert_eq!(
            c.apply_harness_defaults(),
            vec!["broker.session.timeout.ms"]
        );
        assert_eq!(c.sets["broker.session.timeout.ms"], "4000");
        assert_eq!(
            c.sets["replica.lag.time.max.ms"], "30000",
            "the user's value stays"
        );
        assert!(c.apply_harness_defaults().is_empty());
        assert!(c
            .command_line()
            .contains("--set broker.session.timeout.ms=4000"));
    }

    #[test]
    fn a_config_without_a_workload_ran_the_queue_workload() {
        let mut value = serde_json::to_value(example()).unwrap();
        value.as_object_mut().unwrap().remove("workload");
        let c: RunConfig = serde_json::from_value(value).unwrap();
        assert_eq!(c.workload, "queue");
    }

    #[test]
    fn overlay_replaces_fields_and_rejects_unknown_ones() {
        let base = example();
        let table = serde_json::json!({"acks": "1", "time_limit_s": 5, "matrix_cell": "acks=1",
            "sets": {"unclean.leader.election.enable": "true"}});
        let c = base.overlay(table.as_object().unwrap()).unwrap();
        assert_eq!((c.acks.as_str(), c.time_limit_s), ("1", 5));
        assert_eq!(c.matrix_cell.as_deref(), Some("acks=1"));
        assert_eq!(c.sets.len(), 1);
        // The queue workload's focus does not follow a cell into another workload.
        let focused = RunConfig {
            focus: 0.5,
            ..example()
        };
        let txn = serde_json::json!({"workload": "group", "concurrency": 5});
        let c = focused.overlay(txn.as_object().unwrap()).unwrap();
        assert_eq!((c.workload.as_str(), c.focus), ("group", 0.0));
        let asked = serde_json::json!({"workload": "group", "focus": 0.5});
        assert!(focused.overlay(asked.as_object().unwrap()).is_err());
        let bad = serde_json::json!({"acks": "2"});
        assert!(base
            .overlay(bad.as_object().unwrap())
            .unwrap_err()
            .contains("--acks"));
        let unknown = serde_json::json!({"speed": 3});
        assert!(base
            .overlay(unknown.as_object().unwrap())
            .unwrap_err()
            .contains("speed"));
    }

    #[test]
    fn focus_is_a_share_below_one_of_the_queue_workload_and_spelled_out_for_it() {
        let mut c = example();
        assert!(
            c.command_line().contains(" --focus 0 "),
            "{}",
            c.command_line()
        );
        c.focus = 0.5;
        c.validate().unwrap();
        assert!(c.command_line().contains(" --focus 0.5 "));
        assert_eq!(c.fault_key(), "t0/0");
        for bad in [1.0, 1.5, -0.1, f64::NAN] {
            c.focus = bad;
            let e = c.validate().unwrap_err();
            assert!(e.contains("--focus") && e.contains("t0/0"), "{bad}: {e}");
        }
        c.focus = 0.5;
        c.workload = "group".into();
        let e = c.validate().unwrap_err();
        assert!(e.contains("--focus is for the queue workload"), "{e}");
        // Other workloads never spell it (their command would be refused with it).
        c.focus = 0.0;
        assert!(!c.command_line().contains("--focus"));
        // A run stored before the field ran every partition alike.
        let mut stored = serde_json::to_value(example()).unwrap();
        stored.as_object_mut().unwrap().remove("focus");
        let old: RunConfig = serde_json::from_value(stored).unwrap();
        assert_eq!(old.focus, 0.0);
    }

    #[test]
    fn validation_names_the_bad_flag() {
        let mut c = example();
        c.replication_factor = 4;
        assert!(c.validate().unwrap_err().contains("--replication-factor 4"));
        let mut c = example();
        c.nemesis = vec!["flood".into()];
        assert!(c.validate().unwrap_err().contains("flood"));
        c.nemesis = vec!["failback".into(), "pause".into()];
        assert!(c.validate().is_ok());
        let mut c = example();
        c.acks = "2".into();
        assert!(c.validate().unwrap_err().contains("--acks"));
        let mut c = example();
        c.client = "kafka".into();
        assert!(c.validate().is_ok());
        c.acks = "1".into();
        assert!(c
            .validate()
            .unwrap_err()
            .contains("--client kafka sends acks=all only"));
        c.acks = "all".into();
        c.workload = "group".into();
        c.concurrency = 20;
        assert!(c.validate().is_ok(), "the group workload over Kafka");
        c.client = "grpc".into();
        c.workload = "queue".into();
        assert!(c.validate().unwrap_err().contains("--client must be"));
        let mut c = example();
        c.workload = "stream".into();
        assert!(c.validate().unwrap_err().contains("--workload"));
        c.workload = "group".into();
        c.concurrency = 2;
        assert!(c.validate().unwrap_err().contains("--concurrency above 2"));
        c.concurrency = 3;
        assert!(c.validate().is_ok(), "two producers and one member");
        assert!(example().validate().is_ok());
    }

    #[test]
    fn numbers_the_runner_cannot_use_are_refused_naming_the_flag() {
        let refused = |change: &dyn Fn(&mut RunConfig), want: &str| {
            let mut c = example();
            change(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.contains(want), "want {want:?}, got {e:?}");
        };
        for (rate, text) in [
            (-5.0, "-5"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (1e-300, "1e-300"),
            (1e7, "10000000"),
        ] {
            refused(&|c| c.rate = rate, &format!("--rate {text} must be 0"));
        }
        for (interval, text) in [(-1.0, "-1"), (f64::NAN, "NaN"), (1e300, "1e300")] {
            refused(
                &|c| c.nemesis_interval_s = interval,
                &format!("--nemesis-interval {text} must be"),
            );
        }
        refused(
            &|c| c.time_limit_s = u64::MAX,
            "--time-limit 18446744073709551615",
        );
        refused(
            &|c| c.recovery_time_limit_s = 604_801,
            "--recovery-time-limit 604801",
        );
        refused(
            &|c| c.final_time_limit_s = 604_801,
            "--final-time-limit 604801 is longer",
        );
        refused(
            &|c| c.partitions = 1001,
            "--partitions 1001 must be between 1 and 1000",
        );
        refused(&|c| c.partitions = 0, "--partitions 0");
        refused(&|c| c.concurrency = 10_001, "--concurrency 10001");
        let mut c = example();
        (c.rate, c.time_limit_s, c.nemesis_interval_s) = (0.0, TIME_LIMIT_MAX_S, 0.5);
        assert_eq!(
            c.validate(),
            Ok(()),
            "0 is unlimited; the bounds themselves are fine"
        );
        c.rate = RATE_MIN_OPS;
        assert_eq!(c.validate(), Ok(()));
    }
}
