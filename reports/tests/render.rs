//! Renders a report, an index and a matrix page from a fixed run directory and checks their
//! content: standing, anomalies with sentences and examples, plots with fault bands,
//! self-containment. The fixture's results.json is of the older shape (`violation`, no
//! promise, no stats.fault_windows), so these tests also cover reading such files.

mod common;

use common::fixture_run;
use std::collections::BTreeMap;
use tidewater_reports::draw::chart::svg_hex;
use tidewater_reports::pages::matrix::{CellInput, Expectation, MatrixInput, RunOutcome};
use tidewater_reports::pages::report::PLOT_IDS;
use tidewater_reports::scan::fault_windows::{BandColour, Fault};
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

    // Standing (judged from the violation flag of an older results.json), and settings.
    assert!(html.contains("<span class=\"verdict broken\""), "red badge");
    assert!(html.contains(
        ">promise broken</span><span class=\"facts\">valid: false · promise: broken</span>"
    ));
    assert!(
        html.contains("<p class=\"headline broken\">DATA LOST: 1 acknowledged writes; Kafka&#39;s promise broken</p>"),
        "without stats.lost_acknowledged, the lost-write count"
    );
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
    assert!(
        html.contains(&format!(
            "t0/0: value 102, acknowledged at offset 2 by op <a href=\"#op-{0}\">#{0}</a> \
             (acks=all), was never read, though op <a href=\"#op-{1}\">#{1}</a> read past that \
             offset without it: it is gone.",
            fx.lost_ack, fx.lost_read
        )),
        "a sentence says what happened"
    );
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
        for kind in [Fault::Kill, Fault::Pause, Fault::Partition] {
            assert!(
                fig.contains(&format!("fill=\"{}\"", svg_hex(kind.rgb()))),
                "{id} shades {kind:?}"
            );
            if id != "plot-faults" {
                assert!(
                    fig.contains(&format!("fill=\"{}\" fill-opacity=", svg_hex(kind.rgb()))),
                    "{id} shades {kind:?} as a band"
                );
            }
            assert!(
                fig.contains(&format!("{} (fault)", kind.name())),
                "{id} legend names {kind:?}"
            );
        }
    }
    // The windows, derived from the history with the checker's tracker (no fault_windows).
    for title in [
        "kill n1 from 1.0 s to 3.0 s",
        "pause n2 from 4.0 s to 6.0 s",
        "partition n1,n2,n3 from 8.0 s to 12.0 s",
    ] {
        assert!(
            figure(&html, "plot-latency").contains(&format!("<title>{title}</title>")),
            "{title}"
        );
    }
    assert!(html.contains("the history's nemesis ops (results.json has no stats.fault_windows)"));
    assert!(figure(&html, "plot-hw").contains("1 regressions, gathered into 1 episodes"));
    assert!(figure(&html, "plot-isr").contains("min.insync.replicas = 2"));
    // Without final reads the report cannot tell which writes are gone: examples only.
    assert!(figure(&html, "plot-lost-writes")
        .contains("only the checker's 1 lost-write examples are drawn"));
    assert!(figure(&html, "plot-lost-writes")
        .contains("<title>t0/0: the acknowledged write at offset 2 is gone</title>"));
    // The time axis starts at the main phase (the first client op, at 0.1 s).
    assert!(html.contains("Time axes start at the main phase, 0.1 s after the test started"));

    // Summary: 6 sends invoked: 4 ok, 1 fail, 1 info.
    assert!(html.contains(
        "<tr><td>send</td><td class=\"num\">7</td><td class=\"num\">5</td><td class=\"num\">1</td><td class=\"num\">1</td>"
    ), "send summary row");
    // Checker statistics, but not the series drawn as a plot.
    let stats = &html[html.find("<section id=\"stats\">").unwrap()..];
    assert!(stats.contains("<tr><th>unseen_final</th><td class=\"num\">0</td></tr>"));
    assert!(!stats[..stats.find("</section>").unwrap()].contains("unseen_series"));
    assert!(html.contains("<li>final reads of t0/1 timed out</li>"));
    // Fault table: the three windows and the unknown nemesis function.
    assert!(html.contains("compact-logs"));

    common::assert_anchors_resolve(&html);
    common::assert_files_resolve(&html, &dir);
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
    for plot in ["plot-isr", "plot-leaders", "plot-hw"] {
        assert!(
            figure(&html, plot).contains("No replica samples in this run"),
            "{plot}"
        );
    }
    assert!(
        !figure(&html, "plot-isr").contains("sampled every"),
        "no sampling interval is claimed without samples"
    );
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
        html.matches("<span class=\"verdict broken\"").count(),
        2,
        "run row and cell-a's latest"
    );
    assert!(html.contains("valid: false · promise: broken"));
    assert!(html.contains("<span class=\"verdict none\">not checked</span>"));
    assert!(html.contains("acks=all, nemesis=kill,pause,partition, min.insync.replicas=2"));
    assert!(html.contains("<strong class=\"nowrap\" style=\"color:#c62828\">lost-write 1</strong>"));
    // Lost acknowledged writes: the lost-write count for these older results.
    assert!(html.contains("<td class=\"num\">1</td><td class=\"num\">–</td>"));
    // Trends: cell-a has two runs, oldest (valid) first, coloured by writes lost.
    let trends = &html[html.find("id=\"trends\"").unwrap()..html.find("id=\"runs\"").unwrap()];
    let a = &trends[trends.find("cell-a").unwrap()..trends.find("cell-b").unwrap()];
    let valid = a.find("<a class=\"clean\"").unwrap();
    let broken = a.find("<a class=\"broken\"").unwrap();
    assert!(valid < broken, "oldest to newest");
    assert!(html.contains("title=\"20261128T230000Z valid; no acknowledged write\""));
    assert!(!html.contains("http"));
}

