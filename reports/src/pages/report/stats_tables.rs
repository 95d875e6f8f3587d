//! The checkers' statistics (results.json `stats`) as tables, whatever their nesting: plain
//! fields in one table, an object of plain fields as a table of its own, an object of objects
//! (or a list of objects) as a table with a row per entry and a column per field. Nothing is
//! cut short but long lists, which say how many items they hold.

use crate::html::esc;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::fmt::Write;

/// Items of a list shown in a cell at most.
const LIST_ITEMS_MAX: usize = 50;
/// Rows of a table built from a list at most.
const ROWS_MAX: usize = 200;

fn is_plain(v: &Value) -> bool {
    !v.is_object() && !v.is_array() || v.as_array().is_some_and(|a| a.iter().all(is_plain_scalar))
}

fn is_plain_scalar(v: &Value) -> bool {
    !v.is_object() && !v.is_array()
}

/// A plain value as a cell: numbers with at most four decimals, lists joined.
pub fn cell(v: &Value) -> String {
    match v {
        Value::Null => "–".to_string(),
        Value::String(s) => esc(s),
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(0.0);
            let s = format!("{f:.4}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        }
        Value::Array(items) => {
            let shown: Vec<String> = items.iter().take(LIST_ITEMS_MAX).map(cell).collect();
            let more = items.len().saturating_sub(LIST_ITEMS_MAX);
            let mut s = shown.join(", ");
            if more > 0 {
                let _ = write!(s, " and {more} more");
            }
            if s.is_empty() {
                "none".to_string()
            } else {
                s
            }
        }
        Value::Object(_) => esc(&v.to_string()),
        other => esc(&other.to_string()),
    }
}

/// Rows of objects as one table: a row per entry (named by `first` column), a column per
/// field; nested values as compact text.
fn rows_table(first: &str, rows: &[(String, &Map<String, Value>)]) -> String {
    let mut columns: BTreeSet<&str> = BTreeSet::new();
    for (_, obj) in rows {
        columns.extend(obj.keys().map(String::as_str));
    }
    let mut out = format!("<table><tr><th>{}</th>", esc(first));
    for c in &columns {
        let _ = write!(out, "<th>{}</th>", esc(c));
    }
    out.push_str("</tr>");
    for (name, obj) in rows.iter().take(ROWS_MAX) {
        let _ = write!(out, "<tr><td>{}</td>", esc(name));
        for c in &columns {
            let v = obj.get(*c).map(cell).unwrap_or_default();
            let _ = write!(out, "<td class=\"num\">{v}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    if rows.len() > ROWS_MAX {
        let _ = write!(
            out,
            "<p class=\"muted\">{} more rows in results.json.</p>",
            rows.len() - ROWS_MAX
        );
    }
    out
}

/// One field of `stats` as a block: a heading and its table(s).
fn block(name: &str, v: &Value, depth: usize) -> String {
    let mut out = format!("<div><h4>{}</h4>", esc(name));
    match v {
        Value::Object(map) if map.values().all(|x| x.is_object()) && !map.is_empty() => {
            let rows: Vec<(String, &Map<String, Value>)> = map
                .iter()
                .filter_map(|(k, x)| x.as_object().map(|o| (k.clone(), o)))
                .collect();
            out.push_str(&rows_table("", &rows));
        }
        Value::Object(map) => out.push_str(&object_tables(map, depth + 1)),
        Value::Array(items) if items.iter().all(Value::is_object) && !items.is_empty() => {
            let rows: Vec<(String, &Map<String, Value>)> = items
                .iter()
                .enumerate()
                .filter_map(|(i, x)| x.as_object().map(|o| ((i + 1).to_string(), o)))
                .collect();
            out.push_str(&rows_table("#", &rows));
        }
        other => {
            let _ = write!(out, "<p>{}</p>", cell(other));
        }
    }
    out.push_str("</div>");
    out
}

/// An object: its plain fields as one table, every other field as a block of its own.
pub fn object_tables(map: &Map<String, Value>, depth: usize) -> String {
    let mut out = String::new();
    let plain: Vec<(&String, &Value)> = map.iter().filter(|(_, v)| is_plain(v)).collect();
    if !plain.is_empty() {
        out.push_str("<table>");
        for (k, v) in plain {
            let _ = write!(
                out,
                "<tr><th>{}</th><td class=\"num\">{}</td></tr>",
                esc(k),
                cell(v)
            );
        }
        out.push_str("</table>");
    }
    let nested: Vec<(&String, &Value)> = map.iter().filter(|(_, v)| !is_plain(v)).collect();
    if !nested.is_empty() {
        out.push_str("<div class=\"stats-grid\">");
        for (k, v) in nested {
            if depth > 3 {
                let _ = write!(
                    out,
                    "<div><h4>{}</h4><code>{}</code></div>",
                    esc(k),
                    esc(&v.to_string())
                );
            } else {
                out.push_str(&block(k, v, depth));
            }
        }
        out.push_str("</div>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_statistics_become_tables_not_json() {
        let stats = json!({
            "ops": 120,
            "coverage": 0.987654,
            "ops_by_f": {"send": {"invoke": 60, "ok": 50}, "poll": {"invoke": 60, "ok": 60}},
            "final": {"acked_values_read": 40, "keys": [{"key": "t0/0", "records": 30}]},
            "problems": []
        });
        let html = object_tables(stats.as_object().unwrap(), 0);
        assert!(
            html.contains("<tr><th>ops</th><td class=\"num\">120</td></tr>"),
            "{html}"
        );
        assert!(html.contains("<tr><th>coverage</th><td class=\"num\">0.9877</td></tr>"));
        assert!(html.contains("<tr><th>problems</th><td class=\"num\">none</td></tr>"));
        assert!(html.contains("<h4>ops_by_f</h4><table><tr><th></th><th>invoke</th><th>ok</th></tr><tr><td>poll</td><td class=\"num\">60</td><td class=\"num\">60</td></tr>"), "{html}");
        assert!(html.contains("<h4>keys</h4><table><tr><th>#</th><th>key</th><th>records</th></tr><tr><td>1</td><td class=\"num\">t0/0</td><td class=\"num\">30</td></tr>"), "{html}");
        assert!(!html.contains('{'), "no raw JSON: {html}");
    }
}
