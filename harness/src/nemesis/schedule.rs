//! The random schedule behind `--nemesis kill,pause,partition --nemesis-interval SECS`.
//!
//! A weighted choice of fault actions, as TigerBeetle's Vortex picks from a weighted enum, of
//! which several are compositions, as Jepsen composes nemeses: each fault is a short script
//! of steps (isolate the leader, heal, wait for it to rejoin, kill the others...). The kinds
//! include the shapes that expose replication bugs: the leader cut from its followers and the
//! controller while clients still reach it; a new leader taking writes, then leadership
//! failing back to the old one; the leader cut from the controller and one follower while that
//! follower still reaches the controller. See [`FaultKind`] and `docs/nemesis.md`.
//!
//! The first faults of every schedule are not left to the draw: one fault that diverges the
//! leader, one that loses the ISR and one that leaves a live but stale follower, in a seeded
//! order ([`Lead`]), each drawn by weight within its class; only then does the whole weighted
//! table take over. Independent draws left some minutes without them, and those minutes
//! caught half the deliberate bugs.
//!
//! Fault lengths are drawn relative to the cluster's own timeouts ([`ClusterTimeouts`]): a
//! fault meant to move leadership lasts 1.5 to 3 times the longer of
//! `broker.session.timeout.ms` and `replica.lag.time.max.ms`, so the controller fences the
//! old leader, a new one is elected and takes writes while the fault still lasts. Between two
//! faults the cluster gets a recovery gap of about `--nemesis-interval` seconds.
//!
//! Everything random is drawn here from the seed and written into an ordinary [`FaultPlan`],
//! with concrete nodes and grudges, except targets that depend on the cluster at that moment
//! (the leader of a partition, its ISR); the plan is stored with the run, so `--replay`
//! repeats the same faults. Steps are chained with `after_s` (each runs that long after the
//! previous one finished), so a fault whose wait takes longer pushes the next fault back
//! instead of overlapping it.

use super::plan::{
    Action, FaultPlan, Partition, PartitionKind, PlanError, Step, Wait, When, STEPS_MAX,
};
use super::target::Target;
use crate::cluster::CONTROLLER;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tidewater_workloads::nemesis::Fault;

/// Mixed into the run's seed so the schedule's draws differ from the nemesis's and the
/// workload's.
const SEED_SALT: u64 = 0x7363_6865_6475_6c65;

/// Shortest interval accepted, so faults have time to take effect.
pub const INTERVAL_MIN_S: f64 = 1.0;

/// The broker's own defaults (Kafka's session timeout; the broker's replica lag bound), used
/// when a run's settings name neither.
pub const BROKER_SESSION_TIMEOUT_MS_DEFAULT: u64 = 9_000;
/// See [`BROKER_SESSION_TIMEOUT_MS_DEFAULT`].
pub const REPLICA_LAG_TIME_MAX_MS_DEFAULT: u64 = 30_000;

/// Bound on a wait inside a random fault, whatever the timeouts: a fault must not hang the run.
const WAIT_TIMEOUT_MAX_S: f64 = 120.0;

/// One kind of fault the random schedule draws. Each is a short script of plan steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// The leader of the key cut from every other node; clients still reach it.
    IsolateLeader,
    /// The leader cut from the controller and one in-sync follower, while that follower
    /// still reaches the controller (and the other follower reaches everyone).
    LeaderCut,
    /// Diverge, then fail back: isolate the leader (it may append what it can never commit),
    /// heal, wait until it is back in the ISR following the new leader, then kill every other
    /// in-sync replica so leadership returns to it, and start them again.
    Failback,
    /// One random node cut from all others.
    IsolateOne,
    /// The controller cut from every broker.
    IsolateController,
    /// A random partition shape over every node (a split in two, a majorities ring, a
    /// bridge), drawn here and stored as its grudge.
    Shape(PartitionKind),
    /// The harness host (clients) cut from the leader; its peers still reach it.
    CutClientsLeader,
    /// SIGSTOP the leader: sometimes shorter than the session timeout (no failover, the
    /// resumed leader never learns it was gone), mostly longer.
    PauseLeader,
    /// SIGSTOP one random broker.
    PauseOne,
    /// SIGSTOP the controller.
    PauseController,
    /// SIGKILL the leader.
    KillLeader,
    /// SIGKILL one random broker.
    KillOne,
    /// SIGKILL a random minority of the brokers.
    KillMinority,
    /// SIGKILL every in-sync replica of the key: the partition is offline until they return.
    KillIsr,
    /// Restart every broker in turn (graceful stop, start), each after the key's ISR is full
    /// again, as an operator's rolling upgrade would.
    RollingRestart,
    /// A cascade through the key's replicas, as in Jepsen's 2013 Kafka analysis: kill one
    /// follower and let the ISR shrink, let the smaller ISR acknowledge writes the dead one
    /// lacks, kill the other follower so the ISR shrinks to the leader alone, then kill the
    /// leader and start the stale follower first, by itself, for a while before the rest.
    /// Exposes an ISR below `min.insync.replicas` that still acknowledges, and an election of
    /// an out-of-sync replica.
    IsrCascade,
    /// One follower cut from the leader only, so it stays alive and heartbeating to the
    /// controller while the leader drops it from the ISR; then every other in-sync replica
    /// killed and the cut healed. The stale follower is the only live replica, and only the
    /// controller's ISR says it may not lead: exposes an ISR shrink the controller never
    /// heard of (and unclean elections), which a killed follower cannot, because the
    /// controller fences a dead broker and shrinks the ISR itself.
    StaleFollower,
    /// Pause one follower (SIGSTOP), and kill the leader before it drops the paused follower
    /// from its ISR: the leader's high watermark waited for the paused one, so the writes of
    /// those seconds are on the other follower but unanswered; it is elected, and the
    /// producers retry them there. A new leader must answer an idempotent producer's retries
    /// as duplicates of what it replicated (the shape of the shipped plan
    /// `slow-follower-failover`). Drawn only as the leading fault of a run with idempotent
    /// producers (weight 0 in the table), or when it is the only kind named.
    FailoverInFlight,
    /// Cut the leader's power (its unsynced writes are lost), boot it after a failover.
    PowerLossLeader,
    /// Cut one random broker's power.
    PowerLossOne,
    /// Isolate the key's followers until its ISR is the leader alone (with
    /// `min.insync.replicas=2` they stay eligible, KIP-966's ELR), then cut the lone leader's
    /// power, heal, and boot it: a correct broker elects an eligible follower meanwhile and
    /// loses nothing acknowledged. The random shape of the shipped plan `power-loss-leader`.
    /// Drawn only as a leading fault, when the power-loss family is asked for or the kind is
    /// named (weight 0 in the table).
    PowerLossLoneLeader,
    /// Cut every broker's power at once: only what was fsynced survives.
    PowerLossAll,
}

/// What the schedule knows about a kind: its name, the fault families it needs, its weight.
struct KindInfo {
    kind: FaultKind,
    name: &'static str,
    /// Drawn only when every one of these families is enabled.
    families: &'static [Fault],
    /// Relative chance of being drawn among the enabled kinds.
    weight: u32,
}

