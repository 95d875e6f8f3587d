//! The nemesis's vocabulary as a history holds it, in one place for the harness that writes it
//! and the checker and reports that read it back (docs/history.md, "Nemesis operations").
//!
//! - [`Fault`]: a family of faults (`kill`, `pause`, `partition`, `power-loss`): the `X` of a
//!   history's `start-X` / `stop-X`, a fault window's kind and a band's colour in a report, and
//!   a family word of `--nemesis`.
//! - [`OpName`]: the `f` of a nemesis op without its value (`start-kill`, `wait-for-leader`).
//! - [`NemesisOp`]: one nemesis op, each variant with exactly its own arguments
//!   (`start-partition` carries its grudge, `start-kill` its nodes, ...). The harness writes an
//!   op as [`NemesisOp::f`] and [`NemesisOp::value`]; readers get it back with
//!   [`NemesisOp::parse`].
//!
//! Reading is lenient, as it must be for histories that other tools (Jepsen) or hand edits
//! wrote: an op whose name is known but whose value has another shape than the harness writes
//! is kept as [`NemesisOp::Foreign`], and its nodes are read from whatever the value names;
//! `start-X` / `stop-X` of a fault only another tool injects is [`Fault::Other`]; any other
//! name is [`NemesisOp::Other`]. So every history the checker read before reads the same now.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A partition as a grudge, as in Jepsen: node -> the nodes whose packets it drops.
pub type Grudge = BTreeMap<String, BTreeSet<String>>;

/// A family of faults: the `X` of `start-X` / `stop-X`. The order (kill, pause, partition,
/// power loss, others) is the order of a report's legend.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// Processes killed with SIGKILL (or stopped gracefully), later started again.
    Kill,
    /// Processes paused with SIGSTOP, later resumed with SIGCONT.
    Pause,
    /// A network partition (a grudge), later healed.
    Partition,
    /// Power loss: processes killed and every write they had not fsynced discarded, later
    /// booted again on what is left.
    PowerLoss,
    /// A fault only another tool injects (`start-clock` in a Jepsen history), by its name.
    Other(String),
}

impl Fault {
    /// The families the harness injects, as `--nemesis` names them.
    pub const INJECTED: [Fault; 4] = [
        Fault::Kill,
        Fault::Pause,
        Fault::Partition,
        Fault::PowerLoss,
    ];

    /// The name: `kill`, `pause`, `partition`, `power-loss`, or the other tool's.
    pub fn name(&self) -> &str {
        match self {
            Fault::Kill => "kill",
            Fault::Pause => "pause",
            Fault::Partition => "partition",
            Fault::PowerLoss => "power-loss",
            Fault::Other(name) => name,
        }
    }

    /// The fault of a name; [`Fault::Other`] for a name the harness does not inject.
    pub fn parse(name: &str) -> Fault {
        Fault::INJECTED
            .into_iter()
            .find(|f| f.name() == name)
            .unwrap_or_else(|| Fault::Other(name.to_string()))
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Fault {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Fault {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Fault, D::Error> {
        Ok(Fault::parse(&String::deserialize(d)?))
    }
}

/// What a `wait-for-*` op waited for, in the metadata of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WaitFor {
    /// `wait-for-isr-shrink`: none of the nodes in the ISR.
    IsrShrink,
    /// `wait-for-isr-expand`: every one of the nodes in the ISR.
    IsrExpand,
    /// `wait-for-leader`: a leader (one of the nodes, if any are named).
    Leader,
    /// `wait-for-isr-full`: every replica in the ISR.
    IsrFull,
}

impl WaitFor {
    /// Every condition.
    pub const ALL: [WaitFor; 4] = [
        WaitFor::IsrShrink,
        WaitFor::IsrExpand,
        WaitFor::Leader,
        WaitFor::IsrFull,
    ];

    /// The name, the same in plans and in the history: `wait-for-isr-shrink`, ...
    pub fn name(self) -> &'static str {
        match self {
            WaitFor::IsrShrink => "wait-for-isr-shrink",
            WaitFor::IsrExpand => "wait-for-isr-expand",
            WaitFor::Leader => "wait-for-leader",
            WaitFor::IsrFull => "wait-for-isr-full",
        }
    }

    /// The condition of a name, if it is one.
    pub fn parse(name: &str) -> Option<WaitFor> {
        WaitFor::ALL.into_iter().find(|w| w.name() == name)
    }
}

/// The `f` of a nemesis op, without its value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OpName {
    /// `start-X`: fault X began.
    Start(Fault),
    /// `stop-X`: fault X ended.
    Stop(Fault),
    /// `wait-for-*`: the nemesis waited for a condition.
    Wait(WaitFor),
}

