//! Fault plans: timed steps in a TOML file (or stored as JSON with a run), for reproducible
//! fault scenarios. See `docs/nemesis.md` for the vocabulary.
//!
//! ```toml
//! name = "leader-isolation"
//! [[step]]
//! at_s = 5
//! action = "isolate"
//! target = "leader:t0/0"
//! [[step]]
//! at_s = 20
//! action = "heal"
//! ```

use super::target::{is_binding_name, Target};
use crate::net::Grudge;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

/// Longest wait a step may ask for, so a plan cannot hang a run.
pub const WAIT_TIMEOUT_MAX_S: f64 = 600.0;

/// Wait bound of `wait-for-*` steps that name none.
pub const WAIT_TIMEOUT_DEFAULT_S: f64 = 30.0;

/// Most steps in one plan.
pub const STEPS_MAX: usize = 10_000;

/// Latest `at_s` and longest `after_s` a step may give: the longest main phase a run may have
/// (`--time-limit`, one week). A later time could never fire, and one far beyond (1e300 s)
/// would overflow the executor's clock arithmetic mid-run.
pub const STEP_TIME_MAX_S: f64 = 604_800.0;

/// Plans shipped in `harness/plans/`, runnable by name.
pub const BUILTIN_PLANS: &[(&str, &str)] = &[
    (
        "unclean-election",
        include_str!("../../plans/unclean-election.toml"),
    ),
    (
        "leader-isolation",
        include_str!("../../plans/leader-isolation.toml"),
    ),
    (
        "controller-isolation",
        include_str!("../../plans/controller-isolation.toml"),
    ),
    (
        "rolling-restart",
        include_str!("../../plans/rolling-restart.toml"),
    ),
    (
        "pause-leader",
        include_str!("../../plans/pause-leader.toml"),
    ),
    (
        "partition-shapes",
        include_str!("../../plans/partition-shapes.toml"),
    ),
    ("failback", include_str!("../../plans/failback.toml")),
    ("leader-cut", include_str!("../../plans/leader-cut.toml")),
    ("kill-isr", include_str!("../../plans/kill-isr.toml")),
    (
        "cut-clients-leader",
        include_str!("../../plans/cut-clients-leader.toml"),
    ),
    (
        "power-loss-leader",
        include_str!("../../plans/power-loss-leader.toml"),
    ),
    (
        "power-loss-cluster",
        include_str!("../../plans/power-loss-cluster.toml"),
    ),
];

/// What a step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Cut the target nodes (as one group) from every other node. Clients still reach them.
    Isolate,
    /// Apply a partition: `kind` (drawn at random) or an explicit `grudge`.
    Partition,
    /// Cut the target nodes from the `from` nodes, both ways; every other link stays up.
    Cut,
    /// Cut the harness host (clients) from the target nodes.
    CutClients,
    /// Remove every network fault.
    Heal,
    /// SIGKILL the target nodes.
    Kill,
    /// Cut the target nodes' power: SIGKILL, then lose every write they had not fsynced
    /// (needs a lossy filesystem under their data). `start` boots them on what is left.
    PowerLoss,
    /// Stop the target nodes gracefully (SIGTERM, SIGKILL after a bound).
    Stop,
    /// Start the target nodes (those not running).
    Start,
    /// Stop, then start the target nodes.
    Restart,
    /// SIGSTOP the target nodes.
    Pause,
    /// SIGCONT the target nodes.
    Resume,
    /// Wait until none of the target nodes is in the ISR of `key`.
    WaitForIsrShrink,
    /// Wait until every target node is in the ISR of `key`.
    WaitForIsrExpand,
    /// Wait until `key` has a leader (one of the target nodes, if a target is given).
    WaitForLeader,
    /// Wait until every replica of `key` is in its ISR.
    WaitForIsrFull,
}