/// Every kind, with weights that favour the shapes that move leadership while writes go on
/// (they expose truncation and epoch bugs); the classic shapes stay, less often.
const KINDS: &[KindInfo] = &[
    kind(
        FaultKind::IsolateLeader,
        "isolate-leader",
        &[Fault::Partition],
        5,
    ),
    kind(FaultKind::LeaderCut, "leader-cut", &[Fault::Partition], 4),
    kind(
        FaultKind::Failback,
        "failback",
        &[Fault::Partition, Fault::Kill],
        3,
    ),
    kind(FaultKind::IsolateOne, "isolate-one", &[Fault::Partition], 1),
    kind(
        FaultKind::IsolateController,
        "isolate-controller",
        &[Fault::Partition],
        1,
    ),
    shape(PartitionKind::Halves),
    shape(PartitionKind::MajoritiesRing),
    shape(PartitionKind::Bridge),
    kind(
        FaultKind::CutClientsLeader,
        "cut-clients-leader",
        &[Fault::Partition],
        1,
    ),
    kind(FaultKind::PauseLeader, "pause-leader", &[Fault::Pause], 3),
    kind(FaultKind::PauseOne, "pause-one", &[Fault::Pause], 1),
    kind(
        FaultKind::PauseController,
        "pause-controller",
        &[Fault::Pause],
        1,
    ),
    kind(FaultKind::KillLeader, "kill-leader", &[Fault::Kill], 2),
    kind(FaultKind::KillOne, "kill-one", &[Fault::Kill], 1),
    kind(FaultKind::KillMinority, "kill-minority", &[Fault::Kill], 1),
    kind(FaultKind::KillIsr, "kill-isr", &[Fault::Kill], 1),
    kind(
        FaultKind::RollingRestart,
        "rolling-restart",
        &[Fault::Kill],
        1,
    ),
    kind(FaultKind::IsrCascade, "isr-cascade", &[Fault::Kill], 8),
    kind(
        FaultKind::StaleFollower,
        "stale-follower",
        &[Fault::Partition, Fault::Kill],
        3,
    ),
    kind(
        FaultKind::FailoverInFlight,
        "failover-in-flight",
        &[Fault::Pause, Fault::Kill],
        0,
    ),
    kind(
        FaultKind::PowerLossLeader,
        "power-loss-leader",
        &[Fault::PowerLoss],
        3,
    ),
    kind(
        FaultKind::PowerLossOne,
        "power-loss-one",
        &[Fault::PowerLoss],
        1,
    ),
    kind(
        FaultKind::PowerLossLoneLeader,
        "power-loss-lone-leader",
        &[Fault::PowerLoss],
        0,
    ),
    kind(
        FaultKind::PowerLossAll,
        "power-loss-all",
        &[Fault::PowerLoss],
        1,
    ),
];

const fn kind(
    kind: FaultKind,
    name: &'static str,
    families: &'static [Fault],
    weight: u32,
) -> KindInfo {
    KindInfo {
        kind,
        name,
        families,
        weight,
    }
}

/// A random partition shape, named as in plans, drawn as often as `isolate-one`.
const fn shape(shape: PartitionKind) -> KindInfo {
    kind(
        FaultKind::Shape(shape),
        shape.name(),
        &[Fault::Partition],
        1,
    )
}

fn info(kind: FaultKind) -> &'static KindInfo {
    KINDS
        .iter()
        .find(|k| k.kind == kind)
        .expect("every kind is listed in KINDS")
}

impl FaultKind {
    /// The name on the command line and in notes (`isolate-leader`).
    pub fn name(self) -> &'static str {
        info(self).name
    }

    /// The fault families it injects, all of which `--nemesis` must name to draw it.
    pub fn families(self) -> &'static [Fault] {
        info(self).families
    }

    /// Every kind, in the order of [`KINDS`].
    pub fn all() -> Vec<FaultKind> {
        KINDS.iter().map(|k| k.kind).collect()
    }
}

/// The cluster's own timeouts, which fault lengths are drawn against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterTimeouts {
    /// `broker.session.timeout.ms`: how long a broker that stopped heartbeating stays leader.
    pub session_timeout_ms: u64,
    /// `replica.lag.time.max.ms`: how long a stalled follower stays in the ISR.
    pub replica_lag_time_max_ms: u64,
}

impl ClusterTimeouts {
    /// The timeouts a run's `--set` settings give, the broker's defaults for those not set.
    pub fn from_settings(sets: &BTreeMap<String, String>) -> Result<ClusterTimeouts, String> {
        let ms = |name: &str, default: u64| -> Result<u64, String> {
            match sets.get(name) {
                None => Ok(default),
                Some(v) => v
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|ms| *ms > 0)
                    .ok_or_else(|| format!("{name}={v}: expected a positive number of ms")),
            }
        };
        Ok(ClusterTimeouts {
            session_timeout_ms: ms(
                "broker.session.timeout.ms",
                BROKER_SESSION_TIMEOUT_MS_DEFAULT,
            )?,
            replica_lag_time_max_ms: ms(
                "replica.lag.time.max.ms",
                REPLICA_LAG_TIME_MAX_MS_DEFAULT,
            )?,
        })
    }

    /// The session timeout in seconds.
    fn session_s(&self) -> f64 {
        self.session_timeout_ms as f64 / 1000.0
    }

    /// `replica.lag.time.max.ms` in seconds.
    fn lag_s(&self) -> f64 {
        self.replica_lag_time_max_ms as f64 / 1000.0
    }

    /// The longer of the two, in seconds: a fault must outlast it for both fencing and an
    /// ISR shrink to happen.
    fn failover_s(&self) -> f64 {
        self.session_timeout_ms.max(self.replica_lag_time_max_ms) as f64 / 1000.0
    }
}

/// Parses `--nemesis`: a comma-separated list of families (`kill`, `pause`, `partition`,
/// `power-loss`) and kind names (`isolate-leader`, `failback`, ...), or `none`. A family
/// enables every kind all of whose families are listed, except `power-loss-all`; a kind name
/// enables that kind alone. Returns the kinds in the order of the weight table, each once.
///
/// `power-loss-all` cuts every broker's power at once, so a correct broker loses what it had
/// not fsynced (all of it, by Kafka's default of never fsyncing on append): a schedule that
/// draws it fails a correct broker, and its exit code cannot be told from a bug's. The
/// family draws it only when `every_append_fsynced` (`flush.messages=1`, under which a
/// correct broker loses nothing); otherwise only naming it does.
pub fn parse_faults_for(s: &str, every_append_fsynced: bool) -> Result<Vec<FaultKind>, PlanError> {
    let mut kinds = parse_faults(s)?;
    let named = s
        .split(',')
        .any(|w| w.trim() == info(FaultKind::PowerLossAll).name);
    if !named && !every_append_fsynced {
        kinds.retain(|k| *k != FaultKind::PowerLossAll);
    }
    Ok(kinds)
}

/// [`parse_faults_for`] as if every append were fsynced: every kind the words can enable,
/// `power-loss-all` with the `power-loss` family included (for checking the words, and for
/// what a schedule may need, such as a lossy filesystem).
pub fn parse_faults(s: &str) -> Result<Vec<FaultKind>, PlanError> {
    if s.trim() == "none" {
        return Ok(vec![]);
    }
    let mut families = vec![];
    let mut named = vec![];
    for word in s.split(',').map(str::trim) {
        match Fault::parse(word) {
            Fault::Other(other) => match KINDS.iter().find(|k| k.name == other) {
                Some(k) => named.push(k.kind),
                None => {
                    let names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
                    return Err(PlanError(format!(
                        "--nemesis {other:?}: expected kill, pause, partition, power-loss, a fault kind ({}) \
                         (comma-separated) or none",
                        names.join(", ")
                    )));
                }
            },
            family => families.push(family),
        }
    }
    Ok(KINDS
        .iter()
        .filter(|k| named.contains(&k.kind) || k.families.iter().all(|f| families.contains(f)))
        .map(|k| k.kind)
        .collect())
}

