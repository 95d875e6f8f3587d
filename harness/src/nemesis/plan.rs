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

impl FaultPlan {
    /// Loads a plan by shipped name (`unclean-election`) or from a file (`.toml`, or `.json`
    /// as stored in a run directory), and validates it.
    pub fn load(name_or_path: &str) -> Result<FaultPlan, PlanError> {
        let path = Path::new(name_or_path);
        if path.is_file() {
            let text = std::fs::read_to_string(path)
                .map_err(|e| PlanError(format!("read plan {}: {e}", path.display())))?;
            let plan = if path.extension().is_some_and(|x| x == "json") {
                serde_json::from_str(&text)
                    .map_err(|e| PlanError(format!("plan {}: {e}", path.display())))?
            } else {
                FaultPlan::from_toml(&text)
                    .map_err(|e| PlanError(format!("plan {}: {}", path.display(), e.0)))?
            };
            return Ok(plan);
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
        ];
        for (text, want) in cases {
            let e = FaultPlan::from_toml(text).unwrap_err();
            assert!(e.0.contains(want), "{text:?}: {e}");
        }
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