impl OpName {
    /// The `f` as written: `start-kill`, `stop-partition`, `wait-for-leader`.
    pub fn f(&self) -> String {
        match self {
            OpName::Start(fault) => format!("start-{fault}"),
            OpName::Stop(fault) => format!("stop-{fault}"),
            OpName::Wait(until) => until.name().to_string(),
        }
    }

    /// The name an `f` is, if it is one: the grammar of docs/history.md, `start-X` and
    /// `stop-X` for any fault `X` (another tool's too) and the four waits.
    pub fn parse(f: &str) -> Option<OpName> {
        if let Some(until) = WaitFor::parse(f) {
            return Some(OpName::Wait(until));
        }
        if let Some(fault) = f.strip_prefix("start-") {
            return Some(OpName::Start(Fault::parse(fault)));
        }
        f.strip_prefix("stop-")
            .map(|fault| OpName::Stop(Fault::parse(fault)))
    }
}

/// Which target of a step could not be resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TargetRole {
    /// The step's `target`.
    Target,
    /// A `cut` step's `from`.
    From,
}

impl TargetRole {
    /// The key of the value: `target` or `from`.
    pub fn name(self) -> &'static str {
        match self {
            TargetRole::Target => "target",
            TargetRole::From => "from",
        }
    }
}

/// One nemesis op of a history (process `"nemesis"`, type `info`): its `f` and `value`, each
/// variant with exactly the arguments that op carries.
#[derive(Debug, Clone, PartialEq)]
pub enum NemesisOp {
    /// `start-partition`: the grudge now applied (a new one replaces the previous one).
    StartPartition {
        /// Node -> the nodes whose packets it drops.
        grudge: Grudge,
    },
    /// `stop-partition` (value `null`): every network fault removed.
    StopPartition,
    /// `start-kill`: the nodes killed or stopped.
    StartKill {
        /// In the order the step resolved them.
        nodes: Vec<String>,
    },
    /// `stop-kill`: the nodes started again.
    StopKill {
        /// Empty (or `null` when read): every killed node.
        nodes: Vec<String>,
    },
    /// `start-pause`: the nodes paused.
    StartPause {
        /// The nodes.
        nodes: Vec<String>,
    },
    /// `stop-pause`: the nodes resumed.
    StopPause {
        /// Empty (or `null` when read): every paused node.
        nodes: Vec<String>,
    },
    /// `start-power-loss`: the nodes whose power was cut; the value is the node list, or
    /// `{"nodes": [...], "torn_seed": N}` for a torn loss (so a replay tears the same way).
    StartPowerLoss {
        /// The nodes.
        nodes: Vec<String>,
        /// The seed the tear was drawn from, for a torn loss.
        torn_seed: Option<u64>,
    },
    /// `stop-power-loss`: the nodes booted again after their power loss.
    StopPowerLoss {
        /// Empty (or `null` when read): every node without power.
        nodes: Vec<String>,
    },
    /// `wait-for-*`: what the nemesis saw when the wait ended (it held, or its bound passed).
    Waited {
        /// The condition.
        until: WaitFor,
        /// The partition, e.g. `t0/0`.
        key: String,
        /// The nodes the condition is about.
        nodes: Vec<String>,
        /// The partition's leader then.
        leader: Option<String>,
        /// Its ISR then.
        isr: Vec<String>,
        /// How long the wait took.
        waited_ms: u64,
    },
    /// A step whose target (or `from`) named no node it could resolve: recorded under the
    /// name of the op its action starts with, the value `{"target": TEXT}` (or `{"from": ...}`),
    /// and the error beside it.
    Unresolved {
        /// The op the step would have recorded.
        name: OpName,
        /// Which of its targets failed.
        role: TargetRole,
        /// The target as written in the plan.
        target: String,
    },
    /// An op of a known name whose value has another shape than the harness writes (another
    /// tool's history, a hand edit), kept as it was.
    Foreign {
        /// Its name.
        name: OpName,
        /// Its value.
        value: Value,
    },
    /// An op of any other name (`heal`, `compact-logs`, ...), kept as it was.
    Other {
        /// Its `f`.
        f: String,
        /// Its value.
        value: Value,
    },
}

