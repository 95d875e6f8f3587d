//! What every part of a run report reads: the run's files, the pass over its history, and
//! what is derived from them once (fault windows, lost writes, partition states, the time
//! axis). Built by `report`, read by `figures` and `report`'s sections.

use crate::draw::chart::Band;
use crate::scan::fault_windows::Faults;
use crate::scan::history::HistoryScan;
use crate::scan::lost_writes::Losses;
use crate::scan::replica_states::Replicas;
use crate::scan::run_files::RunFiles;

/// Everything a section of the report may read.
pub(crate) struct Ctx<'a> {
    /// config.json, results.json and samples.jsonl.
    pub(crate) files: &'a RunFiles,
    /// What the pass over the history gathered.
    pub(crate) scan: &'a HistoryScan,
    /// Fault windows (one list: results.json's, or derived by the same code).
    pub(crate) faults: &'a Faults,
    /// The fault windows as bands, shaded on every time plot.
    pub(crate) bands: Vec<Band>,
    /// Every acknowledged write that is gone.
    pub(crate) losses: &'a Losses,
    /// Leader, ISR and offline periods of each partition.
    pub(crate) replicas: &'a Replicas,
    /// The time axis, s since the test started: from the main phase's start (setup is not
    /// shown) to the latest op, sample or unseen point.
    pub(crate) x_range_s: (f64, f64),
}

impl Ctx<'_> {
    /// The main phase's time window in ns: from its first invocation to the first final read
    /// (or the end of the run).
    pub(crate) fn main_phase_ns(&self) -> (u64, u64) {
        let start = self.scan.main_start_ns.unwrap_or(0);
        let end = self
            .scan
            .final_start_ns
            .unwrap_or((self.x_range_s.1 * 1e9) as u64);
        (start, end.max(start))
    }
}
