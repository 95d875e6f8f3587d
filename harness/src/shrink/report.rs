//! What `tidewater shrink` writes beside the run: `shrunk-plan.toml` (the smallest plan that
//! failed in k of n, replayable with `tidewater run --plan`), `shrink.json` (the whole
//! search), `shrink.md` (the same for a reader: the plan, the replay command, a table of
//! attempts) and `shrink/attempt-N.toml` (each candidate, named by its reruns' configs).

use super::reduce::describe_steps;
use super::search::{Attempt, Candidate, Search};
use super::Origin;
use crate::nemesis::FaultPlan;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The files of one shrink, beside the run.
pub struct Outputs {
    /// The run directory.
    dir: PathBuf,
    /// n, for the report.
    pub reruns: usize,
    /// k, for the report.
    pub need: usize,
}

impl Outputs {
    /// The outputs of shrinking the run in `dir` with k of n.
    pub fn new(dir: &Path, reruns: usize, need: usize) -> Outputs {
        Outputs {
            dir: dir.to_path_buf(),
            reruns,
            need,
        }
    }

    /// `shrink.md`.
    pub fn markdown(&self) -> PathBuf {
        self.dir.join("shrink.md")
    }

    /// `shrunk-plan.toml`.
    pub fn shrunk_plan(&self) -> PathBuf {
        self.dir.join("shrunk-plan.toml")
    }

    /// Writes attempt `number`'s plan to `shrink/attempt-N.toml` (absolute, as reruns name it).
    pub fn write_attempt_plan(&self, number: usize, c: &Candidate) -> Result<PathBuf, String> {
        let dir = self.dir.join("shrink");
        std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        let path = dir.join(format!("attempt-{number}.toml"));
        let plan = FaultPlan {
            name: format!("shrink-attempt-{number}"),
            description: format!(
                "attempt {number} of tidewater shrink {}, for --time-limit {}",
                self.dir.display(),
                c.time_limit_s
            ),
            ..c.plan.clone()
        };
        write(&path, &plan.to_toml())?;
        Ok(path.canonicalize().unwrap_or(path))
    }

    /// Rewrites `shrink.json`, `shrink.md` and (once the baseline failed again)
    /// `shrunk-plan.toml` from the search so far.
    pub fn write(&self, origin: &Origin, search: &Search, elapsed: Duration) -> Result<(), String> {
        let replay = search
            .reproduced
            .then(|| self.replay_command(origin, &search.best));
        if search.reproduced {
            write(&self.shrunk_plan(), &self.shrunk(origin, search).to_toml())?;
        }
        let record = json!({
            "run_dir": origin.run_dir.display().to_string(),
            "anomaly": origin.class,
            "anomaly_count": origin.class_count,
            "reruns": self.reruns,
            "need": self.need,
            "original": search.original,
            "stored_steps": origin.stored_steps,
            "reproduced": search.reproduced,
            "best": search.best,
            "shrunk_plan": search.reproduced.then(|| self.shrunk_plan().display().to_string()),
            "replay": replay,
            "stopped": search.stopped,
            "seconds": elapsed.as_secs_f64(),
            "attempts": search.attempts,
        });
        let text = serde_json::to_string_pretty(&record).expect("the record serializes") + "\n";
        write(&self.dir.join("shrink.json"), &text)?;
        write(
            &self.markdown(),
            &self.render(origin, search, replay.as_deref(), elapsed),
        )
    }

    /// The best plan as `shrunk-plan.toml` holds it: named and described after its origin.
    fn shrunk(&self, origin: &Origin, search: &Search) -> FaultPlan {
        let kept = search.attempts.iter().rev().find(|a| a.kept);
        FaultPlan {
            name: format!("shrunk-{}", search.original.plan.name),
            description: format!(
                "Shrunk by `tidewater shrink {}` from {} ({}, --time-limit {}) to {} \
                 for --time-limit {}: {} of {} reruns showed {} (attempt {}).",
                origin.run_dir.display(),
                origin.config.plan.as_deref().map_or(
                    format!("the random schedule of seed {}", origin.config.seed),
                    |p| { format!("plan {p}") }
                ),
                steps_text(search.original.plan.step.len()),
                search.original.time_limit_s,
                steps_text(search.best.plan.step.len()),
                search.best.time_limit_s,
                kept.map_or(0, |a| a.failed),
                kept.map_or(0, |a| a.reruns.len()),
                origin.class,
                kept.map_or(0, |a| a.number),
            ),
            ..search.best.plan.clone()
        }
    }

