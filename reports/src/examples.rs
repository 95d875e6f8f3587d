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
    if is_index_field(name) {
        let links: Vec<String> = integers(v).into_iter().map(op_link).collect();
        if !links.is_empty() {
            return links.join(" ");
        }
    }
    format!("<code>{}</code>", short_json(v))
}

/// An example as HTML with the anchor `id`.
pub fn example_html(id: &str, n: usize, example: &Value) -> String {
    let mut out = format!(
        "<div class=\"example\" id=\"{}\"><strong>example {}</strong>",
        esc(id),
        n + 1
    );
    let ops = op_indexes(example);
    if !ops.is_empty() {
        let links: Vec<String> = ops.iter().map(|&i| op_link(i)).collect();
        let _ = write!(out, " — ops {}", links.join(" "));
    }
    match example.as_object() {
        Some(obj) => {
            out.push_str("<table>");
            for (name, v) in obj {
                let _ = write!(
                    out,
                    "<tr><th>{}</th><td>{}</td></tr>",
                    esc(name),
                    field_html(name, v)
                );
            }
            out.push_str("</table>");
        }
        None => {
            let _ = write!(out, "<pre>{}</pre>", short_json(example));
        }
    }
    out.push_str("</div>");
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
    fn example_html_links_ops_and_escapes_values() {
        let html = example_html("anomaly-x-0", 0, &json!({"index": 5, "value": "<b>"}));
        assert!(html.contains("<a href=\"#op-5\">#5</a>"), "{html}");
        assert!(html.contains("&lt;b&gt;"), "{html}");
        assert!(html.contains("id=\"anomaly-x-0\""), "{html}");
    }
}
