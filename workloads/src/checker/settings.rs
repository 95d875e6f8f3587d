//! The run settings that decide which anomalies break Kafka's promise, and the policy itself.
//!
//! Every anomaly is always reported, and whether it makes the history invalid is a fact
//! ([`CheckSettings::invalidates`]); these settings decide whether it breaks the promise of
//! the run's configuration, and the `note` of each anomaly says why.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The producer's `acks` setting, Kafka's names: `0`, `1` or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Acks {
    /// `acks=0`: the producer does not wait for the leader at all.
    Zero,
    /// `acks=1`: the leader acknowledges after its own append.
    One,
    /// `acks=all` (or `-1`): the leader acknowledges once the high watermark passes the record.
    #[default]
    All,
}

impl Acks {
    /// `"0"`, `"1"` or `"all"`, as in Kafka's producer config.
    pub fn as_str(self) -> &'static str {
        match self {
            Acks::Zero => "0",
            Acks::One => "1",
            Acks::All => "all",
        }
    }
}

impl fmt::Display for Acks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Acks {
    type Err = String;
    fn from_str(s: &str) -> Result<Acks, String> {
        match s {
            "0" => Ok(Acks::Zero),
            "1" => Ok(Acks::One),
            "all" | "-1" => Ok(Acks::All),
            other => Err(format!(
                "acks must be \"0\", \"1\" or \"all\", got {other:?}"
            )),
        }
    }
}

impl Serialize for Acks {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Acks {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Accept both "all" and the integers 0, 1, -1 that Kafka configs also use.
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::String(s) => s.parse().map_err(serde::de::Error::custom),
            serde_json::Value::Number(n) => n.to_string().parse().map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(format!("bad acks {other}"))),
        }
    }
}

/// What the checker needs to know about a run to judge its anomalies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CheckSettings {
    /// The producers' `acks`; every acknowledged send is attributed to this level.
    pub acks: Acks,
    /// The topics' `min.insync.replicas`.
    pub min_insync_replicas: u32,
    /// The topics' replication factor.
    pub replication_factor: u32,
    /// `unclean.leader.election.enable`: an out-of-sync replica may become leader.
    pub unclean_leader_election_enable: bool,
    /// The broker's unsafe switch: followers truncate to their high watermark on restart
    /// instead of by leader epoch (pre-KIP-101 Kafka).
    pub truncate_to_hw: bool,
    /// The broker's unsafe switch: a new leader serves its lagging high watermark to consumers
    /// instead of `OFFSET_NOT_AVAILABLE` (pre-KIP-207 Kafka).
    pub serve_lagging_hw: bool,
    /// True when the runner's final reads of every partition completed. Without them an
    /// acknowledged write that was never read may only be delayed, so the verdict can be at
    /// best `unknown`.
    pub final_reads_completed: bool,
    /// True when all sends of one op are appended as one contiguous batch (one produce request
    /// to one partition); only then is a gap between them (`int-send-skip`) an anomaly.
    pub atomic_send_batches: bool,
    /// At most this many examples are kept per anomaly.
    pub examples_max: usize,
    /// The floor of a run that tested something: every partition written to must have at
    /// least this many acknowledged writes, or the verdict is `unknown`.
    pub min_acked_per_key: u64,
    /// `flush.messages`: the brokers fsync after this many appended records (`None`: never,
    /// Kafka's default). With 1, every acknowledged record is on disk on every holder.
    pub flush_messages: Option<u64>,
    /// The most brokers whose power was cut at the same time (down from `start-power-loss`
    /// until their `stop-power-loss`), from the history's fault windows; filled in by the
    /// checker. A power loss of at least `min.insync.replicas` brokers at once may take every
    /// copy of a record acknowledged with acks=all, unless each copy was fsynced.
    pub power_lost_at_once: u32,
    /// The fault kinds the run asked for (`kill`, `pause`, `partition`, ...). When not empty
    /// and the history shows none of them injected, the run tested nothing under faults and
    /// the verdict is `unknown`. Empty for a bare history: then faults are not judged.
    pub faults_requested: Vec<String>,
    /// `enable.idempotence` of the producers: `Some(true)` when they were idempotent (the
    /// broker must drop a retried batch by producer id and sequence, so a duplicate breaks the
    /// promise), `Some(false)` when they retried without idempotence (a retry may append a
    /// batch twice: at-least-once), `None` when they never retried (Tidewater's plain
    /// workload: each send once, so a duplicate is the broker's doing). Omitted from
    /// `stats.settings` when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_idempotence: Option<bool>,
    /// True when the producers were transactional (`transactional.id` set). Transactional
    /// producers are idempotent, and the transaction analysis runs even if no `txn` op
    /// appears. Omitted from `stats.settings` when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub transactional: bool,
    /// The consumers' `isolation.level`. Kafka promises `read_committed` consumers never see
    /// an aborted or open transaction's records; `read_uncommitted` ones see both. Omitted
    /// from `stats.settings` when `read_committed` (the default here, as the transactional
    /// workload reads that way; Kafka's client default is `read_uncommitted`).
    #[serde(skip_serializing_if = "IsolationLevel::is_read_committed")]
    pub isolation_level: IsolationLevel,
    /// The transactional producers' `transaction.timeout.ms`, when the run set it (Kafka's
    /// client default is 60000): how long the coordinator lets a transaction stay open
    /// before it aborts it. Omitted from `stats.settings` when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transaction_timeout_ms: Option<u64>,
}

