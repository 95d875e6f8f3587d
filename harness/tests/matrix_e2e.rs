//! `tidewater matrix` end to end on a real local cluster (root only; skipped otherwise): a
//! 2 x 2 matrix of short fault-free runs, `acks` in {1, all} by `min.insync.replicas` in
//! {2, 4} on a replication factor of 3.
//!
//! `min.insync.replicas=4` is above the replication factor, so (as in Kafka) every acks=all
//! send is refused with NOT_ENOUGH_REPLICAS while acks=1 sends are unaffected. The matrix
//! expects at least half the sends of every cell to be acknowledged: three cells hold it and
//! `acks=all min.insync.replicas=4` cannot, so the exit code must be 1 (an expectation
//! failed, no run errored), and the JUnit file must say which cell failed and why.
//!
//! Four 8-second runs with their set-up, recovery and final reads: about 40 s on 2 cores.

mod run_support;

use run_support::{can_run, json, tidewater};
use std::path::PathBuf;

/// A /24 no other test uses (infra 10.213.x, runner 10.214.x, groups 10.216.x).
const SUBNET: &str = "10.215.1.0/24";

const MATRIX: &str = r#"
name = "mini"
repetitions = 1

[run]
time_limit_s = 8
nemesis = []
rate = 50.0
partitions = 1
recovery_time_limit_s = 10
final_time_limit_s = 10

[axes]
acks = ["1", "all"]
"min.insync.replicas" = [2, 4]

[[expect]]
description = "most sends acknowledged"
availability_min = 0.5

[[expect]]
when = { "min.insync.replicas" = 2 }
description = "no lost acknowledged write"
lost_writes_max = 0
forbidden_anomalies = ["lost-write"]
"#;

const LABELS: [&str; 4] = [
    "acks=1 min.insync.replicas=2",
    "acks=1 min.insync.replicas=4",
    "acks=all min.insync.replicas=2",
    "acks=all min.insync.replicas=4",
];
const FAILING: &str = "acks=all min.insync.replicas=4";

/// Every `href="..."` value of a page.
fn hrefs(html: &str) -> Vec<&str> {
    html.split("href=\"")
        .skip(1)
        .map(|rest| &rest[..rest.find('"').expect("closing quote")])
        .collect()
}

/// Undoes the `%XX` escapes the pages put in links.
fn unescape(link: &str) -> PathBuf {
    let bytes = link.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    PathBuf::from(String::from_utf8(out).unwrap())
}

/// The `<testcase ...>...</testcase>` element of a cell.
fn testcase<'a>(junit: &'a str, label: &str) -> &'a str {
    let name = junit
        .find(&format!(" name=\"{label}\">"))
        .unwrap_or_else(|| panic!("no testcase for {label}:\n{junit}"));
    let start = junit[..name].rfind("<testcase ").expect("testcase opens");
    let end = junit[start..].find("</testcase>").expect("testcase closes") + start;
    &junit[start..end]
}

#[test]
fn a_two_by_two_matrix_writes_its_page_and_junit_and_fails_on_the_unsatisfiable_cell() {
    if !can_run("matrix_e2e") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("mini.toml");
    std::fs::write(&file, MATRIX).unwrap();
    let store = tmp.path().join("store");
    let out = tidewater(&[
        "matrix",
        file.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--subnet",
        SUBNET,
        "--plain",
        // A short night: the file's 8 s overridden, and a fixed seed instead of a random one.
        "--time-limit",
        "6",
        "--seeds",
        "77",
    ]);
    let transcript = out.transcript();
    assert_eq!(
        out.code, 1,
        "one expectation failed, no run errored:\n{transcript}"
    );

    let out_dir = store.join("mini");
    let page_path = out_dir.join("matrix.html");
    let junit_path = out_dir.join("junit.xml");
    assert!(
        out.stdout
            .contains(&format!("matrix page: {}", page_path.display())),
        "{transcript}"
    );
    assert!(
        out.stdout
            .contains(&format!("junit: {}", junit_path.display())),
        "{transcript}"
    );
    for label in LABELS {
        assert!(
            out.stdout.contains(&format!("matrix cell {label} run 1")),
            "{transcript}"
        );
    }

    // JUnit: a testcase per cell, one failure (the unsatisfiable cell), no error.
    let junit = std::fs::read_to_string(&junit_path).unwrap();
    assert!(
        junit.contains("tests=\"4\" failures=\"1\" errors=\"0\""),
        "{junit}\n{transcript}"
    );
    for label in LABELS {
        let case = testcase(&junit, label);
        assert!(
            case.contains("classname=\"tidewater.matrix.mini\""),
            "{case}"
        );
        assert!(!case.contains("<error"), "{label}: {case}");
        assert_eq!(
            case.contains("<failure"),
            label == FAILING,
            "{label}: {case}"
        );
    }
    let failing = testcase(&junit, FAILING);
    assert!(
        failing.contains("availability 0.0% (required: 50.0%)"),
        "every acks=all send is refused: {failing}"
    );

    // The page: every cell in the table, the charts, and a link to each run's report that
    // resolves to the report file of a run of that cell.
    let page = std::fs::read_to_string(&page_path).unwrap();
    for label in LABELS {
        assert!(page.contains(label), "{label} on the page");
    }
    for chart in [
        "chart-lost-writes",
        "chart-availability",
        "chart-latency",
        "chart-hw-regressions",
    ] {
        assert!(page.contains(&format!("id=\"{chart}\"")), "{chart}");
    }
    let reports: Vec<PathBuf> = hrefs(&page)
        .into_iter()
        .filter(|h| h.ends_with("report.html"))
        .map(|h| out_dir.join(unescape(h)))
        .collect();
    assert_eq!(reports.len(), 4, "one report link per run: {reports:?}");
    let mut cells_linked = Vec::new();
    for report in &reports {
        assert!(report.is_file(), "{} resolves", report.display());
        let run_dir = report.parent().unwrap();
        let config = json(&run_dir.join("config.json"));
        let cell = config["matrix_cell"].as_str().unwrap().to_string();
        // The run's settings are the cell's.
        let (acks, min_isr) = (
            config["acks"].as_str().unwrap(),
            config["sets"]["min.insync.replicas"].as_str().unwrap(),
        );
        assert_eq!(cell, format!("acks={acks} min.insync.replicas={min_isr}"));
        assert_eq!(
            (config["seed"].as_u64(), config["time_limit_s"].as_u64()),
            (Some(77), Some(6))
        );
        assert!(
            run_dir.join("results.json").is_file(),
            "{} was checked",
            run_dir.display()
        );
        cells_linked.push(cell);
    }
    cells_linked.sort();
    assert_eq!(cells_linked, LABELS);

    // The store's index groups the runs by cell, one trend square per run.
    let index = std::fs::read_to_string(store.join("index.html")).unwrap();
    let trends = &index
        [index.find("id=\"trends\"").expect("trends section")..index.find("id=\"runs\"").unwrap()];
    for label in LABELS {
        assert!(trends.contains(&format!("<code>{label}</code>")), "{label}");
    }
    assert_eq!(trends.matches("<a class=\"").count(), 4, "{trends}");
}
