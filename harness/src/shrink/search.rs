//! The search of `tidewater shrink`: the run's schedule rerun as a baseline, then delta
//! debugging over its steps, each step's delay halved, each step's target narrowed, and the
//! main phase cut to what the plan needs. Every candidate is rerun up to n times (through a
//! [`Rerunner`], the real cluster or a test's stand-in) and kept when the anomaly class
//! appears in k of them; the attempts are recorded as they end.

use super::ddmin::{ddmin, Outcome};
use super::reduce;
use crate::nemesis::FaultPlan;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// A plan to try: the fault plan and the main phase it runs in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// The fault plan.
    pub plan: FaultPlan,
    /// `--time-limit` of its reruns, in seconds.
    pub time_limit_s: u64,
}

impl Candidate {
    /// What tells two candidates apart, for the cache of tested ones.
    fn key(&self) -> String {
        format!("{} {}", self.time_limit_s, self.plan.to_json())
    }
}

/// The phases of the search, in their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// The schedule as the run had it: does it fail again?
    Baseline,
    /// Fewer steps (ddmin).
    Steps,
    /// Shorter delays.
    Durations,
    /// Fewer nodes per step.
    Nodes,
    /// A shorter main phase.
    Length,
}

impl Phase {
    /// The name in `shrink.md`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Baseline => "baseline",
            Phase::Steps => "steps",
            Phase::Durations => "durations",
            Phase::Nodes => "nodes",
            Phase::Length => "length",
        }
    }
}

/// One rerun of a candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rerun {
    /// Its run directory.
    pub run_dir: String,
    /// Its exit code (1 invalid, 0 valid, 2 unknown, 4 no recovery).
    pub exit_code: i32,
    /// Whether its results hold the anomaly class (invalidating, at least one instance).
    pub class_seen: bool,
    /// How many instances of the class it found.
    pub class_count: u64,
    /// When its last planned fault op ran, in seconds into the main phase (from its history),
    /// for the length phase.
    pub last_fault_s: Option<f64>,
}

/// One candidate tried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// Numbered from 1 in the order tried.
    pub number: usize,
    /// The phase that proposed it.
    pub phase: Phase,
    /// What it changed from the best plan so far.
    pub change: String,
    /// Its steps and main phase.
    pub candidate: Candidate,
    /// Its reruns (fewer than n when k were reached, or could no longer be).
    pub reruns: Vec<Rerun>,
    /// How many reruns showed the class.
    pub failed: usize,
    /// Whether it became the best plan (the class in k of n).
    pub kept: bool,
    /// Wall-clock seconds its reruns took.
    pub seconds: f64,
}

/// Runs a candidate on a cluster (or stands in for one in tests) and hears of each attempt.
pub trait Rerunner {
    /// Runs `candidate` once, as rerun `rerun` (from 1) of attempt `attempt`. An error (setup
    /// failed, a harness error) ends the search.
    fn rerun(
        &mut self,
        candidate: &Candidate,
        attempt: usize,
        rerun: usize,
    ) -> Result<Rerun, String>;

    /// Called after every attempt, so that a report can be rewritten as the search goes.
    fn attempted(&mut self, _search: &Search) {}
}

/// The bounds of a search.
#[derive(Debug, Clone)]
pub struct Bounds {
    /// Reruns per candidate (n).
    pub reruns: usize,
    /// Reruns with the class that keep a candidate (k).
    pub need: usize,
    /// Most candidates tried, the baseline included.
    pub max_attempts: usize,
    /// No attempt starts after this.
    pub deadline: Option<Instant>,
}

/// A search under way, and its record.
#[derive(Debug, Clone)]
pub struct Search {
    /// Its bounds.
    pub bounds: Bounds,
    /// The schedule of the run being shrunk.
    pub original: Candidate,
    /// The smallest candidate that failed in k of n so far.
    pub best: Candidate,
    /// The reruns of `best` that showed the class.
    best_reruns: Vec<Rerun>,
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
    /// Candidates already tried, and whether they were kept.
    tried: BTreeMap<String, bool>,
    /// Why the search stopped early, if it did (budget, deadline).
    pub stopped: Option<String>,
    /// Whether the baseline failed in k of n.
    pub reproduced: bool,
}