    /// The command that replays the shrunk plan with the run's settings.
    fn replay_command(&self, origin: &Origin, best: &Candidate) -> String {
        let mut config = origin.config.clone();
        config.plan = Some(self.shrunk_plan().display().to_string());
        config.time_limit_s = best.time_limit_s;
        config.command_line()
    }

    fn render(
        &self,
        origin: &Origin,
        search: &Search,
        replay: Option<&str>,
        elapsed: Duration,
    ) -> String {
        let mut md = format!("# Shrinking {}\n\n", origin.run_dir.display());
        md.push_str(&format!(
            "Anomaly class kept: `{}` (the run found {}). {}\n\n",
            origin.class,
            origin.class_count,
            k_of_n(self.need, self.reruns)
        ));
        if !origin.not_shown.is_empty() {
            md.push_str(&format!(
                "The run did not show `{}`; a rerun that does fails as well.\n\n",
                origin.not_shown.join("`, `")
            ));
        }
        md.push_str(&format!(
            "The run's schedule: {}, `--time-limit {}`",
            steps_text(search.original.plan.step.len()),
            search.original.time_limit_s
        ));
        let late = origin.stored_steps - search.original.plan.step.len();
        if late > 0 {
            md.push_str(&format!(
                " ({late} more stored step{} never started before the time limit, dropped \
                 first)",
                if late == 1 { "" } else { "s" }
            ));
        }
        md.push_str(".\n\n");
        match replay {
            Some(cmd) => md.push_str(&format!(
                "Shrunk to {}, `--time-limit {}`, in `{}`. Replay (add `--subnet` or \
                 `--cluster` as for the run):\n\n    {cmd}\n\n",
                steps_text(search.best.plan.step.len()),
                search.best.time_limit_s,
                self.shrunk_plan().display()
            )),
            None => md.push_str(&format!(
                "The run's schedule did not show `{}` again in {} of {} reruns, so there is \
                 nothing to shrink reliably: no shrunk plan was written.\n\n",
                origin.class, self.need, self.reruns
            )),
        }
        if replay.is_some() {
            md.push_str("## The shrunk plan\n\n");
            for line in describe_steps(&search.best.plan) {
                md.push_str(&format!("{line}\n"));
            }
            md.push('\n');
        }
        md.push_str("## Attempts\n\n");
        md.push_str(&attempts_table(&origin.class, &search.attempts));
        let reruns: usize = search.attempts.iter().map(|a| a.reruns.len()).sum();
        md.push_str(&format!(
            "\n{} attempts, {reruns} reruns, {:.0} s in all.{}\n",
            search.attempts.len(),
            elapsed.as_secs_f64(),
            search
                .stopped
                .as_deref()
                .map_or(String::new(), |why| format!(" Stopped early: {why}."))
        ));
        md.push_str("\n## Reruns\n\n");
        for a in &search.attempts {
            for (i, r) in a.reruns.iter().enumerate() {
                md.push_str(&format!(
                    "- attempt {} rerun {}: exit {}, {} {}: `{}`\n",
                    a.number,
                    i + 1,
                    r.exit_code,
                    r.class_count,
                    origin.class,
                    r.run_dir
                ));
            }
        }
        md
    }
}

/// `1 step`, `3 steps`.
pub fn steps_text(n: usize) -> String {
    match n {
        1 => "1 step".into(),
        n => format!("{n} steps"),
    }
}

/// How candidates were judged, in a sentence.
pub fn k_of_n(need: usize, reruns: usize) -> String {
    match reruns {
        1 => "Each candidate was rerun once and kept when that rerun showed it.".into(),
        n => format!(
            "Each candidate was rerun up to {n} times and kept when {need} of them showed it."
        ),
    }
}