/// Draws a schedule for a main phase of `time_limit_s` seconds over `nodes` (controller
/// `c1` and brokers `n1..`): faults of the given kinds, separated by recovery gaps of about
/// `interval_s`, partition-relative targets on `key`, lengths drawn against `timeouts`.
pub fn random_plan(
    seed: u64,
    faults: &[FaultKind],
    interval_s: f64,
    time_limit_s: f64,
    nodes: &[String],
    key: &str,
    timeouts: ClusterTimeouts,
) -> Result<FaultPlan, PlanError> {
    random_plan_for(
        seed,
        faults,
        interval_s,
        time_limit_s,
        nodes,
        key,
        timeouts,
        false,
    )
}

/// [`random_plan`] for the queue workload with idempotent producers when `idempotent`
/// (`--idempotence`): then the schedule leads with a [`FaultKind::FailoverInFlight`] (when its
/// families are enabled), the leader change with writes in flight whose retries only a
/// producer's sequence numbers tell apart, before the other leading faults; the faults after
/// it are those the same seed gives any run.
#[allow(clippy::too_many_arguments)]
pub fn random_plan_for(
    seed: u64,
    faults: &[FaultKind],
    interval_s: f64,
    time_limit_s: f64,
    nodes: &[String],
    key: &str,
    timeouts: ClusterTimeouts,
    idempotent: bool,
) -> Result<FaultPlan, PlanError> {
    if !(interval_s >= INTERVAL_MIN_S && interval_s.is_finite()) {
        return Err(PlanError(format!(
            "--nemesis-interval {interval_s}: at least {INTERVAL_MIN_S} s"
        )));
    }
    let brokers: Vec<String> = nodes.iter().filter(|n| *n != CONTROLLER).cloned().collect();
    if brokers.is_empty() {
        return Err(PlanError("a schedule needs at least one broker".into()));
    }
    let draw = Draw {
        nodes,
        brokers: &brokers,
        key,
        timeouts,
    };
    let mut rng = StdRng::seed_from_u64(seed ^ SEED_SALT);
    let mut steps: Vec<Step> = vec![];
    let mut elapsed_s = 0.0;
    let mut index = 0;
    let mut leading = Lead::shuffled(&mut rng, faults);
    if idempotent && !Lead::InFlight.enabled(faults).is_empty() {
        leading.insert(0, Lead::InFlight);
    }
    while !faults.is_empty() && steps.len() + 32 <= STEPS_MAX {
        let gap_s = round(interval_s * rng.gen_range(0.75..=1.5));
        if elapsed_s + gap_s >= time_limit_s {
            break;
        }
        let kind = match leading.get(index) {
            Some(class) => choose_kind(&mut rng, &class.enabled(faults)),
            None => choose_kind(&mut rng, faults),
        };
        let (mut fault, length_s) = draw.fault(&mut rng, kind, &format!("f{index}"));
        fault[0].when = When::After { after_s: gap_s };
        fault[0].note = Some(format!("f{index}: {}", kind.name()));
        steps.extend(fault);
        elapsed_s += gap_s + length_s;
        index += 1;
    }
    // The kinds this schedule can draw: a kind of weight 0 only when it leads (or when
    // nothing else was asked for).
    let only_unweighted = faults.iter().all(|k| info(*k).weight == 0);
    let names: Vec<&str> = faults
        .iter()
        .filter(|k| {
            info(**k).weight > 0
                || only_unweighted
                || leading.iter().any(|class| class.kinds().contains(k))
        })
        .map(|f| f.name())
        .collect();
    let plan = FaultPlan {
        name: "random".into(),
        description: format!(
            "random schedule, seed {seed}: faults {} for {time_limit_s} s, recovery gaps of \
             about {interval_s} s, lengths against broker.session.timeout.ms={} and \
             replica.lag.time.max.ms={}",
            names.join(","),
            timeouts.session_timeout_ms,
            timeouts.replica_lag_time_max_ms
        ),
        step: steps,
    };
    plan.validate()?;
    Ok(plan)
}

/// Rounds seconds to milliseconds, so stored plans read well.
fn round(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

/// The classes of fault every run's first faults cover, one fault each, in a shuffled
/// order, before the rest are drawn from the whole weighted table: most deliberate bugs (and
/// the real ones they model) need one of them, and independent draws left some 60 s runs
/// without them (docs/detection.md, "Rates over ten seeds").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lead {
    /// The leader cut off while clients still write to it, then healed: it appends what it
    /// cannot commit, a new leader takes writes, and the old one must truncate by epoch
    /// (divergent suffixes, epochs not bumped, acks answered before replication).
    Diverge,
    /// The ISR shrunk below `min.insync.replicas` and its last members killed, so an
    /// election has only stale replicas left (unclean elections, acks under the minimum).
    IsrLoss,
    /// A live follower dropped from the ISR by its leader, then the rest of the ISR killed:
    /// only the controller's ISR keeps the stale follower from leading (ISR changes the
    /// controller never heard of, unclean elections).
    StaleIsr,
    /// The leader's power cut (its unsynced writes are lost), booted after a failover: a
    /// correct broker with acks=all and
    /// `min.insync.replicas=2` elects a replica that holds every acknowledged write (an ELR
    /// member if the ISR emptied). Leads only when the run asks for the power-loss family
    /// (lossyfs under the nodes), as one of the shuffled classes.
    PowerLoss,
    /// A follower paused and the leader killed before the follower leaves the ISR: the
    /// other follower leads with the unanswered writes, which producers retry (duplicates
    /// an idempotent producer's sequences must catch). Only for idempotent producers
    /// ([`random_plan_for`]), first.
    InFlight,
}

impl Lead {
    /// The classes a run leads with (in a shuffled order), those with an enabled kind.
    const ALL: [Lead; 4] = [
        Lead::Diverge,
        Lead::IsrLoss,
        Lead::StaleIsr,
        Lead::PowerLoss,
    ];

    /// The kinds of this class.
    fn kinds(self) -> &'static [FaultKind] {
        match self {
            Lead::Diverge => &[
                FaultKind::IsolateLeader,
                FaultKind::LeaderCut,
                FaultKind::Failback,
            ],
            Lead::IsrLoss => &[FaultKind::IsrCascade, FaultKind::KillIsr],
            Lead::StaleIsr => &[FaultKind::StaleFollower],
            Lead::InFlight => &[FaultKind::FailoverInFlight],
            Lead::PowerLoss => &[FaultKind::PowerLossLoneLeader],
        }
    }

    /// The enabled kinds of this class.
    fn enabled(self, faults: &[FaultKind]) -> Vec<FaultKind> {
        self.kinds()
            .iter()
            .copied()
            .filter(|k| faults.contains(k))
            .collect()
    }

    /// The classes with an enabled kind, in a seeded order.
    fn shuffled(rng: &mut StdRng, faults: &[FaultKind]) -> Vec<Lead> {
        let mut leading: Vec<Lead> = Lead::ALL
            .into_iter()
            .filter(|class| !class.enabled(faults).is_empty())
            .collect();
        leading.shuffle(rng);
        leading
    }
}