impl Search {
    /// A search from `original` (which must have at least one step).
    pub fn new(original: Candidate, bounds: Bounds) -> Search {
        assert!(
            bounds.need >= 1 && bounds.need <= bounds.reruns,
            "1 <= k <= n"
        );
        assert!(!original.plan.step.is_empty(), "a plan to shrink");
        Search {
            bounds,
            best: original.clone(),
            original,
            best_reruns: Vec::new(),
            attempts: Vec::new(),
            tried: BTreeMap::new(),
            stopped: None,
            reproduced: false,
        }
    }

    /// Runs every phase; stops after the baseline when it does not fail in k of n.
    pub fn run(&mut self, rerunner: &mut dyn Rerunner) -> Result<(), String> {
        let original = self.original.clone();
        self.reproduced = self.attempt(
            rerunner,
            original,
            Phase::Baseline,
            "none: the schedule as the run had it".into(),
        )?;
        if !self.reproduced {
            return Ok(());
        }
        self.fewer_steps(rerunner)?;
        self.shorter_delays(rerunner)?;
        self.fewer_nodes(rerunner)?;
        self.shorter_run(rerunner)
    }

    /// Tries one candidate (unless tried before, or the budget is spent): reruns it until k
    /// reruns show the class or k can no longer be reached; keeps it as the best if k did.
    fn attempt(
        &mut self,
        rerunner: &mut dyn Rerunner,
        candidate: Candidate,
        phase: Phase,
        change: String,
    ) -> Result<bool, String> {
        if let Some(kept) = self.tried.get(&candidate.key()) {
            return Ok(*kept);
        }
        if self.stopped.is_some() || self.out_of_budget() {
            return Ok(false);
        }
        let number = self.attempts.len() + 1;
        let started = Instant::now();
        let Bounds { reruns, need, .. } = self.bounds;
        let mut done: Vec<Rerun> = Vec::new();
        let mut failed = 0;
        while failed < need && failed + (reruns - done.len()) >= need {
            let rerun = rerunner.rerun(&candidate, number, done.len() + 1)?;
            failed += usize::from(rerun.class_seen);
            done.push(rerun);
        }
        let kept = failed >= need;
        self.tried.insert(candidate.key(), kept);
        if kept {
            self.best = candidate.clone();
            self.best_reruns = done.iter().filter(|r| r.class_seen).cloned().collect();
        }
        self.attempts.push(Attempt {
            number,
            phase,
            change,
            candidate,
            reruns: done,
            failed,
            kept,
            seconds: started.elapsed().as_secs_f64(),
        });
        rerunner.attempted(self);
        Ok(kept)
    }

    /// Whether the attempt budget or the deadline is spent (and says so once).
    fn out_of_budget(&mut self) -> bool {
        let reason = if self.attempts.len() >= self.bounds.max_attempts {
            format!("--max-attempts {} reached", self.bounds.max_attempts)
        } else if self.bounds.deadline.is_some_and(|d| Instant::now() >= d) {
            "--time-limit reached".to_string()
        } else {
            return false;
        };
        self.stopped = Some(reason);
        true
    }

    /// Delta debugging over the best plan's steps.
    fn fewer_steps(&mut self, rerunner: &mut dyn Rerunner) -> Result<(), String> {
        let whole = self.best.clone();
        let indexes: Vec<usize> = (0..whole.plan.step.len()).collect();
        ddmin::<usize, String>(indexes, &mut |subset: &[usize]| {
            let (plan, kept) = reduce::keep_steps(&whole.plan, subset);
            if kept.is_empty() || kept.len() == whole.plan.step.len() {
                return Ok(Outcome::Passes);
            }
            let removed: Vec<String> = (0..whole.plan.step.len())
                .filter(|i| !kept.contains(i))
                .map(|i| {
                    let step = reduce::describe_step(&whole.plan.step[i]);
                    format!("{} ({step})", i + 1)
                })
                .collect();
            let change = format!(
                "removed step{} {} of the baseline",
                if removed.len() == 1 { "" } else { "s" },
                removed.join(", ")
            );
            let candidate = Candidate {
                plan,
                time_limit_s: whole.time_limit_s,
            };
            Ok(
                match self.attempt(rerunner, candidate, Phase::Steps, change)? {
                    true => Outcome::Fails(kept),
                    false => Outcome::Passes,
                },
            )
        })?;
        Ok(())
    }