impl NemesisOp {
    /// Its name, or `None` for [`NemesisOp::Other`].
    pub fn name(&self) -> Option<OpName> {
        Some(match self {
            NemesisOp::StartPartition { .. } => OpName::Start(Fault::Partition),
            NemesisOp::StopPartition => OpName::Stop(Fault::Partition),
            NemesisOp::StartKill { .. } => OpName::Start(Fault::Kill),
            NemesisOp::StopKill { .. } => OpName::Stop(Fault::Kill),
            NemesisOp::StartPause { .. } => OpName::Start(Fault::Pause),
            NemesisOp::StopPause { .. } => OpName::Stop(Fault::Pause),
            NemesisOp::StartPowerLoss { .. } => OpName::Start(Fault::PowerLoss),
            NemesisOp::StopPowerLoss { .. } => OpName::Stop(Fault::PowerLoss),
            NemesisOp::Waited { until, .. } => OpName::Wait(*until),
            NemesisOp::Unresolved { name, .. } | NemesisOp::Foreign { name, .. } => name.clone(),
            NemesisOp::Other { .. } => return None,
        })
    }

    /// The `f` as written in the history.
    pub fn f(&self) -> String {
        match self {
            NemesisOp::Other { f, .. } => f.clone(),
            op => op.name().expect("only Other has no name").f(),
        }
    }

    /// The `value` as written in the history (docs/history.md).
    pub fn value(&self) -> Value {
        match self {
            NemesisOp::StartPartition { grudge } => json!(grudge),
            NemesisOp::StopPartition => Value::Null,
            NemesisOp::StartKill { nodes }
            | NemesisOp::StopKill { nodes }
            | NemesisOp::StartPause { nodes }
            | NemesisOp::StopPause { nodes }
            | NemesisOp::StopPowerLoss { nodes }
            | NemesisOp::StartPowerLoss {
                nodes,
                torn_seed: None,
            } => json!(nodes),
            NemesisOp::StartPowerLoss {
                nodes,
                torn_seed: Some(seed),
            } => json!({"nodes": nodes, "torn_seed": seed}),
            NemesisOp::Waited {
                key,
                nodes,
                leader,
                isr,
                waited_ms,
                ..
            } => json!({
                "key": key,
                "nodes": nodes,
                "leader": leader,
                "isr": isr,
                "waited_ms": waited_ms,
            }),
            NemesisOp::Unresolved { role, target, .. } => json!({ role.name(): target }),
            NemesisOp::Foreign { value, .. } | NemesisOp::Other { value, .. } => value.clone(),
        }
    }

    /// Reads a nemesis op back from its `f` and `value`. Never fails: what the harness does
    /// not write comes back as [`NemesisOp::Foreign`] or [`NemesisOp::Other`]. A `null` node
    /// list reads as an empty one; `stop-partition` ignores its value (a stop ends every
    /// partition, whatever it says).
    pub fn parse(f: &str, value: &Value) -> NemesisOp {
        let Some(name) = OpName::parse(f) else {
            return NemesisOp::Other {
                f: f.to_string(),
                value: value.clone(),
            };
        };
        NemesisOp::typed(&name, value).unwrap_or_else(|| NemesisOp::Foreign {
            name,
            value: value.clone(),
        })
    }

