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

//!
//! - [`step`]: one step as code sees it, [`Step`] with an [`Action`] whose variants carry
//!   exactly their own arguments.
//! - [`file`]: the shape of plan files and stored plans (`[[step]]` tables, `action` beside
//!   every field any action takes) and its typing into steps, refusing what an action does
//!   not take, numbered by step.

mod file;
pub mod step;

pub use step::{Action, Partition, PartitionKind, Step, Wait, When};

use super::target::is_binding_name;
use file::RawPlan;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use step::bind_error;

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
        include_str!("../../../plans/unclean-election.toml"),
    ),
    (
        "leader-isolation",
        include_str!("../../../plans/leader-isolation.toml"),
    ),
    (
        "controller-isolation",
        include_str!("../../../plans/controller-isolation.toml"),
    ),
    (
        "rolling-restart",
        include_str!("../../../plans/rolling-restart.toml"),
    ),
    (
        "pause-leader",
        include_str!("../../../plans/pause-leader.toml"),
    ),
    (
        "partition-shapes",
        include_str!("../../../plans/partition-shapes.toml"),
    ),
    ("failback", include_str!("../../../plans/failback.toml")),
    ("leader-cut", include_str!("../../../plans/leader-cut.toml")),
    ("kill-isr", include_str!("../../../plans/kill-isr.toml")),
    (
        "cut-clients-leader",
        include_str!("../../../plans/cut-clients-leader.toml"),
    ),
    (
        "power-loss-leader",
        include_str!("../../../plans/power-loss-leader.toml"),
    ),
    (
        "power-loss-cluster",
        include_str!("../../../plans/power-loss-cluster.toml"),
    ),
    ("txn-delays", include_str!("../../../plans/txn-delays.toml")),
    (
        "slow-follower-failover",
        include_str!("../../../plans/slow-follower-failover.toml"),
    ),
];

/// A whole plan. In files and in a run's `config.json` it has the shape `file.rs` reads and writes: a
/// `[[step]]` table per step, `action` naming what it does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawPlan", into = "RawPlan")]
pub struct FaultPlan {
    /// Short name (the file name for shipped plans).
    pub name: String,
    /// What the plan shows, for the reader and the report.
    pub description: String,
    /// The steps, in order.
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

/// Refuses a plan of more than [`STEPS_MAX`] steps.
fn check_steps_max(steps: usize) -> Result<(), PlanError> {
    if steps > STEPS_MAX {
        return Err(PlanError(format!("{steps} steps; at most {STEPS_MAX}")));
    }
    Ok(())
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
        let raw: RawPlan = toml::from_str(text).map_err(|e| PlanError(e.to_string()))?;
        FaultPlan::try_from(raw)
    }

    /// Parses and validates JSON (a plan as stored in a run's `config.json`), exactly as TOML
    /// is: a JSON plan must not wait for the cluster to be up to be refused.
    pub fn from_json(text: &str) -> Result<FaultPlan, PlanError> {
        let raw: RawPlan = serde_json::from_str(text).map_err(|e| PlanError(e.to_string()))?;
        FaultPlan::try_from(raw)
    }