    /// Halves each step's delay while the plan still fails.
    fn shorter_delays(&mut self, rerunner: &mut dyn Rerunner) -> Result<(), String> {
        for index in 0..self.best.plan.step.len() {
            while let Some((plan, old_s, new_s)) = reduce::halve_delay(&self.best.plan, index) {
                let step = reduce::describe_step(&self.best.plan.step[index]);
                let change = format!("step {} ({step}): delay {old_s} s -> {new_s} s", index + 1);
                let candidate = Candidate {
                    plan,
                    time_limit_s: self.best.time_limit_s,
                };
                if !self.attempt(rerunner, candidate, Phase::Durations, change)? {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Narrows each step's target while the plan still fails.
    fn fewer_nodes(&mut self, rerunner: &mut dyn Rerunner) -> Result<(), String> {
        for index in 0..self.best.plan.step.len() {
            'narrowed: loop {
                let step = reduce::describe_step(&self.best.plan.step[index]);
                for (plan, line) in reduce::narrower(&self.best.plan, index) {
                    let candidate = Candidate {
                        plan,
                        time_limit_s: self.best.time_limit_s,
                    };
                    let change = format!("step {} ({step}): {line}", index + 1);
                    if self.attempt(rerunner, candidate, Phase::Nodes, change)? {
                        continue 'narrowed;
                    }
                }
                break;
            }
        }
        Ok(())
    }

    /// Cuts the main phase to what the plan needs: a second or two after the last fault of
    /// the best plan's failing reruns (or its last step's earliest start), then halfway.
    fn shorter_run(&mut self, rerunner: &mut dyn Rerunner) -> Result<(), String> {
        let last_fault_s = self
            .best_reruns
            .iter()
            .filter_map(|r| r.last_fault_s)
            .fold(0.0_f64, f64::max);
        let last_start_s = self
            .best
            .plan
            .earliest_starts_s()
            .last()
            .copied()
            .unwrap_or(0.0);
        let needed_s = (last_fault_s.max(last_start_s) + 2.0).ceil() as u64;
        let current_s = self.best.time_limit_s;
        let mut tries = vec![needed_s, (needed_s + current_s) / 2];
        tries.dedup();
        for time_limit_s in tries.into_iter().filter(|t| *t < current_s) {
            let change = format!(
                "--time-limit {} -> {time_limit_s} (the last fault ran at {:.1} s)",
                self.best.time_limit_s,
                last_fault_s.max(last_start_s)
            );
            let candidate = Candidate {
                plan: self.best.plan.clone(),
                time_limit_s,
            };
            if self.attempt(rerunner, candidate, Phase::Length, change)? {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::{Action, Target, When};

    /// Stands in for the cluster: a candidate fails when its plan kills `isr:t0/0` (or a
    /// narrowing of it) and heals, with every delay at least 1 s, in a main phase of at least
    /// 20 s.
    struct Model {
        runs: usize,
        /// Every `rerun`-th run fails to show the class, to exercise k of n.
        flaky_every: Option<usize>,
    }

    impl Model {
        fn fails(candidate: &Candidate) -> bool {
            let plan = &candidate.plan;
            let kills_isr = plan.step.iter().any(|s| {
                matches!(
                    &s.action,
                    Action::Kill {
                        target: Target::Isr(_) | Target::Except(..)
                    }
                )
            });
            let heals = plan.step.iter().any(|s| matches!(s.action, Action::Heal));
            let delays_ok = plan.step.iter().all(|s| match s.when {
                When::After { after_s } => after_s >= 1.0,
                When::At { at_s } => at_s >= 1.0,
                When::Now => true,
            });
            kills_isr && heals && delays_ok && candidate.time_limit_s >= 20
        }
    }

    impl Rerunner for Model {
        fn rerun(&mut self, c: &Candidate, attempt: usize, rerun: usize) -> Result<Rerun, String> {
            self.runs += 1;
            let flake = self
                .flaky_every
                .is_some_and(|n| self.runs.is_multiple_of(n));
            let seen = Model::fails(c) && !flake;
            Ok(Rerun {
                run_dir: format!("store/x-shrink/a{attempt}r{rerun}"),
                exit_code: if seen { 1 } else { 0 },
                class_seen: seen,
                class_count: u64::from(seen),
                last_fault_s: Some(9.0),
            })
        }
    }

    fn unclean() -> Candidate {
        Candidate {
            plan: FaultPlan::load("unclean-election").unwrap(),
            time_limit_s: 45,
        }
    }

    fn bounds(reruns: usize, need: usize, max_attempts: usize) -> Bounds {
        Bounds {
            reruns,
            need,
            max_attempts,
            deadline: None,
        }
    }

    #[test]
    fn the_search_keeps_only_what_the_failure_needs() {
        let mut model = Model {
            runs: 0,
            flaky_every: None,
        };
        let mut search = Search::new(unclean(), bounds(1, 1, 100));
        search.run(&mut model).unwrap();
        assert!(search.reproduced && search.stopped.is_none());
        let steps = reduce::describe_steps(&search.best.plan);
        // Heal, then kill the ISR spared one follower, with delays the model still allows.
        assert_eq!(steps.len(), 2, "{steps:?}");
        assert!(steps.iter().any(|s| s.contains("heal")), "{steps:?}");
        assert!(
            steps
                .iter()
                .any(|s| s.contains("kill isr:t0/0 except follower:t0/0")),
            "{steps:?}"
        );
        // 11 s (the last fault at 9 s, plus 2) is too short for the model; halfway, 28 s, is not.
        assert_eq!(search.best.time_limit_s, 28);
        // Every attempt is numbered, ran one rerun, and the kept ones are those that failed.
        for (i, a) in search.attempts.iter().enumerate() {
            assert_eq!(a.number, i + 1);
            assert_eq!(a.reruns.len(), 1);
            assert_eq!(a.kept, Model::fails(&a.candidate));
            assert_eq!(a.failed, usize::from(a.kept));
        }
        assert_eq!(model.runs, search.attempts.len(), "no candidate ran twice");
        assert_eq!(search.attempts[0].phase, Phase::Baseline);
        assert!(Model::fails(&search.best));
    }

    #[test]
    fn k_of_n_reruns_decide_and_stop_as_soon_as_decided() {
        // Every third run misses the class: a failing candidate needs 2 of 3.
        let mut model = Model {
            runs: 0,
            flaky_every: Some(3),
        };
        let mut search = Search::new(unclean(), bounds(3, 2, 100));
        search.run(&mut model).unwrap();
        for a in &search.attempts {
            assert_eq!(a.kept, a.failed >= 2);
            assert!(a.reruns.len() <= 3);
            let failed = a.reruns.iter().filter(|r| r.class_seen).count();
            assert_eq!(failed, a.failed);
            // Stopped once 2 failed, or once 2 could no longer fail.
            let decided = a.reruns.len() == 3 || failed == 2 || a.reruns.len() - failed >= 2;
            assert!(decided, "{a:?}");
        }
        assert!(Model::fails(&search.best));
    }

    #[test]
    fn the_budget_bounds_the_attempts_and_says_so() {
        let mut model = Model {
            runs: 0,
            flaky_every: None,
        };
        let mut search = Search::new(unclean(), bounds(1, 1, 4));
        search.run(&mut model).unwrap();
        assert_eq!(search.attempts.len(), 4);
        assert_eq!(search.stopped.as_deref(), Some("--max-attempts 4 reached"));
        assert!(Model::fails(&search.best));
    }

    #[test]
    fn a_baseline_that_does_not_fail_again_ends_the_search() {
        let mut model = Model {
            runs: 0,
            flaky_every: None,
        };
        let mut original = unclean();
        original.time_limit_s = 10;
        let mut search = Search::new(original.clone(), bounds(2, 1, 100));
        search.run(&mut model).unwrap();
        assert!(!search.reproduced);
        assert_eq!(search.attempts.len(), 1);
        assert_eq!(
            search.attempts[0].reruns.len(),
            2,
            "both reruns were needed to be sure"
        );
        assert_eq!(search.best, original);
    }
}