/// A weighted draw among the enabled kinds. Kinds of weight 0 are never drawn beside
/// others; when only such kinds are enabled (named alone, or a leading class of them), they
/// are drawn alike.
fn choose_kind(rng: &mut StdRng, faults: &[FaultKind]) -> FaultKind {
    let enabled: Vec<&KindInfo> = KINDS.iter().filter(|k| faults.contains(&k.kind)).collect();
    let total: u32 = enabled.iter().map(|k| k.weight).sum();
    let weight = |k: &KindInfo| if total == 0 { 1 } else { k.weight };
    let total = if total == 0 {
        enabled.len() as u32
    } else {
        total
    };
    let mut roll = rng.gen_range(0..total);
    for k in &enabled {
        if roll < weight(k) {
            return k.kind;
        }
        roll -= weight(k);
    }
    unreachable!("the roll is below the total weight")
}

/// What one fault is drawn over.
struct Draw<'a> {
    /// Every node, controller included.
    nodes: &'a [String],
    /// The brokers.
    brokers: &'a [String],
    /// The partition whose leader, followers and ISR partition-relative faults aim at.
    key: &'a str,
    /// The cluster's timeouts.
    timeouts: ClusterTimeouts,
}

/// A target the schedule wrote (always a valid one).
fn target(text: &str) -> Target {
    text.parse().expect("schedule targets parse")
}

/// The nodes an earlier step bound as `name`.
fn bound_to(name: &str) -> Target {
    Target::Bound(name.to_string())
}

/// A step of `action` that binds its nodes as `bind`.
fn bound(action: Action, bind: &str) -> Step {
    Step {
        bind: Some(bind.to_string()),
        ..Step::new(action)
    }
}

/// `s`, run `after_s` after the previous step.
fn after(after_s: f64, s: Step) -> Step {
    Step {
        when: When::After {
            after_s: round(after_s),
        },
        ..s
    }
}