    /// The variant for a name and a value of the shape the harness writes for it.
    fn typed(name: &OpName, value: &Value) -> Option<NemesisOp> {
        if let Some((role, target)) = unresolved(value) {
            return Some(NemesisOp::Unresolved {
                name: name.clone(),
                role,
                target,
            });
        }
        let nodes = || node_list(value);
        Some(match name {
            OpName::Start(Fault::Partition) => NemesisOp::StartPartition {
                grudge: grudge(value)?,
            },
            OpName::Stop(Fault::Partition) => NemesisOp::StopPartition,
            OpName::Start(Fault::Kill) => NemesisOp::StartKill { nodes: nodes()? },
            OpName::Stop(Fault::Kill) => NemesisOp::StopKill { nodes: nodes()? },
            OpName::Start(Fault::Pause) => NemesisOp::StartPause { nodes: nodes()? },
            OpName::Stop(Fault::Pause) => NemesisOp::StopPause { nodes: nodes()? },
            OpName::Start(Fault::PowerLoss) => match value.as_object() {
                Some(map) => torn_power_loss(map)?,
                None => NemesisOp::StartPowerLoss {
                    nodes: nodes()?,
                    torn_seed: None,
                },
            },
            OpName::Stop(Fault::PowerLoss) => NemesisOp::StopPowerLoss { nodes: nodes()? },
            OpName::Wait(until) => waited(*until, value.as_object()?)?,
            OpName::Start(Fault::Other(_)) | OpName::Stop(Fault::Other(_)) => return None,
        })
    }

    /// The nodes the op names, sorted, each once: for a grudge every node that drops some
    /// other and every node dropped. Ops kept as they were are read leniently: a list of
    /// names, `{"nodes": ...}`, a grudge, or one name.
    pub fn nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = match self {
            NemesisOp::StartPartition { grudge } => grudge
                .iter()
                .filter(|(_, dropped)| !dropped.is_empty())
                .flat_map(|(node, dropped)| std::iter::once(node).chain(dropped))
                .cloned()
                .collect(),
            NemesisOp::StopPartition | NemesisOp::Unresolved { .. } => Vec::new(),
            NemesisOp::StartKill { nodes }
            | NemesisOp::StopKill { nodes }
            | NemesisOp::StartPause { nodes }
            | NemesisOp::StopPause { nodes }
            | NemesisOp::StartPowerLoss { nodes, .. }
            | NemesisOp::StopPowerLoss { nodes }
            | NemesisOp::Waited { nodes, .. } => nodes.clone(),
            NemesisOp::Foreign { value, .. } | NemesisOp::Other { value, .. } => {
                return nodes_named(value)
            }
        };
        nodes.sort();
        nodes.dedup();
        nodes
    }
}

/// `{"target": TEXT}` or `{"from": TEXT}`: a target that could not be resolved.
fn unresolved(value: &Value) -> Option<(TargetRole, String)> {
    let map = value.as_object().filter(|m| m.len() == 1)?;
    let (key, text) = map.iter().next()?;
    let role = [TargetRole::Target, TargetRole::From]
        .into_iter()
        .find(|r| r.name() == key)?;
    Some((role, text.as_str()?.to_string()))
}

/// A list of node names.
fn names(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(String::from))
        .collect()
}

/// A list of node names, `null` for none.
fn node_list(value: &Value) -> Option<Vec<String>> {
    match value {
        Value::Null => Some(Vec::new()),
        other => names(other),
    }
}

/// A grudge: node -> list of node names. An object with a `nodes` key is not one.
fn grudge(value: &Value) -> Option<Grudge> {
    let map = value.as_object().filter(|m| !m.contains_key("nodes"))?;
    map.iter()
        .map(|(node, dropped)| Some((node.clone(), names(dropped)?.into_iter().collect())))
        .collect()
}

