//! The random schedule behind `--nemesis kill,pause,partition --nemesis-interval SECS`.
//!
//! Like Jepsen's, it alternates quiet and faulty intervals: at 1×interval a fault starts, at
//! 2×interval it stops, at 3×interval the next starts, and so on. Everything random is drawn
//! here from the seed and written into the plan as concrete nodes and grudges, except targets
//! that depend on the cluster at that moment (the leader of a partition); the plan is stored
//! with the run, so `--replay` repeats the same faults.

use super::plan::{Action, FaultPlan, PlanError, Step};
use super::target::Target;
use crate::cluster::CONTROLLER;
use crate::net;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// Mixed into the run's seed so the schedule's draws differ from the nemesis's and the
/// workload's.
const SEED_SALT: u64 = 0x7363_6865_6475_6c65;

/// Shortest interval accepted, so faults have time to take effect.
pub const INTERVAL_MIN_S: f64 = 1.0;

/// A kind of fault the random schedule may inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fault {
    /// SIGKILL nodes, start them again.
    Kill,
    /// SIGSTOP nodes, SIGCONT them.
    Pause,
    /// Network partitions, healed afterwards.
    Partition,
}

/// Parses `--nemesis`: a comma-separated list of `kill`, `pause`, `partition`, or `none`.
pub fn parse_faults(s: &str) -> Result<Vec<Fault>, PlanError> {
    if s.trim() == "none" {
        return Ok(vec![]);
    }
    let mut faults = vec![];
    for word in s.split(',').map(str::trim) {
        let fault = match word {
            "kill" => Fault::Kill,
            "pause" => Fault::Pause,
            "partition" => Fault::Partition,
            other => {
                return Err(PlanError(format!(
                    "--nemesis {other:?}: expected kill, pause, partition (comma-separated) or none"
                )))
            }
        };
        if !faults.contains(&fault) {
            faults.push(fault);
        }
    }
    Ok(faults)
}

/// Draws a schedule for a main phase of `time_limit_s` seconds over `nodes` (controller
/// `c1` and brokers `n1..`), faults from `faults`, partition-relative targets on `leader_key`.
pub fn random_plan(
    seed: u64,
    faults: &[Fault],
    interval_s: f64,
    time_limit_s: f64,
    nodes: &[String],
    leader_key: &str,
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
    let mut rng = StdRng::seed_from_u64(seed ^ SEED_SALT);
    let mut steps = vec![];
    let mut cycle = 0;
    while !faults.is_empty() {
        let start_s = interval_s * (2 * cycle + 1) as f64;
        if start_s >= time_limit_s {
            break;
        }
        let stop_s = start_s + interval_s;
        let fault = *faults.choose(&mut rng).expect("faults is not empty");
        let bind = format!("f{cycle}");
        let (start, stop) = match fault {
            Fault::Kill => node_fault(
                &mut rng,
                &brokers,
                leader_key,
                Action::Kill,
                Action::Start,
                &bind,
            ),
            Fault::Pause => node_fault(
                &mut rng,
                &brokers,
                leader_key,
                Action::Pause,
                Action::Resume,
                &bind,
            ),
            Fault::Partition => partition_fault(&mut rng, nodes, leader_key),
        };
        steps.push(Step {
            at_s: Some(start_s),
            ..start
        });
        if stop_s < time_limit_s {
            steps.push(Step {
                at_s: Some(stop_s),
                ..stop
            });
        }
        cycle += 1;
    }
    let names: Vec<&str> = faults
        .iter()
        .map(|f| match f {
            Fault::Kill => "kill",
            Fault::Pause => "pause",
            Fault::Partition => "partition",
        })
        .collect();
    let plan = FaultPlan {
        name: "random".into(),
        description: format!(
            "random schedule: faults {} every {interval_s} s for {time_limit_s} s, seed {seed}",
            names.join(",")
        ),
        step: steps,
    };
    plan.validate()?;
    Ok(plan)
}

/// Kill or pause: which brokers, and the step that undoes it.
fn node_fault(
    rng: &mut StdRng,
    brokers: &[String],
    leader_key: &str,
    on: Action,
    off: Action,
    bind: &str,
) -> (Step, Step) {
    // Weights favour single-node faults and the leader, which exercise elections most.
    let choices: [(u32, &str); 6] = [
        (3, "one"),
        (2, "minority"),
        (1, "majority"),
        (1, "all"),
        (3, "leader"),
        (1, "controller"),
    ];
    let total: u32 = choices.iter().map(|c| c.0).sum();
    let mut roll = rng.gen_range(0..total);
    let choice = choices
        .iter()
        .find(|(w, _)| {
            let hit = roll < *w;
            roll = roll.saturating_sub(*w);
            hit
        })
        .map_or("one", |c| c.1);
    let count = match choice {
        "minority" => (brokers.len() / 2).max(1),
        "majority" => brokers.len() / 2 + 1,
        "all" => brokers.len(),
        _ => 1,
    };
    let target = match choice {
        "leader" => Target::Leader(leader_key.to_string()),
        "controller" => Target::Nodes(vec![CONTROLLER.to_string()]),
        _ => {
            let mut chosen: Vec<String> = brokers.choose_multiple(rng, count).cloned().collect();
            chosen.sort_by_key(|n| n[1..].parse::<u32>().unwrap_or(u32::MAX));
            Target::Nodes(chosen)
        }
    };
    let start = Step {
        target: Some(target),
        bind: Some(bind.to_string()),
        ..Step::new(on)
    };
    let stop = Step {
        target: Some(Target::Bound(bind.to_string())),
        ..Step::new(off)
    };
    (start, stop)
}

