//! Renders a report, an index and a matrix page from a fixed run directory and checks their
//! content: anomalies with examples, plots with fault bands, self-containment.

mod common;

use common::fixture_run;
use std::collections::BTreeMap;
use tidewater_reports::faults::FaultKind;
use tidewater_reports::matrix::{CellInput, Expectation, MatrixInput, RunOutcome};
use tidewater_reports::plots::svg_hex;
use tidewater_reports::report::PLOT_IDS;
use tidewater_reports::{junit_xml, render_index, render_matrix, render_run, summarize_matrix};

/// The HTML of the element with `id` (up to the end of its figure).
fn figure<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<figure id=\"{id}\""))
        .unwrap_or_else(|| panic!("{id} missing"));
    let end = html[start..].find("</figure>").unwrap() + start;
    &html[start..end]
}

#[test]
fn report_shows_every_anomaly_with_examples_and_every_plot_with_fault_bands() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("fixture/20261130T230000Z");
    let fx = fixture_run(&dir, "cell-a", false);
    let path = render_run(&dir).unwrap();
    assert_eq!(path, dir.join("report.html"));
    let html = std::fs::read_to_string(&path).unwrap();

    // Verdict and settings.
    assert!(html.contains("<span class=\"verdict invalid\">invalid</span>"));
    assert!(html.contains("min.insync.replicas"));
    assert!(html.contains("unclean.leader.election.enable"));
    assert!(html.contains("<pre id=\"reproduce\">tidewater run --seed 42 --name fixture</pre>"));

    // Every anomaly, with its count and examples, and links to the ops they name.
    for (name, count) in [("lost-write", 1), ("hw-regression", 1), ("unseen", 0)] {
        assert!(
            html.contains(&format!(
                "<div id=\"anomaly-{name}\" class=\"anomaly\"><h3>{name}: {count} "
            )),
            "{name}"
        );
    }
    assert!(html.contains("id=\"anomaly-lost-write-0\""));
    assert!(html.contains("<code>102</code>"), "the lost value is shown");
    assert!(html.contains("id=\"anomaly-hw-regression-0\""));
    assert!(html.contains("visibility-only"));
    for i in [
        fx.lost_ack,
        fx.lost_read,
        fx.regression,
        fx.regression_prior,
    ] {
        assert!(
            html.contains(&format!("<a href=\"#op-{i}\">#{i}</a>")),
            "link to op {i}"
        );
        let row = format!("<tr id=\"op-{i}\">");
        let at = html
            .find(&row)
            .unwrap_or_else(|| panic!("anchor for op {i}"));
        let row_html = &html[at..at + html[at..].find("</tr>").unwrap()];
        assert!(
            row_html.contains(&format!("&quot;index&quot;:{i},")),
            "{row_html}"
        );
    }
    // The invocation of a referenced completion is listed too.
    assert!(html.contains(&format!("<tr id=\"op-{}\">", fx.lost_ack - 1)));

    // Every plot, as inline SVG; time plots shade each fault kind in its own colour.
    for id in PLOT_IDS {
        let fig = figure(&html, id);
        assert!(fig.contains("<svg width="), "{id} has an SVG");
        assert!(fig.contains("<text"), "{id} has labels");
        if id == "plot-lost-writes" {
            continue; // offsets on x: no time, no fault windows
        }
        for kind in [FaultKind::Kill, FaultKind::Pause, FaultKind::Partition] {
            assert!(
                fig.contains(&format!("fill=\"{}\"", svg_hex(kind.rgb()))),
                "{id} shades {kind:?}"
            );
            assert!(
                fig.contains(&format!("{} (fault)", kind.label())),
                "{id} legend names {kind:?}"
            );
        }
    }
    assert!(figure(&html, "plot-hw").contains("1 observations went back"));
    assert!(figure(&html, "plot-isr").contains("min.insync.replicas = 2"));
    assert!(figure(&html, "plot-lost-writes").contains("1 lost acknowledged writes"));

    // Summary: 6 sends invoked: 4 ok, 1 fail, 1 info.
    assert!(html.contains(
        "<tr><td>send</td><td class=\"num\">7</td><td class=\"num\">5</td><td class=\"num\">1</td><td class=\"num\">1</td>"
    ), "send summary row");
    // Checker statistics, but not the series drawn as a plot.
    let stats = &html[html.find("<section id=\"stats\">").unwrap()..];
    assert!(stats.contains("<tr><th>unseen_final</th><td><code>0</code></td></tr>"));
    assert!(!stats[..stats.find("</section>").unwrap()].contains("unseen_series"));
    assert!(html.contains("<li>final reads of t0/1 timed out</li>"));
    // Fault table: the three windows and the unknown nemesis function.
    assert!(html.contains("compact-logs"));

    common::assert_anchors_resolve(&html);
    // Self-contained.
    for needle in ["http://", "https://", "src=", "<script", "<link", "url("] {
        assert!(!html.contains(needle), "found {needle}");
    }
    assert!(html.len() < 1_000_000);
}

