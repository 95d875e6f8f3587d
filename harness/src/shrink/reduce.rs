//! The ways a fault plan gets smaller, as pure functions of the plan: keeping a subset of its
//! steps (dropping what refers to a binding no kept step makes, and keeping every remaining
//! step's time), halving one step's delay, and narrowing one step's target to fewer nodes.

use crate::nemesis::{Action, FaultPlan, Partition, Step, Target, When};
use std::collections::BTreeSet;

/// Shortest delay the duration phase halves a step's `at_s` or `after_s` down to, in seconds:
/// below it the halving changes nothing a run could tell.
pub const DELAY_MIN_S: f64 = 0.5;

/// The plan keeping only the steps at `keep` (indexes into `plan.step`, any order), and the
/// indexes it really kept. A kept step that refers to `@name` when no kept step before it
/// binds `name` is dropped as well (it could not run), and every kept step starts when it
/// did in `plan`: the `after_s` of dropped steps is carried into the next kept one, and a
/// dropped `at_s` becomes that step's own.
pub fn keep_steps(plan: &FaultPlan, keep: &[usize]) -> (FaultPlan, Vec<usize>) {
    let wanted: BTreeSet<usize> = keep.iter().copied().collect();
    let mut bound: BTreeSet<&str> = BTreeSet::new();
    let mut kept = Vec::new();
    let mut steps = Vec::new();
    // Time of the dropped steps since the last kept one: an absolute start, then seconds.
    let (mut anchor_s, mut carried_s): (Option<f64>, f64) = (None, 0.0);
    for (i, step) in plan.step.iter().enumerate() {
        let runnable = step_bindings(step).iter().all(|name| bound.contains(name));
        if !(wanted.contains(&i) && runnable) {
            match step.when {
                When::At { at_s } => (anchor_s, carried_s) = (Some(at_s), 0.0),
                When::After { after_s } => carried_s += after_s,
                When::Now => {}
            }
            continue;
        }
        let when = match (step.when, anchor_s) {
            (When::At { at_s }, _) => When::At { at_s },
            (own, Some(at_s)) => When::At {
                at_s: round_ms(at_s + carried_s + own_after_s(own)),
            },
            (own, None) if carried_s + own_after_s(own) > 0.0 => When::After {
                after_s: round_ms(carried_s + own_after_s(own)),
            },
            (own, None) => own,
        };
        (anchor_s, carried_s) = (None, 0.0);
        if let Some(name) = &step.bind {
            bound.insert(name);
        }
        kept.push(i);
        steps.push(Step {
            when,
            ..step.clone()
        });
    }
    let smaller = FaultPlan {
        step: steps,
        ..plan.clone()
    };
    debug_assert!(
        smaller.validate().is_ok(),
        "kept steps refer only to kept bindings"
    );
    (smaller, kept)
}

fn own_after_s(when: When) -> f64 {
    match when {
        When::After { after_s } => after_s,
        When::Now | When::At { .. } => 0.0,
    }
}

/// The binding names (`@name`) a step's targets refer to.
fn step_bindings(step: &Step) -> Vec<&str> {
    let from = match &step.action {
        Action::Cut { from, .. } => Some(from),
        _ => None,
    };
    [step.action.target(), from]
        .into_iter()
        .flatten()
        .flat_map(Target::bindings)
        .collect()
}

/// Seconds rounded to milliseconds, as the random schedule writes them.
fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

/// The plan with step `index`'s delay (`at_s` or `after_s`) halved (to a tenth of a second),
/// or `None` when it has none or it is already below twice [`DELAY_MIN_S`].
pub fn halve_delay(plan: &FaultPlan, index: usize) -> Option<(FaultPlan, f64, f64)> {
    let step = plan.step.get(index)?;
    let (old_s, when) = match step.when {
        When::At { at_s } => (at_s, When::At { at_s: half(at_s) }),
        When::After { after_s } => (
            after_s,
            When::After {
                after_s: half(after_s),
            },
        ),
        When::Now => return None,
    };
    if old_s < 2.0 * DELAY_MIN_S {
        return None;
    }
    let mut smaller = plan.clone();
    smaller.step[index].when = when;
    Some((smaller, old_s, half(old_s)))
}

fn half(s: f64) -> f64 {
    ((s / 2.0) * 10.0).round() / 10.0
}