/// Kafka's client default of `transaction.timeout.ms`.
pub const TRANSACTION_TIMEOUT_MS_DEFAULT: u64 = 60_000;

/// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms` default (the
/// companion broker's too): how often a coordinator looks for transactions past their
/// timeout.
pub const TRANSACTION_CLEANUP_INTERVAL_MS: u64 = 10_000;

/// The consumers' `isolation.level`, Kafka's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IsolationLevel {
    /// `read_committed`: fetches stop at the last stable offset and aborted records are
    /// filtered out.
    #[default]
    ReadCommitted,
    /// `read_uncommitted`: fetches go up to the high watermark, aborted records included.
    ReadUncommitted,
}

impl IsolationLevel {
    /// True for `read_committed`.
    pub fn is_read_committed(&self) -> bool {
        *self == IsolationLevel::ReadCommitted
    }

    /// `"read_committed"` or `"read_uncommitted"`.
    pub fn as_str(self) -> &'static str {
        match self {
            IsolationLevel::ReadCommitted => "read_committed",
            IsolationLevel::ReadUncommitted => "read_uncommitted",
        }
    }
}

impl FromStr for IsolationLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<IsolationLevel, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "read_committed" => Ok(IsolationLevel::ReadCommitted),
            "read_uncommitted" => Ok(IsolationLevel::ReadUncommitted),
            other => Err(format!(
                "isolation.level must be read_committed or read_uncommitted, got {other:?}"
            )),
        }
    }
}

impl Default for CheckSettings {
    /// The safe configuration: acks=all, min.insync.replicas=2, replication factor 3, unclean
    /// election off, no unsafe switches, final reads completed.
    fn default() -> Self {
        CheckSettings {
            acks: Acks::All,
            min_insync_replicas: 2,
            replication_factor: 3,
            unclean_leader_election_enable: false,
            truncate_to_hw: false,
            serve_lagging_hw: false,
            final_reads_completed: true,
            atomic_send_batches: false,
            examples_max: 10,
            min_acked_per_key: 1,
            flush_messages: None,
            power_lost_at_once: 0,
            faults_requested: Vec::new(),
            enable_idempotence: None,
            transactional: false,
            isolation_level: IsolationLevel::ReadCommitted,
            transaction_timeout_ms: None,
        }
    }
}