/// The table of attempts, in Markdown (also what the terminal shows at the end).
pub fn attempts_table(class: &str, attempts: &[Attempt]) -> String {
    let mut t = format!(
        "| # | phase | change | steps | time limit | reruns with {class} | kept | time |\n\
         |---|---|---|---|---|---|---|---|\n"
    );
    for a in attempts {
        t.push_str(&format!(
            "| {} | {} | {} | {} | {} s | {} of {} | {} | {:.0} s |\n",
            a.number,
            a.phase.name(),
            a.change.replace('|', "\\|"),
            a.candidate.plan.step.len(),
            a.candidate.time_limit_s,
            a.failed,
            a.reruns.len(),
            if a.kept { "yes" } else { "no" },
            a.seconds
        ));
    }
    t
}

/// What the terminal shows when the search ends.
pub fn terminal(origin: &Origin, search: &Search) -> String {
    let mut out = attempts_table(&origin.class, &search.attempts);
    if let Some(why) = &search.stopped {
        out.push_str(&format!("stopped early: {why}\n"));
    }
    if search.reproduced {
        out.push_str(&format!(
            "shrunk: {}, --time-limit {} (from {}, --time-limit {})\n",
            steps_text(search.best.plan.step.len()),
            search.best.time_limit_s,
            steps_text(search.original.plan.step.len()),
            search.original.time_limit_s
        ));
        for line in describe_steps(&search.best.plan) {
            out.push_str(&format!("  {line}\n"));
        }
    } else {
        out.push_str(&format!(
            "not shrunk: the run's schedule did not show {} again in k of n reruns\n",
            origin.class
        ));
    }
    out
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("write {}: {e}", path.display()))
}

/// When the last fault op of the main phase ran, in seconds from the main phase's start (the
/// first client op), from a run's `history.jsonl`; ops at or after the time limit (the final
/// step) are not the plan's. `None` when the history cannot be read or holds no such op.
pub fn last_fault_s(history: &Path, time_limit_s: u64) -> Option<f64> {
    let text = std::fs::read_to_string(history).ok()?;
    let ops: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let started_ns = ops
        .iter()
        .filter(|op| op["process"] != "nemesis")
        .filter_map(|op| op["time"].as_u64())
        .min()?;
    let end_ns = started_ns + time_limit_s * 1_000_000_000;
    ops.iter()
        .filter(|op| op["process"] == "nemesis")
        .filter_map(|op| op["time"].as_u64())
        .filter(|t| *t >= started_ns && *t < end_ns)
        .max()
        .map(|t| (t - started_ns) as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_fault_is_the_last_nemesis_op_of_the_main_phase() {
        let dir = tempfile::tempdir().unwrap();
        let history = dir.path().join("history.jsonl");
        let lines = [
            r#"{"index":0,"time":2000000000,"process":0,"type":"invoke","f":"send"}"#,
            r#"{"index":1,"time":5000000000,"process":"nemesis","type":"info","f":"start-kill"}"#,
            r#"{"index":2,"time":9500000000,"process":"nemesis","type":"info","f":"stop-kill"}"#,
            // The final step, after a 10 s main phase.
            r#"{"index":3,"time":12500000000,"process":"nemesis","type":"info","f":"stop-partition"}"#,
        ];
        std::fs::write(&history, lines.join("\n")).unwrap();
        assert_eq!(last_fault_s(&history, 10), Some(7.5));
        assert_eq!(last_fault_s(&history, 20), Some(10.5));
        assert_eq!(last_fault_s(&dir.path().join("none"), 10), None);
    }

    #[test]
    fn plans_written_as_toml_load_back_as_they_were() {
        for (name, _) in crate::nemesis::plan::BUILTIN_PLANS {
            let plan = FaultPlan::load(name).unwrap();
            assert_eq!(
                FaultPlan::from_toml(&plan.to_toml()).unwrap(),
                plan,
                "{name}"
            );
        }
        let mut random = crate::runner::config::example();
        random.nemesis = vec!["kill".into(), "pause".into(), "partition".into()];
        random.time_limit_s = 300;
        let schedule = crate::runner::faults::resolve_schedule(&random).unwrap();
        let plan: FaultPlan = serde_json::from_value(schedule).unwrap();
        assert_eq!(FaultPlan::from_toml(&plan.to_toml()).unwrap(), plan);
    }
}