#[test]
fn report_of_a_run_without_results_or_samples_still_renders_every_plot() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t/1");
    fixture_run(&dir, "c", true);
    std::fs::remove_file(dir.join("results.json")).unwrap();
    std::fs::remove_file(dir.join("samples.jsonl")).unwrap();
    let html = std::fs::read_to_string(render_run(&dir).unwrap()).unwrap();
    assert!(html.contains("not checked"));
    for id in PLOT_IDS {
        assert!(figure(&html, id).contains("<svg"), "{id}");
    }
    assert!(figure(&html, "plot-isr").contains("No samples.jsonl in this run."));
}

#[test]
fn index_lists_runs_newest_first_with_verdicts_and_cell_trends() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path();
    fixture_run(&store.join("fixture/20261129T230000Z"), "cell-a", true);
    fixture_run(&store.join("fixture/20261130T230000Z"), "cell-a", false);
    fixture_run(&store.join("other test/20261128T230000Z"), "cell-b", true);
    render_run(&store.join("fixture/20261130T230000Z")).unwrap();
    // A run in progress: history only.
    std::fs::create_dir_all(store.join("fixture/20261201T000000Z")).unwrap();
    std::fs::write(store.join("fixture/20261201T000000Z/history.jsonl"), "").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(store.join("fixture/20261130T230000Z"), store.join("latest"))
        .unwrap();

    let html = std::fs::read_to_string(render_index(store).unwrap()).unwrap();
    let order: Vec<usize> = [
        "20261201T000000Z",
        "20261130T230000Z",
        "20261129T230000Z",
        "20261128T230000Z",
    ]
    .iter()
    .map(|ts| {
        html.find(&format!(">{ts}</a>"))
            .unwrap_or_else(|| panic!("{ts} listed"))
    })
    .collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "newest first: {order:?}"
    );
    assert!(html.contains("<a href=\"fixture/20261130T230000Z/report.html\">"));
    assert!(
        html.contains("<a href=\"fixture/20261129T230000Z/\">"),
        "no report yet: link the directory"
    );
    assert!(html.contains("<a href=\"other%20test/20261128T230000Z/\">"));
    assert_eq!(
        html.matches("<span class=\"verdict invalid\">").count(),
        2,
        "run row and cell-a's latest"
    );
    assert!(html.contains("not checked"));
    assert!(html.contains("acks=all, nemesis=kill,pause,partition, min.insync.replicas=2"));
    assert!(html.contains("<strong class=\"nowrap\" style=\"color:#c62828\">lost-write 1</strong>"));
    // Trends: cell-a has two runs, oldest (valid) first.
    let trends = &html[html.find("id=\"trends\"").unwrap()..html.find("id=\"runs\"").unwrap()];
    let a = &trends[trends.find("cell-a").unwrap()..trends.find("cell-b").unwrap()];
    let valid = a.find("<a class=\"valid\"").unwrap();
    let invalid = a.find("<a class=\"invalid\"").unwrap();
    assert!(valid < invalid, "oldest to newest");
    assert_eq!(html.matches("title=\"20261128T230000Z valid\"").count(), 1);
    assert!(!html.contains("http"));
}

fn cell(
    label: &str,
    settings: &[(&str, &str)],
    expectation: Expectation,
    runs: Vec<RunOutcome>,
) -> CellInput {
    CellInput {
        label: label.into(),
        settings: settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        expectation,
        runs,
    }
}