impl Draw<'_> {
    /// `lo..=hi` times the failover time, in seconds.
    fn failover(&self, rng: &mut StdRng, lo: f64, hi: f64) -> f64 {
        round(self.timeouts.failover_s() * rng.gen_range(lo..=hi))
    }

    /// The bound of a wait for the cluster to heal itself after a fault.
    fn wait_bound_s(&self) -> Option<f64> {
        Some((5.0 * self.timeouts.failover_s()).clamp(30.0, WAIT_TIMEOUT_MAX_S))
    }

    /// A wait until every replica of the key is in its ISR again.
    fn isr_full(&self) -> Step {
        Step::new(Action::Wait(Wait::IsrFull {
            key: self.key(),
            timeout_s: self.wait_bound_s(),
        }))
    }

    /// The key the faults aim at, as a wait names it.
    fn key(&self) -> String {
        self.key.to_string()
    }

    /// `leader:KEY`.
    fn leader(&self) -> Target {
        Target::Leader(self.key())
    }

    /// `count` random brokers, sorted, as a target.
    fn random_brokers(&self, rng: &mut StdRng, count: usize) -> Target {
        let mut chosen: Vec<String> = self
            .brokers
            .choose_multiple(rng, count.clamp(1, self.brokers.len()))
            .cloned()
            .collect();
        chosen.sort_by_key(|n| n[1..].parse::<u32>().unwrap_or(u32::MAX));
        Target::Nodes(chosen)
    }

    /// A node fault (kill, pause, power loss) on `target` for `length_s`, undone by `off`.
    fn node_fault(
        &self,
        on: fn(Target) -> Action,
        off: fn(Target) -> Action,
        target: Target,
        bind: &str,
        length_s: f64,
    ) -> (Vec<Step>, f64) {
        let steps = vec![
            bound(on(target), bind),
            after(length_s, Step::new(off(bound_to(bind)))),
        ];
        (steps, length_s)
    }

    /// A network fault started by `start`, healed after `length_s`.
    fn net_fault(&self, start: Step, length_s: f64) -> (Vec<Step>, f64) {
        (
            vec![start, after(length_s, Step::new(Action::Heal))],
            length_s,
        )
    }

    /// The steps of one fault (the first one's `after_s` is set by the caller) and its
    /// nominal length in seconds (waits counted as instant).
    fn fault(&self, rng: &mut StdRng, kind: FaultKind, bind: &str) -> (Vec<Step>, f64) {
        let kill = |target| Action::Kill { target };
        let start = |target| Action::Start { target };
        let pause = |target| Action::Pause { target };
        let resume = |target| Action::Resume { target };
        let power_loss = |target| Action::PowerLoss {
            target,
            torn: false,
        };
        match kind {
            FaultKind::IsolateLeader => {
                let length = self.failover(rng, 1.5, 3.0);
                let target = self.leader();
                self.net_fault(bound(Action::Isolate { target }, bind), length)
            }
            FaultKind::LeaderCut => {
                let length = self.failover(rng, 1.5, 3.0);
                let cut = Action::Cut {
                    target: self.leader(),
                    from: target(&format!("controller+follower:{}", self.key)),
                };
                self.net_fault(bound(cut, bind), length)
            }
            FaultKind::Failback => self.failback(rng, bind),
            FaultKind::IsolateOne => {
                let length = self.failover(rng, 1.0, 3.0);
                let node = self.nodes.choose(rng).expect("nodes are not empty").clone();
                let target = Target::Nodes(vec![node]);
                self.net_fault(bound(Action::Isolate { target }, bind), length)
            }
            FaultKind::IsolateController => {
                let length = self.failover(rng, 1.0, 3.0);
                let target = Target::Nodes(vec![CONTROLLER.to_string()]);
                self.net_fault(bound(Action::Isolate { target }, bind), length)
            }
            FaultKind::Shape(shape) => {
                let length = self.failover(rng, 1.0, 3.0);
                let mut shuffled = self.nodes.to_vec();
                shuffled.shuffle(rng);
                let grudge = shape.grudge(&shuffled);
                let partition = Step {
                    note: Some(shape.name().to_string()),
                    ..Step::new(Action::Partition(Partition::Grudge(grudge)))
                };
                self.net_fault(partition, length)
            }
            FaultKind::CutClientsLeader => {
                let length = self.failover(rng, 1.0, 2.0);
                let target = self.leader();
                self.net_fault(bound(Action::CutClients { target }, bind), length)
            }
            FaultKind::PauseLeader => {
                // A third of the pauses end before the session timeout: no failover, and the
                // resumed leader carries on as if nothing happened.
                let length = if rng.gen_bool(1.0 / 3.0) {
                    round(self.timeouts.session_s() * rng.gen_range(0.3..=0.8))
                } else {
                    self.failover(rng, 1.5, 3.0)
                };
                self.node_fault(pause, resume, self.leader(), bind, length)
            }
            FaultKind::PauseOne => {
                let length = self.failover(rng, 1.0, 3.0);
                let target = self.random_brokers(rng, 1);
                self.node_fault(pause, resume, target, bind, length)
            }
            FaultKind::PauseController => {
                let length = self.failover(rng, 0.5, 2.0);
                let target = Target::Nodes(vec![CONTROLLER.to_string()]);
                self.node_fault(pause, resume, target, bind, length)
            }
            FaultKind::KillLeader => {
                let length = self.failover(rng, 1.0, 2.5);
                self.node_fault(kill, start, self.leader(), bind, length)
            }
            FaultKind::KillOne => {
                let length = self.failover(rng, 1.0, 2.5);
                let target = self.random_brokers(rng, 1);
                self.node_fault(kill, start, target, bind, length)
            }
            FaultKind::KillMinority => {
                let length = self.failover(rng, 1.0, 2.5);
                let target = self.random_brokers(rng, self.brokers.len() / 2);
                self.node_fault(kill, start, target, bind, length)
            }
            FaultKind::KillIsr => {
                let length = self.failover(rng, 1.0, 2.0);
                let target = Target::Isr(self.key());
                self.node_fault(kill, start, target, bind, length)
            }
            FaultKind::RollingRestart => self.rolling_restart(rng, bind),
            FaultKind::IsrCascade => self.isr_cascade(rng, bind),
            FaultKind::StaleFollower => self.stale_follower(rng, bind),
            FaultKind::FailoverInFlight => self.failover_in_flight(rng, bind),
            FaultKind::PowerLossLeader => {
                let length = self.failover(rng, 1.0, 2.5);
                self.node_fault(power_loss, start, self.leader(), bind, length)
            }
            FaultKind::PowerLossOne => {
                let length = self.failover(rng, 1.0, 2.5);
                let target = self.random_brokers(rng, 1);
                self.node_fault(power_loss, start, target, bind, length)
            }
            FaultKind::PowerLossLoneLeader => self.power_loss_lone_leader(rng, bind),
            FaultKind::PowerLossAll => {
                let length = self.failover(rng, 0.5, 1.5);
                self.node_fault(power_loss, start, Target::All, bind, length)
            }
        }
    }

    /// Isolate the leader, heal, wait until it follows again, kill the other in-sync
    /// replicas so it leads again, then start them.
    fn failback(&self, rng: &mut StdRng, bind: &str) -> (Vec<Step>, f64) {
        let key = self.key;
        let isolated_s = self.failover(rng, 1.5, 3.0);
        let led_again_s = round(self.timeouts.session_s() * rng.gen_range(1.5..=3.0));
        let old = format!("{bind}-old");
        let others = format!("{bind}-others");
        let steps = vec![
            bound(
                Action::Isolate {
                    target: self.leader(),
                },
                &old,
            ),
            after(isolated_s, Step::new(Action::Heal)),
            Step::new(Action::Wait(Wait::IsrExpand {
                key: self.key(),
                target: bound_to(&old),
                timeout_s: self.wait_bound_s(),
            })),
            bound(
                Action::Kill {
                    target: target(&format!("isr:{key} except @{old}")),
                },
                &others,
            ),
            Step::new(Action::Wait(Wait::Leader {
                key: self.key(),
                target: Some(bound_to(&old)),
                timeout_s: self.wait_bound_s(),
            })),
            after(
                led_again_s,
                Step::new(Action::Start {
                    target: bound_to(&others),
                }),
            ),
        ];
        (steps, isolated_s + led_again_s)
    }

    /// Kill a follower, wait for the ISR to shrink, let the rest acknowledge for a while; kill
    /// the other in-sync followers, wait again, let the leader alone take writes for a while;
    /// kill the leader and start the first (stale) follower by itself; start the others after
    /// the session timeout has fenced the dead ISR.
    fn isr_cascade(&self, rng: &mut StdRng, bind: &str) -> (Vec<Step>, f64) {
        let key = self.key;
        // A second or two of writes is hundreds of records at the default rate: enough for
        // the stale replica to lack, or for a leader alone to acknowledge.
        let smaller_isr_s = self.failover(rng, 0.25, 0.75);
        let leader_alone_s = self.failover(rng, 0.25, 0.75);
        // The dead ISR is fenced a session timeout after the last kill; only then can an
        // election (an unclean one) pick the stale replica, started 1 s after that kill.
        let stale_alone_s = round(self.timeouts.session_s() * rng.gen_range(1.25..=2.0));
        let stale = format!("{bind}-stale");
        let second = format!("{bind}-second");
        let last = format!("{bind}-last");
        let shrink = |name: &str| {
            Step::new(Action::Wait(Wait::IsrShrink {
                key: self.key(),
                target: bound_to(name),
                timeout_s: self.wait_bound_s(),
            }))
        };
        let steps = vec![
            bound(
                Action::Kill {
                    target: Target::Follower(self.key()),
                },
                &stale,
            ),
            shrink(&stale),
            after(
                smaller_isr_s,
                bound(
                    Action::Kill {
                        target: target(&format!("isr:{key} except leader:{key}")),
                    },
                    &second,
                ),
            ),
            shrink(&second),
            after(
                leader_alone_s,
                bound(
                    Action::Kill {
                        target: self.leader(),
                    },
                    &last,
                ),
            ),
            after(
                1.0,
                Step::new(Action::Start {
                    target: bound_to(&stale),
                }),
            ),
            after(
                stale_alone_s,
                Step::new(Action::Start {
                    target: target(&format!("@{second}+@{last}")),
                }),
            ),
        ];
        (steps, smaller_isr_s + leader_alone_s + 1.0 + stale_alone_s)
    }

    /// Cut a follower from the leader alone for longer than `replica.lag.time.max.ms`, kill
    /// the rest of the ISR, heal, and start them after the session timeout has fenced them.
    fn stale_follower(&self, rng: &mut StdRng, bind: &str) -> (Vec<Step>, f64) {
        let key = self.key;
        // The leader drops a follower that has not caught up for replica.lag.time.max.ms,
        // checked every half of it; the cut does not need to outlast the session timeout,
        // since the follower still heartbeats to the controller.
        let lag_s = round(self.timeouts.lag_s() * rng.gen_range(2.0..=3.5));
        let stale_alone_s = round(self.timeouts.session_s() * rng.gen_range(1.25..=2.0));
        let stale = format!("{bind}-stale");
        let isr = format!("{bind}-isr");
        let steps = vec![
            bound(
                Action::Cut {
                    target: Target::Follower(self.key()),
                    from: self.leader(),
                },
                &stale,
            ),
            after(
                lag_s,
                bound(
                    Action::Kill {
                        target: target(&format!("isr:{key} except @{stale}")),
                    },
                    &isr,
                ),
            ),
            after(0.5, Step::new(Action::Heal)),
            after(
                stale_alone_s,
                Step::new(Action::Start {
                    target: bound_to(&isr),
                }),
            ),
        ];
        (steps, lag_s + 0.5 + stale_alone_s)
    }

    /// Pause a follower, kill the leader while the paused one is still in its ISR (before
    /// `replica.lag.time.max.ms`), wait for the other follower to lead, then resume and
    /// start the two.
    fn failover_in_flight(&self, rng: &mut StdRng, bind: &str) -> (Vec<Step>, f64) {
        let key = self.key;
        let in_flight_s = round(self.timeouts.lag_s() * rng.gen_range(0.4..=0.7));
        let slow = format!("{bind}-slow");
        let old = format!("{bind}-old");
        let steps = vec![
            bound(
                Action::Pause {
                    target: Target::Follower(self.key()),
                },
                &slow,
            ),
            after(
                in_flight_s,
                bound(
                    Action::Kill {
                        target: self.leader(),
                    },
                    &old,
                ),
            ),
            Step::new(Action::Wait(Wait::Leader {
                key: self.key(),
                target: Some(target(&format!("replicas:{key} except @{slow}+@{old}"))),
                timeout_s: self.wait_bound_s(),
            })),
            after(
                2.0,
                Step::new(Action::Resume {
                    target: bound_to(&slow),
                }),
            ),
            Step::new(Action::Start {
                target: bound_to(&old),
            }),
            self.isr_full(),
        ];
        (steps, in_flight_s + 2.0)
    }

    /// Isolate the followers until the ISR is the leader alone, let it lead alone a while,
    /// cut its power, heal, boot it, and wait for the ISR to fill.
    fn power_loss_lone_leader(&self, rng: &mut StdRng, bind: &str) -> (Vec<Step>, f64) {
        let key = self.key;
        let alone_s = self.failover(rng, 0.75, 1.25);
        let followers = format!("{bind}-followers");
        let old = format!("{bind}-old");
        let steps = vec![
            bound(
                Action::Isolate {
                    target: target(&format!("replicas:{key} except leader:{key}")),
                },
                &followers,
            ),
            Step::new(Action::Wait(Wait::IsrShrink {
                key: self.key(),
                target: bound_to(&followers),
                timeout_s: self.wait_bound_s(),
            })),
            after(
                alone_s,
                bound(
                    Action::PowerLoss {
                        target: self.leader(),
                        torn: false,
                    },
                    &old,
                ),
            ),
            after(3.0, Step::new(Action::Heal)),
            after(
                3.0,
                Step::new(Action::Start {
                    target: bound_to(&old),
                }),
            ),
            self.isr_full(),
        ];
        (steps, alone_s + 6.0)
    }

    /// Restart every broker in a seeded order, each once the key's ISR is full again.
    fn rolling_restart(&self, rng: &mut StdRng, bind: &str) -> (Vec<Step>, f64) {
        let mut order = self.brokers.to_vec();
        order.shuffle(rng);
        let pause_s = round(self.timeouts.failover_s() * 0.5);
        let mut steps = vec![];
        for (i, node) in order.iter().enumerate() {
            let target = Target::Nodes(vec![node.clone()]);
            let restart = bound(Action::Restart { target }, &format!("{bind}-{i}"));
            steps.push(if i == 0 {
                restart
            } else {
                after(pause_s, restart)
            });
            steps.push(after(1.0, self.isr_full()));
        }
        (steps, order.len() as f64 * (pause_s + 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step's `after_s`, if it has one.
    fn after_s(step: &Step) -> Option<f64> {
        match step.when {
            When::After { after_s } => Some(after_s),
            When::Now | When::At { .. } => None,
        }
    }

    fn nodes() -> Vec<String> {
        ["c1", "n1", "n2", "n3", "n4", "n5"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    fn timeouts() -> ClusterTimeouts {
        ClusterTimeouts {
            session_timeout_ms: 4_000,
            replica_lag_time_max_ms: 2_500,
        }
    }

    fn plan(seed: u64, faults: &[FaultKind], time_limit_s: f64) -> FaultPlan {
        random_plan(
            seed,
            faults,
            5.0,
            time_limit_s,
            &nodes(),
            "t0/0",
            timeouts(),
        )
        .unwrap()
    }

    /// The kind of each fault, from the note on its first step.
    fn kinds(plan: &FaultPlan) -> Vec<String> {
        plan.step
            .iter()
            .filter_map(|s| s.note.as_deref()?.split_once(": ").map(|x| x.1.to_string()))
            .collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_another_seed_another() {
        let all = FaultKind::all();
        assert_eq!(plan(42, &all, 300.0), plan(42, &all, 300.0));
        assert_ne!(plan(42, &all, 300.0).step, plan(43, &all, 300.0).step);
    }

    #[test]
    fn families_enable_their_kinds_and_compositions_need_all_their_families() {
        let partition = parse_faults("partition").unwrap();
        assert!(partition.contains(&FaultKind::IsolateLeader));
        assert!(partition.contains(&FaultKind::LeaderCut));
        assert!(
            !partition.contains(&FaultKind::Failback),
            "failback also kills"
        );
        let both = parse_faults("kill, partition").unwrap();
        assert!(both.contains(&FaultKind::Failback));
        assert!(!both.contains(&FaultKind::PauseLeader));
        assert_eq!(
            parse_faults("failback,isolate-leader,failback").unwrap(),
            [FaultKind::IsolateLeader, FaultKind::Failback]
        );
        let power_loss = [
            FaultKind::PowerLossLeader,
            FaultKind::PowerLossOne,
            FaultKind::PowerLossLoneLeader,
            FaultKind::PowerLossAll,
        ];
        let mut classic = FaultKind::all();
        classic.retain(|k| !power_loss.contains(k));
        assert_eq!(parse_faults("kill,pause,partition").unwrap(), classic);
        // Power loss needs a lossy filesystem, so only asking for it draws it.
        assert_eq!(parse_faults("power-loss").unwrap(), power_loss);
        assert_eq!(
            parse_faults("kill,pause,partition,power-loss").unwrap(),
            FaultKind::all()
        );
        assert!(parse_faults("none").unwrap().is_empty());
        // A run draws every broker's power cut from the family only when every append is
        // fsynced (flush.messages=1); without it, only by name.
        let single = [
            FaultKind::PowerLossLeader,
            FaultKind::PowerLossOne,
            FaultKind::PowerLossLoneLeader,
        ];
        assert_eq!(parse_faults_for("power-loss", false).unwrap(), single);
        assert_eq!(parse_faults_for("power-loss", true).unwrap(), power_loss);
        assert_eq!(
            parse_faults_for("power-loss-all", false).unwrap(),
            [FaultKind::PowerLossAll]
        );
        assert_eq!(
            parse_faults_for("power-loss, power-loss-all", false).unwrap(),
            power_loss
        );
        let mut without_all = FaultKind::all();
        without_all.retain(|k| *k != FaultKind::PowerLossAll);
        assert_eq!(
            parse_faults_for("kill,pause,partition,power-loss", false).unwrap(),
            without_all
        );
        assert_eq!(
            parse_faults_for("kill,pause,partition", true).unwrap(),
            classic
        );
        let e = parse_faults("kill,explode").unwrap_err().0;
        assert!(e.contains("explode") && e.contains("leader-cut"), "{e}");
    }

    #[test]
    fn fault_lengths_follow_the_cluster_timeouts() {
        let plan = plan(7, &[FaultKind::IsolateLeader], 600.0);
        let failover_s = 4.0;
        let mut faults = 0;
        for pair in plan.step.chunks(2) {
            assert!(matches!(pair[0].action, Action::Isolate { .. }));
            let gap = after_s(&pair[0]).unwrap();
            assert!((3.75..=7.5).contains(&gap), "gap {gap}");
            if let [_, heal] = pair {
                assert_eq!(heal.action, Action::Heal);
                let length = after_s(heal).unwrap();
                assert!(
                    (1.5 * failover_s..=3.0 * failover_s).contains(&length),
                    "isolated for {length} s"
                );
                faults += 1;
            }
        }
        assert!(faults >= 30, "600 s hold many faults: {faults}");
        // Longer timeouts, longer faults.
        let slow = ClusterTimeouts {
            session_timeout_ms: 9_000,
            replica_lag_time_max_ms: 30_000,
        };
        let p = random_plan(
            7,
            &[FaultKind::KillLeader],
            5.0,
            600.0,
            &nodes(),
            "t0/0",
            slow,
        );
        assert!(after_s(&p.unwrap().step[1]).unwrap() >= 30.0);
    }

    #[test]
    fn every_kind_is_drawn_and_weights_favour_leadership_faults() {
        let drawn = kinds(&plan(3, &FaultKind::all(), 20_000.0));
        for k in FaultKind::all() {
            // Weight 0: drawn only as a leading fault (the lone leader's power cut once,
            // first among the power-loss family's runs; a failover in flight only for
            // idempotent producers).
            let expected = match k {
                FaultKind::FailoverInFlight => Some(0),
                FaultKind::PowerLossLoneLeader => Some(1),
                _ => None,
            };
            let count = drawn.iter().filter(|d| *d == k.name()).count();
            match expected {
                Some(n) => assert_eq!(count, n, "{}", k.name()),
                None => assert!(count > 0, "{} never drawn", k.name()),
            }
        }
        let alone = plan(3, &[FaultKind::FailoverInFlight], 600.0);
        assert!(kinds(&alone).iter().all(|k| k == "failover-in-flight"));
        assert!(!kinds(&alone).is_empty());
        let count = |name: &str| drawn.iter().filter(|d| *d == name).count();
        assert!(count("isolate-leader") > 2 * count("halves"), "{drawn:?}");
    }

    #[test]
    fn idempotent_producers_lead_with_a_failover_while_writes_are_in_flight() {
        let three: Vec<String> = ["c1", "n1", "n2", "n3"].map(String::from).to_vec();
        let default = parse_faults("kill,pause,partition").unwrap();
        let draw = |seed, idempotent| {
            random_plan_for(
                seed,
                &default,
                5.0,
                60.0,
                &three,
                "t0/0",
                timeouts(),
                idempotent,
            )
            .unwrap()
        };
        let mut all_four = 0;
        for seed in 1..=50 {
            let faults = fault_times(&draw(seed, true));
            assert_eq!(faults[0].0, "failover-in-flight", "seed {seed}");
            // The three leading classes follow, each once, as far as the minute goes; and no
            // other run draws it.
            let mut next: Vec<&str> = faults[1..faults.len().min(4)]
                .iter()
                .map(|f| lead_class(&f.0))
                .collect();
            next.sort();
            next.dedup();
            assert_eq!(
                next.len(),
                faults.len().min(4) - 1,
                "seed {seed}: {faults:?}"
            );
            assert!(
                next.iter()
                    .all(|c| ["diverge", "isr loss", "stale isr"].contains(c)),
                "seed {seed}: {faults:?}"
            );
            if faults.len() >= 4 && faults[3].2 <= 60.0 {
                all_four += 1;
            }
            let plain = fault_times(&draw(seed, false));
            assert!(
                plain.iter().all(|f| f.0 != "failover-in-flight"),
                "seed {seed}"
            );
        }
        // The price: a fourth leading fault does not always end inside the minute (the
        // schedule is a function of the seed, so this count is exact).
        assert_eq!(
            all_four, 21,
            "seeds of 50 whose four leading faults end within 60 s"
        );
        // The fault: pause a follower, kill the leader within the replica lag bound (2.5 s
        // here) so the paused one is still in the ISR, wait for the third replica to lead,
        // resume and start the two, and wait for the ISR to fill again.
        let p = draw(1, true);
        assert_eq!(
            script(&p, 6),
            [
                ("pause", "follower:t0/0".to_string()),
                ("kill", "leader:t0/0".to_string()),
                (
                    "wait-for-leader",
                    "replicas:t0/0 except @f0-slow+@f0-old".to_string()
                ),
                ("resume", "@f0-slow".to_string()),
                ("start", "@f0-old".to_string()),
                ("wait-for-isr-full", String::new()),
            ]
        );
        let kill_after = after_s(&p.step[1]).unwrap();
        assert!((1.0..=1.75).contains(&kill_after), "{kill_after}");
        assert_eq!(after_s(&p.step[3]), Some(2.0));
        // The description names what the schedule can draw: the leading-only kind for
        // idempotent producers, not for others.
        assert!(draw(1, true)
            .description
            .contains(",failover-in-flight for 60 s"));
        assert!(!draw(1, false).description.contains("failover-in-flight"));
        // Without the pause family there is no such fault to lead with.
        let no_pause = parse_faults("kill,partition").unwrap();
        let p = random_plan_for(1, &no_pause, 5.0, 60.0, &three, "t0/0", timeouts(), true);
        assert!(kinds(&p.unwrap()).iter().all(|k| k != "failover-in-flight"));
    }

    #[test]
    fn a_lone_leaders_power_cut_isolates_the_followers_until_the_isr_is_the_leader_alone() {
        let plan = plan(5, &[FaultKind::PowerLossLoneLeader], 30.0);
        assert_eq!(
            script(&plan, 6),
            [
                ("isolate", "replicas:t0/0 except leader:t0/0".to_string()),
                ("wait-for-isr-shrink", "@f0-followers".to_string()),
                ("power-loss", "leader:t0/0".to_string()),
                ("heal", String::new()),
                ("start", "@f0-old".to_string()),
                ("wait-for-isr-full", String::new()),
            ]
        );
        // The leader leads alone for 0.75 to 1.25 failover times (4 s here) before the cut.
        let alone = after_s(&plan.step[2]).unwrap();
        assert!((3.0..=5.0).contains(&alone), "{alone}");
    }

    /// The first `steps` steps of `plan` as (action, target) pairs.
    fn script(plan: &FaultPlan, steps: usize) -> Vec<(&'static str, String)> {
        plan.step[..steps]
            .iter()
            .map(|s| {
                let target = s.action.target().map(Target::to_string).unwrap_or_default();
                (s.action.name(), target)
            })
            .collect()
    }

    /// The leading class of a fault kind's name, or the name itself.
    fn lead_class(kind: &str) -> &str {
        match kind {
            "isolate-leader" | "leader-cut" | "failback" => "diverge",
            "isr-cascade" | "kill-isr" => "isr loss",
            "stale-follower" => "stale isr",
            other => other,
        }
    }

    fn fault_times(plan: &FaultPlan) -> Vec<(String, f64, f64)> {
        let mut faults: Vec<(String, f64, f64)> = vec![];
        let mut now_s = 0.0;
        for s in &plan.step {
            now_s += after_s(s).unwrap_or(0.0);
            match s.note.as_deref().and_then(|n| n.split_once(": ")) {
                Some((_, kind)) => faults.push((kind.to_string(), now_s, now_s)),
                None => {
                    faults
                        .last_mut()
                        .expect("a fault's first step has a note")
                        .2 = now_s
                }
            }
        }
        faults
    }

    #[test]
    fn a_default_minute_usually_holds_a_whole_isr_cascade() {
        // The default run: `tidewater run --time-limit 60` on three brokers. The cascade is
        // the only kind that shrinks the ISR below min.insync.replicas while the leader
        // takes writes and then elects nothing but a stale replica, so most runs should hold
        // one that ends before the time limit.
        let three: Vec<String> = ["c1", "n1", "n2", "n3"].map(String::from).to_vec();
        let kinds = parse_faults("kill,pause,partition").unwrap();
        let seeds = 400;
        let with_cascade = (1..=seeds)
            .filter(|seed| {
                let p = random_plan(*seed, &kinds, 5.0, 60.0, &three, "t0/0", timeouts());
                fault_times(&p.unwrap())
                    .iter()
                    .any(|(kind, _, end_s)| kind == "isr-cascade" && *end_s <= 60.0)
            })
            .count();
        // 341 of 400 since an ISR loss is one of the three leading faults (370 with two
        // leading classes, 235 when every fault was drawn from the whole table).
        assert!(
            with_cascade as u64 * 4 >= seeds * 3,
            "{with_cascade} of {seeds}"
        );
    }

    #[test]
    fn every_default_minute_leads_with_one_fault_of_each_leading_class_in_a_seeded_order() {
        let three: Vec<String> = ["c1", "n1", "n2", "n3"].map(String::from).to_vec();
        let default = parse_faults("kill,pause,partition").unwrap();
        let mut orders = std::collections::BTreeSet::new();
        let mut later = std::collections::BTreeSet::new();
        let mut whole = 0;
        let seeds = 400;
        for seed in 1..=seeds {
            let p = random_plan(seed, &default, 5.0, 60.0, &three, "t0/0", timeouts()).unwrap();
            let faults = fault_times(&p);
            assert!(faults.len() >= 3, "seed {seed}: {faults:?}");
            let mut leading: Vec<&str> = faults[..3].iter().map(|f| lead_class(&f.0)).collect();
            orders.insert(leading.join(", "));
            leading.sort();
            assert_eq!(
                leading,
                ["diverge", "isr loss", "stale isr"],
                "seed {seed}: {faults:?}"
            );
            if faults[2].2 <= 60.0 {
                whole += 1;
            }
            later.extend(faults[3..].iter().map(|f| f.0.clone()));
        }
        // Every order of the three classes comes up.
        assert_eq!(orders.len(), 6, "{orders:?}");
        // Nominal times: most minutes hold all three to their end.
        assert!(whole * 4 >= seeds * 3, "{whole} of {seeds}");
        // Later faults still come from the whole table.
        assert!(
            later.contains("pause-leader") && later.contains("kill-one"),
            "{later:?}"
        );
        // Without a kill, no ISR loss can be drawn: the leading faults are the divergent ones.
        let partition = parse_faults("partition").unwrap();
        let p = random_plan(1, &partition, 5.0, 60.0, &three, "t0/0", timeouts()).unwrap();
        assert_eq!(lead_class(&fault_times(&p)[0].0), "diverge", "{p:?}");
        // With the power-loss family asked for, a lone leader's power cut leads too, in
        // one of 24 orders; default runs never have it (the schedules above are unchanged).
        let power = parse_faults("kill,pause,partition,power-loss").unwrap();
        let mut power_orders = std::collections::BTreeSet::new();
        let mut with_power_cut = 0;
        for seed in 1..=seeds {
            let p = random_plan(seed, &power, 5.0, 60.0, &three, "t0/0", timeouts()).unwrap();
            let faults = fault_times(&p);
            let mut leading: Vec<&str> = faults[..faults.len().min(4)]
                .iter()
                .map(|f| lead_class(&f.0))
                .collect();
            if leading.len() == 4 {
                power_orders.insert(leading.join(", "));
            }
            if faults
                .iter()
                .take(4)
                .any(|f| f.0 == "power-loss-lone-leader" && f.2 <= 60.0)
            {
                with_power_cut += 1;
            }
            leading.sort();
            leading.dedup();
            assert_eq!(
                leading.len(),
                faults.len().min(4),
                "seed {seed}: {faults:?}"
            );
            assert!(
                faults[..faults.len().min(4)]
                    .iter()
                    .any(|f| f.0 == "power-loss-lone-leader")
                    || faults.len() < 4,
                "seed {seed}: {faults:?}"
            );
        }
        assert_eq!(power_orders.len(), 24, "{power_orders:?}");
        // The schedule is a function of the seed: exactly this many minutes hold a whole
        // lone-leader power cut.
        assert_eq!(with_power_cut, 302, "of {seeds}");
        // Named kinds outside every class are drawn as before.
        let p = plan(3, &[FaultKind::PauseOne], 60.0);
        assert!(kinds(&p).iter().all(|k| k == "pause-one"));
    }

    #[test]
    fn stale_follower_cuts_a_follower_from_the_leader_then_kills_the_rest_of_the_isr() {
        let plan = plan(17, &[FaultKind::StaleFollower], 30.0);
        let fault = script(&plan, 4);
        assert_eq!(
            fault,
            [
                ("cut", "follower:t0/0".to_string()),
                ("kill", "isr:t0/0 except @f0-stale".into()),
                ("heal", String::new()),
                ("start", "@f0-isr".into()),
            ]
        );
        let Action::Cut { from, .. } = &plan.step[0].action else {
            panic!("not a cut: {:?}", plan.step[0]);
        };
        assert_eq!(from.to_string(), "leader:t0/0");
        // Cut for longer than replica.lag.time.max.ms (2.5 s), so the leader drops the
        // follower; the rest stay dead past the session timeout (4 s), so they are fenced.
        let cut_s = after_s(&plan.step[1]).unwrap();
        assert!((5.0..=8.75).contains(&cut_s), "cut for {cut_s} s");
        let dead_s = after_s(&plan.step[3]).unwrap();
        assert!((5.0..=8.0).contains(&dead_s), "dead for {dead_s} s");
    }

    #[test]
    fn failback_fails_back_to_the_isolated_leader() {
        let plan = plan(11, &[FaultKind::Failback], 60.0);
        let fault = script(&plan, 6);
        assert_eq!(
            fault,
            [
                ("isolate", "leader:t0/0".to_string()),
                ("heal", String::new()),
                ("wait-for-isr-expand", "@f0-old".into()),
                ("kill", "isr:t0/0 except @f0-old".into()),
                ("wait-for-leader", "@f0-old".into()),
                ("start", "@f0-others".into()),
            ]
        );
    }

    #[test]
    fn isr_cascade_kills_the_followers_then_the_leader_and_starts_the_stale_one_alone() {
        let plan = plan(13, &[FaultKind::IsrCascade], 40.0);
        let fault = script(&plan, 7);
        assert_eq!(
            fault,
            [
                ("kill", "follower:t0/0".to_string()),
                ("wait-for-isr-shrink", "@f0-stale".into()),
                ("kill", "isr:t0/0 except leader:t0/0".into()),
                ("wait-for-isr-shrink", "@f0-second".into()),
                ("kill", "leader:t0/0".into()),
                ("start", "@f0-stale".into()),
                ("start", "@f0-second+@f0-last".into()),
            ]
        );
        // The stale replica is alone for longer than the session timeout, so the dead ISR is
        // fenced and an election could pick it before the others return.
        let alone_s = after_s(&plan.step[6]).unwrap();
        assert!((5.0..=8.0).contains(&alone_s), "alone for {alone_s} s");
    }

    #[test]
    fn leader_cut_cuts_the_controller_and_one_follower_only() {
        let plan = plan(5, &[FaultKind::LeaderCut], 30.0);
        let Action::Cut { target, from } = &plan.step[0].action else {
            panic!("not a cut: {:?}", plan.step[0]);
        };
        assert_eq!(target.to_string(), "leader:t0/0");
        assert_eq!(from.to_string(), "controller+follower:t0/0");
    }

    #[test]
    fn random_partitions_are_stored_as_concrete_grudges_or_targets() {
        let faults = parse_faults("partition").unwrap();
        let plan = plan(3, &faults, 2_000.0);
        for step in &plan.step {
            match &step.action {
                Action::Partition(Partition::Grudge(g)) => assert!(!g.is_empty()),
                Action::Isolate { .. } | Action::Cut { .. } | Action::CutClients { .. } => {
                    assert!(step.action.target().is_some())
                }
                Action::Heal => {}
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn no_faults_means_an_empty_schedule_and_bad_intervals_are_refused() {
        assert!(plan(1, &[], 60.0).step.is_empty());
        let e = random_plan(
            1,
            &[FaultKind::KillOne],
            0.1,
            60.0,
            &nodes(),
            "t0/0",
            timeouts(),
        );
        assert!(e.is_err());
    }

    #[test]
    fn timeouts_come_from_the_settings_or_the_broker_defaults() {
        let none = ClusterTimeouts::from_settings(&BTreeMap::new()).unwrap();
        assert_eq!(none.session_timeout_ms, BROKER_SESSION_TIMEOUT_MS_DEFAULT);
        let sets = BTreeMap::from([
            ("broker.session.timeout.ms".to_string(), "3000".to_string()),
            ("replica.lag.time.max.ms".to_string(), "x".to_string()),
        ]);
        assert!(ClusterTimeouts::from_settings(&sets)
            .unwrap_err()
            .contains("replica.lag.time.max.ms=x"));
    }
}
