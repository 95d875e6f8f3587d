//! Small HTML helpers shared by every page and by the charts: escaping of text and of links
//! ([`href`]), the page shell with its inline stylesheet, standing badges. Pages never load
//! anything from the network, so they open from disk and from `tidewater serve` alike.
//!
//! A run's badge shows where it stands, verdict and promise together
//! ([`CheckResults::standing`]): green "valid" when nothing was lost, amber when data was
//! lost in a way the settings allow, red when Kafka's promise was broken, grey when the run
//! could not tell. Next to it both facts are spelled out: `valid` (Jepsen's meaning: nothing
//! acknowledged lost, no anomaly, whatever the settings) and `promise` (kept, broken, unknown).

use std::fmt::Write;
use tidewater_workloads::results::{CheckResults, Validity};

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
.valid, .clean { background: #2e7d32; } .invalid, .broken { background: #c62828; }
.allowed.verdict { background: #a85d00; } .unknown { background: #757575; }
.none { background: #757575; } .setup { background: #37474f; } .partial { background: #a85d00; }
.facts { font-size: 0.85em; color: #444; margin-left: 0.5em; white-space: nowrap; }
.headline { font-size: 1.25em; font-weight: bold; margin: 0.4em 0; }
.headline.clean { color: #2e7d32; background: none; } .headline.allowed { color: #a85d00; background: none; }
.headline.broken { color: #c62828; background: none; } .headline.unknown { color: #555; background: none; }
.sentence { margin: 0.2em 0 0.2em 0; }
.stats-grid { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
.stats-grid > div { flex: 0 1 auto; } .stats-grid h4 { margin: 0.4em 0 0.2em; }
svg.key { display: inline-block; border: none; vertical-align: middle; margin-right: 0.3em; }
.files a { margin-right: 1em; }
.tag { display: inline-block; padding: 0 0.4em; border-radius: 3px; font-size: 0.85em; color: #fff; }
.violation { background: #c62828; } .allowed { background: #607d8b; } .allowed-tag { background: #a85d00; }
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
.trend a { background: none; display: inline-block; width: 1.1em; margin-right: 2px; text-decoration: none; vertical-align: bottom; }
.trend a span { display: block; width: 1.1em; }
.trend a span.loss { height: 1.1em; border-radius: 2px 2px 0 0; } .trend a span.avail { height: 0.35em; }
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

/// "true", "false" or "unknown": the `valid` field as results.json writes it.
pub fn validity_text(v: Validity) -> &'static str {
    match v {
        Validity::Valid => "true",
        Validity::Invalid => "false",
        Validity::Unknown => "unknown",
    }
}

/// A run's badge in its standing's colour, then `valid: ... · promise: ...`; a run without
/// results gets a grey badge saying `missing` (for example "not checked").
pub fn standing_badge(results: Option<&CheckResults>, missing: &str) -> String {
    match results {
        Some(r) => format!(
            "<span class=\"verdict {}\" title=\"{}\">{}</span><span class=\"facts\">valid: {} · \
             promise: {}</span>",
            r.standing().class(),
            esc(&r.promise_reason),
            esc(r.standing_label()),
            validity_text(r.valid),
            r.promise.as_str()
        ),
        None => format!("<span class=\"verdict none\">{}</span>", esc(missing)),
    }
}

/// Percent-encodes a relative path for an href (keeps `/`).
pub fn href(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
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