impl Action {
    /// The name used in plan files.
    pub fn name(self) -> &'static str {
        match self {
            Action::Isolate => "isolate",
            Action::Partition => "partition",
            Action::Cut => "cut",
            Action::CutClients => "cut-clients",
            Action::Heal => "heal",
            Action::Kill => "kill",
            Action::PowerLoss => "power-loss",
            Action::Stop => "stop",
            Action::Start => "start",
            Action::Restart => "restart",
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::WaitForIsrShrink => "wait-for-isr-shrink",
            Action::WaitForIsrExpand => "wait-for-isr-expand",
            Action::WaitForLeader => "wait-for-leader",
            Action::WaitForIsrFull => "wait-for-isr-full",
        }
    }

    fn needs_target(self) -> bool {
        !matches!(
            self,
            Action::Heal | Action::Partition | Action::WaitForLeader | Action::WaitForIsrFull
        )
    }

    fn is_wait(self) -> bool {
        matches!(
            self,
            Action::WaitForIsrShrink
                | Action::WaitForIsrExpand
                | Action::WaitForLeader
                | Action::WaitForIsrFull
        )
    }
}

/// Random partition shapes over every node (controller included), drawn when the step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartitionKind {
    /// A random split in two (see [`crate::net::halves`]: minority and majority, or two
    /// equal halves for an even node count).
    Halves,
    /// Every node sees a different majority.
    MajoritiesRing,
    /// Two halves joined by one node.
    Bridge,
}

/// One timed step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Run at this many seconds after the main phase started (or at once if that is past).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_s: Option<f64>,
    /// Run this many seconds after the previous step finished. Exclusive with `at_s`; with
    /// neither, the step runs right after the previous one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_s: Option<f64>,
    /// What to do.
    pub action: Action,
    /// Which nodes (see [`Target`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// For `cut`: the nodes the target is cut from (resolved after the target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Target>,
    /// For `partition`: a random shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<PartitionKind>,
    /// For `partition`: an explicit grudge (node -> nodes it drops).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grudge: Option<Grudge>,
    /// For `wait-for-*`: the partition, e.g. `t0/0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// For `wait-for-*`: give up after this long (default 30 s, at most 600 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    /// For `power-loss`: tear each file's last unsynced write instead of dropping it whole
    /// (a prefix survives, drawn from a seed of the nemesis), as a disk that lost power
    /// mid-write may. Default: clean losses.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub torn: bool,
    /// Remember the resolved target nodes under this name, for later `@name` targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    /// Free text for the reader of the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Step {
    /// A step with only an action; fill in the rest with struct update syntax.
    pub fn new(action: Action) -> Step {
        Step {
            at_s: None,
            after_s: None,
            action,
            target: None,
            from: None,
            kind: None,
            grudge: None,
            key: None,
            timeout_s: None,
            torn: false,
            bind: None,
            note: None,
        }
    }

    /// The bound of a wait step.
    pub fn wait_timeout_s(&self) -> f64 {
        self.timeout_s.unwrap_or(WAIT_TIMEOUT_DEFAULT_S)
    }
}

/// A whole plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultPlan {
    /// Short name (the file name for shipped plans).
    #[serde(default)]
    pub name: String,
    /// What the plan shows, for the reader and the report.
    #[serde(default)]
    pub description: String,
    /// The steps, in order (`[[step]]` in TOML).
    #[serde(default)]
    pub step: Vec<Step>,
}

/// A plan that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError(pub String);

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlanError {}

/// A number as a reader wants it in a message: `75`, `0.5`, or `1e300` and `1e-300` rather
/// than three hundred digits.
pub fn number_text(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-6..1e9).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

impl FaultPlan {
    /// Loads a plan by shipped name (`unclean-election`) or from a file (`.toml`, or `.json`
    /// as stored in a run directory), and validates it.
    pub fn load(name_or_path: &str) -> Result<FaultPlan, PlanError> {
        let path = Path::new(name_or_path);
        if path.is_file() {
            let text = std::fs::read_to_string(path)
                .map_err(|e| PlanError(format!("read plan {}: {e}", path.display())))?;
            let plan = if path.extension().is_some_and(|x| x == "json") {
                FaultPlan::from_json(&text)
            } else {
                FaultPlan::from_toml(&text)
            };
            return plan.map_err(|e| PlanError(format!("plan {}: {}", path.display(), e.0)));
        }
        match BUILTIN_PLANS.iter().find(|(n, _)| *n == name_or_path) {
            Some((_, text)) => FaultPlan::from_toml(text),
            None => {
                Err(PlanError(format!(
                "no plan file {name_or_path:?} and no shipped plan of that name; shipped plans: {}",
                BUILTIN_PLANS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            )))
            }
        }
    }

