//! Rendering the checkers' anomaly examples, whose shape each checker chooses.
//!
//! Examples are JSON objects "naming key, offsets, values and op indexes" (results.rs). The
//! report does not rely on one schema: it shows every field, and recognises op indexes by
//! name (`index`, `*-index`, `*_index`, `op`, `*-op`, plural forms) or as embedded ops
//! (objects with an `index` and a `type` or `f`), linking each to `#op-N` in the report's
//! list of referenced operations.

use crate::html::esc;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write;

/// Values longer than this many characters are cut in tables (the full example is in
/// results.json).
const VALUE_CHARS_MAX: usize = 600;

/// True when a field of this name holds op indexes.
fn is_index_field(name: &str) -> bool {
    let base = name
        .trim_end_matches("es")
        .trim_end_matches('s')
        .rsplit(['-', '_'])
        .next()
        .unwrap_or(name);
    matches!(base, "index" | "indic" | "op")
}

/// True when `v` looks like an embedded op: an object with an index and a type or f.
fn embedded_op_index(v: &Value) -> Option<u64> {
    let obj = v.as_object()?;
    if obj.contains_key("type") || obj.contains_key("f") {
        obj.get("index").and_then(Value::as_u64)
    } else {
        None
    }
}

/// An op as the transaction analysis describes it (`{"op", "invoke_op", "process", "f",
/// "type"}`), in words: "txn op #23 (ok, process 0, invoked at #21)".
fn described_op(v: &Value) -> Option<String> {
    let obj = v.as_object()?;
    let op = obj.get("op")?.as_u64()?;
    let f = obj.get("f")?.as_str()?;
    let kind = obj.get("type")?.as_str()?;
    let mut s = format!("{} op {} ({}", esc(f), op_link(op), esc(kind));
    if let Some(p) = obj.get("process").filter(|p| !p.is_null()) {
        s.push_str(&format!(", process {}", esc(&p.to_string())));
    }
    if let Some(i) = obj.get("invoke_op").and_then(Value::as_u64) {
        s.push_str(&format!(", invoked at {}", op_link(i)));
    }
    s.push(')');
    Some(s)
}

/// A cycle's step (`{"from", "to", "kind", "key", ...}`) in words: "#2 –ww t0/0→ #3".
fn described_step(v: &Value) -> Option<String> {
    let obj = v.as_object()?;
    let from = obj.get("from")?.as_u64()?;
    let to = obj.get("to")?.as_u64()?;
    let kind = obj.get("kind")?.as_str()?;
    let key = obj.get("key").and_then(Value::as_str).unwrap_or("?");
    Some(format!(
        "{} –{} {}→ {}",
        op_link(from),
        esc(kind),
        esc(key),
        op_link(to)
    ))
}

/// `v` in words when it is a described op or step, or a list of them.
fn described(v: &Value) -> Option<String> {
    let one = |item: &Value| described_op(item).or_else(|| described_step(item));
    match v {
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(one)
            .collect::<Option<Vec<_>>>()
            .map(|parts| parts.join("<br>")),
        Value::Object(_) => one(v),
        _ => None,
    }
}

fn integers(v: &Value) -> Vec<u64> {
    match v {
        Value::Number(n) => n.as_u64().into_iter().collect(),
        Value::Array(items) => items.iter().filter_map(Value::as_u64).collect(),
        _ => Vec::new(),
    }
}

/// Every op index an example refers to, in the order they appear.
pub fn op_indexes(example: &Value) -> Vec<u64> {
    let mut out = Vec::new();
    collect(example, &mut out);
    let mut seen = BTreeSet::new();
    out.retain(|i| seen.insert(*i));
    out
}

