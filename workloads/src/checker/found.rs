//! Collecting the instances of each anomaly: a count and a bounded list of examples.

use crate::results::Anomaly;
use serde_json::Value;
use std::collections::BTreeMap;

/// The instances found of one anomaly.
#[derive(Debug, Default, Clone)]
pub struct Found {
    /// Every instance, counted.
    pub count: u64,
    /// Instances that count against the run (for example poll anomalies on processes that
    /// used `assign`, not `subscribe`). Equal to `count` for most anomalies.
    pub counting: u64,
    /// The first few instances, as JSON objects.
    pub examples: Vec<Value>,
}

/// All anomalies found so far, by name, with a bound on examples.
#[derive(Debug, Clone)]
pub struct Findings {
    /// At most this many examples per anomaly.
    examples_max: usize,
    /// By anomaly name; a BTreeMap so results list anomalies in a stable order.
    by_name: BTreeMap<&'static str, Found>,
}

impl Findings {
    /// An empty collection keeping at most `examples_max` examples per anomaly.
    pub fn new(examples_max: usize) -> Findings {
        Findings {
            examples_max,
            by_name: BTreeMap::new(),
        }
    }

    /// Records one instance. `example` is only called while there is room for it, so callers
    /// pay for building JSON only for the first few instances.
    pub fn add(&mut self, name: &'static str, counts: bool, example: impl FnOnce() -> Value) {
        let found = self.by_name.entry(name).or_default();
        found.count += 1;
        found.counting += counts as u64;
        if found.examples.len() < self.examples_max {
            found.examples.push(example());
        }
    }

    /// Converts to the results' shape; `judge` gives each anomaly's verdicts and note.
    pub fn into_anomalies(
        self,
        mut judge: impl FnMut(&'static str, &Found) -> Verdicts,
    ) -> BTreeMap<String, Anomaly> {
        self.by_name
            .into_iter()
            .map(|(name, found)| {
                let v = judge(name, &found);
                let anomaly = Anomaly {
                    count: found.count,
                    examples: found.examples,
                    invalidates: v.invalidates,
                    breaks_promise: v.breaks_promise,
                    note: v.note,
                };
                (name.to_string(), anomaly)
            })
            .collect()
    }

    /// The examples collected so far of `name`, to annotate before they become results.
    pub fn examples_mut(&mut self, name: &str) -> Option<&mut Vec<Value>> {
        self.by_name.get_mut(name).map(|f| &mut f.examples)
    }
}

/// What one anomaly means for the run.
#[derive(Debug, Clone, Default)]
pub struct Verdicts {
    /// It makes the history invalid (a fact, whatever the settings).
    pub invalidates: bool,
    /// The run's settings forbid it.
    pub breaks_promise: bool,
    /// Why it does or does not break the promise.
    pub note: String,
}
