//! The report of an unclean-election run, the scenario Tidewater is built for, checked
//! against counts made here from the raw history and samples (never from the code under
//! test): the whole-ISR kill is drawn although it overlaps another kill, every partition
//! that lost writes shows all of them, offline periods are explicit, and the headline says
//! what was lost.

mod common;

use common::unclean::{unclean_election_run, KEYS};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use tidewater_reports::pages::report::PLOT_IDS;
use tidewater_reports::render_run;

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The HTML of the figure with `id`.
fn figure<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<figure id=\"{id}\""))
        .unwrap_or_else(|| panic!("{id} missing"));
    let end = html[start..].find("</figure>").unwrap() + start;
    &html[start..end]
}

/// The nodes a nemesis value names: a list, or a grudge's keys and values.
fn nodes(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = match v {
        Value::Array(a) => a
            .iter()
            .filter_map(|n| n.as_str().map(String::from))
            .collect(),
        Value::Object(m) => m
            .iter()
            .flat_map(|(k, v)| {
                std::iter::once(k.clone()).chain(
                    v.as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|n| n.as_str().map(String::from)),
                )
            })
            .collect(),
        _ => Vec::new(),
    };
    out.sort();
    out.dedup();
    out
}

/// Every start paired with the stop of its own node and kind: (kind, node, start s, end s).
fn pair_faults(history: &[Value]) -> BTreeSet<(String, String, String, String)> {
    let mut open: BTreeMap<(String, String), f64> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for op in history.iter().filter(|op| op["process"] == "nemesis") {
        let f = op["f"].as_str().unwrap();
        let t = op["time"].as_u64().unwrap() as f64 / 1e9;
        if let Some(kind) = f.strip_prefix("start-") {
            for n in nodes(&op["value"]) {
                open.insert((kind.to_string(), n), t);
            }
        } else if let Some(kind) = f.strip_prefix("stop-") {
            let named = nodes(&op["value"]);
            let ending: Vec<(String, String)> = open
                .keys()
                .filter(|(k, n)| k == kind && (named.is_empty() || named.contains(n)))
                .cloned()
                .collect();
            for key in ending {
                let start = open.remove(&key).unwrap();
                out.insert((key.0, key.1, format!("{start:.1}"), format!("{t:.1}")));
            }
        }
    }
    out
}

