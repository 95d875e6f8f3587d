//! Fault windows: when each fault was in effect on which nodes.
//!
//! There is one list of them per run, derived from the history once by the checker
//! (`tidewater_workloads::checker::FaultTracker`: every `start-X` paired with its own `stop-X`,
//! per node and per fault, overlapping windows kept) and written to results.json as
//! `stats.fault_windows`. Every plot and table of the report draws that list. For a run
//! whose results.json predates the field, or that has none, the same tracker derives the
//! list here from the nemesis ops of the history, so the pairing is never done twice in two
//! ways. Nemesis ops that are not `start-X` / `stop-X` (and starts that failed) are kept as
//! events for the Faults table. A window's kind is the history's own [`Fault`]
//! (`tidewater_workloads::nemesis`), drawn in its [`BandColour`].

use serde_json::Value;
use tidewater_workloads::checker::FaultTracker;
pub use tidewater_workloads::checker::FaultWindow;
use tidewater_workloads::history::{Op, OpType, Process};
pub use tidewater_workloads::nemesis::Fault;
use tidewater_workloads::nemesis::{NemesisOp, OpName};
use tidewater_workloads::results::CheckResults;

/// The colour a fault's bands are drawn in.
pub trait BandColour {
    /// The band colour, from the Okabe-Ito palette (told apart with any colour vision):
    /// reddish purple, yellow, sky blue; brown for power loss (ColorBrewer's BrBG end: the
    /// palette's remaining hues already mark data drawn over the bands, vermillion failures
    /// and losses among them); grey for others. Data is drawn in stronger colours
    /// on top of these light bands.
    fn rgb(&self) -> (u8, u8, u8);
}

impl BandColour for Fault {
    fn rgb(&self) -> (u8, u8, u8) {
        match self {
            Fault::Kill => (204, 121, 167),
            Fault::Pause => (240, 228, 66),
            Fault::Partition => (86, 180, 233),
            Fault::PowerLoss => (140, 81, 10),
            Fault::Other(_) => (150, 150, 150),
        }
    }
}

/// A nemesis op that is not part of a start/stop pair (for example `heal` or an unknown f),
/// or a start that failed.
#[derive(Debug, Clone, PartialEq)]
pub struct NemesisEvent {
    /// Its function.
    pub f: String,
    /// When, ns.
    pub time_ns: u64,
    /// Its value.
    pub value: Value,
    /// Its index.
    pub index: u64,
    /// Its error, when it failed.
    pub error: Option<String>,
}

/// Where the windows came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WindowSource {
    /// `stats.fault_windows` of results.json.
    #[default]
    Results,
    /// Derived here from the history's nemesis ops (results.json lacks the list).
    History,
}

/// Fault windows and other nemesis events of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    /// Windows ordered by start time.
    pub windows: Vec<FaultWindow>,
    /// Everything else the nemesis did.
    pub events: Vec<NemesisEvent>,
    /// Where `windows` came from.
    pub source: WindowSource,
}

impl Faults {
    /// The distinct faults present, in legend order (kill, pause, partition, power loss,
    /// others by name).
    pub fn kinds(&self) -> Vec<Fault> {
        let mut kinds: Vec<Fault> = self.windows.iter().map(|w| w.kind.clone()).collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// Every node some window names, in natural order (`n2` before `n10`).
    pub fn nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self
            .windows
            .iter()
            .flat_map(|w| w.nodes.iter().cloned())
            .collect();
        nodes.sort_by_key(|a| natural_key(a));
        nodes.dedup();
        nodes
    }
}

/// Sorts names with a trailing number by that number.
pub fn natural_key(name: &str) -> (String, u64) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (stem, number) = name.split_at(name.len() - digits);
    (stem.to_string(), number.parse().unwrap_or(0))
}

/// `stats.fault_windows` of the results, when present and well formed.
fn windows_of_results(results: Option<&CheckResults>) -> Option<Vec<FaultWindow>> {
    let list = results?.stats.get("fault_windows")?;
    serde_json::from_value(list.clone()).ok()
}

