//! The view of one dependency cycle (`G0`, `G1c`, `G-single`, `G2`; docs/checkers.md, "The
//! dependency graph"): the drawing (`draw::cycle`), a table of its steps and a table of its
//! operations, each op linked to its history line.
//!
//! The checker's example names each step's key and values (`value` for wr, `values` for ww
//! and rw) but not their offsets; the offsets come from the history lines of the cycle's own
//! operations (their sends' acknowledged offsets and their polls' records), which the report
//! keeps because the example names those ops. An offset none of them shows is `?`.

use crate::draw::chart::{legend_lines, Rgb, Stroke, BLUE, GREY, ORANGE, VERMILLION};
use crate::draw::cycle::{draw_cycle, CycleEdge, CycleNode, EdgeKind, CYCLE_NODES_DRAWN_MAX};
use crate::html::esc;
use crate::pages::report::examples::op_link;
use crate::scan::history::{line_micro_summary, line_offsets, HistoryScan};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;

/// The anomalies whose examples are cycles.
pub const CYCLE_ANOMALIES: [&str; 4] = ["G0", "G1c", "G-single", "G2"];

/// Steps listed per cycle at most (the checker's cycles are shortest ones, rarely long).
const STEPS_LISTED_MAX: usize = 100;

/// One operation of a cycle, as the example describes it.
#[derive(Debug, Clone)]
struct CycleOp {
    op: u64,
    invoke_op: Option<u64>,
    process: String,
    f: String,
    ended: String,
}

/// One step of a cycle: an edge from `from` to `to`.
#[derive(Debug, Clone)]
struct Step {
    from: u64,
    to: u64,
    kind: EdgeKind,
    key: String,
    /// One value (wr) or two (ww, rw): what the edge rests on.
    values: Vec<i64>,
    explanation: String,
}

/// A cycle example read from its fields; `None` when it is not shaped as one.
struct Cycle {
    ops: Vec<CycleOp>,
    steps: Vec<Step>,
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "?".to_string(),
        other => other.to_string(),
    }
}

