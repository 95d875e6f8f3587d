//! The runner's side of the nemesis: resolving the fault schedule before the run (stored in
//! `config.json` as a fault plan, so `--replay` repeats exactly these faults), running it
//! during the main phase, and the final step that heals, resumes and restarts every node.

use super::config::RunConfig;
use crate::cluster::{node_list, Cluster};
use crate::nemesis::{
    self,
    schedule::{parse_faults, parse_faults_for},
    ClusterView, Fault, FaultPlan, Nemesis, NemesisOp,
};
use crate::recorder::Recorder;
use serde_json::Value;
use std::net::Ipv4Addr;
use std::sync::Arc;
use tokio::time::Instant;

/// Writes the nemesis's operations into the run's history.
struct HistoryRecorder(Arc<Recorder>);

impl nemesis::Recorder for HistoryRecorder {
    fn nemesis(&self, op: NemesisOp, error: Option<String>) {
        // A fault that could not be applied keeps its error next to it in the history.
        self.0.nemesis(&op, error);
    }
}

/// The fault plan of a run: the named plan, or the random schedule drawn from the seed for
/// `--nemesis`, or an empty plan. As JSON, for `config.json`.
pub fn resolve_schedule(config: &RunConfig) -> Result<Value, String> {
    let plan = match &config.plan {
        Some(name) => {
            let plan = FaultPlan::load(name).map_err(|e| e.to_string())?;
            plan.check_fits(config.time_limit_s)
                .map_err(|e| format!("plan {name}: {e}"))?;
            plan
        }
        None if config.nemesis.is_empty() => FaultPlan {
            name: "none".into(),
            description: "no faults".into(),
            step: Vec::new(),
        },
        None => {
            // flush.messages=1: every acknowledged write is on disk, so a correct broker
            // survives every broker losing power at once (`parse_faults_for`).
            let every_append_fsynced = config
                .sets
                .get("flush.messages")
                .is_some_and(|v| v.trim() == "1");
            let faults = parse_faults_for(&config.nemesis.join(","), every_append_fsynced)
                .map_err(|e| e.to_string())?;
            // Only the names matter to the schedule; addresses are the cluster's business.
            let nodes: Vec<String> = node_list(config.nodes, 0, |_| Ipv4Addr::LOCALHOST)
                .into_iter()
                .map(|n| n.name)
                .collect();
            let timeouts = nemesis::ClusterTimeouts::from_settings(&config.sets)?;
            // Idempotent producers lead with a leader change whose writes are in flight
            // (`docs/nemesis.md`, "The leading faults").
            nemesis::random_plan_for(
                config.seed,
                &faults,
                config.nemesis_interval_s,
                config.time_limit_s as f64,
                &nodes,
                &config.fault_key(),
                timeouts,
                config.idempotence,
            )
            .map_err(|e| e.to_string())?
        }
    };
    serde_json::to_value(&plan).map_err(|e| format!("fault plan: {e}"))
}

/// The fault kinds (`kill`, `pause`, `partition`: the `X` of the history's `start-X`) a run
/// asks for: those its resolved schedule starts, and for a random schedule the kinds named
/// by `--nemesis` even when none fitted in the time limit. The checker calls a run that
/// injected none of them untested (`unknown`).
pub fn requested_faults(config: &RunConfig) -> Vec<String> {
    let mut kinds = scheduled_faults(config);
    if config.plan.is_none() {
        kinds.extend(config.nemesis.iter().cloned());
    }
    kinds.sort();
    kinds.dedup();
    kinds
}

/// Whether the run cuts nodes' power: its schedule (resolved here if the config does not hold
/// it yet) has a `power-loss` step, or its `--nemesis` names the family or a kind of it. Such
/// a run needs a lossy filesystem under the nodes' data (mounted by either backend).
pub fn cuts_power(config: &RunConfig) -> bool {
    let named = config.plan.is_none()
        && parse_faults(&config.nemesis.join(",")).is_ok_and(|kinds| {
            kinds
                .iter()
                .any(|k| k.families().contains(&Fault::PowerLoss))
        });
    if named {
        return true;
    }
    let resolved;
    let config = if config.schedule.is_null() {
        let Ok(schedule) = resolve_schedule(config) else {
            return false;
        };
        resolved = RunConfig {
            schedule,
            ..config.clone()
        };
        &resolved
    } else {
        config
    };
    scheduled_faults(config)
        .iter()
        .any(|k| *k == Fault::PowerLoss.name())
}