fn collect(v: &Value, out: &mut Vec<u64>) {
    if let Some(i) = embedded_op_index(v) {
        out.push(i);
    }
    match v {
        Value::Object(obj) => {
            for (name, field) in obj {
                if is_index_field(name) {
                    out.extend(integers(field));
                }
                collect(field, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect(item, out)),
        _ => {}
    }
}

/// A link to op `i` in the report.
pub fn op_link(i: u64) -> String {
    format!("<a href=\"#op-{i}\">#{i}</a>")
}

fn short_json(v: &Value) -> String {
    let mut text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.chars().count() > VALUE_CHARS_MAX {
        text = text.chars().take(VALUE_CHARS_MAX).collect::<String>() + " …";
    }
    esc(&text)
}

/// One field's value: op indexes become links, embedded ops a link plus their JSON.
fn field_html(name: &str, v: &Value) -> String {
    if let Some(i) = embedded_op_index(v) {
        return format!("op {} <code>{}</code>", op_link(i), short_json(v));
    }
    if let Some(words) = described(v) {
        return words;
    }
    if is_index_field(name) {
        let links: Vec<String> = integers(v).into_iter().map(op_link).collect();
        if !links.is_empty() {
            return links.join(" ");
        }
    }
    format!("<code>{}</code>", short_json(v))
}

/// Fields shown first, in this order, when examples have them; the rest follow by name.
const LEADING_FIELDS: [&str; 8] = [
    "key", "offset", "offsets", "value", "values", "class", "acks", "process",
];

/// The columns of an examples table: every field of any example, leading fields first.
fn columns(examples: &[Value]) -> Vec<String> {
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for e in examples {
        if let Some(obj) = e.as_object() {
            names.extend(obj.keys().map(String::as_str));
        }
    }
    let mut out: Vec<String> = LEADING_FIELDS
        .iter()
        .filter(|f| names.contains(*f))
        .map(|f| f.to_string())
        .collect();
    out.extend(
        names
            .into_iter()
            .filter(|n| !LEADING_FIELDS.contains(n))
            .map(str::to_string),
    );
    out
}

/// The examples of anomaly `name` as one table, a row per example with the anchor
/// `anomaly-NAME-N` (N from 0) and a column per field; examples that are not objects get a
/// single `example` column.
pub fn examples_table(name: &str, examples: &[Value]) -> String {
    if examples.is_empty() {
        return String::new();
    }
    let columns = columns(examples);
    let any_plain = examples.iter().any(|e| !e.is_object());
    let mut out = String::from("<table class=\"examples\"><tr><th>#</th>");
    for c in &columns {
        let _ = write!(out, "<th>{}</th>", esc(c));
    }
    if any_plain {
        out.push_str("<th>example</th>");
    }
    out.push_str("</tr>");
    for (n, example) in examples.iter().enumerate() {
        let _ = write!(
            out,
            "<tr id=\"anomaly-{}-{n}\"><td>{}</td>",
            esc(name),
            n + 1
        );
        for c in &columns {
            let cell = example
                .get(c.as_str())
                .map(|v| field_html(c, v))
                .unwrap_or_default();
            let _ = write!(out, "<td>{cell}</td>");
        }
        if any_plain {
            let cell = if example.is_object() {
                String::new()
            } else {
                format!("<code>{}</code>", short_json(example))
            };
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_indexes_by_field_name_and_embedded_ops() {
        let example = json!({
            "key": "t0/1", "offset": 17, "value": 907,
            "ack-index": 9,
            "read_indexes": [40, 41],
            "ack": {"index": 9, "type": "ok", "f": "send"},
            "proof": {"op": 55, "offset": 18},
            "count": 3
        });
        assert_eq!(op_indexes(&example), vec![9, 55, 40, 41]);
    }

    #[test]
    fn offsets_values_and_counts_are_not_op_indexes() {
        for name in [
            "offset", "value", "offsets", "count", "hw", "key", "prior-hw",
        ] {
            assert!(!is_index_field(name), "{name}");
        }
        for name in [
            "index",
            "op",
            "ops",
            "ack-index",
            "read_index",
            "indices",
            "invoke-op",
        ] {
            assert!(is_index_field(name), "{name}");
        }
    }

    #[test]
    fn examples_table_has_a_row_per_example_and_links_ops() {
        let examples = [
            json!({"value": "<b>", "ack_op": 5, "key": "t0/1"}),
            json!({"key": "t0/2", "extra": [1, 2]}),
            json!("plain"),
        ];
        let html = examples_table("x", &examples);
        // Leading fields first, then the rest by name.
        assert!(
            html.contains(
                "<th>#</th><th>key</th><th>value</th><th>ack_op</th><th>extra</th><th>example</th>"
            ),
            "{html}"
        );
        assert!(html.contains("<tr id=\"anomaly-x-0\"><td>1</td><td><code>t0/1</code></td><td><code>&lt;b&gt;</code></td><td><a href=\"#op-5\">#5</a></td><td></td><td></td></tr>"), "{html}");
        assert!(html.contains("<tr id=\"anomaly-x-2\"><td>3</td><td></td><td></td><td></td><td></td><td><code>plain</code></td></tr>"), "{html}");
        assert_eq!(examples_table("x", &[]), "");
    }

    #[test]
    fn transaction_ops_and_cycle_steps_are_written_out_with_links() {
        let examples = [json!({
            "writer": {"op": 23, "invoke_op": 21, "process": 0, "f": "txn", "type": "ok"},
            "steps": [{"from": 23, "to": 30, "kind": "wr", "key": "t0/1", "value": 4},
                      {"from": 30, "to": 23, "kind": "rw", "key": "t0/0", "values": [1, 2]}]
        })];
        let html = examples_table("G-single", &examples);
        assert!(
            html.contains(
                "<td><a href=\"#op-23\">#23</a> –wr t0/1→ <a href=\"#op-30\">#30</a><br>\
             <a href=\"#op-30\">#30</a> –rw t0/0→ <a href=\"#op-23\">#23</a></td>"
            ),
            "{html}"
        );
        assert!(html.contains(
            "<td>txn op <a href=\"#op-23\">#23</a> (ok, process 0, invoked at <a href=\"#op-21\">#21</a>)</td>"
        ), "{html}");
        assert_eq!(op_indexes(&examples[0]), vec![21, 23]);
    }
}