#[test]
fn matrix_page_and_junit_follow_the_expectations() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let lossy = store.join("durability/a/1");
    let clean = store.join("durability/b/1");
    fixture_run(&lossy, "a", false);
    fixture_run(&clean, "b", true);
    render_run(&lossy).unwrap();
    let strict = Expectation {
        description: "no lost acknowledged write".into(),
        lost_writes_max: Some(0),
        ..Expectation::default()
    };
    let input = MatrixInput {
        title: "durability".into(),
        cells: vec![
            cell(
                "acks=all mir=2",
                &[("acks", "all"), ("min.insync.replicas", "2")],
                strict.clone(),
                vec![RunOutcome::Completed(lossy.clone())],
            ),
            cell(
                "acks=1 mir=1",
                &[("acks", "1"), ("min.insync.replicas", "1")],
                Expectation::default(),
                vec![
                    RunOutcome::Completed(clean.clone()),
                    RunOutcome::Errored {
                        run_dir: None,
                        error: "broker n2 did not start".into(),
                    },
                ],
            ),
        ],
    };
    let summary = summarize_matrix(&input).unwrap();
    let a = &summary.cells[0];
    assert_eq!(
        (
            a.lost_writes_total,
            a.runs_with_lost_writes,
            a.hw_regressions_total
        ),
        (1, 1, 1)
    );
    assert_eq!(
        a.failures,
        vec!["1 lost acknowledged writes (allowed: 0)".to_string()]
    );
    // 7 sends invoked per run, 5 ok.
    assert_eq!((a.sends_invoked, a.sends_ok), (7, 5));
    assert_eq!(a.send_latency_p50_ns, Some(3_000_000));
    let b = &summary.cells[1];
    assert!(b.expectation_held());
    assert_eq!(b.runs_errored(), 1);
    assert_eq!(summary.exit_code(), 1);

    let out = store.join("matrix/durability");
    let html = std::fs::read_to_string(render_matrix(&summary, &out).unwrap()).unwrap();
    for id in [
        "chart-lost-writes",
        "chart-availability",
        "chart-latency",
        "chart-hw-regressions",
    ] {
        assert!(figure(&html, id).contains("<svg"), "{id}");
    }
    assert!(html.contains("<a href=\"../../durability/a/1/report.html\">"));
    assert!(html.contains("<a href=\"../../durability/b/1/\">"));
    assert!(html.contains("71.4%"), "availability 5/7");
    assert!(html.contains("broker n2 did not start"));
    assert!(!html.contains("http"));

    let xml = junit_xml(&summary);
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
    assert!(xml.contains("<testsuite name=\"durability\" tests=\"2\" failures=\"1\" errors=\"1\">"));
    assert!(xml.contains(
        "<failure message=\"expectation failed: no lost acknowledged write\">1 lost acknowledged writes (allowed: 0)</failure>"
    ));
    assert!(
        xml.contains("<error message=\"1 of 2 runs errored\">-: broker n2 did not start</error>")
    );

    // The same matrix without the lossy run and the errored one passes.
    let passing = MatrixInput {
        title: "durability".into(),
        cells: vec![cell(
            "acks=all",
            &[],
            strict,
            vec![RunOutcome::Completed(clean)],
        )],
    };
    let summary = summarize_matrix(&passing).unwrap();
    assert_eq!(summary.exit_code(), 0);
    assert!(junit_xml(&summary).contains("failures=\"0\" errors=\"0\""));
}

#[test]
fn report_reads_the_harness_run_config_shape() {
    // RunConfig writes `sets`, a list for `nemesis`, a `schedule` and no `command`.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("queue/20261130T230000Z");
    fixture_run(&dir, "c", true);
    common::write_json(
        &dir.join("config.json"),
        &serde_json::json!({
            "name": "queue", "seed": 7, "time_limit_s": 30, "nodes": 3,
            "nemesis": ["kill", "partition"], "acks": "1",
            "sets": {"unclean.leader.election.enable": "true"},
            "schedule": [{"at_s": 1.0, "fault": "kill"}, {"at_s": 5.0, "fault": "heal"}]
        }),
    );
    let html = std::fs::read_to_string(render_run(&dir).unwrap()).unwrap();
    assert!(html.contains(
        "<td><code>unclean.leader.election.enable</code></td><td><code>true</code></td>"
    ));
    assert!(html.contains("<code>kill,partition</code>"));
    assert!(html.contains("Fault schedule: 2 steps (in config.json"));
    assert!(html.contains(&format!(
        "<pre id=\"reproduce\">tidewater run --replay {}</pre>",
        dir.display()
    )));
    let index = std::fs::read_to_string(render_index(tmp.path()).unwrap()).unwrap();
    assert!(index.contains("acks=1, nemesis=kill,partition, unclean.leader.election.enable=true"));
}

#[test]
fn a_group_run_plots_its_rebalances_and_names_its_redeliveries() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("g/1");
    fixture_run(&dir, "c", true);
    let html = std::fs::read_to_string(render_run(&dir).unwrap()).unwrap();
    assert!(
        !html.contains("plot-rebalances"),
        "a queue run has no rebalance plot"
    );

    let path = dir.join("results.json");
    let mut results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    results["stats"]["rebalances"] = serde_json::json!({
        "count": 3, "ok": 2, "fail": 1, "info": 0, "duration_ms_mean": 150.0,
        "duration_ms_max": 300, "series": [[1000, 50], [4000, 100], [9000, 300]]
    });
    results["stats"]["redeliveries"] =
        serde_json::json!({"delivered": 40, "redelivered_records": 3, "redeliveries": 4});
    std::fs::write(&path, results.to_string()).unwrap();
    let html = std::fs::read_to_string(render_run(&dir).unwrap()).unwrap();
    for id in tidewater_reports::report::GROUP_PLOT_IDS {
        let fig = figure(&html, id);
        assert!(fig.contains("<svg width="), "{id} has an SVG");
        assert!(fig.matches("<circle").count() >= 3, "{id} draws its dots");
    }
    let fig = figure(&html, "plot-rebalances");
    assert!(
        fig.contains(
            "Rebalances: 3 (2 ok, 1 failed, 0 indeterminate), mean 150 ms, longest 300 ms."
        ),
        "{fig}"
    );
    assert!(
        fig.contains("Redeliveries: 4 deliveries of 3 records that their group had already been given, out of 40 records delivered"),
        "{fig}"
    );
    common::assert_anchors_resolve(&html);
}