/// `{"nodes": [...], "torn_seed": N}`.
fn torn_power_loss(map: &Map<String, Value>) -> Option<NemesisOp> {
    if map.len() != 2 {
        return None;
    }
    Some(NemesisOp::StartPowerLoss {
        nodes: names(map.get("nodes")?)?,
        torn_seed: Some(map.get("torn_seed")?.as_u64()?),
    })
}

/// `{"key", "nodes", "leader", "isr", "waited_ms"}`.
fn waited(until: WaitFor, map: &Map<String, Value>) -> Option<NemesisOp> {
    if map.len() != 5 {
        return None;
    }
    let list = |k: &str| names(map.get(k)?);
    let leader = match map.get("leader")? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        _ => return None,
    };
    Some(NemesisOp::Waited {
        until,
        key: map.get("key")?.as_str()?.to_string(),
        nodes: list("nodes")?,
        leader,
        isr: list("isr")?,
        waited_ms: map.get("waited_ms")?.as_u64()?,
    })
}

/// The nodes any value names, leniently: a list of node names, or a grudge (node -> nodes it
/// drops; nodes that drop nothing are not named), or `{"nodes": ...}`, or one name. Sorted,
/// each once.
fn nodes_named(value: &Value) -> Vec<String> {
    let mut nodes: Vec<String> = match value {
        Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        Value::Object(map) if map.contains_key("nodes") => return nodes_named(&map["nodes"]),
        Value::Object(map) => map
            .iter()
            .filter(|(_, dropped)| dropped.as_array().is_some_and(|a| !a.is_empty()))
            .flat_map(|(node, dropped)| {
                std::iter::once(node.clone()).chain(
                    dropped
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(String::from)),
                )
            })
            .collect(),
        Value::String(node) => vec![node.clone()],
        _ => Vec::new(),
    };
    nodes.sort();
    nodes.dedup();
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    /// One op of every shape the harness writes.
    fn written() -> Vec<NemesisOp> {
        let grudge = Grudge::from([
            ("c1".to_string(), BTreeSet::from(["n1".to_string()])),
            (
                "n1".to_string(),
                BTreeSet::from(["c1".to_string(), "n3".to_string()]),
            ),
            ("n2".to_string(), BTreeSet::new()),
        ]);
        vec![
            NemesisOp::StartPartition { grudge },
            NemesisOp::StopPartition,
            NemesisOp::StartKill {
                nodes: strings(&["n2", "c1", "n10"]),
            },
            NemesisOp::StopKill {
                nodes: strings(&["n1"]),
            },
            NemesisOp::StartPause {
                nodes: strings(&["n3"]),
            },
            NemesisOp::StopPause {
                nodes: strings(&["n3"]),
            },
            NemesisOp::StartPowerLoss {
                nodes: strings(&["n1"]),
                torn_seed: None,
            },
            NemesisOp::StartPowerLoss {
                nodes: strings(&["n2", "n1"]),
                torn_seed: Some(7),
            },
            NemesisOp::StopPowerLoss {
                nodes: strings(&["n1", "n2"]),
            },
            NemesisOp::Waited {
                until: WaitFor::IsrShrink,
                key: "t0/0".into(),
                nodes: strings(&["n3"]),
                leader: Some("n1".into()),
                isr: strings(&["n1", "n2"]),
                waited_ms: 2_400,
            },
            NemesisOp::Waited {
                until: WaitFor::Leader,
                key: "t0/0".into(),
                nodes: vec![],
                leader: None,
                isr: vec![],
                waited_ms: 30_000,
            },
            NemesisOp::Unresolved {
                name: OpName::Start(Fault::Kill),
                role: TargetRole::Target,
                target: "leader:t9/9".into(),
            },
            NemesisOp::Unresolved {
                name: OpName::Start(Fault::Partition),
                role: TargetRole::From,
                target: "controller+follower:t0/0".into(),
            },
        ]
    }

    #[test]
    fn the_names_and_values_are_those_of_docs_history_md() {
        let got: Vec<(String, String)> = written()
            .iter()
            .map(|op| (op.f(), op.value().to_string()))
            .collect();
        let want = [
            (
                "start-partition",
                r#"{"c1":["n1"],"n1":["c1","n3"],"n2":[]}"#,
            ),
            ("stop-partition", "null"),
            ("start-kill", r#"["n2","c1","n10"]"#),
            ("stop-kill", r#"["n1"]"#),
            ("start-pause", r#"["n3"]"#),
            ("stop-pause", r#"["n3"]"#),
            ("start-power-loss", r#"["n1"]"#),
            ("start-power-loss", r#"{"nodes":["n2","n1"],"torn_seed":7}"#),
            ("stop-power-loss", r#"["n1","n2"]"#),
            (
                "wait-for-isr-shrink",
                r#"{"isr":["n1","n2"],"key":"t0/0","leader":"n1","nodes":["n3"],"waited_ms":2400}"#,
            ),
            (
                "wait-for-leader",
                r#"{"isr":[],"key":"t0/0","leader":null,"nodes":[],"waited_ms":30000}"#,
            ),
            ("start-kill", r#"{"target":"leader:t9/9"}"#),
            ("start-partition", r#"{"from":"controller+follower:t0/0"}"#),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn what_the_harness_writes_reads_back_as_itself_naming_the_same_nodes() {
        for op in written() {
            let back = NemesisOp::parse(&op.f(), &op.value());
            assert_eq!(back, op);
            assert_eq!(op.nodes(), nodes_named(&op.value()), "{op:?}");
        }
        let grudge = &written()[0];
        assert_eq!(grudge.nodes(), strings(&["c1", "n1", "n3"]));
    }

    #[test]
    fn other_shapes_and_names_are_kept_and_read_leniently() {
        let cases = [
            // Jepsen's partitioner completes with a tagged grudge.
            (
                "start-partition",
                json!(["isolated", {"n1": ["n2"]}]),
                "Foreign",
                vec!["isolated"],
            ),
            ("start-kill", json!("n1"), "Foreign", vec!["n1"]),
            ("start-kill", json!(["n1", 5]), "Foreign", vec!["n1"]),
            ("start-partition", json!({"n1": [5]}), "Foreign", vec!["n1"]),
            ("start-clock", json!(["n2"]), "Foreign", vec!["n2"]),
            ("stop-partition", json!({}), "StopPartition", vec![]),
            ("stop-kill", json!(null), "StopKill", vec![]),
            ("heal", json!(null), "Other", vec![]),
            ("compact-logs", json!(["n1"]), "Other", vec!["n1"]),
        ];
        for (f, value, variant, nodes) in cases {
            let op = NemesisOp::parse(f, &value);
            assert!(
                format!("{op:?}").starts_with(variant),
                "{f} {value}: {op:?}"
            );
            assert_eq!(op.nodes(), strings(&nodes), "{f} {value}");
            assert_eq!(op.nodes(), nodes_named(&value), "{f} {value}");
            assert_eq!(op.f(), f);
        }
        assert_eq!(
            NemesisOp::parse("start-clock", &json!(null)).name(),
            Some(OpName::Start(Fault::Other("clock".into())))
        );
        assert_eq!(NemesisOp::parse("heal", &json!(null)).name(), None);
    }

    #[test]
    fn faults_are_written_by_name() {
        for fault in Fault::INJECTED {
            assert_eq!(Fault::parse(fault.name()), fault);
            assert_eq!(json!(fault), json!(fault.name()));
        }
        assert_eq!(Fault::parse("clock"), Fault::Other("clock".into()));
        let back: Fault = serde_json::from_value(json!("power-loss")).unwrap();
        assert_eq!(back, Fault::PowerLoss);
        for until in WaitFor::ALL {
            assert_eq!(OpName::parse(until.name()), Some(OpName::Wait(until)));
        }
    }
}