impl CheckSettings {
    /// Builds settings from the producer's `acks` and the run's Kafka-style configs, by their
    /// names: `min.insync.replicas`, `replication.factor` (or `default.replication.factor`),
    /// `unclean.leader.election.enable`, `flush.messages` (or `log.flush.interval.messages`),
    /// `tidewater.unsafe.truncate.to.hw.enable` and
    /// `tidewater.unsafe.serve.lagging.hw.enable`; and of the clients: `enable.idempotence`,
    /// `transactional.id` (any non-empty value: transactional) and `isolation.level`.
    /// Other names are ignored; a known name
    /// with a bad value is an error; an absent one takes Kafka's default
    /// (`min.insync.replicas` 1).
    pub fn from_kafka_configs(
        acks: &str,
        configs: &std::collections::BTreeMap<String, String>,
    ) -> Result<CheckSettings, String> {
        // Absent names take Kafka's defaults (min.insync.replicas is 1 there), not the safe
        // configuration of `CheckSettings::default()`: the promise must describe what ran.
        let mut s = CheckSettings {
            acks: acks.parse()?,
            min_insync_replicas: 1,
            ..CheckSettings::default()
        };
        let flag = |name: &str| -> Result<Option<bool>, String> {
            configs
                .get(name)
                .map(|v| match v.trim().to_ascii_lowercase().as_str() {
                    "true" => Ok(true),
                    "false" => Ok(false),
                    other => Err(format!("{name} must be true or false, got {other:?}")),
                })
                .transpose()
        };
        let number = |name: &str| -> Result<Option<u32>, String> {
            configs
                .get(name)
                .map(|v| {
                    v.trim()
                        .parse()
                        .map_err(|_| format!("{name} must be a number, got {v:?}"))
                })
                .transpose()
        };
        if let Some(n) = number("min.insync.replicas")? {
            s.min_insync_replicas = n;
        }
        if let Some(n) = number("replication.factor")?.or(number("default.replication.factor")?) {
            s.replication_factor = n;
        }
        let count = |name: &str| -> Result<Option<u64>, String> {
            configs
                .get(name)
                .map(|v| {
                    v.trim()
                        .parse()
                        .map_err(|_| format!("{name} must be a number, got {v:?}"))
                })
                .transpose()
        };
        s.flush_messages = count("flush.messages")?
            .or(count("log.flush.interval.messages")?)
            .filter(|n| *n != u64::MAX);
        if let Some(b) = flag("unclean.leader.election.enable")? {
            s.unclean_leader_election_enable = b;
        }
        if let Some(b) = flag("tidewater.unsafe.truncate.to.hw.enable")? {
            s.truncate_to_hw = b;
        }
        if let Some(b) = flag("tidewater.unsafe.serve.lagging.hw.enable")? {
            s.serve_lagging_hw = b;
        }
        s.enable_idempotence = flag("enable.idempotence")?;
        s.transactional = configs
            .get("transactional.id")
            .is_some_and(|id| !id.trim().is_empty());
        if let Some(level) = configs.get("isolation.level") {
            s.isolation_level = level.parse()?;
        }
        s.transaction_timeout_ms = count("transaction.timeout.ms")?;
        Ok(s)
    }
}

/// Whether an anomaly breaks Kafka's promise under some settings, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// True when the settings forbid the anomaly.
    pub breaks_promise: bool,
    /// One sentence saying why.
    pub note: String,
}