    /// Parses and validates TOML.
    pub fn from_toml(text: &str) -> Result<FaultPlan, PlanError> {
        let plan: FaultPlan = toml::from_str(text).map_err(|e| PlanError(e.to_string()))?;
        plan.validate()?;
        Ok(plan)
    }

    /// Parses and validates JSON (a plan as stored in a run's `config.json`), exactly as TOML
    /// is: a JSON plan must not wait for the cluster to be up to be refused.
    pub fn from_json(text: &str) -> Result<FaultPlan, PlanError> {
        let plan: FaultPlan = serde_json::from_str(text).map_err(|e| PlanError(e.to_string()))?;
        plan.validate()?;
        Ok(plan)
    }

    /// Checks what serde cannot: fields each action needs, bounds, and that every `@name`
    /// refers to an earlier `bind`.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.step.len() > STEPS_MAX {
            return Err(PlanError(format!(
                "{} steps; at most {STEPS_MAX}",
                self.step.len()
            )));
        }
        let mut bound = BTreeSet::new();
        for (i, step) in self.step.iter().enumerate() {
            let at = |m: String| PlanError(format!("step {} ({}): {m}", i + 1, step.action.name()));
            for (field, v) in [
                ("at_s", step.at_s),
                ("after_s", step.after_s),
                ("timeout_s", step.timeout_s),
            ] {
                if v.is_some_and(|v| !v.is_finite() || v < 0.0) {
                    return Err(at(format!("{field} must be a non-negative number")));
                }
            }
            for (field, v) in [("at_s", step.at_s), ("after_s", step.after_s)] {
                if let Some(v) = v.filter(|v| *v > STEP_TIME_MAX_S) {
                    return Err(at(format!(
                        "{field} = {} is beyond the longest run ({STEP_TIME_MAX_S} s)",
                        number_text(v)
                    )));
                }
            }
            if step.timeout_s.is_some() && !step.action.is_wait() {
                return Err(at("timeout_s is for wait-for-* steps".into()));
            }
            if step.at_s.is_some() && step.after_s.is_some() {
                return Err(at("give at_s or after_s, not both".into()));
            }
            if step.action.needs_target() && step.target.is_none() {
                return Err(at("needs a target".into()));
            }
            if (step.action == Action::Cut) != step.from.is_some() {
                return Err(at("from is for cut, and cut needs it".into()));
            }
            if step.torn && step.action != Action::PowerLoss {
                return Err(at("torn is for power-loss".into()));
            }
            if step.action == Action::Partition && step.kind.is_some() == step.grudge.is_some() {
                return Err(at("partition needs exactly one of kind or grudge".into()));
            }
            if step.action.is_wait() {
                if step.key.is_none() {
                    return Err(at("needs a key such as \"t0/0\"".into()));
                }
                if step.wait_timeout_s() > WAIT_TIMEOUT_MAX_S {
                    return Err(at(format!("timeout_s above {WAIT_TIMEOUT_MAX_S}")));
                }
            }
            for target in [&step.target, &step.from].into_iter().flatten() {
                if let Some(name) = target.bindings().find(|n| !bound.contains(*n)) {
                    return Err(at(format!("@{name} is not bound by an earlier step")));
                }
            }
            if let Some(name) = &step.bind {
                if !is_binding_name(name) || step.target.is_none() {
                    return Err(at(format!(
                        "bind {name:?} needs a target and a simple name"
                    )));
                }
                bound.insert(name.clone());
            }
        }
        Ok(())
    }

    /// The earliest time, in seconds into the main phase, at which each step can start: its
    /// `at_s`, or the previous step's earliest start plus its `after_s`, and never before the
    /// previous step (steps run in order and each takes time, so the real start is later).
    pub fn earliest_starts_s(&self) -> Vec<f64> {
        let mut previous_s = 0.0_f64;
        self.step
            .iter()
            .map(|step| {
                previous_s = match (step.at_s, step.after_s) {
                    (Some(at), _) => previous_s.max(at),
                    (None, Some(after)) => previous_s + after,
                    (None, None) => previous_s,
                };
                previous_s
            })
            .collect()
    }

    /// The steps (numbered from 1, with their earliest start) that can never run in a main
    /// phase of `time_limit_s`: the executor stops at the first step due at or after the end.
    pub fn steps_after(&self, time_limit_s: f64) -> Vec<(usize, f64)> {
        self.earliest_starts_s()
            .into_iter()
            .enumerate()
            .filter(|(_, start_s)| *start_s >= time_limit_s)
            .map(|(i, start_s)| (i + 1, start_s))
            .collect()
    }

    /// Refuses a plan none of whose steps can start within `time_limit_s` (the run would
    /// inject nothing it asked for). A plan cut short by the limit is allowed: shipped plans
    /// are run under shorter limits on purpose, and the final step heals, resumes and
    /// restarts everything whatever the plan left undone; see [`FaultPlan::steps_after`].
    pub fn check_fits(&self, time_limit_s: u64) -> Result<(), PlanError> {
        let late = self.steps_after(time_limit_s as f64);
        match late.first() {
            Some((1, start_s)) => Err(PlanError(format!(
                "no step can run within --time-limit {time_limit_s}: step 1 ({}) starts at {} s \
                 at the earliest, and the run would inject nothing",
                self.step[0].action.name(),
                number_text(*start_s)
            ))),
            _ => Ok(()),
        }
    }

    /// The plan as stored with a run (`plan.json`), for `--replay`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a plan always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_plan_parses_and_validates() {
        for (name, _) in BUILTIN_PLANS {
            let plan = FaultPlan::load(name).unwrap();
            assert_eq!(plan.name, *name);
            assert!(!plan.description.is_empty(), "{name} says what it shows");
            assert!(!plan.step.is_empty());
        }
    }

    #[test]
    fn the_unclean_election_plan_starts_only_the_stale_follower_after_killing_the_isr() {
        let plan = FaultPlan::load("unclean-election").unwrap();
        let actions: Vec<(&str, String)> = plan
            .step
            .iter()
            .map(|s| {
                (
                    s.action.name(),
                    s.target.as_ref().map(|t| t.to_string()).unwrap_or_default(),
                )
            })
            .collect();
        let kill_isr = actions
            .iter()
            .position(|a| *a == ("kill", "isr:t0/0".into()))
            .unwrap();
        let start_stale = actions
            .iter()
            .position(|a| *a == ("start", "@stale".into()))
            .unwrap();
        let start_isr = actions
            .iter()
            .position(|a| *a == ("start", "@isr".into()))
            .unwrap();
        assert!(actions[0] == ("isolate", "follower:t0/0".into()));
        assert!(actions.contains(&("wait-for-isr-shrink", "@stale".into())));
        assert!(kill_isr < start_stale && start_stale < start_isr);
    }

    #[test]
    fn plans_round_trip_through_json() {
        let plan = FaultPlan::load("leader-isolation").unwrap();
        let back: FaultPlan = serde_json::from_str(&plan.to_json()).unwrap();
        assert_eq!(back, plan);
    }

    #[test]
    fn mistakes_are_reported_with_the_step_number() {
        let cases = [
            (
                "[[step]]\naction = \"kill\"\n",
                "step 1 (kill): needs a target",
            ),
            (
                "[[step]]\naction = \"heal\"\nat_s = 1\nafter_s = 2\n",
                "not both",
            ),
            (
                "[[step]]\naction = \"partition\"\n",
                "exactly one of kind or grudge",
            ),
            (
                "[[step]]\naction = \"start\"\ntarget = \"@x\"\n",
                "@x is not bound",
            ),
            ("[[step]]\naction = \"wait-for-leader\"\n", "needs a key"),
            (
                "[[step]]\naction = \"cut\"\ntarget = \"n1\"\n",
                "cut needs it",
            ),
            (
                "[[step]]\naction = \"isolate\"\ntarget = \"n1\"\nfrom = \"n2\"\n",
                "from is for cut",
            ),
            (
                "[[step]]\naction = \"kill\"\ntarget = \"isr:t0/0 except @old\"\n",
                "@old is not bound",
            ),
            (
                "[[step]]\naction = \"wait-for-leader\"\nkey = \"t0/0\"\ntimeout_s = 9999\n",
                "timeout_s above",
            ),
            ("[[step]]\naction = \"explode\"\n", "unknown variant"),
            (
                "[[step]]\naction = \"heal\"\ntargte = \"n1\"\n",
                "unknown field",
            ),
            (
                "[[step]]\naction = \"kill\"\ntarget = \"x9\"\n",
                "expected one, minority",
            ),
            (
                "[[step]]\naction = \"heal\"\nat_s = 1e300\n",
                "step 1 (heal): at_s = 1e300 is beyond the longest run (604800 s)",
            ),
            (
                "[[step]]\naction = \"heal\"\nafter_s = 1e12\n",
                "after_s = 1e12 is beyond the longest run",
            ),
            (
                "[[step]]\naction = \"heal\"\nat_s = nan\n",
                "at_s must be a non-negative number",
            ),
            (
                "[[step]]\naction = \"kill\"\ntarget = \"n1\"\ntimeout_s = 1e300\n",
                "timeout_s is for wait-for-* steps",
            ),
        ];
        for (text, want) in cases {
            let e = FaultPlan::from_toml(text).unwrap_err();
            assert!(e.0.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_json_plan_file_is_validated_when_it_is_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.json");
        std::fs::write(&path, r#"{"step": [{"action": "heal", "at_s": 1e300}]}"#).unwrap();
        let e = FaultPlan::load(path.to_str().unwrap()).unwrap_err();
        assert!(
            e.0.contains("plan.json: step 1 (heal): at_s = 1e300"),
            "{e}"
        );
        std::fs::write(&path, r#"{"step": [{"action": "kill"}]}"#).unwrap();
        let e = FaultPlan::load(path.to_str().unwrap()).unwrap_err();
        assert!(e.0.contains("step 1 (kill): needs a target"), "{e}");
        let stored = FaultPlan::load("leader-isolation").unwrap();
        std::fs::write(&path, stored.to_json()).unwrap();
        assert_eq!(FaultPlan::load(path.to_str().unwrap()).unwrap(), stored);
    }

    #[test]
    fn earliest_starts_chain_after_s_and_never_go_back() {
        let plan = FaultPlan::from_toml(
            "[[step]]\naction = \"heal\"\nat_s = 10\n\
             [[step]]\naction = \"heal\"\nafter_s = 5\n\
             [[step]]\naction = \"heal\"\nat_s = 3\n\
             [[step]]\naction = \"heal\"\n\
             [[step]]\naction = \"heal\"\nat_s = 60\n",
        )
        .unwrap();
        assert_eq!(plan.earliest_starts_s(), vec![10.0, 15.0, 15.0, 15.0, 60.0]);
        assert_eq!(
            plan.steps_after(60.0),
            vec![(5, 60.0)],
            "due at the end: never runs"
        );
        assert!(plan.steps_after(61.0).is_empty());
        assert_eq!(plan.check_fits(11), Ok(()), "cut short, but step 1 runs");
        let e = plan.check_fits(10).unwrap_err();
        assert!(
            e.0.contains("--time-limit 10: step 1 (heal) starts at 10 s"),
            "{e}"
        );
        assert_eq!(FaultPlan::from_toml("").unwrap().check_fits(0), Ok(()));
    }

    #[test]
    fn an_unknown_name_lists_the_shipped_plans() {
        let e = FaultPlan::load("no-such-plan").unwrap_err();
        assert!(
            e.0.contains("unclean-election") && e.0.contains("leader-isolation"),
            "{e}"
        );
    }
}
