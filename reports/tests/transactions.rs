//! Reports of transactional runs checked by the real checker: the figures the page shows
//! (transactions committed, aborted and unknown; sends per partition) equal counts made here
//! from the raw history, every anomaly of the transaction analysis gets its words, the
//! checker's promise judgement and its example sentence, every cycle its drawing and its
//! steps with keys, values and offsets, and the timeline draws transactions with their
//! outcome and micro-ops.

mod common;

use common::txn::{count_txns, txn_fixture};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use tidewater_reports::render_run;
use tidewater_workloads::checker::txn_gen::{generate_txns, TxnGenConfig};
use tidewater_workloads::history::{MicroOp, Op, OpType};
use tidewater_workloads::results::Validity;

/// The part of `html` from `start` to the next `end`.
fn between<'h>(html: &'h str, start: &str, end: &str) -> &'h str {
    let at = html
        .find(start)
        .unwrap_or_else(|| panic!("{start} not in the page"));
    let rest = &html[at..];
    &rest[..rest.find(end).map_or(rest.len(), |e| e + end.len())]
}

fn link(i: u64) -> String {
    format!("op <a href=\"#op-{i}\">#{i}</a>")
}

/// The colour of an edge kind as the steps table writes it.
fn kind_hex(kind: &str) -> &'static str {
    match kind {
        "ww" => "#0072B2",
        "wr" => "#009E73",
        _ => "#E69F00",
    }
}