impl CheckSettings {
    /// The settings that decide the promise, in Kafka's names: `acks=all,
    /// min.insync.replicas=2, unclean election off` (plus any unsafe switch that is on).
    pub fn describe(&self) -> String {
        let mut parts = vec![
            format!("acks={}", self.acks),
            format!("min.insync.replicas={}", self.min_insync_replicas),
            format!(
                "unclean election {}",
                if self.unclean_leader_election_enable {
                    "on"
                } else {
                    "off"
                }
            ),
        ];
        if self.truncate_to_hw {
            parts.push("truncation to the high watermark".into());
        }
        if self.serve_lagging_hw {
            parts.push("lagging high watermark served".into());
        }
        if let Some(n) = self.flush_messages {
            parts.push(format!("flush.messages={n}"));
        }
        if self.power_lost_at_once > 0 {
            parts.push(format!(
                "power lost on {} broker(s) at once",
                self.power_lost_at_once
            ));
        }
        if let Some(on) = self.enable_idempotence {
            parts.push(format!("enable.idempotence={on}"));
        }
        if self.transactional {
            parts.push("transactional producers".into());
        }
        if !self.isolation_level.is_read_committed() {
            parts.push(format!("isolation.level={}", self.isolation_level.as_str()));
        }
        parts.join(", ")
    }

