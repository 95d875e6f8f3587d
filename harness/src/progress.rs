//! The live progress display: on a terminal an indicatif bar showing the phase, elapsed and
//! remaining time, ops ok/fail/info and the active faults; otherwise plain log lines (one per
//! phase and one every few seconds), which read well in CI logs and `harness.log`.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What the display shows at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Client ops completed ok.
    pub ok: u64,
    /// Client ops that failed.
    pub fail: u64,
    /// Client ops with indeterminate outcome.
    pub info: u64,
    /// Faults active now, e.g. `["partition", "kill"]`.
    pub faults: Vec<String>,
}

/// The progress display of one run.
pub struct Progress {
    /// The bar on a terminal; `None` prints lines instead.
    bar: Option<ProgressBar>,
    /// When the current phase started, and its name and expected length.
    phase: Mutex<(String, Instant, Option<Duration>)>,
    /// When the run started.
    start: Instant,
}

/// One status line, shared by the bar and the plain output.
pub fn status_line(
    phase: &str,
    elapsed: Duration,
    remaining: Option<Duration>,
    s: &Snapshot,
) -> String {
    let remaining = remaining
        .map(|r| format!(" (remaining {}s)", r.as_secs()))
        .unwrap_or_default();
    let faults = if s.faults.is_empty() {
        "none".to_string()
    } else {
        s.faults.join(",")
    };
    format!(
        "{phase} {}s{remaining} | ok {} fail {} info {} | faults: {faults}",
        elapsed.as_secs(),
        s.ok,
        s.fail,
        s.info
    )
}

impl Progress {
    /// A bar when stderr is a terminal and `plain` is false, lines otherwise.
    pub fn new(plain: bool) -> Progress {
        let bar = (!plain && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{bar:30}] {msg}")
                    .expect("static template")
                    .progress_chars("=> "),
            );
            bar
        });
        Progress {
            bar,
            phase: Mutex::new(("setup".into(), Instant::now(), None)),
            start: Instant::now(),
        }
    }

    /// True when drawing a bar.
    pub fn is_bar(&self) -> bool {
        self.bar.is_some()
    }

    /// Enters a phase; `length` is its expected duration (the main phase's time limit).
    pub fn phase(&self, name: &str, length: Option<Duration>) {
        *self.phase.lock().expect("progress lock") = (name.to_string(), Instant::now(), length);
        match &self.bar {
            Some(bar) => {
                // A phase without a known length shows an empty bar rather than a full one.
                let len = length.map(|l| l.as_millis() as u64).unwrap_or(1).max(1);
                bar.set_length(len);
                bar.set_position(0);
            }
            None => self.println(&format!(
                "phase {name} at {}s",
                self.start.elapsed().as_secs()
            )),
        }
    }

    /// Updates the display with fresh counts.
    pub fn update(&self, s: &Snapshot) {
        let (name, started, length) = self.phase.lock().expect("progress lock").clone();
        let elapsed = started.elapsed();
        let remaining = length.map(|l| l.saturating_sub(elapsed));
        let line = status_line(&name, elapsed, remaining, s);
        match &self.bar {
            Some(bar) => {
                if length.is_some() {
                    bar.set_position(elapsed.as_millis() as u64);
                }
                bar.set_message(line);
                bar.tick();
            }
            None => self.println(&line),
        }
    }

    /// Prints a line above the bar (or plainly).
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            // A closed stderr (a reader that went away) must not stop a run half-way, as
            // eprintln! would by panicking: the run still cleans up and writes its results.
            None => {
                use std::io::Write;
                let _ = writeln!(std::io::stderr(), "{line}");
            }
        }
    }

    /// Removes the bar so the final lines print cleanly.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_line_names_phase_time_counts_and_faults() {
        let s = Snapshot {
            ok: 10,
            fail: 2,
            info: 1,
            faults: vec!["partition".into(), "kill".into()],
        };
        assert_eq!(
            status_line(
                "main",
                Duration::from_secs(12),
                Some(Duration::from_secs(18)),
                &s
            ),
            "main 12s (remaining 18s) | ok 10 fail 2 info 1 | faults: partition,kill"
        );
        assert_eq!(
            status_line("heal", Duration::from_secs(1), None, &Snapshot::default()),
            "heal 1s | ok 0 fail 0 info 0 | faults: none"
        );
    }
}