/// The fault kinds the resolved schedule of a run starts.
fn scheduled_faults(config: &RunConfig) -> Vec<String> {
    let Ok(plan) = serde_json::from_value::<FaultPlan>(config.schedule.clone()) else {
        return Vec::new();
    };
    let mut kinds: Vec<String> = plan
        .step
        .iter()
        .filter_map(|step| step.action.fault())
        .map(|fault| fault.name().to_string())
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

/// A warning for a random schedule that asks for faults but fits none into the time limit
/// (such a run tests nothing under faults and will be `unknown`), or for a plan whose last
/// steps start after the time limit and so will not run.
pub fn schedule_warning(config: &RunConfig) -> Option<String> {
    if let Some(name) = &config.plan {
        return plan_cut_warning(config, name);
    }
    if config.nemesis.is_empty() || !scheduled_faults(config).is_empty() {
        return None;
    }
    Some(format!(
        "--time-limit {} leaves no room for a fault of the random schedule (--nemesis {} \
         --nemesis-interval {}): no fault will be injected and the verdict will be unknown",
        config.time_limit_s,
        config.nemesis.join(","),
        config.nemesis_interval_s
    ))
}

/// Names the steps of the run's plan that start at or after `--time-limit`: the nemesis stops
/// at the first of them, and the final step heals, resumes and restarts everything instead.
fn plan_cut_warning(config: &RunConfig, name: &str) -> Option<String> {
    let plan = serde_json::from_value::<FaultPlan>(config.schedule.clone()).ok()?;
    let late = plan.steps_after(config.time_limit_s as f64);
    let (first, start_s) = late.first()?;
    let steps = match plan.step.len() {
        last if last == *first => format!("step {first} of plan {name} starts"),
        last => format!("steps {first} to {last} of plan {name} start"),
    };
    Some(format!(
        "{steps} at {start_s} s or later, not before --time-limit {}, and will not run (the \
         final step heals, resumes and restarts every node)",
        config.time_limit_s
    ))
}

/// The stored plan of a run.
pub fn stored_plan(config: &RunConfig) -> Result<FaultPlan, String> {
    let plan: FaultPlan = serde_json::from_value(config.schedule.clone())
        .map_err(|e| format!("config.json schedule is not a fault plan: {e}"))?;
    plan.validate().map_err(|e| e.to_string())?;
    Ok(plan)
}

/// A nemesis running its plan during the main phase.
pub struct NemesisHandle {
    /// Runs the plan and hands the nemesis back for the final step.
    task: tokio::task::JoinHandle<(Nemesis, usize)>,
}

/// Starts the run's plan now, resolving its targets against `view`; it ends by itself at
/// `deadline` (the end of the main phase).
pub fn spawn(
    config: &RunConfig,
    cluster: Arc<dyn Cluster>,
    view: Arc<dyn ClusterView>,
    recorder: Arc<Recorder>,
    deadline: Instant,
) -> Result<NemesisHandle, String> {
    let plan = stored_plan(config)?;
    let mut nemesis = Nemesis::new(
        cluster,
        view,
        Arc::new(HistoryRecorder(recorder)),
        config.seed,
    );
    let started = Instant::now();
    let task = tokio::spawn(async move {
        let steps = nemesis.run(&plan, started, deadline).await;
        (nemesis, steps)
    });
    Ok(NemesisHandle { task })
}

impl NemesisHandle {
    /// Waits for the plan to end (it stops at the deadline by itself), then runs the final
    /// step: heal, resume and start everything. Returns how many steps ran.
    pub async fn finish(self) -> Result<usize, String> {
        let (mut nemesis, steps) = self
            .task
            .await
            .map_err(|e| format!("nemesis task failed: {e}"))?;
        nemesis.final_step().await?;
        Ok(steps)
    }
}

/// The final step for when the nemesis task itself failed: heal, resume, start, recorded.
pub async fn final_step_without_plan(
    cluster: Arc<dyn Cluster>,
    view: Arc<dyn ClusterView>,
    recorder: Arc<Recorder>,
    seed: u64,
) -> Result<(), String> {
    let mut nemesis = Nemesis::new(cluster, view, Arc::new(HistoryRecorder(recorder)), seed);
    nemesis.final_step().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_random_schedule_follows_the_seed_and_is_stored_as_a_plan() {
        let mut c = super::super::config::example();
        c.time_limit_s = 60;
        let a = resolve_schedule(&c).unwrap();
        assert_eq!(a, resolve_schedule(&c).unwrap(), "same seed, same schedule");
        c.seed += 1;
        assert_ne!(a, resolve_schedule(&c).unwrap());
        c.schedule = a;
        let plan = stored_plan(&c).unwrap();
        assert!(!plan.step.is_empty());
    }

    #[test]
    fn the_power_loss_family_cuts_every_broker_at_once_only_when_every_append_is_fsynced() {
        let mut c = super::super::config::example();
        c.time_limit_s = 120;
        c.nemesis_interval_s = 5.0;
        c.nemesis = ["kill", "pause", "partition", "power-loss"]
            .map(String::from)
            .to_vec();
        // The harness's timeouts (`tidewater run` sets them), which make faults short.
        c.sets
            .insert("broker.session.timeout.ms".into(), "4000".into());
        c.sets
            .insert("replica.lag.time.max.ms".into(), "2500".into());
        // The seeds of 1..=200 whose schedule holds a fault `power-loss-all` (weight 1 of 46,
        // drawn after the three leading faults).
        let cut_all = |c: &mut RunConfig| -> Vec<u64> {
            (1..=200)
                .filter(|seed| {
                    c.seed = *seed;
                    let plan = stored_plan(&RunConfig {
                        schedule: resolve_schedule(c).unwrap(),
                        ..c.clone()
                    })
                    .unwrap();
                    plan.step.iter().any(|s| {
                        s.note
                            .as_deref()
                            .is_some_and(|n| n.ends_with(": power-loss-all"))
                    })
                })
                .collect()
        };
        assert_eq!(cut_all(&mut c), Vec::<u64>::new());
        c.sets.insert("flush.messages".into(), "1".into());
        assert!(!cut_all(&mut c).is_empty(), "flush.messages=1 draws it");
        c.sets.remove("flush.messages");
        c.nemesis.push("power-loss-all".into());
        assert!(!cut_all(&mut c).is_empty(), "named, it is drawn");
    }

    #[test]
    fn named_plans_and_no_faults_resolve() {
        let mut c = super::super::config::example();
        c.plan = Some("unclean-election".into());
        c.schedule = resolve_schedule(&c).unwrap();
        assert_eq!(stored_plan(&c).unwrap().name, "unclean-election");
        c.plan = None;
        c.nemesis.clear();
        c.schedule = resolve_schedule(&c).unwrap();
        assert!(stored_plan(&c).unwrap().step.is_empty());
        c.plan = Some("no-such-plan".into());
        assert!(resolve_schedule(&c).unwrap_err().contains("no-such-plan"));
    }

    #[test]
    fn a_plan_cut_by_the_time_limit_is_warned_about_and_one_that_never_starts_is_refused() {
        let mut c = super::super::config::example();
        c.plan = Some("partition-shapes".into());
        c.time_limit_s = 60;
        c.schedule = resolve_schedule(&c).unwrap();
        let warning = schedule_warning(&c).unwrap();
        assert!(
            warning.starts_with("steps 7 to 8 of plan partition-shapes start at 65 s or later"),
            "{warning}"
        );
        assert!(warning.contains("not before --time-limit 60"), "{warning}");
        c.time_limit_s = 70;
        assert!(schedule_warning(&c).unwrap().starts_with("step 8 of plan"));
        c.time_limit_s = 80;
        assert_eq!(schedule_warning(&c), None, "every step runs");
        c.time_limit_s = 5;
        let e = resolve_schedule(&c).unwrap_err();
        assert!(
            e.starts_with("plan partition-shapes: no step can run within --time-limit 5"),
            "{e}"
        );
    }
}
