//! The report of a history checked by the real checkers: every anomaly the checkers found
//! is shown with its examples, and every op an example names is listed with its history line.
//! This keeps the report in step with the examples' actual fields (docs/checkers.md).

mod common;

use std::collections::BTreeSet;
use tidewater_reports::pages::report::EXAMPLES_SHOWN_MAX;
use tidewater_reports::render_run;
use tidewater_workloads::checker::gen::{generate, GenConfig};
use tidewater_workloads::checker::{check_file, CheckSettings};
use tidewater_workloads::history::{MicroOp, OpType};

#[test]
fn report_of_a_checked_history_with_unclean_truncations_shows_every_finding() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("gen/20261130T230000Z");
    std::fs::create_dir_all(&dir).unwrap();
    // Unclean elections discard acknowledged records: lost writes and more, under the safe
    // settings (where they are violations).
    let ops = generate(GenConfig {
        seed: 11,
        ops: 3000,
        unclean_truncation_probability: 0.01,
        ..GenConfig::default()
    });
    let lines: Vec<String> = ops
        .iter()
        .map(|op| serde_json::to_string(op).unwrap())
        .collect();
    std::fs::write(dir.join("history.jsonl"), lines.join("\n") + "\n").unwrap();
    let results = check_file(dir.join("history.jsonl"), &CheckSettings::default()).unwrap();
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string(&results).unwrap(),
    )
    .unwrap();
    assert!(
        results
            .anomalies
            .get("lost-write")
            .is_some_and(|a| a.count > 0),
        "the fixture must lose writes"
    );

    let html = std::fs::read_to_string(render_run(&dir).unwrap()).unwrap();
    let history_indexes: BTreeSet<u64> = ops.iter().map(|op| op.index).collect();
    for (name, anomaly) in &results.anomalies {
        assert!(
            html.contains(&format!(
                "<div id=\"anomaly-{name}\" class=\"anomaly\"><h3>{name}: {} ",
                anomaly.count
            )),
            "{name}"
        );
        for n in 0..anomaly.examples.len().min(EXAMPLES_SHOWN_MAX) {
            assert!(
                html.contains(&format!("id=\"anomaly-{name}-{n}\"")),
                "{name} example {n}"
            );
        }
        for example in anomaly.examples.iter().take(EXAMPLES_SHOWN_MAX) {
            for i in tidewater_reports::pages::report::examples::op_indexes(example) {
                assert!(
                    history_indexes.contains(&i),
                    "{name}: {i} is not an op index: {example}"
                );
                assert!(
                    html.contains(&format!("<tr id=\"op-{i}\">")),
                    "{name}: op {i} listed"
                );
            }
        }
    }
    assert!(!html.contains("not in the history"));
    common::assert_anchors_resolve(&html);
    // The lost-writes plot draws every acknowledged write the final reads lack (counted here
    // from the generated ops), and that count is the checker's stats.lost_acknowledged.
    let mut acked: Vec<(String, u64, i64)> = Vec::new();
    let mut final_values = BTreeSet::new();
    let mut log_start: std::collections::BTreeMap<String, u64> = Default::default();
    for op in ops.iter().filter(|op| op.kind == OpType::Ok) {
        for micro in op.micro_ops().unwrap_or_default() {
            match micro {
                MicroOp::Send {
                    key,
                    offset: Some(o),
                    value,
                } if !op.r#final => acked.push((key, o, value)),
                MicroOp::Poll(records) if op.r#final => {
                    final_values.extend(records.values().flatten().map(|(_, v)| *v));
                }
                _ => {}
            }
        }
        if op.r#final {
            for (key, start) in op.log_start_offsets.iter().flatten() {
                let s = log_start.entry(key.clone()).or_default();
                *s = (*s).max(*start);
            }
        }
    }
    let gone = acked
        .iter()
        .filter(|(key, o, v)| {
            !final_values.contains(v) && *o >= log_start.get(key).copied().unwrap_or(0)
        })
        .count() as u64;
    assert!(gone > 0);
    assert_eq!(results.lost_acknowledged(), gone);
    assert!(
        html.contains(&format!(
            "{gone} of {} acknowledged writes are gone",
            acked.len()
        )),
        "lost-writes caption"
    );
    assert!(html.contains(&format!(
        "The checker's count agrees (stats.lost_acknowledged: {gone})"
    )));
}