    /// Checks what the types cannot, for plans loaded and plans built in code alike: how many
    /// steps, each step's numbers and `bind`, and that every `@name` refers to an earlier
    /// `bind`. (Which fields each action takes is settled when a file is loaded: a [`Step`]
    /// holds exactly its action's.)
    pub fn validate(&self) -> Result<(), PlanError> {
        check_steps_max(self.step.len())?;
        let mut bound = BTreeSet::new();
        for (i, step) in self.step.iter().enumerate() {
            let at = |m: String| PlanError(format!("step {} ({}): {m}", i + 1, step.action.name()));
            step.check().map_err(at)?;
            let from = match &step.action {
                Action::Cut { from, .. } => Some(from),
                _ => None,
            };
            for target in [step.action.target(), from].into_iter().flatten() {
                if let Some(name) = target.bindings().find(|n| !bound.contains(*n)) {
                    return Err(at(format!("@{name} is not bound by an earlier step")));
                }
            }
            if let Some(name) = &step.bind {
                if !is_binding_name(name) {
                    return Err(at(bind_error(name)));
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
                previous_s = match step.when {
                    When::At { at_s } => previous_s.max(at_s),
                    When::After { after_s } => previous_s + after_s,
                    When::Now => previous_s,
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

    /// The plan as a plan file (`--plan FILE`), in the shape [`FaultPlan::from_toml`] reads.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a plan always serialises as TOML")
    }

    /// The plan as stored with a run (`plan.json`), for `--replay`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a plan always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::target::Target;
    use tidewater_workloads::nemesis::Fault;

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
    fn the_kafka_17754_plan_file_cuts_the_clients_longer_than_max_block_ms() {
        // Not shipped (the faithfulness matrix runs every shipped plan); given by its path.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/kafka-17754/txn-commit-timeouts.toml"
        );
        let plan = FaultPlan::load(path).unwrap();
        assert_eq!(plan.name, "txn-commit-timeouts");
        let at = |s: &Step| match s.when {
            When::At { at_s } => at_s,
            ref other => panic!("every step is timed: {other:?}"),
        };
        let cuts: Vec<f64> = plan
            .step
            .windows(2)
            .filter(|w| w[0].action.name() == "cut-clients")
            .map(|w| at(&w[1]) - at(&w[0]))
            .collect();
        let max_block_s = tidewater_workloads::java::settings::MAX_BLOCK_MS as f64 / 1000.0;
        assert_eq!(cuts.len(), 4);
        assert!(cuts.iter().all(|&c| c > max_block_s), "{cuts:?}");
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
                    s.action.target().map(|t| t.to_string()).unwrap_or_default(),
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
    fn fields_an_action_does_not_take_are_refused_naming_the_step() {
        let cases = [
            (
                "[[step]]\naction = \"kill\"\ntarget = \"n1\"\nkey = \"t0/0\"\n",
                "step 1 (kill): key is for wait-for-* steps",
            ),
            (
                "[[step]]\naction = \"isolate\"\ntarget = \"n1\"\nkind = \"halves\"\n",
                "step 1 (isolate): kind and grudge are for partition",
            ),
            (
                "[[step]]\naction = \"heal\"\ntarget = \"n1\"\n",
                "step 1 (heal): takes no target",
            ),
            (
                "[[step]]\naction = \"wait-for-isr-full\"\nkey = \"t0/0\"\ntarget = \"n1\"\n",
                "step 1 (wait-for-isr-full): takes no target",
            ),
            (
                "[[step]]\naction = \"heal\"\nbind = \"x\"\n",
                "step 1 (heal): bind \"x\" needs a target",
            ),
            (
                "[[step]]\naction = \"kill\"\ntarget = \"n1\"\nbind = \"a b\"\n",
                "step 1 (kill): bind \"a b\" needs a target and a simple name",
            ),
        ];
        for (text, want) in cases {
            let e = FaultPlan::from_toml(text).unwrap_err();
            assert!(e.0.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_step_holds_exactly_its_actions_arguments_and_is_stored_as_it_was_written() {
        let text = "[[step]]\nat_s = 5\naction = \"cut\"\ntarget = \"leader:t0/0\"\n\
                    from = \"controller+follower:t0/0\"\nbind = \"old\"\n\
                    [[step]]\naction = \"partition\"\nkind = \"bridge\"\n\
                    [[step]]\nafter_s = 2\naction = \"wait-for-leader\"\nkey = \"t0/0\"\n\
                    target = \"@old\"\ntimeout_s = 9\nnote = \"back\"\n\
                    [[step]]\naction = \"power-loss\"\ntarget = \"all\"\ntorn = true\n";
        let plan = FaultPlan::from_toml(text).unwrap();
        let target = |t: &str| t.parse::<Target>().unwrap();
        assert_eq!(
            plan.step[0],
            Step {
                when: When::At { at_s: 5.0 },
                bind: Some("old".into()),
                ..Step::new(Action::Cut {
                    target: target("leader:t0/0"),
                    from: target("controller+follower:t0/0"),
                })
            }
        );
        assert_eq!(
            plan.step[1].action,
            Action::Partition(Partition::Random(PartitionKind::Bridge))
        );
        assert_eq!(
            plan.step[2].action,
            Action::Wait(Wait::Leader {
                key: "t0/0".into(),
                target: Some(target("@old")),
                timeout_s: Some(9.0),
            })
        );
        assert_eq!(plan.step[2].when, When::After { after_s: 2.0 });
        assert_eq!(plan.step[3].action.fault(), Some(Fault::PowerLoss));
        assert_eq!(
            serde_json::to_string(&plan).unwrap(),
            r#"{"name":"","description":"","step":[{"at_s":5.0,"action":"cut","target":"leader:t0/0","from":"controller+follower:t0/0","bind":"old"},{"action":"partition","kind":"bridge"},{"after_s":2.0,"action":"wait-for-leader","target":"@old","key":"t0/0","timeout_s":9.0,"note":"back"},{"action":"power-loss","target":"all","torn":true}]}"#
        );
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
