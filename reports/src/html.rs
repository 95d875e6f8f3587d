//! Small HTML helpers shared by the report, the index and the matrix page: escaping, the page
//! shell with its inline stylesheet, verdict badges and legends. Pages never load anything
//! from the network, so they open from disk and from `tidewater serve` alike.

use crate::plots::{svg_hex, Rgb};
use std::fmt::Write;
use tidewater_workloads::results::Validity;

/// The stylesheet of every page, inlined.
const CSS: &str = r#"
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
  max-width: 1100px; padding: 1em 1.5em 4em; color: #222; line-height: 1.4; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.92em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 0.9em; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
.verdict { display: inline-block; padding: 0.25em 0.8em; border-radius: 4px; color: #fff; font-weight: bold; }
.valid { background: #2e7d32; } .invalid { background: #c62828; } .unknown { background: #ef8f00; }
.none { background: #757575; }
.tag { display: inline-block; padding: 0 0.4em; border-radius: 3px; font-size: 0.85em; color: #fff; }
.violation { background: #c62828; } .allowed { background: #607d8b; }
figure { margin: 1.5em 0; } figcaption { font-size: 0.9em; color: #444; margin-top: 0.3em; }
svg { max-width: 100%; height: auto; display: block; border: 1px solid #eee; }
.legend { font-size: 0.85em; margin: 0.3em 0; }
.legend span.item { margin-right: 1.2em; white-space: nowrap; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; vertical-align: -0.1em; margin-right: 0.3em;
  border: 1px solid #999; }
table.examples td { max-width: 28em; overflow-wrap: anywhere; }
.anomaly { margin-bottom: 1.5em; }
.warning { background: #fff3cd; border: 1px solid #e0c36a; padding: 0.5em 0.8em; }
.muted { color: #777; } .nowrap { white-space: nowrap; }
.trend a { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 2px; border-radius: 2px; }
:target { background: #fff59d; }
"#;

/// Escapes text for HTML element content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole page: `body` is trusted HTML built by this crate.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n",
        esc(title)
    )
}

/// The CSS class of a verdict.
pub fn verdict_class(v: Option<Validity>) -> &'static str {
    match v {
        Some(v) => v.as_str(),
        None => "none",
    }
}

/// A coloured verdict badge; `None` is a run without results.
pub fn verdict_badge(v: Option<Validity>) -> String {
    let text = match v {
        Some(v) => v.as_str(),
        None => "not checked",
    };
    format!("<span class=\"verdict {}\">{text}</span>", verdict_class(v))
}

/// A legend: coloured swatches with labels.
pub fn legend(entries: &[(String, Rgb)]) -> String {
    let mut out = String::from("<div class=\"legend\">");
    for (label, rgb) in entries {
        let _ = write!(
            out,
            "<span class=\"item\"><span class=\"swatch\" style=\"background:{}\"></span>{}</span>",
            svg_hex(*rgb),
            esc(label)
        );
    }
    out.push_str("</div>");
    out
}

/// Formats a duration in ns as milliseconds with sensible precision.
pub fn ms(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 1.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn milliseconds_keep_three_significant_digits_or_more() {
        assert_eq!(ms(1_234_567), "1.2");
        assert_eq!(ms(123_456_789), "123");
        assert_eq!(ms(12_345), "0.012");
    }
}