/// A step of a cycle as the test expects it: from, kind, key, values with offsets, to.
type Step = (u64, &'static str, &'static str, &'static str, u64);

/// A row of a cycle's steps table, without its step number.
fn step_row(from: u64, kind: &str, key: &str, detail: &str, to: u64) -> String {
    format!(
        "<td class=\"nowrap\">{}</td><td><strong style=\"color:{}\">{kind}</strong></td><td><code>{key}</code></td>\
         <td><code>{detail}</code></td><td class=\"nowrap\">{}</td>",
        link(from),
        kind_hex(kind),
        link(to)
    )
}

/// Send micro-ops of the main phase's completions per key: [ok, fail, info].
fn sends_by_key(ops: &[Op]) -> BTreeMap<String, [u64; 3]> {
    let mut out: BTreeMap<String, [u64; 3]> = BTreeMap::new();
    for op in ops.iter().filter(|op| !op.r#final) {
        let slot = match op.kind {
            OpType::Ok => 0,
            OpType::Fail => 1,
            OpType::Info => 2,
            OpType::Invoke => continue,
        };
        for micro in op.micro_ops().unwrap_or_default() {
            if let MicroOp::Send { key, .. } = micro {
                out.entry(key).or_default()[slot] += 1;
            }
        }
    }
    out
}

/// The tooltip the timeline gives a completed transaction: its process, outcome, times,
/// index and micro-ops (written here from the ops themselves).
fn txn_title(ops: &[Op], completion: u64, outcome: &str, micro_ops: &str) -> String {
    let done = &ops[completion as usize];
    let invoke = ops[..completion as usize]
        .iter()
        .rev()
        .find(|op| op.process == done.process && op.kind == OpType::Invoke)
        .unwrap();
    let p = match done.process {
        tidewater_workloads::history::Process::Client(p) => p,
        _ => unreachable!(),
    };
    format!(
        "<title>process {p} txn {outcome}: {:.3} s to {:.3} s ({:.1} ms), op {completion}: {micro_ops}</title>",
        invoke.time as f64 / 1e9,
        done.time as f64 / 1e9,
        (done.time - invoke.time) as f64 / 1e6
    )
}

#[test]
fn every_transaction_anomaly_gets_its_words_cycles_and_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("txn/20261202T070000Z");
    let f = txn_fixture();
    let ops = &f.history.ops;
    let results = f.history.write_run(&dir, "txn");
    let html = std::fs::read_to_string(render_run(&dir).unwrap()).unwrap();
    common::assert_anchors_resolve(&html);

    // Transactions by outcome, counted from the history, are the checker's and the page's.
    let [committed, aborted, unknown] = count_txns(ops);
    assert_eq!([committed, aborted, unknown], [16, 2, 1]);
    let txns = &results.stats["transactions"]["txns"];
    assert_eq!(
        [&txns["committed"], &txns["aborted"], &txns["unknown"]],
        [committed, aborted, unknown].map(Value::from).each_ref()
    );
    let all = committed + aborted + unknown;
    assert!(
        html.contains(&format!(
            "Transactions: <strong>{committed} committed</strong>, {aborted} aborted, \
             {unknown} unknown (of {all}; stats.transactions)"
        )),
        "verdict line"
    );
    let share = format!("{:.1}%", 100.0 * committed as f64 / all as f64);
    for source in [
        "the checker (<code>stats.transactions.txns</code>)",
        "this report's count of txn completions in history.jsonl",
    ] {
        assert!(
            html.contains(&format!(
                "<tr><td>{source}</td><td class=\"num\">{committed}</td><td class=\"num\">{aborted}</td>\
                 <td class=\"num\">{unknown}</td><td class=\"num\">{all}</td><td class=\"num\">{share}</td></tr>"
            )),
            "{source}"
        );
    }
    assert!(
        html.contains(&format!(
            "<tr><td>txn</td><td class=\"num\">{all}</td><td class=\"num\">{committed}</td>\
             <td class=\"num\">{aborted}</td><td class=\"num\">{unknown}</td><td class=\"num\">0</td>"
        )),
        "operations row"
    );
    assert!(!html.contains("stats.transactions says"), "no disagreement");
    assert_eq!(results.valid, Validity::Invalid);
    assert!(html.contains(
        "INVALID: anomalies seen, no acknowledged write lost; Kafka&#39;s promise broken"
    ));

    // Each anomaly: its plain words, and the checker's judgement as the page states it.
    let expected = [
        ("G0", false),
        ("G1c", true),
        ("G-single", false),
        ("G2", false),
        ("aborted-read", true),
        ("precommitted-read", true),
        ("intermediate-read", false),
    ];
    assert_eq!(
        results.anomalies.keys().collect::<Vec<_>>(),
        {
            let mut names: Vec<&str> = expected.iter().map(|e| e.0).collect();
            names.sort_unstable();
            names
        },
        "the fixture holds exactly these anomalies"
    );
    for (name, breaks) in expected {
        let a = &results.anomalies[name];
        assert_eq!(a.breaks_promise, breaks, "{name}");
        let div = between(&html, &format!("<div id=\"anomaly-{name}\""), "</div>");
        assert!(div.contains("<p class=\"explanation\">"), "{name}: {div}");
        let promise = if breaks {
            "these instances break the promise"
        } else if a.invalidates {
            "the history is invalid, but no promise is broken"
        } else {
            "Kafka does not promise this away"
        };
        assert!(div.contains(promise), "{name}: {div}");
    }

    // The sentences of the reads, with their ops linked.
    assert!(html.contains(&format!(
        "e0: {} read value 42 at offset 1, though the transaction that sent it aborted \
         (invoked as {}).",
        link(f.aborted_reader),
        link(f.aborted_invoke)
    )));
    assert!(html.contains(&format!(
        "f0: transaction {} read value 51 at offset 0, which it had sent itself",
        link(f.own_reader)
    )));
    assert!(html.contains(&format!(
        "g0: {}'s last read was value 61 at offset 0, but transaction {} sent 61, 62 there",
        link(f.intermediate_reader),
        link(f.intermediate_writer)
    )));

    // Each cycle: a sentence linking to its drawing, the drawing, and its steps with the
    // offsets of the values (from the ops' own lines).
    let cycles: [(&str, Vec<Step>); 4] = [
        (
            "G0",
            vec![
                (f.g0.0, "ww", "a0", "1@0 → 3@1", f.g0.1),
                (f.g0.1, "ww", "a1", "4@0 → 2@1", f.g0.0),
            ],
        ),
        (
            "G1c",
            vec![
                (f.g1c.0, "wr", "b0", "11@0", f.g1c.1),
                (f.g1c.1, "wr", "b1", "12@0", f.g1c.0),
            ],
        ),
        (
            "G-single",
            vec![
                (
                    f.g_single_reader,
                    "rw",
                    "c0",
                    "read 21@0, next 22@1",
                    f.g_single_writer,
                ),
                (f.g_single_writer, "wr", "c1", "23@0", f.g_single_reader),
            ],
        ),
        (
            "G2",
            vec![
                (f.g2.0, "rw", "d0", "read 31@0, next 32@1", f.g2.1),
                (f.g2.1, "rw", "d1", "read 35@0, next 36@1", f.g2.0),
            ],
        ),
    ];
    for (name, steps) in cycles {
        let div = between(&html, &format!("<div id=\"anomaly-{name}\""), "</div>");
        assert!(
            div.contains(&format!(
                "(<a href=\"#cycle-{name}-0\">the cycle drawn</a>)"
            )),
            "{name}: {div}"
        );
        let view = between(
            &html,
            &format!("<figure id=\"cycle-{name}-0\""),
            "</figure>",
        );
        assert!(view.contains("<svg"), "{name} drawn");
        assert_eq!(view.matches("<circle").count(), steps.len(), "{name}");
        assert_eq!(view.matches("marker-end=").count(), steps.len(), "{name}");
        for (from, kind, key, detail, to) in steps {
            assert!(
                view.contains(&step_row(from, kind, key, detail, to)),
                "{name}: step {from} -{kind}-> {to}: {view}"
            );
            assert!(
                view.contains(&format!(">{kind} {key}<")),
                "{name}: edge label"
            );
        }
    }
    assert!(html.contains("(2 ww edges)"));
    assert!(between(&html, "<div id=\"anomaly-G1c\"", "</div>").contains("write-read edges alone"));
    // The Transactions section's cycles table links each drawing.
    let section = between(&html, "<section id=\"transactions\">", "</section>");
    for name in ["G0", "G1c", "G-single", "G2"] {
        assert!(
            section.contains(&format!(
                "<tr><td><a href=\"#anomaly-{name}\">{name}</a></td><td class=\"num\">1</td>"
            )),
            "{name}: {section}"
        );
        assert!(section.contains(&format!("<a href=\"#cycle-{name}-0\">1</a>")));
    }

    // The timeline: transactions with their outcome and micro-ops in the tooltip.
    let timeline = between(&html, "<figure id=\"plot-timeline\"", "</figure>");
    for (completion, outcome, micro_ops) in [
        (f.g0.0, "committed", "send a0 1 @0 · send a1 2 @1"),
        (f.unknown, "unknown", "send h0 71"),
        (f.aborted_plain, "aborted", "send h0 72 · poll"),
        (f.aborted_reader, "committed", "poll e0: 2 records @0–1"),
    ] {
        let title = txn_title(ops, completion, outcome, micro_ops);
        assert!(timeline.contains(&title), "{title}");
    }
    assert!(timeline.contains("ok (txn: committed)") && timeline.contains("fail (txn: aborted)"));

    // Availability counts a transaction's sends per partition by the transaction's outcome.
    for (key, [ok, fail, info]) in sends_by_key(ops) {
        assert!(
            html.contains(&format!(
                "<tr><td>{key}</td><td class=\"num\">{}</td><td class=\"num\">{ok}</td>\
                 <td class=\"num\">{fail}</td><td class=\"num\">{info}</td>",
                ok + fail + info
            )),
            "availability of {key}"
        );
    }
    // Committed sends are acknowledged writes; the final reads hold every one.
    assert_eq!(results.lost_acknowledged(), 0);
    assert!(html.contains("The checker's count agrees (stats.lost_acknowledged: 0)"));
}