/// Every way of making step `index` touch fewer nodes, each as a plan and a line saying what
/// changed: a node list or a union loses one member; `all`, `majority` and `minority` step
/// down to the next smaller random set; `isr:KEY` and `replicas:KEY` spare one follower; a
/// grudge forgets one node's drops.
pub fn narrower(plan: &FaultPlan, index: usize) -> Vec<(FaultPlan, String)> {
    let Some(step) = plan.step.get(index) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Action::Partition(Partition::Grudge(grudge)) = &step.action {
        for node in grudge.keys() {
            let mut fewer = grudge.clone();
            fewer.remove(node);
            if fewer.is_empty() {
                continue;
            }
            let mut smaller = plan.clone();
            smaller.step[index].action = Action::Partition(Partition::Grudge(fewer));
            out.push((smaller, format!("{node} drops nobody's traffic")));
        }
    }
    if let Some(target) = step.action.target() {
        for fewer in narrower_targets(target) {
            let mut smaller = plan.clone();
            let line = format!("target {target} -> {fewer}");
            smaller.step[index].action = with_target(&step.action, fewer);
            out.push((smaller, line));
        }
    }
    out
}

/// The targets naming fewer nodes than `target`, for the forms where that is clear.
fn narrower_targets(target: &Target) -> Vec<Target> {
    let spare_follower = |whole: Target, key: &str| {
        Target::Except(Box::new(whole), Box::new(Target::Follower(key.to_string())))
    };
    match target {
        Target::Nodes(nodes) if nodes.len() > 1 => (0..nodes.len())
            .map(|i| {
                let mut fewer = nodes.clone();
                fewer.remove(i);
                Target::Nodes(fewer)
            })
            .collect(),
        Target::Union(parts) if parts.len() > 1 => (0..parts.len())
            .map(|i| {
                let mut fewer = parts.clone();
                fewer.remove(i);
                match fewer.len() {
                    1 => fewer.remove(0),
                    _ => Target::Union(fewer),
                }
            })
            .collect(),
        Target::All => vec![Target::Majority],
        Target::Majority => vec![Target::Minority],
        Target::Minority => vec![Target::One],
        Target::Isr(key) => vec![spare_follower(target.clone(), key)],
        Target::Replicas(key) => vec![spare_follower(target.clone(), key)],
        _ => Vec::new(),
    }
}

/// `action` aimed at `target` instead (for the actions that take one).
fn with_target(action: &Action, target: Target) -> Action {
    use crate::nemesis::Wait;
    match action.clone() {
        Action::Isolate { .. } => Action::Isolate { target },
        Action::Cut { from, .. } => Action::Cut { target, from },
        Action::CutClients { .. } => Action::CutClients { target },
        Action::Kill { .. } => Action::Kill { target },
        Action::PowerLoss { torn, .. } => Action::PowerLoss { target, torn },
        Action::Stop { .. } => Action::Stop { target },
        Action::Start { .. } => Action::Start { target },
        Action::Restart { .. } => Action::Restart { target },
        Action::Pause { .. } => Action::Pause { target },
        Action::Resume { .. } => Action::Resume { target },
        Action::Wait(Wait::IsrShrink { key, timeout_s, .. }) => Action::Wait(Wait::IsrShrink {
            key,
            target,
            timeout_s,
        }),
        Action::Wait(Wait::IsrExpand { key, timeout_s, .. }) => Action::Wait(Wait::IsrExpand {
            key,
            target,
            timeout_s,
        }),
        Action::Wait(Wait::Leader { key, timeout_s, .. }) => Action::Wait(Wait::Leader {
            key,
            target: Some(target),
            timeout_s,
        }),
        other @ (Action::Heal | Action::Partition(_) | Action::Wait(Wait::IsrFull { .. })) => other,
    }
}

/// One line per step, numbered from 1, as `shrink.md` lists a plan: `3. kill @stale`.
pub fn describe_steps(plan: &FaultPlan) -> Vec<String> {
    plan.step
        .iter()
        .enumerate()
        .map(|(i, step)| format!("{}. {}", i + 1, describe_step(step)))
        .collect()
}