#[test]
fn the_unclean_election_report_draws_the_isr_kill_every_loss_and_the_offline_periods() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("unclean-election/20261201T120000Z");
    let fx = unclean_election_run(&dir, None);
    let history = lines(&dir.join("history.jsonl"));
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();

    // stats.fault_windows matches the start/stop pairs of the history.
    let paired = pair_faults(&history);
    let mut from_results = BTreeSet::new();
    for w in results["stats"]["fault_windows"].as_array().unwrap() {
        for n in w["nodes"].as_array().unwrap() {
            from_results.insert((
                w["kind"].as_str().unwrap().to_string(),
                n.as_str().unwrap().to_string(),
                format!("{:.1}", w["start_s"].as_f64().unwrap()),
                format!("{:.1}", w["end_s"].as_f64().unwrap()),
            ));
        }
    }
    assert_eq!(from_results, paired);
    let isr_kill = |n: &str| {
        (
            "kill".to_string(),
            n.to_string(),
            "20.5".to_string(),
            "41.5".to_string(),
        )
    };
    assert!(
        paired.contains(&isr_kill("n1")) && paired.contains(&isr_kill("n2")),
        "{paired:?}"
    );

    // Lost acknowledged writes, counted here: acknowledged values the final reads lack.
    let mut acked: Vec<(String, u64, i64)> = Vec::new();
    let mut final_values = BTreeSet::new();
    for op in &history {
        if op["type"] != "ok" {
            continue;
        }
        for m in op["value"].as_array().unwrap() {
            match (m[0].as_str(), op["final"].as_bool() == Some(true)) {
                (Some("send"), false) => acked.push((
                    m[1].as_str().unwrap().to_string(),
                    m[2][0].as_u64().unwrap(),
                    m[2][1].as_i64().unwrap(),
                )),
                (Some("poll"), true) => {
                    for records in m[1].as_object().unwrap().values() {
                        for r in records.as_array().unwrap() {
                            final_values.insert(r[1].as_i64().unwrap());
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut lost: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (key, offset, value) in &acked {
        if !final_values.contains(value) {
            lost.entry(key.clone()).or_default().push(*offset);
        }
    }
    let lost_counts: BTreeMap<String, u64> = lost
        .iter()
        .map(|(k, v)| (k.clone(), v.len() as u64))
        .collect();
    assert_eq!(lost_counts, fx.expected_lost);
    assert_eq!(
        lost.len(),
        3,
        "every partition lost writes: {lost_counts:?}"
    );
    let total: u64 = lost_counts.values().sum();
    assert_eq!(results["stats"]["lost_acknowledged"]["total"], total);
    for (k, n) in &lost_counts {
        assert_eq!(
            results["stats"]["lost_acknowledged"]["by_key"][k], *n,
            "{k}"
        );
    }

    let html = std::fs::read_to_string(render_run(&dir).unwrap()).unwrap();

    // The headline says what was lost, with both facts and the standing colour.
    assert!(
        html.contains(&format!(
            "<p class=\"headline allowed\">DATA LOST: {total} of {} acknowledged writes; allowed by acks=1 + unclean election</p>",
            acked.len()
        )),
        "{}",
        &html[html.find("<section id=\"verdict\">").unwrap()..][..600]
    );
    assert!(html.contains("<span class=\"verdict allowed\""));
    assert!(html.contains("valid: false · promise: kept"));

    // The whole-ISR kill is in every time plot, in the faults plot and in the Faults table.
    for id in PLOT_IDS {
        if ["plot-lost-writes", "plot-faults"].contains(&id) {
            continue;
        }
        assert!(
            figure(&html, id).contains("<title>kill n1,n2 from 20.5 s to 41.5 s</title>"),
            "{id} draws the ISR kill"
        );
        assert!(
            figure(&html, id).contains("<title>kill n3 from 15.0 s to 21.5 s</title>"),
            "{id} draws the stale node's kill"
        );
    }
    for n in ["n1", "n2"] {
        assert!(figure(&html, "plot-faults").contains(&format!(
            "<title>kill of {n} (n1,n2) from 20.5 s to 41.5 s</title>"
        )));
    }
    assert!(html.contains(
        "kill</td><td>n1, n2</td><td class=\"num\">20.50</td><td class=\"num\">41.50</td>"
    ));

    // Every lost write of every partition, drawn where it was acknowledged.
    let lost_fig = figure(&html, "plot-lost-writes");
    for key in KEYS {
        let offsets = &lost[key];
        let (first, last) = (offsets[0], *offsets.last().unwrap());
        assert_eq!(
            last - first + 1,
            offsets.len() as u64,
            "{key}: one run of offsets"
        );
        assert!(
            lost_fig.contains(&format!(">{key}: {} lost</text>", offsets.len())),
            "{key}"
        );
        assert!(
            lost_fig.contains(&format!(
                "<title>{key}: {} acknowledged writes gone at offsets {first} to {last}</title>",
                offsets.len()
            )),
            "{key}"
        );
    }
    assert!(lost_fig.contains(&format!(
        "{total} of {} acknowledged writes are gone",
        acked.len()
    )));
    assert!(lost_fig.contains(&format!(
        "The checker's count agrees (stats.lost_acknowledged: {total})"
    )));
    // The gone line ends at the total; the unseen line alone would not show the loss.
    assert!(figure(&html, "plot-unseen").contains(&format!(
        "<title>gone: {total} acknowledged writes the final reads no longer hold"
    )));

    // Offline periods, from the samples: a gap of leader samples longer than 2.5 rounds.
    let samples = lines(&dir.join("samples.jsonl"));
    for key in KEYS {
        let times: Vec<u64> = samples
            .iter()
            .filter(|s| s["key"] == key && s["role"] == "leader")
            .map(|s| s["time"].as_u64().unwrap())
            .collect();
        let gaps: Vec<(u64, u64)> = times
            .windows(2)
            .filter(|w| w[1] - w[0] > 1_250_000_000)
            .map(|w| (w[0] + 500_000_000, w[1]))
            .collect();
        assert_eq!(gaps.len(), 1, "{key}: {gaps:?}");
        let (a, b) = gaps[0];
        let text = format!(
            "<title>{key} offline: no leader answered from {:.1} s to {:.1} s ({:.1} s)</title>",
            a as f64 / 1e9,
            b as f64 / 1e9,
            (b - a) as f64 / 1e9
        );
        assert!(
            figure(&html, "plot-isr").contains(&text),
            "{key}: ISR plot shows {text}"
        );
        assert!(
            figure(&html, "plot-leaders").contains(&text),
            "{key}: leaders plot"
        );
        assert!(figure(&html, "plot-leaders")
            .contains(&format!("{key} led by n3 (leader epoch 2) from 27.5 s")));
        // Availability: the key's completed sends, counted from the history.
        let sends = history
            .iter()
            .filter(|op| op["f"] == "send" && op["type"] != "invoke")
            .filter(|op| op["value"][0][1] == key)
            .count();
        let row = format!("<td>{key}</td><td class=\"num\">{sends}</td>");
        let at = html
            .find(&row)
            .unwrap_or_else(|| panic!("{key}: availability row"));
        let row = &html[at..at + html[at..].find("</tr>").unwrap()];
        let offline = format!("{:.1}", (b - a) as f64 / 1e9);
        assert!(
            row.ends_with(&format!(
                "<td class=\"num\">{offline}</td><td class=\"num\">{offline}</td>"
            )),
            "{key}: time without a leader: {row}"
        );
    }

    // The time axis starts at the main phase, not at the start of the process.
    assert!(html.contains("Time axes start at the main phase, 2.0 s after the test started"));
    // Each lost-write example has a sentence.
    let sentences = html.matches("is gone from the final reads; offset").count();
    assert!(sentences >= 5, "{sentences}");
    common::assert_anchors_resolve(&html);
    common::assert_files_resolve(&html, &dir);
}