/// A partition shape over every node, and the heal after it.
fn partition_fault(rng: &mut StdRng, nodes: &[String], leader_key: &str) -> (Step, Step) {
    let mut shuffled = nodes.to_vec();
    shuffled.shuffle(rng);
    let shapes = [
        "isolate-one",
        "halves",
        "majorities-ring",
        "bridge",
        "isolate-leader",
        "isolate-controller",
    ];
    let shape = *shapes.choose(rng).expect("shapes is not empty");
    let start = match shape {
        "isolate-leader" => Step {
            target: Some(Target::Leader(leader_key.to_string())),
            ..Step::new(Action::Isolate)
        },
        "isolate-controller" => Step {
            target: Some(Target::Nodes(vec![CONTROLLER.to_string()])),
            ..Step::new(Action::Isolate)
        },
        "isolate-one" => Step {
            target: Some(Target::Nodes(vec![shuffled[0].clone()])),
            ..Step::new(Action::Isolate)
        },
        _ => {
            let grudge = match shape {
                "halves" => net::halves(&shuffled),
                "majorities-ring" => net::majorities_ring(&shuffled),
                _ => net::bridge(&shuffled),
            };
            Step {
                grudge: Some(grudge),
                note: Some(shape.to_string()),
                ..Step::new(Action::Partition)
            }
        }
    };
    (start, Step::new(Action::Heal))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> Vec<String> {
        ["c1", "n1", "n2", "n3", "n4", "n5"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_another_seed_another() {
        let all = [Fault::Kill, Fault::Pause, Fault::Partition];
        let a = random_plan(42, &all, 5.0, 120.0, &nodes(), "t0/0").unwrap();
        let b = random_plan(42, &all, 5.0, 120.0, &nodes(), "t0/0").unwrap();
        let c = random_plan(43, &all, 5.0, 120.0, &nodes(), "t0/0").unwrap();
        assert_eq!(a, b);
        assert_ne!(a.step, c.step);
    }

    #[test]
    fn faults_alternate_with_their_repair_within_the_time_limit() {
        let plan =
            random_plan(7, &[Fault::Kill, Fault::Pause], 5.0, 60.0, &nodes(), "t0/0").unwrap();
        let times: Vec<f64> = plan.step.iter().map(|s| s.at_s.unwrap()).collect();
        assert_eq!(
            times,
            [5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0, 45.0, 50.0, 55.0]
        );
        for pair in plan.step.chunks(2) {
            let undo = match pair[0].action {
                Action::Kill => Action::Start,
                Action::Pause => Action::Resume,
                other => panic!("unexpected {other:?}"),
            };
            if let [start, stop] = pair {
                assert_eq!(stop.action, undo);
                assert_eq!(
                    stop.target,
                    Some(Target::Bound(start.bind.clone().unwrap()))
                );
            }
        }
    }

    #[test]
    fn random_partitions_are_stored_as_concrete_grudges_or_targets() {
        let plan = random_plan(3, &[Fault::Partition], 2.0, 200.0, &nodes(), "t0/0").unwrap();
        for step in plan.step.iter().filter(|s| s.action != Action::Heal) {
            match step.action {
                Action::Partition => assert!(step.grudge.as_ref().is_some_and(|g| !g.is_empty())),
                Action::Isolate => assert!(step.target.is_some()),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(plan.step.iter().any(|s| s.action == Action::Partition));
        assert!(plan.step.iter().any(|s| s.action == Action::Isolate));
    }

    #[test]
    fn no_faults_means_an_empty_schedule_and_bad_words_are_refused() {
        assert!(parse_faults("none").unwrap().is_empty());
        assert_eq!(
            parse_faults("kill, partition,kill").unwrap(),
            [Fault::Kill, Fault::Partition]
        );
        assert!(parse_faults("kill,explode")
            .unwrap_err()
            .0
            .contains("explode"));
        let plan = random_plan(1, &[], 5.0, 60.0, &nodes(), "t0/0").unwrap();
        assert!(plan.step.is_empty());
        assert!(random_plan(1, &[Fault::Kill], 0.1, 60.0, &nodes(), "t0/0").is_err());
    }
}