#[test]
fn the_index_names_the_fault_plan_and_setup_failures_and_colours_trends_by_loss() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path();
    let cell = "acks=1 unclean.leader.election.enable=true";
    let lossy = store.join("unclean-election/20261201T120000Z");
    common::unclean::unclean_election_run(&lossy, Some(cell));
    let failed = store.join("unclean-election/20261201T130000Z");
    std::fs::create_dir_all(&failed).unwrap();
    std::fs::write(failed.join("history.jsonl"), "").unwrap();
    common::write_json(
        &failed.join("config.json"),
        &serde_json::json!({"name": "unclean-election", "plan": "unclean-election",
                            "nemesis": ["kill"], "acks": "1", "matrix_cell": cell}),
    );
    std::fs::write(
        failed.join("harness.log"),
        "2026-12-01T13:00:09Z  INFO tidewater: phase setup\n\
         2026-12-01T13:00:39Z ERROR tidewater::cli: setup failed: could not create topic t0: cluster unreachable\n",
    )
    .unwrap();
    let html = std::fs::read_to_string(render_index(store).unwrap()).unwrap();
    // The plan, not the unused random nemesis.
    assert!(html.contains("<code>acks=1, plan=unclean-election, min.insync.replicas=2, unclean.leader.election.enable=true</code>"));
    assert!(!html.contains("nemesis=kill"));
    // A setup failure says so.
    assert!(html.contains("<span class=\"verdict setup\" title=\"could not create topic t0: cluster unreachable\">setup failed</span>"));
    // The lossy run: its loss and the share of sends acknowledged, counted from the files.
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(lossy.join("results.json")).unwrap())
            .unwrap();
    let (lost, acked) = (
        results["stats"]["lost_acknowledged"]["total"]
            .as_u64()
            .unwrap(),
        results["stats"]["sends"]["acked"].as_u64().unwrap(),
    );
    let history = std::fs::read_to_string(lossy.join("history.jsonl")).unwrap();
    let ops: Vec<serde_json::Value> = history
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let count = |kind: &str| {
        ops.iter()
            .filter(|op| op["f"] == "send" && op["type"] == kind)
            .count() as u64
    };
    let (sends_ok, sends) = (count("ok"), count("invoke"));
    assert_eq!(acked, sends_ok);
    assert!(
        html.contains(&format!("<td class=\"num\">{lost} of {acked}</td>")),
        "{lost} of {acked}"
    );
    assert!(html.contains(&format!(
        "<td class=\"num\">{:.0}%</td>",
        100.0 * sends_ok as f64 / sends as f64
    )));
    // Its trend square: red (10% or more lost), with the figures in its title.
    assert!(lost * 10 >= acked);
    assert!(html.contains(&format!(
        "title=\"20261201T120000Z data lost, allowed; {lost} of {acked} acknowledged writes lost ({:.1}%); {:.0}% of sends acknowledged\"><span class=\"loss\" style=\"background:#a50f15\">",
        100.0 * lost as f64 / acked as f64,
        100.0 * sends_ok as f64 / sends as f64
    )));
    assert!(html.contains("title=\"20261201T130000Z setup failed: could not create topic t0: cluster unreachable\"><span class=\"loss\" style=\"background:#37474f\">"));
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
fn a_system_axis_puts_the_systems_side_by_side_and_marks_where_they_differ() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let lossy = store.join("faithfulness/a/1");
    let clean = store.join("faithfulness/b/1");
    let clean2 = store.join("faithfulness/c/1");
    fixture_run(&lossy, "a", false);
    fixture_run(&clean, "b", true);
    fixture_run(&clean2, "c", true);
    // The same standing as `lossy`, with more writes lost: timing, not a difference.
    let lossier = store.join("faithfulness/d/1");
    fixture_run(&lossier, "d", false);
    let results_path = lossier.join("results.json");
    let mut results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&results_path).unwrap()).unwrap();
    assert_eq!(results["anomalies"]["lost-write"]["count"], 1);
    results["stats"]["lost_acknowledged"] = serde_json::json!({"total": 5});
    std::fs::write(&results_path, results.to_string()).unwrap();
    let run = |dir: &std::path::PathBuf| vec![RunOutcome::Completed(dir.clone())];
    let input = MatrixInput {
        title: "faithfulness".into(),
        cells: vec![
            cell(
                "plan=x system=companion",
                &[("plan", "x"), ("system", "companion")],
                Expectation::default(),
                run(&clean),
            ),
            cell(
                "plan=x system=kafka:4.1.1",
                &[("plan", "x"), ("system", "kafka:4.1.1")],
                Expectation::default(),
                run(&lossy),
            ),
            cell(
                "plan=y system=companion",
                &[("plan", "y"), ("system", "companion")],
                Expectation::default(),
                run(&clean2),
            ),
            cell(
                "plan=y system=kafka:4.1.1",
                &[("plan", "y"), ("system", "kafka:4.1.1")],
                Expectation::default(),
                run(&clean),
            ),
            cell(
                "plan=z system=companion",
                &[("plan", "z"), ("system", "companion")],
                Expectation::default(),
                run(&lossy),
            ),
            cell(
                "plan=z system=kafka:4.1.1",
                &[("plan", "z"), ("system", "kafka:4.1.1")],
                Expectation::default(),
                run(&lossier),
            ),
        ],
    };
    let summary = summarize_matrix(&input).unwrap();
    let html =
        std::fs::read_to_string(render_matrix(&summary, &store.join("faithfulness")).unwrap())
            .unwrap();
    let start = html
        .find("<section id=\"systems\">")
        .expect("the systems section");
    let section = &html[start..start + html[start..].find("</section>").unwrap()];
    assert!(
        section.contains(
            "<tr><th>settings</th><th>companion</th><th>kafka:4.1.1</th><th>differs</th></tr>"
        ),
        "{section}"
    );
    let row = |plan: &str| {
        let at = section.find(&format!("<tr><td>plan={plan}</td>")).unwrap();
        &section[at..at + section[at..].find("</tr>").unwrap()]
    };
    let valid = "<span class=\"verdict valid\">1 valid, 0 invalid of 1</span> lost 0";
    let lost = "<span class=\"verdict invalid\">0 valid, 1 invalid of 1</span> lost 1";
    assert_eq!(
        row("x"),
        format!("<tr><td>plan=x</td><td>{valid}</td><td>{lost}</td><td><span class=\"verdict invalid\">yes</span></td>")
    );
    assert_eq!(
        row("y"),
        format!("<tr><td>plan=y</td><td>{valid}</td><td>{valid}</td><td><span class=\"muted\">no</span></td>")
    );
    let lost5 = "<span class=\"verdict invalid\">0 valid, 1 invalid of 1</span> lost 5";
    assert_eq!(
        row("z"),
        format!("<tr><td>plan=z</td><td>{lost}</td><td>{lost5}</td><td><span class=\"muted\">no</span></td>")
    );
    // One system only: no such section.
    let one = MatrixInput {
        title: "one".into(),
        cells: input.cells[..1].to_vec(),
    };
    let html = std::fs::read_to_string(
        render_matrix(&summarize_matrix(&one).unwrap(), &store.join("one")).unwrap(),
    )
    .unwrap();
    assert!(!html.contains("id=\"systems\""));
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
    for id in tidewater_reports::pages::report::GROUP_PLOT_IDS {
        let fig = figure(&html, id);
        assert!(fig.contains("<svg width="), "{id} has an SVG");
        let dots = fig
            .split("<path ")
            .find(|p| p.contains("<title>rebalance</title>"))
            .expect("a path of rebalance dots");
        assert_eq!(dots.matches("h0").count(), 3, "{id} draws its dots");
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

#[test]
fn the_matrix_page_lists_shared_settings_counts_lost_acknowledged_and_never_holds_an_errored_cell()
{
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let lossy = store.join("m/20261201T120000Z");
    common::unclean::unclean_election_run(&lossy, Some("acks=1"));
    let strict = Expectation {
        description: "no lost acknowledged write".into(),
        lost_writes_max: Some(0),
        ..Expectation::default()
    };
    let input = MatrixInput {
        title: "m".into(),
        cells: vec![
            cell(
                "acks=1",
                &[("acks", "1")],
                Expectation::default(),
                vec![RunOutcome::Completed(lossy.clone())],
            ),
            cell(
                "acks=all",
                &[("acks", "all")],
                strict,
                vec![RunOutcome::Errored {
                    run_dir: None,
                    error: "setup failed: cluster unreachable".into(),
                }],
            ),
        ],
    };
    let summary = summarize_matrix(&input).unwrap();
    // The loss is stats.lost_acknowledged, which is what the history shows: acknowledged
    // values the final reads lack, counted here.
    let ops: Vec<serde_json::Value> = std::fs::read_to_string(lossy.join("history.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut acked = Vec::new();
    let mut kept = std::collections::BTreeSet::new();
    for op in ops.iter().filter(|op| op["type"] == "ok") {
        for m in op["value"].as_array().unwrap() {
            if m[0] == "send" {
                acked.push(m[2][1].as_i64().unwrap());
            } else if m[0] == "poll" && op["final"] == true {
                for records in m[1].as_object().unwrap().values() {
                    kept.extend(
                        records
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|r| r[1].as_i64().unwrap()),
                    );
                }
            }
        }
    }
    let lost = acked.iter().filter(|v| !kept.contains(v)).count() as u64;
    assert!(lost > 0);
    assert_eq!(summary.cells[0].lost_writes_total, lost);
    assert_eq!(summary.cells[0].runs[0].lost_writes, lost);
    // The errored cell was not evaluated: not failed, not held.
    use tidewater_reports::pages::matrix::CellStatus;
    assert_eq!(summary.cells[1].status(), CellStatus::NotEvaluated);
    assert_eq!(summary.exit_code(), 2);
    assert_eq!(
        summary.shared_settings.get("plan").map(String::as_str),
        Some("unclean-election")
    );
    assert_eq!(
        summary
            .shared_settings
            .get("min.insync.replicas")
            .map(String::as_str),
        Some("2")
    );
    assert!(
        !summary.shared_settings.contains_key("acks"),
        "an axis is not shared"
    );
    assert!(
        !summary.shared_settings.contains_key("nemesis"),
        "a plan replaced it"
    );

    let out = store.join("m");
    let html = std::fs::read_to_string(render_matrix(&summary, &out).unwrap()).unwrap();
    assert!(html.contains("<section id=\"shared\"><h2>Shared by every cell</h2>"));
    assert!(html.contains("<tr><th>plan</th><td><code>unclean-election</code></td></tr>"));
    assert!(html.contains("<tr><th>min.insync.replicas</th><td><code>2</code></td></tr>"));
    let errored_row = &html[html.find("<tr id=\"cell-C2\">").unwrap()..];
    let errored_row = &errored_row[..errored_row.find("</tr>").unwrap()];
    assert!(
        errored_row.contains("<span class=\"verdict none\">not evaluated</span> every run errored (setup failed: cluster unreachable)"),
        "{errored_row}"
    );
    assert!(!errored_row.contains(">yes<"), "{errored_row}");
    let lossy_row = &html[html.find("<tr id=\"cell-C1\">").unwrap()..];
    let lossy_row = &lossy_row[..lossy_row.find("</tr>").unwrap()];
    assert!(
        lossy_row.contains(&format!("<td class=\"num\">{lost}</td>")),
        "{lossy_row}"
    );
    assert!(
        html.contains("<span class=\"verdict allowed\""),
        "the run's standing"
    );
    assert!(html.contains("valid: false · promise: kept"));
    assert!(junit_xml(&summary).contains(&format!("lost_writes={lost} ")));
    common::assert_anchors_resolve(&html);
    common::assert_files_resolve(&html, &out);
}
