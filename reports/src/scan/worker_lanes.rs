//! The operations of the main phase per process, as Jepsen's `timeline.html` shows them:
//! one lane per worker, one bar per operation from its invocation to its completion.
//!
//! Lanes, not processes: a process whose op ended `info` never runs again and its worker goes
//! on under a new number, so a lane is reused once its process has retired. That keeps the
//! number of lanes near the number of workers however many processes a run used.
//!
//! Bounded in size both ways: up to [`TIMELINE_OPS_MAX`] operations are kept one by one (each
//! drawn with its own tooltip); beyond that the chart is drawn from a grid of at most
//! [`COLUMNS_MAX`] time columns per lane counting the outcomes of the operations there, which
//! is gathered for every run while the history streams by (the column width doubles whenever
//! the run outgrows the grid). A column shows its most frequent outcome: at a million
//! operations nearly every column holds some failure, and showing the worst would paint the
//! whole chart red.

use crate::scan::outcome::Outcome;
use std::collections::{BTreeSet, HashMap};

/// Operations kept one by one; a longer main phase is drawn from the grid.
pub const TIMELINE_OPS_MAX: usize = 6000;
/// Lanes drawn at most; operations of further lanes are counted, not drawn.
pub const LANES_MAX: usize = 64;
/// Time columns of the grid at most.
pub const COLUMNS_MAX: usize = 600;
/// The grid's first column width, ns.
const COLUMN_NS_FIRST: u64 = 10_000_000;

/// The kind of operation, as drawn (shape of the tooltip, not colour).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpKind {
    /// A `send`.
    Send,
    /// A `poll`.
    Poll,
    /// A `txn`: sends and polls committed (ok), aborted (fail) or unknown (info) as one.
    Txn,
    /// Anything else (`assign`, `subscribe`, `rebalance`, ...).
    Other,
}

impl OpKind {
    /// The kind of function `f`.
    pub fn of(f: &str) -> OpKind {
        match f {
            "send" => OpKind::Send,
            "poll" => OpKind::Poll,
            "txn" => OpKind::Txn,
            _ => OpKind::Other,
        }
    }
}

/// One operation of the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineOp {
    /// The lane it is drawn in.
    pub lane: u16,
    /// Its process number.
    pub process: u64,
    /// Its function's kind.
    pub kind: OpKind,
    /// How it completed.
    pub outcome: Outcome,
    /// Invocation time, ns.
    pub invoke_ns: u64,
    /// Completion time, ns.
    pub complete_ns: u64,
    /// Index of the completion.
    pub index: u64,
    /// What a tooltip adds: a transaction's micro-ops (empty for other ops). Filled by the
    /// caller through what [`Timeline::add`] returns, so only kept ops pay for it.
    pub detail: String,
}

/// Slot of an outcome in a grid cell.
fn slot(o: Outcome) -> usize {
    match o {
        Outcome::Ok => 0,
        Outcome::Fail => 1,
        Outcome::Info => 2,
    }
}

/// Operations per outcome (ok, fail, info) that overlapped one column of one lane.
pub type Cell = [u32; 3];

/// What the timeline gathered.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Operations one by one, while there are at most [`TIMELINE_OPS_MAX`].
    pub ops: Vec<TimelineOp>,
    /// True when there were more and `ops` is incomplete: draw the grid.
    pub overflowed: bool,
    /// Operations of the main phase seen, drawn or not.
    pub ops_total: u64,
    /// Operations on lanes beyond [`LANES_MAX`], not drawn.
    pub ops_beyond_lanes: u64,
    /// Lanes used.
    pub lanes: usize,
    /// Processes seen.
    pub processes: u64,
    /// Start of the grid (the first operation's invocation), ns.
    pub start_ns: u64,
    /// Width of a grid column, ns.
    pub column_ns: u64,
    /// Per lane, per column: how many operations of each outcome overlapped it.
    pub grid: Vec<Vec<Cell>>,
    /// Lanes by process, for the processes still running.
    lane_of: HashMap<u64, u16>,
    /// Lanes whose process retired, reusable.
    free: BTreeSet<u16>,
}

impl Timeline {
    /// Adds one completed operation of the main phase; returns it when it is kept one by
    /// one (so the caller may fill in its `detail`), `None` when it is only counted.
    pub fn add(
        &mut self,
        process: u64,
        kind: OpKind,
        outcome: Outcome,
        invoke_ns: u64,
        complete_ns: u64,
        index: u64,
    ) -> Option<&mut TimelineOp> {
        if self.ops_total == 0 {
            self.start_ns = invoke_ns;
            self.column_ns = COLUMN_NS_FIRST;
        }
        self.ops_total += 1;
        let lane = self.lane(process);
        if outcome == Outcome::Info {
            // The process never runs again: its lane is free for the next one.
            self.lane_of.remove(&process);
            self.free.insert(lane);
        }
        if usize::from(lane) >= LANES_MAX {
            self.ops_beyond_lanes += 1;
            return None;
        }
        self.mark(lane, outcome, invoke_ns, complete_ns);
        if self.overflowed {
            return None;
        }
        if self.ops.len() >= TIMELINE_OPS_MAX {
            self.overflowed = true;
            self.ops = Vec::new();
            return None;
        }
        self.ops.push(TimelineOp {
            lane,
            process,
            kind,
            outcome,
            invoke_ns,
            complete_ns,
            index,
            detail: String::new(),
        });
        self.ops.last_mut()
    }