/// The run's fault windows: results.json's list, else derived from the nemesis ops (in
/// history order) with the checker's tracker; windows never stopped end at `end_ns`.
pub fn fault_windows(results: Option<&CheckResults>, nemesis: &[Op], end_ns: u64) -> Faults {
    let events = nemesis
        .iter()
        .filter(|op| match NemesisOp::parse(&op.f, &op.value).name() {
            Some(OpName::Start(_)) => op.error.is_some(),
            Some(OpName::Stop(_)) => false,
            Some(OpName::Wait(_)) | None => true,
        })
        .map(|op| NemesisEvent {
            f: op.f.clone(),
            time_ns: op.time,
            value: op.value.clone(),
            index: op.index,
            error: op.error.clone(),
        })
        .collect();
    if let Some(windows) = windows_of_results(results) {
        return Faults {
            windows,
            events,
            source: WindowSource::Results,
        };
    }
    let mut tracker = FaultTracker::default();
    for op in nemesis {
        tracker.observe(op);
    }
    // A client op only moves the tracker's clock: open windows end at the end of the run.
    tracker.observe(&Op {
        index: u64::MAX,
        time: end_ns,
        process: Process::Client(0),
        kind: OpType::Invoke,
        f: String::new(),
        value: Value::Null,
        node: None,
        high_watermarks: None,
        log_start_offsets: None,
        isr_sizes: None,
        error: None,
        r#final: false,
        txn_end: None,
    });
    Faults {
        windows: tracker.windows(),
        events,
        source: WindowSource::History,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nem(index: u64, time_s: u64, f: &str, value: Value) -> Op {
        Op {
            index,
            time: time_s * 1_000_000_000,
            process: Process::Nemesis,
            kind: OpType::Info,
            f: f.into(),
            value,
            node: None,
            high_watermarks: None,
            log_start_offsets: None,
            isr_sizes: None,
            error: None,
            r#final: false,
            txn_end: None,
        }
    }

    /// (kind, nodes, start s, end s, open) of each window.
    fn summary(faults: &Faults) -> Vec<(String, String, f64, f64, bool)> {
        faults
            .windows
            .iter()
            .map(|w| {
                (
                    w.kind.name().to_string(),
                    w.nodes.join(","),
                    w.start_s,
                    w.end_s,
                    w.open,
                )
            })
            .collect()
    }

    #[test]
    fn power_loss_has_a_colour_of_its_own() {
        let kinds = ["kill", "pause", "partition", "power-loss", "other"].map(Fault::parse);
        assert_eq!(kinds[3], Fault::PowerLoss);
        assert_eq!(kinds[3].name(), "power-loss");
        let colours: std::collections::BTreeSet<_> = kinds.iter().map(Fault::rgb).collect();
        assert_eq!(colours.len(), kinds.len(), "every kind is told apart");
        // Nor is it a colour that data drawn over the bands uses.
        let data = [
            crate::draw::chart::BLUE,
            crate::draw::chart::ORANGE,
            crate::draw::chart::GREEN,
            crate::draw::chart::VERMILLION,
            crate::draw::chart::BLACK,
        ];
        assert!(!data.contains(&kinds[3].rgb()));
    }

    #[test]
    fn overlapping_kills_pauses_and_partitions_each_keep_their_window() {
        // The unclean-election shape: a kill of the stale node, then of the whole ISR while
        // the first is open, then the stale node alone restarted: that stop must not end the
        // ISR's window.
        let ops = [
            nem(0, 3, "start-partition", json!({"n3": ["n1", "n2"]})),
            nem(1, 8, "start-kill", json!(["n3"])),
            nem(2, 9, "stop-partition", json!(null)),
            nem(3, 10, "start-pause", json!(["n1"])),
            nem(4, 12, "stop-pause", json!(["n1"])),
            nem(5, 14, "start-kill", json!(["n1", "n2"])),
            nem(6, 15, "stop-kill", json!(["n3"])),
            nem(7, 16, "start-pause", json!(["n3"])),
            nem(8, 35, "stop-kill", json!(["n1", "n2"])),
            nem(9, 36, "heal", json!(null)),
        ];
        let faults = fault_windows(None, &ops, 50_000_000_000);
        assert_eq!(faults.source, WindowSource::History);
        let s = |k: &str, n: &str, a: f64, b: f64, open: bool| {
            (k.to_string(), n.to_string(), a, b, open)
        };
        assert_eq!(
            summary(&faults),
            vec![
                s("partition", "n1,n2,n3", 3.0, 9.0, false),
                s("kill", "n3", 8.0, 15.0, false),
                s("pause", "n1", 10.0, 12.0, false),
                s("kill", "n1,n2", 14.0, 35.0, false),
                s("pause", "n3", 16.0, 50.0, true),
            ]
        );
        assert_eq!(faults.events.len(), 1);
        assert_eq!(faults.events[0].f, "heal");
        assert_eq!(faults.nodes(), vec!["n1", "n2", "n3"]);
    }

    #[test]
    fn the_checkers_list_in_results_is_used_as_is() {
        let ops = [
            nem(0, 1, "start-kill", json!(["n1"])),
            nem(1, 2, "stop-kill", json!(["n1"])),
        ];
        let results: CheckResults = serde_json::from_value(json!({
            "valid": true, "anomalies": {},
            "stats": {"fault_windows": [{"kind": "kill", "nodes": ["n1"], "start_s": 1.0,
                                         "end_s": 2.5, "start_op": 0}]}
        }))
        .unwrap();
        let faults = fault_windows(Some(&results), &ops, 9_000_000_000);
        assert_eq!(faults.source, WindowSource::Results);
        assert_eq!(
            summary(&faults),
            vec![("kill".into(), "n1".into(), 1.0, 2.5, false)]
        );
    }

    #[test]
    fn node_names_sort_by_their_number() {
        let mut names = vec!["n10", "n2", "n1"];
        names.sort_by_key(|a| natural_key(a));
        assert_eq!(names, vec!["n1", "n2", "n10"]);
    }
}