/// A step in a few words: its time, its action and target.
pub fn describe_step(step: &Step) -> String {
    let when = match step.when {
        When::Now => String::new(),
        When::At { at_s } => format!("at {at_s} s: "),
        When::After { after_s } => format!("after {after_s} s: "),
    };
    let what = match &step.action {
        Action::Cut { target, from } => format!("cut {target} from {from}"),
        Action::Partition(Partition::Grudge(grudge)) => {
            let parts: Vec<String> = grudge
                .iter()
                .map(|(node, drops)| {
                    format!(
                        "{node} drops {}",
                        drops.iter().cloned().collect::<Vec<_>>().join(",")
                    )
                })
                .collect();
            format!("partition ({})", parts.join("; "))
        }
        Action::Partition(Partition::Random(kind)) => format!("partition {}", kind.name()),
        action => match (action.target(), action) {
            (_, Action::Wait(wait)) => match action.target() {
                Some(t) => format!("{} {} {t}", action.name(), wait.key()),
                None => format!("{} {}", action.name(), wait.key()),
            },
            (Some(t), _) => format!("{} {t}", action.name()),
            (None, _) => action.name().to_string(),
        },
    };
    format!("{when}{what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> FaultPlan {
        FaultPlan::from_toml(text).unwrap()
    }

    const UNCLEAN: &str = "\
[[step]]\nat_s = 3\naction = \"isolate\"\ntarget = \"follower:t0/0\"\nbind = \"stale\"\n\
[[step]]\naction = \"wait-for-isr-shrink\"\nkey = \"t0/0\"\ntarget = \"@stale\"\n\
[[step]]\naction = \"kill\"\ntarget = \"@stale\"\n\
[[step]]\naction = \"heal\"\n\
[[step]]\nafter_s = 5\naction = \"kill\"\ntarget = \"isr:t0/0\"\nbind = \"isr\"\n\
[[step]]\nafter_s = 1\naction = \"start\"\ntarget = \"@stale\"\n\
[[step]]\nafter_s = 20\naction = \"start\"\ntarget = \"@isr\"\n";

    #[test]
    fn dropping_a_binding_step_drops_the_steps_that_use_it_and_keeps_every_start_time() {
        let whole = plan(UNCLEAN);
        let (smaller, kept) = keep_steps(&whole, &[1, 2, 3, 4, 5, 6]);
        assert_eq!(
            kept,
            vec![3, 4, 6],
            "the @stale steps cannot run without step 0"
        );
        // The heal ran right after the wait; with step 0 gone it starts at 3 s as step 0 did.
        assert_eq!(smaller.step[0].when, When::At { at_s: 3.0 });
        assert_eq!(smaller.step[1].when, When::After { after_s: 5.0 });
        // The dropped start's 1 s is carried into the next kept step.
        assert_eq!(smaller.step[2].when, When::After { after_s: 21.0 });
        assert!(smaller.validate().is_ok());
        assert_eq!(
            describe_steps(&smaller),
            vec![
                "1. at 3 s: heal",
                "2. after 5 s: kill isr:t0/0",
                "3. after 21 s: start @isr"
            ]
        );
        let (all, kept) = keep_steps(&whole, &[0, 1, 2, 3, 4, 5, 6]);
        assert_eq!((all, kept), (whole.clone(), (0..7).collect()));
        let (none, kept) = keep_steps(&whole, &[6]);
        assert!(none.step.is_empty() && kept.is_empty());
    }

    #[test]
    fn delays_halve_down_to_the_minimum() {
        let whole = plan(UNCLEAN);
        let (half, old_s, new_s) = halve_delay(&whole, 6).unwrap();
        assert_eq!((old_s, new_s), (20.0, 10.0));
        assert_eq!(half.step[6].when, When::After { after_s: 10.0 });
        assert_eq!(halve_delay(&whole, 1), None, "a step with no delay");
        let (_, _, new_s) = halve_delay(&whole, 5).unwrap();
        assert_eq!(new_s, 0.5);
        let mut short = whole.clone();
        short.step[5].when = When::After { after_s: 0.9 };
        assert_eq!(halve_delay(&short, 5), None);
        assert_eq!(halve_delay(&whole, 99), None);
    }

    #[test]
    fn targets_narrow_to_fewer_nodes() {
        let whole = plan(
            "[[step]]\naction = \"kill\"\ntarget = \"n1,n2,n3\"\n\
             [[step]]\naction = \"cut\"\ntarget = \"leader:t0/0\"\nfrom = \"controller+follower:t0/0\"\n\
             [[step]]\naction = \"kill\"\ntarget = \"isr:t0/0\"\n\
             [[step]]\naction = \"pause\"\ntarget = \"all\"\n\
             [[step]]\naction = \"partition\"\n[step.grudge]\nn1 = [\"n2\"]\nn2 = [\"n1\"]\n\
             [[step]]\naction = \"heal\"\n",
        );
        let lines =
            |i| -> Vec<String> { narrower(&whole, i).into_iter().map(|(_, l)| l).collect() };
        assert_eq!(
            lines(0),
            vec![
                "target n1,n2,n3 -> n2,n3",
                "target n1,n2,n3 -> n1,n3",
                "target n1,n2,n3 -> n1,n2"
            ]
        );
        assert!(
            lines(1).is_empty(),
            "a single leader cannot be narrowed; `from` is not the target"
        );
        assert_eq!(
            lines(2),
            vec!["target isr:t0/0 -> isr:t0/0 except follower:t0/0"]
        );
        assert_eq!(lines(3), vec!["target all -> majority"]);
        assert_eq!(
            lines(4),
            vec!["n1 drops nobody's traffic", "n2 drops nobody's traffic"]
        );
        assert!(lines(5).is_empty());
        for i in 0..5 {
            for (smaller, _) in narrower(&whole, i) {
                // Every narrower plan still parses as a plan file would.
                let back = FaultPlan::from_json(&smaller.to_json()).unwrap();
                assert_eq!(back, smaller);
            }
        }
    }
}