#[test]
fn transaction_counts_that_disagree_with_the_history_are_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("txn/20261202T070000Z");
    let f = txn_fixture();
    let mut results = f.history.write_run(&dir, "txn");
    let html = std::fs::read_to_string(render_run(&dir).unwrap()).unwrap();
    assert!(!html.contains("stats.transactions says"));
    // A results.json that miscounts: the page shows the checker's figure and warns.
    results.stats["transactions"]["txns"]["committed"] = Value::from(99);
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string(&results).unwrap(),
    )
    .unwrap();
    let html = std::fs::read_to_string(render_run(&dir).unwrap()).unwrap();
    let [committed, aborted, unknown] = count_txns(&f.history.ops);
    assert!(html.contains(&format!(
        "transactions: the history has {committed} committed, {aborted} aborted and {unknown} \
         unknown txn completions, stats.transactions says 99, {aborted} and {unknown}"
    )));
    assert!(html.contains("Transactions: <strong>99 committed</strong>"));
}

/// The offset of every (key, value) any ok op of `ops` shows: sends' acknowledged offsets
/// and polls' records.
fn offsets_in(ops: &[Op]) -> HashMap<(String, i64), u64> {
    let mut out = HashMap::new();
    for op in ops.iter().filter(|op| op.kind == OpType::Ok) {
        for micro in op.micro_ops().unwrap_or_default() {
            match micro {
                MicroOp::Send {
                    key,
                    offset: Some(o),
                    value,
                } => {
                    out.insert((key, value), o);
                }
                MicroOp::Poll(records) => {
                    for (key, recs) in records {
                        for (o, v) in recs {
                            out.insert((key.clone(), v), o);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    out
}

#[test]
fn a_generated_transactional_history_shows_each_cycle_with_its_steps_and_the_true_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("txn-gen/20261202T070000Z");
    let ops = generate_txns(TxnGenConfig {
        seed: 3,
        txns: 600,
        ..Default::default()
    });
    let history = common::txn::TxnHistory::from_ops(ops.clone());
    let results = history.write_run(&dir, "txn-gen");
    let html = std::fs::read_to_string(render_run(&dir).unwrap()).unwrap();
    common::assert_anchors_resolve(&html);
    let [committed, aborted, unknown] = count_txns(&ops);
    assert!(
        committed > 0 && aborted > 0,
        "{committed} {aborted} {unknown}"
    );
    // A correct history: valid, and the headline says how many transactions committed.
    assert_eq!(results.valid, Validity::Valid, "{:?}", results.anomalies);
    assert!(html.contains(&format!(
        "; {committed} of {} transactions committed</p>",
        committed + aborted + unknown
    )));
    assert!(html.contains(&format!(
        "Transactions: <strong>{committed} committed</strong>, {aborted} aborted, \
         {unknown} unknown (of {}; stats.transactions)",
        committed + aborted + unknown
    )));

    let mut cycles_checked = 0;
    for name in ["G0", "G1c", "G-single", "G2"] {
        let Some(a) = results.anomalies.get(name) else {
            continue;
        };
        for (n, example) in a.examples.iter().take(20).enumerate() {
            let view = between(
                &html,
                &format!("<figure id=\"cycle-{name}-{n}\""),
                "</figure>",
            );
            // The offsets the cycle's own completed ops show (the report's source; an op
            // that ended info or never completed shows none).
            let cycle_ops: Vec<Op> = example["ops"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| ops[o["op"].as_u64().unwrap() as usize].clone())
                .collect();
            let offsets = offsets_in(&cycle_ops);
            for step in example["steps"].as_array().unwrap() {
                let (from, to) = (step["from"].as_u64().unwrap(), step["to"].as_u64().unwrap());
                let (kind, key) = (
                    step["kind"].as_str().unwrap(),
                    step["key"].as_str().unwrap(),
                );
                let values: Vec<i64> = match step.get("values") {
                    Some(vs) => vs
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_i64().unwrap())
                        .collect(),
                    None => vec![step["value"].as_i64().unwrap()],
                };
                let at = |v: i64| match offsets.get(&(key.to_string(), v)) {
                    Some(o) => format!("{v}@{o}"),
                    None => format!("{v}@?"),
                };
                let detail = match (kind, values.as_slice()) {
                    ("ww", [a, b]) => format!("{} → {}", at(*a), at(*b)),
                    ("rw", [a, b]) => format!("read {}, next {}", at(*a), at(*b)),
                    (_, [a]) => at(*a),
                    other => panic!("{name}: a step of {other:?}"),
                };
                // A value its committed writer sent always has its offset.
                if kind != "rw" && ops[from as usize].kind == OpType::Ok {
                    assert!(!detail.starts_with(&format!("{}@?", values[0])), "{detail}");
                }
                assert!(
                    view.contains(&step_row(from, kind, key, &detail, to)),
                    "{name} example {n}: step {step}: {view}"
                );
                cycles_checked += 1;
            }
        }
    }
    assert!(
        cycles_checked >= 2,
        "the generated history holds cycles: {cycles_checked} steps"
    );
}