    fn lane(&mut self, process: u64) -> u16 {
        if let Some(&lane) = self.lane_of.get(&process) {
            return lane;
        }
        self.processes += 1;
        let lane = match self.free.pop_first() {
            Some(lane) => lane,
            None => {
                self.lanes += 1;
                u16::try_from(self.lanes - 1).unwrap_or(u16::MAX)
            }
        };
        self.lane_of.insert(process, lane);
        lane
    }

    /// Marks the columns an operation spans in its lane's row of the grid.
    fn mark(&mut self, lane: u16, outcome: Outcome, invoke_ns: u64, complete_ns: u64) {
        let lane = usize::from(lane);
        let from = invoke_ns.saturating_sub(self.start_ns);
        let to = complete_ns.max(invoke_ns).saturating_sub(self.start_ns);
        while to / self.column_ns >= COLUMNS_MAX as u64 {
            self.coarsen();
        }
        if self.grid.len() <= lane {
            self.grid.resize(lane + 1, Vec::new());
        }
        let row = &mut self.grid[lane];
        let (first, last) = (
            (from / self.column_ns) as usize,
            (to / self.column_ns) as usize,
        );
        if row.len() <= last {
            row.resize(last + 1, [0; 3]);
        }
        for cell in &mut row[first..=last] {
            cell[slot(outcome)] = cell[slot(outcome)].saturating_add(1);
        }
    }

    /// Doubles the column width, merging neighbouring columns.
    fn coarsen(&mut self) {
        self.column_ns *= 2;
        for row in &mut self.grid {
            let merged: Vec<Cell> = row
                .chunks(2)
                .map(|c| {
                    c.iter().fold([0u32; 3], |a: Cell, b| {
                        [
                            a[0].saturating_add(b[0]),
                            a[1].saturating_add(b[1]),
                            a[2].saturating_add(b[2]),
                        ]
                    })
                })
                .collect();
            *row = merged;
        }
    }

    /// The grid as runs per lane: (lane, start ns, end ns, most frequent outcome), where
    /// neighbouring columns of the same outcome are one run. Ties go to the worse outcome
    /// (info over fail over ok).
    pub fn grid_runs(&self) -> Vec<(usize, u64, u64, Outcome)> {
        let main = |cell: &Cell| {
            let most = *cell.iter().max().expect("three counts");
            if most == 0 {
                None
            } else if cell[2] == most {
                Some(Outcome::Info)
            } else if cell[1] == most {
                Some(Outcome::Fail)
            } else {
                Some(Outcome::Ok)
            }
        };
        let mut runs = Vec::new();
        for (lane, row) in self.grid.iter().enumerate() {
            let mut current: Option<(usize, Outcome)> = None;
            for (col, cell) in row.iter().chain(std::iter::once(&[0; 3])).enumerate() {
                let w = main(cell);
                if current.map(|c| Some(c.1)) != Some(w) {
                    if let Some((start, o)) = current.take() {
                        runs.push((
                            lane,
                            self.start_ns + start as u64 * self.column_ns,
                            self.start_ns + col as u64 * self.column_ns,
                            o,
                        ));
                    }
                    current = w.map(|o| (col, o));
                }
            }
        }
        runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retired_process_hands_its_lane_to_the_next() {
        let mut t = Timeline::default();
        t.add(1, OpKind::Send, Outcome::Ok, 0, 10, 1);
        t.add(2, OpKind::Poll, Outcome::Ok, 0, 10, 3);
        // Process 1 ends indeterminate; its worker goes on as process 7.
        t.add(1, OpKind::Send, Outcome::Info, 20, 30, 5);
        t.add(7, OpKind::Send, Outcome::Ok, 40, 50, 7);
        let lanes: Vec<(u64, u16)> = t.ops.iter().map(|o| (o.process, o.lane)).collect();
        assert_eq!(lanes, vec![(1, 0), (2, 1), (1, 0), (7, 0)]);
        assert_eq!((t.lanes, t.processes, t.ops_total), (2, 3, 4));
    }

    #[test]
    fn the_grid_stays_bounded_and_shows_the_most_frequent_outcome() {
        let mut t = Timeline::default();
        // 100 s of 1 ms ops on one lane: a stray failure at 20 s, all failing from 50 to 60 s.
        for i in 0..100_000u64 {
            let o = if i == 20_000 || (50_000..60_000).contains(&i) {
                Outcome::Fail
            } else {
                Outcome::Ok
            };
            t.add(
                1,
                OpKind::Send,
                o,
                i * 1_000_000,
                i * 1_000_000 + 500_000,
                i,
            );
        }
        assert!(t.overflowed && t.ops.is_empty());
        assert!(t.grid[0].len() <= COLUMNS_MAX, "{}", t.grid[0].len());
        let total: u32 = t.grid[0].iter().map(|c| c[1]).sum();
        assert!(total >= 10_001, "every failure is counted: {total}");
        let runs = t.grid_runs();
        assert_eq!(runs.len(), 3, "{runs:?}");
        assert_eq!(runs[1].3, Outcome::Fail);
        let s = |ns: u64| ns as f64 / 1e9;
        assert!(
            (s(runs[1].1) - 50.0).abs() < 0.3 && (s(runs[1].2) - 60.0).abs() < 0.3,
            "{runs:?}"
        );
    }
}