    /// The reasons, under these settings, that acknowledged writes may legitimately be lost
    /// (empty when none: then a lost write is a bug).
    pub fn loss_reasons(&self) -> Vec<&'static str> {
        let mut reasons = Vec::new();
        match self.acks {
            Acks::Zero => reasons.push("acks=0 acknowledges before the leader has the record"),
            Acks::One => reasons.push(
                "acks=1 may lose acknowledged writes on leader failover (the leader acknowledges before followers have the record)",
            ),
            Acks::All => {}
        }
        if self.unclean_leader_election_enable {
            reasons.push(
                "unclean.leader.election.enable=true lets an out-of-sync replica become leader and discard acknowledged records",
            );
        }
        if self.truncate_to_hw {
            reasons.push(
                "truncation to the high watermark (pre-KIP-101) can discard records below the leader's high watermark",
            );
        }
        if self.power_loss_permits_loss() {
            reasons.push(
                "power was lost on at least min.insync.replicas brokers at once without flush.messages=1, which can take every copy of a record acknowledged with acks=all",
            );
        }
        reasons
    }

    /// Whether the run's power losses may legitimately lose acknowledged records: at least
    /// `min.insync.replicas` brokers lost power at once (an acks=all record may have had no
    /// other holder), and the brokers did not fsync every record (`flush.messages` is not 1).
    pub fn power_loss_permits_loss(&self) -> bool {
        self.power_lost_at_once > 0
            && self.power_lost_at_once >= self.min_insync_replicas
            && self.flush_messages != Some(1)
    }

    /// The reasons that records below an acknowledged high watermark may be discarded (the
    /// high watermark itself regresses with data loss). acks does not matter here: the high
    /// watermark is the minimum log end over the ISR, so a clean election keeps everything
    /// below it.
    fn hw_loss_reasons(&self) -> Vec<&'static str> {
        self.loss_reasons()
            .into_iter()
            .filter(|r| !r.starts_with("acks="))
            .collect()
    }

    /// Whether instances of anomaly `name` make the history invalid whatever the settings
    /// (Jepsen's `valid?`): every lost acknowledged write and every consistency anomaly does.
    /// Not: `unseen` while the final reads are incomplete (it may be delay), `int-send-skip`
    /// when the sends of one op are separate appends, and `hw-regression`, which is judged
    /// per class (only `data-loss` invalidates). Nor the transaction anomalies that Kafka's
    /// model produces by design, reported as facts: `G0` (appends of concurrent transactions
    /// interleave in every partition; Jepsen's Kafka checker allows it too), `G-single` and
    /// `G2` (Kafka's transactions are not serializable across partitions: a correct broker
    /// shows them, so counting them would make every transactional run invalid),
    /// `intermediate-read` (a poll may end inside a committed transaction's records) and
    /// `G1c` cycles that need a ww edge (judged per class by [`CheckSettings::judge_g1c`]).
    pub fn invalidates(&self, name: &str) -> bool {
        match name {
            "unseen" => self.final_reads_completed,
            "int-send-skip" => self.atomic_send_batches,
            "G0" | "G-single" | "G2" | "intermediate-read" => false,
            _ => true,
        }
    }

    /// How long a transaction may hold a partition's last stable offset before its
    /// coordinator must have aborted it: `transaction.timeout.ms` plus the coordinator's
    /// check interval. A longer hold while the producers are gone is `hanging-transaction`.
    pub fn hanging_after_ms(&self) -> u64 {
        self.transaction_timeout_ms
            .unwrap_or(TRANSACTION_TIMEOUT_MS_DEFAULT)
            .saturating_add(TRANSACTION_CLEANUP_INTERVAL_MS)
    }

    /// True when the producers were idempotent: `enable.idempotence=true`, or transactional
    /// (a transactional producer is always idempotent).
    pub fn idempotent(&self) -> bool {
        self.enable_idempotence == Some(true) || self.transactional
    }

    /// Judges `aborted-read` when `from_txn` of its instances read a value of an aborted
    /// transaction (the others read a failed plain send). `read_uncommitted` consumers see
    /// aborted transactions' records by design; a failed plain send was never appended.
    pub fn judge_aborted_reads(&self, from_txn: u64, total: u64) -> Judgement {
        if from_txn == 0 {
            return self.judge("aborted-read");
        }
        match self.isolation_level {
            IsolationLevel::ReadCommitted => Judgement {
                breaks_promise: true,
                note: "read_committed consumers must never see a record of an aborted transaction (or of a failed send)".into(),
            },
            IsolationLevel::ReadUncommitted if from_txn == total => Judgement {
                breaks_promise: false,
                note: "expected with isolation.level=read_uncommitted: such consumers read aborted transactions' records".into(),
            },
            IsolationLevel::ReadUncommitted => Judgement {
                breaks_promise: true,
                note: format!("{} instance(s) read a failed plain send, which was never appended; the {from_txn} read(s) of aborted transactions are expected with isolation.level=read_uncommitted", total - from_txn),
            },
        }
    }

    /// Judges `G1c` cycles when `wr_only` of them consist of write-read edges alone. Such a
    /// cycle cannot happen with read_committed consumers: each transaction would have read
    /// the other's records before either committed. A cycle that needs a ww edge is Kafka's
    /// design (append order is no commit order), reported and not counted, as in Jepsen; so
    /// `G1c` invalidates the history exactly when `wr_only > 0`.
    pub fn judge_g1c(&self, wr_only: u64) -> Judgement {
        let read_committed = self.isolation_level.is_read_committed();
        let note = if wr_only == 0 {
            "every cycle found needs a ww edge: appends of concurrent transactions interleave and append order is not commit order, so Kafka's model allows it (Jepsen's Kafka checker allows G1c with ww edges)".to_string()
        } else if read_committed {
            format!("{wr_only} cycle(s) of write-read edges alone: with isolation.level=read_committed every transaction in such a cycle read another's records before that one committed")
        } else {
            format!("{wr_only} cycle(s) of write-read edges alone; expected with isolation.level=read_uncommitted (consumers read uncommitted records)")
        };
        Judgement {
            breaks_promise: wr_only > 0 && read_committed,
            note,
        }
    }

    /// Judges one anomaly by name (`hw-regression` is judged per class by
    /// [`CheckSettings::judge_hw_regression`]).
    pub fn judge(&self, name: &str) -> Judgement {
        let loss = self.loss_reasons();
        let permitted_by_loss = |what: &str| -> Judgement {
            if loss.is_empty() {
                Judgement {
                    breaks_promise: true,
                    note: format!(
                        "{what} is forbidden with acks=all, unclean election off, no unsafe switches and no power loss of min.insync.replicas brokers at once (or flush.messages=1)"
                    ),
                }
            } else {
                Judgement {
                    breaks_promise: false,
                    note: format!("expected under these settings: {}", loss.join("; ")),
                }
            }
        };
        match name {
            "lost-write" => permitted_by_loss("losing an acknowledged write"),
            "unseen" => {
                if !self.final_reads_completed {
                    Judgement {
                        breaks_promise: false,
                        note: "the final reads did not complete, so unseen writes may only be delayed"
                            .into(),
                    }
                } else {
                    let mut j = permitted_by_loss(
                        "an acknowledged write that even the final reads never returned (it lies beyond the log's end)",
                    );
                    if j.breaks_promise {
                        j.note = format!("the final reads covered every partition, so these writes are lost: {}", j.note);
                    }
                    j
                }
            }
            "inconsistent-offsets" | "nonmonotonic-send" | "int-nonmonotonic-send" => {
                permitted_by_loss("reusing an offset (a sign of truncated acknowledged records)")
            }
            "poll-skip" | "nonmonotonic-poll" | "int-poll-skip" | "int-nonmonotonic-poll" => {
                let mut j = permitted_by_loss("a consumer skipping or re-reading records");
                j.note.push_str(
                    "; instances on processes that used subscribe are reported but never count (rebalances legitimately move positions), nor do polls going back after an OFFSET_OUT_OF_RANGE reset the consumer (after_reset)",
                );
                j
            }
            "int-send-skip" => {
                if self.atomic_send_batches {
                    permitted_by_loss("a gap inside one atomically appended batch")
                } else {
                    Judgement {
                        breaks_promise: false,
                        note: "the sends of one op are separate appends, so other producers may interleave".into(),
                    }
                }
            }
            "group-split-ownership" => Judgement {
                breaks_promise: true,
                note: "a partition must have one owner per group generation".into(),
            },
            "commit-regression" => {
                let hw_loss = self.hw_loss_reasons();
                if hw_loss.is_empty() {
                    Judgement {
                        breaks_promise: true,
                        note: "committed offsets are stored replicated and must never go back".into(),
                    }
                } else {
                    Judgement {
                        breaks_promise: false,
                        note: format!("expected under these settings (the offsets store may lose commits too): {}", hw_loss.join("; ")),
                    }
                }
            }
            "group-undelivered" => permitted_by_loss(
                "a group committing past an acknowledged record it never delivered",
            ),
            "duplicate" => match self.enable_idempotence {
                _ if self.idempotent() => Judgement {
                    breaks_promise: true,
                    note: "the producers were idempotent: the broker must drop a retried batch by producer id and sequence, so a value at two offsets breaks that promise".into(),
                },
                Some(false) => Judgement {
                    breaks_promise: false,
                    note: "expected with enable.idempotence=false: a producer retry may append a batch twice (at-least-once)".into(),
                },
                _ => Judgement {
                    breaks_promise: true,
                    note: "values are sent once, so a value at two offsets means the broker appended it twice".into(),
                },
            },
            "precommitted-read" => Judgement {
                breaks_promise: self.isolation_level.is_read_committed(),
                note: if self.isolation_level.is_read_committed() {
                    "read_committed consumers must not see a transaction's records before it commits".into()
                } else {
                    "expected with isolation.level=read_uncommitted: such consumers read open transactions' records".into()
                },
            },
            "intermediate-read" => Judgement {
                breaks_promise: false,
                note: "reported, not counted: a poll may end inside a committed transaction's records (max.poll.records, fetch sizes), so a prefix of its writes to one partition is Kafka's design".into(),
            },
            "G0" => Judgement {
                breaks_promise: false,
                note: "reported, not counted: Kafka does not isolate writes; appends of concurrent transactions interleave in every partition (Jepsen's Kafka checker allows G0 too)".into(),
            },
            "G-single" | "G2" => Judgement {
                breaks_promise: false,
                note: "reported as a fact, not counted: Kafka's transactions are atomic but not serializable across partitions (a poll is no snapshot of several partitions, and nothing orders one transaction's reads before another's writes)".into(),
            },
            "aborted-read" => Judgement {
                breaks_promise: true,
                note: "a failed send certainly had no effect, so its value must never be read".into(),
            },
            "hanging-transaction" => Judgement {
                breaks_promise: self.isolation_level.is_read_committed(),
                note: format!(
                    "a transaction coordinator aborts a transaction open longer than transaction.timeout.ms (checked every {} s), so after the producers stopped the last stable offset must reach every acknowledged write within {} s; one held longer is a transaction no coordinator will end, hiding every later record from read_committed consumers (KAFKA-12671, KIP-664)",
                    TRANSACTION_CLEANUP_INTERVAL_MS / 1000,
                    self.hanging_after_ms() / 1000
                ),
            },
            "unexpected" => Judgement {
                breaks_promise: true,
                note: "a value that no process ever sent was read".into(),
            },
            "replica-divergence" if self.truncate_to_hw => Judgement {
                breaks_promise: false,
                note: "expected with truncation to the high watermark (pre-KIP-101): a follower keeps records its new leader replaced".into(),
            },
            "replica-divergence" => Judgement {
                breaks_promise: true,
                note: "replicas in the ISR must hold the same record at every offset below the high watermark (KIP-101, KIP-279); any of them may be elected".into(),
            },
            "under-min-isr-ack" => Judgement {
                breaks_promise: self.acks == Acks::All,
                note: format!(
                    "with acks=all the leader must refuse (NOT_ENOUGH_REPLICAS) while fewer than min.insync.replicas={} replicas are in sync; this acknowledgement stands on fewer",
                    self.min_insync_replicas
                ),
            },
            _ => Judgement { breaks_promise: true, note: String::new() },
        }
    }

    /// Judges high-watermark regressions of one class: `"visibility-only"` or `"data-loss"`.
    pub fn judge_hw_regression(&self, class: &str) -> Judgement {
        let loss = self.hw_loss_reasons();
        match class {
            "data-loss" if loss.is_empty() => Judgement {
                breaks_promise: true,
                note: "records below an acknowledged high watermark were discarded; only unclean election or truncation to the high watermark allow that".into(),
            },
            "data-loss" => Judgement {
                breaks_promise: false,
                note: format!("expected under these settings: {}", loss.join("; ")),
            },
            _ if self.serve_lagging_hw => Judgement {
                breaks_promise: false,
                note: "expected: a new leader serves its lagging high watermark, and with serve_lagging_hw (pre-KIP-207) answers it as the latest offset too; no record was lost".into(),
            },
            // Kafka's reads are not linearizable: a new leader serves fetches with its own HW,
            // which lags the old leader's until its followers fetch again (KIP-207 withholds
            // only the latest offset), and a deposed leader that has not yet learned of its
            // successor may answer with its older one. Only loss is a bug.
            _ => Judgement {
                breaks_promise: false,
                note: "reported, not a breaks_promise: no record was lost; a new leader serves fetches with its own high watermark, which lags the old leader's until its followers fetch again (Kafka's Partition.fetchRecords; KIP-207 withholds only the latest offset), and a deposed leader that has not yet learned of its successor may still answer with its older one".into(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn settings_come_from_kafka_config_names() {
        let configs: BTreeMap<String, String> = [
            ("min.insync.replicas", "1"),
            ("unclean.leader.election.enable", "TRUE"),
            ("tidewater.unsafe.serve.lagging.hw.enable", "false"),
            ("log.retention.ms", "1000"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let s = CheckSettings::from_kafka_configs("1", &configs).unwrap();
        assert_eq!(s.acks, Acks::One);
        assert_eq!(s.min_insync_replicas, 1);
        assert!(s.unclean_leader_election_enable && !s.serve_lagging_hw);
        assert_eq!(s.replication_factor, 3);
        assert!(CheckSettings::from_kafka_configs("2", &configs).is_err());
        let bad: BTreeMap<String, String> =
            [("min.insync.replicas".to_string(), "two".to_string())].into();
        assert!(CheckSettings::from_kafka_configs("all", &bad).is_err());
    }

    #[test]
    fn client_settings_come_from_kafka_config_names() {
        let configs: BTreeMap<String, String> = [
            ("enable.idempotence", "true"),
            ("transactional.id", "tidewater-7"),
            ("isolation.level", "READ_UNCOMMITTED"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let s = CheckSettings::from_kafka_configs("all", &configs).unwrap();
        assert_eq!(s.enable_idempotence, Some(true));
        assert!(s.transactional && s.idempotent());
        assert_eq!(s.isolation_level, IsolationLevel::ReadUncommitted);
        assert!(s.describe().ends_with(
            "enable.idempotence=true, transactional producers, isolation.level=read_uncommitted"
        ));
        // Absent: no retries, not transactional, read_committed; and nothing new serialized.
        let plain = CheckSettings::from_kafka_configs("all", &BTreeMap::new()).unwrap();
        assert_eq!(
            (
                plain.enable_idempotence,
                plain.transactional,
                plain.isolation_level
            ),
            (None, false, IsolationLevel::ReadCommitted)
        );
        assert_eq!(plain.transaction_timeout_ms, None);
        assert_eq!(
            plain.hanging_after_ms(),
            70_000,
            "Kafka's 60 s and its 10 s check"
        );
        let json = serde_json::to_value(&plain).unwrap();
        for name in [
            "enable_idempotence",
            "transactional",
            "isolation_level",
            "transaction_timeout_ms",
        ] {
            assert!(json.get(name).is_none(), "{name} in {json}");
        }
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["isolation_level"], "read_uncommitted");
        assert_eq!(serde_json::from_value::<CheckSettings>(json).unwrap(), s);
        let timeout = BTreeMap::from([("transaction.timeout.ms".to_string(), "10000".to_string())]);
        let s = CheckSettings::from_kafka_configs("all", &timeout).unwrap();
        assert_eq!(
            (s.transaction_timeout_ms, s.hanging_after_ms()),
            (Some(10_000), 20_000)
        );
        for (name, bad) in [
            ("isolation.level", "serializable"),
            ("enable.idempotence", "yes"),
            ("transaction.timeout.ms", "ten"),
        ] {
            let configs = BTreeMap::from([(name.to_string(), bad.to_string())]);
            let err = CheckSettings::from_kafka_configs("all", &configs).unwrap_err();
            assert!(err.starts_with(name), "{err}");
        }
        // An empty transactional.id is no transactional producer.
        let empty = BTreeMap::from([("transactional.id".to_string(), " ".to_string())]);
        assert!(
            !CheckSettings::from_kafka_configs("all", &empty)
                .unwrap()
                .transactional
        );
    }

    #[test]
    fn only_acks_all_without_unsafe_switches_forbids_loss() {
        assert!(CheckSettings::default().judge("lost-write").breaks_promise);
        for s in [
            CheckSettings {
                acks: Acks::Zero,
                ..Default::default()
            },
            CheckSettings {
                acks: Acks::One,
                ..Default::default()
            },
            CheckSettings {
                unclean_leader_election_enable: true,
                ..Default::default()
            },
            CheckSettings {
                truncate_to_hw: true,
                ..Default::default()
            },
        ] {
            let j = s.judge("lost-write");
            assert!(
                !j.breaks_promise && j.note.starts_with("expected under these settings"),
                "{s:?}"
            );
        }
        // acks=1 loses unreplicated records, never records below the high watermark.
        let acks1 = CheckSettings {
            acks: Acks::One,
            ..Default::default()
        };
        assert!(acks1.judge_hw_regression("data-loss").breaks_promise);
        assert!(!acks1.judge_hw_regression("visibility-only").breaks_promise);
        assert!(CheckSettings::default().judge("duplicate").breaks_promise);
        let acks: Acks = serde_json::from_str("-1").unwrap();
        assert_eq!(acks, Acks::All);
    }
}