impl Cycle {
    fn parse(example: &Value) -> Option<Cycle> {
        let ops = example
            .get("ops")?
            .as_array()?
            .iter()
            .map(|o| {
                Some(CycleOp {
                    op: o.get("op")?.as_u64()?,
                    invoke_op: o.get("invoke_op").and_then(Value::as_u64),
                    process: text(o.get("process").unwrap_or(&Value::Null)),
                    f: text(o.get("f").unwrap_or(&Value::Null)),
                    ended: text(o.get("type").unwrap_or(&Value::Null)),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let steps = example
            .get("steps")?
            .as_array()?
            .iter()
            .map(|s| {
                let values = match (s.get("values"), s.get("value")) {
                    (Some(Value::Array(vs)), _) => vs.iter().filter_map(Value::as_i64).collect(),
                    (_, Some(v)) => v.as_i64().into_iter().collect(),
                    _ => Vec::new(),
                };
                Some(Step {
                    from: s.get("from")?.as_u64()?,
                    to: s.get("to")?.as_u64()?,
                    kind: EdgeKind::parse(s.get("kind")?.as_str()?)?,
                    key: text(s.get("key").unwrap_or(&Value::Null)),
                    values,
                    explanation: s
                        .get("explanation")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        if steps.is_empty() {
            return None;
        }
        Some(Cycle { ops, steps })
    }

    /// True when every step starts where the one before ended and the last returns to the
    /// first: only then is it drawn as a cycle.
    fn closes(&self) -> bool {
        let n = self.steps.len();
        (0..n).all(|i| self.steps[i].to == self.steps[(i + 1) % n].from)
    }

    fn op(&self, index: u64) -> Option<&CycleOp> {
        self.ops.iter().find(|o| o.op == index)
    }
}

/// Offsets of `(key, value)` as the cycle's own ops show them.
struct Offsets(HashMap<(String, i64), u64>);

impl Offsets {
    fn of(cycle: &Cycle, scan: &HistoryScan) -> Offsets {
        let mut map = HashMap::new();
        for op in &cycle.ops {
            for raw in [Some(op.op), op.invoke_op]
                .into_iter()
                .flatten()
                .filter_map(|i| scan.referenced.get(&i))
            {
                for (key, value, offset) in line_offsets(raw) {
                    map.entry((key, value)).or_insert(offset);
                }
            }
        }
        Offsets(map)
    }

    /// "1@0", or "1@?" when no op of the cycle shows the offset.
    fn at(&self, key: &str, value: i64) -> String {
        match self.0.get(&(key.to_string(), value)) {
            Some(o) => format!("{value}@{o}"),
            None => format!("{value}@?"),
        }
    }
}

/// What a step rests on, short: ww "1@0 → 3@1", wr "3@0", rw "read 1@0, next 2@1".
fn step_detail(step: &Step, offsets: &Offsets) -> String {
    let at: Vec<String> = step
        .values
        .iter()
        .map(|&v| offsets.at(&step.key, v))
        .collect();
    match (step.kind, at.as_slice()) {
        (EdgeKind::Ww, [a, b]) => format!("{a} → {b}"),
        (EdgeKind::Rw, [a, b]) => format!("read {a}, next {b}"),
        (_, [a]) => a.clone(),
        _ => at.join(", "),
    }
}

/// The outline colour of an op by how it ended.
fn ended_rgb(ended: &str) -> Rgb {
    match ended {
        "ok" => BLUE,
        "info" => ORANGE,
        "fail" => VERMILLION,
        _ => GREY,
    }
}

/// How an op ended, in a transaction's words when it is one.
fn ended_text(f: &str, ended: &str) -> String {
    match (f, ended) {
        ("txn", "ok") => "committed".into(),
        ("txn", "fail") => "aborted".into(),
        ("txn", "info") => "unknown (info)".into(),
        (_, "pending") => "never completed".into(),
        (_, e) => e.into(),
    }
}

/// True when `example` is shaped as a cycle: [`cycle_view`] draws or lists it.
pub fn is_cycle(example: &Value) -> bool {
    Cycle::parse(example).is_some()
}

/// The edge kinds' legend, with what each means.
pub fn edges_legend() -> String {
    let entry = |k: EdgeKind, text: &str| {
        (
            text.to_string(),
            Stroke {
                rgb: k.rgb(),
                dash: k.dash(),
                width_px: 2.5,
            },
        )
    };
    legend_lines(&[
        entry(
            EdgeKind::Ww,
            "ww: the next op appended the next record of the key",
        ),
        entry(EdgeKind::Wr, "wr: the next op read this op's record"),
        entry(
            EdgeKind::Rw,
            "rw: this op's last read of the key was just before the next op's record",
        ),
    ])
}

/// The view of example `n` of cycle anomaly `name`: drawing, steps and operations, in a
/// figure with the id `cycle-NAME-N`; `None` when the example is not shaped as a cycle.
/// `listed` says whether the page lists an op (so that a link to it resolves).
pub fn cycle_view(
    name: &str,
    n: usize,
    example: &Value,
    scan: &HistoryScan,
    listed: &BTreeSet<u64>,
) -> Option<String> {
    let cycle = Cycle::parse(example)?;
    let offsets = Offsets::of(&cycle, scan);
    let link = |i: u64| {
        if listed.contains(&i) {
            format!("op {}", op_link(i))
        } else {
            format!("op #{i}")
        }
    };
    let id = format!("cycle-{name}-{n}");
    let drawing = if cycle.closes() {
        let nodes: Vec<CycleNode> = cycle
            .steps
            .iter()
            .map(|s| {
                let op = cycle.op(s.from);
                let (f, ended) = op.map_or(("?", "?"), |o| (o.f.as_str(), o.ended.as_str()));
                let summary = scan
                    .referenced
                    .get(&s.from)
                    .map(|raw| line_micro_summary(raw))
                    .unwrap_or_default();
                CycleNode {
                    label: format!("op {}", s.from),
                    sublabel: format!("{f} {ended}"),
                    rgb: ended_rgb(ended),
                    href: listed.contains(&s.from).then(|| format!("#op-{}", s.from)),
                    title: format!(
                        "op {} ({f}, {}, process {}){}",
                        s.from,
                        ended_text(f, ended),
                        op.map_or("?", |o| o.process.as_str()),
                        if summary.is_empty() {
                            String::new()
                        } else {
                            format!(": {summary}")
                        }
                    ),
                }
            })
            .collect();
        let edges: Vec<CycleEdge> = cycle
            .steps
            .iter()
            .map(|s| CycleEdge {
                kind: s.kind,
                key: s.key.clone(),
                detail: step_detail(s, &offsets),
                title: s.explanation.clone(),
            })
            .collect();
        draw_cycle(
            &format!("{id}-svg"),
            &format!("{name} cycle of {} operations", nodes.len()),
            &nodes,
            &edges,
        )
    } else {
        None
    };
    let mut out = format!(
        "<figure id=\"{id}\" class=\"cycle-view\"><h4>{} example {}: a cycle of {} operations</h4>",
        esc(name),
        n + 1,
        cycle.steps.len()
    );
    match drawing {
        Some(svg) => {
            out.push_str(&svg);
            out.push_str(&edges_legend());
        }
        None if !cycle.closes() => out.push_str(
            "<p class=\"warning\">The steps of this example do not close into a cycle; they \
             are listed as the checker gave them.</p>",
        ),
        None => {
            let _ = write!(
                out,
                "<p class=\"muted\">Cycles of more than {CYCLE_NODES_DRAWN_MAX} operations are \
                 listed, not drawn.</p>"
            );
        }
    }
    out.push_str(
        "<table class=\"steps\"><tr><th class=\"num\">step</th><th>from</th><th>edge</th>\
         <th>key</th><th>values (value@offset)</th><th>to</th><th>why (the checker's words)</th></tr>",
    );
    for (i, s) in cycle.steps.iter().take(STEPS_LISTED_MAX).enumerate() {
        let _ = write!(
            out,
            "<tr><td class=\"num\">{}</td><td class=\"nowrap\">{}</td><td><strong style=\"color:{}\">{}</strong></td>\
             <td><code>{}</code></td><td><code>{}</code></td><td class=\"nowrap\">{}</td><td>{}</td></tr>",
            i + 1,
            link(s.from),
            crate::draw::chart::svg_hex(s.kind.rgb()),
            s.kind.as_str(),
            esc(&s.key),
            esc(&step_detail(s, &offsets)),
            link(s.to),
            esc(&s.explanation)
        );
    }
    out.push_str("</table>");
    if cycle.steps.len() > STEPS_LISTED_MAX {
        let _ = write!(
            out,
            "<p class=\"muted\">{} more steps in results.json.</p>",
            cycle.steps.len() - STEPS_LISTED_MAX
        );
    }
    out.push_str(
        "<table class=\"cycle-ops\"><tr><th>op</th><th>function</th><th>outcome</th>\
         <th class=\"num\">process</th><th>invoked</th><th>micro-ops</th></tr>",
    );
    for op in cycle.ops.iter().take(STEPS_LISTED_MAX) {
        let summary = scan
            .referenced
            .get(&op.op)
            .map(|raw| line_micro_summary(raw))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<tr><td class=\"nowrap\">{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"nowrap\">{}</td><td>{}</td></tr>",
            link(op.op),
            esc(&op.f),
            esc(&ended_text(&op.f, &op.ended)),
            esc(&op.process),
            op.invoke_op.map(link).unwrap_or_default(),
            if summary.is_empty() {
                "<span class=\"muted\">not in the history</span>".to_string()
            } else {
                format!("<code>{}</code>", esc(&summary))
            }
        );
    }
    out.push_str("</table></figure>");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scan_with(lines: &[(u64, &str)]) -> HistoryScan {
        let mut scan = HistoryScan::default();
        for (i, raw) in lines {
            scan.referenced.insert(*i, raw.to_string());
        }
        scan
    }

    #[test]
    fn a_g0_example_is_drawn_with_offsets_from_its_ops_lines() {
        let example = json!({
            "ops": [{"op": 2, "invoke_op": 0, "process": 0, "f": "txn", "type": "ok"},
                    {"op": 3, "invoke_op": 1, "process": 1, "f": "txn", "type": "ok"}],
            "steps": [{"from": 2, "to": 3, "kind": "ww", "key": "x", "values": [1, 3],
                       "explanation": "op 2 sent 1 to x; op 3 sent 3, the next value of x"},
                      {"from": 3, "to": 2, "kind": "ww", "key": "y", "values": [4, 2],
                       "explanation": "op 3 sent 4 to y; op 2 sent 2, the next value of y"}],
            "edges": {"ww": 2}
        });
        let scan = scan_with(&[
            (
                2,
                r#"{"index":2,"time":2,"process":0,"type":"ok","f":"txn","value":[["send","x",[0,1]],["send","y",[1,2]]]}"#,
            ),
            (
                3,
                r#"{"index":3,"time":3,"process":1,"type":"ok","f":"txn","value":[["send","x",[1,3]],["send","y",[0,4]]]}"#,
            ),
        ]);
        let listed: BTreeSet<u64> = [0, 1, 2, 3].into();
        let html = cycle_view("G0", 0, &example, &scan, &listed).unwrap();
        assert!(html.starts_with("<figure id=\"cycle-G0-0\""), "{html}");
        assert!(html.contains("<svg"), "{html}");
        assert!(html.contains(
            "<td class=\"num\">1</td><td class=\"nowrap\">op <a href=\"#op-2\">#2</a></td><td><strong style=\"color:#0072B2\">ww</strong></td>\
             <td><code>x</code></td><td><code>1@0 → 3@1</code></td><td class=\"nowrap\">op <a href=\"#op-3\">#3</a></td>"
        ), "{html}");
        assert!(html.contains("<code>4@0 → 2@1</code>"), "{html}");
        assert!(
            html.contains("<code>send x 1 @0 · send y 2 @1</code>"),
            "{html}"
        );
        assert!(html.contains("<td>committed</td>"), "{html}");
    }

    #[test]
    fn unknown_offsets_are_marked_and_open_cycles_are_listed_not_drawn() {
        let example = json!({
            "ops": [{"op": 7, "process": 0, "f": "txn", "type": "info"},
                    {"op": 9, "process": 1, "f": "poll", "type": "ok"}],
            "steps": [{"from": 7, "to": 9, "kind": "wr", "key": "x", "value": 5},
                      {"from": 9, "to": 8, "kind": "rw", "key": "y", "values": [1, 2]}]
        });
        let html = cycle_view(
            "G-single",
            1,
            &example,
            &HistoryScan::default(),
            &BTreeSet::new(),
        )
        .unwrap();
        assert!(!html.contains("<svg"), "{html}");
        assert!(html.contains("do not close into a cycle"), "{html}");
        assert!(html.contains("<code>5@?</code>") && html.contains("read 1@?, next 2@?"));
        // Ops the page does not list are named, not linked.
        assert!(
            html.contains("<td class=\"nowrap\">op #7</td>") && !html.contains("href"),
            "{html}"
        );
        assert!(cycle_view(
            "G0",
            0,
            &json!({"key": "x"}),
            &HistoryScan::default(),
            &BTreeSet::new()
        )
        .is_none());
    }
}
