//! Opens generated reports (a fixture with every kind of fault, and the unclean-election
//! run), the index and a matrix page in headless Chromium and checks that every plot and
//! every other SVG renders with a non-zero size, that the pages log no error, and that every
//! link resolves (in-page anchors to an element, file links to a file). Screenshots of the
//! unclean-election report, the index and the matrix page are kept for humans to look at,
//! with the pages themselves, in `runs/` of `$TIDEWATER_ARTIFACTS` or else of
//! `<target>/tmp/tidewater-screenshots/` (printed by the test); those of two transactional
//! reports (every transaction anomaly, each cycle drawn; a generated run of 600
//! transactions) in `transactions/`. `TIDEWATER_REPORT_RUN=DIR`
//! adds a real run directory (for example one of `tidewater run --plan unclean-election`):
//! its report is rendered, probed the same way and photographed as `real-run-report.png`.
//!
//! Chromium comes from the distribution (`chromium-headless-shell` or `chromium`, installed
//! by `.ci/run`); `TIDEWATER_CHROMIUM` names another binary. Without one the test fails when
//! `TIDEWATER_REQUIRE_CHROMIUM` is set (`.ci/run` sets it where it installs Chromium) and is
//! skipped elsewhere, saying so.
//!
//! The pages have no script of their own. The test copies each page and adds a probe: one
//! script at the top records error events (scripts, failed resource loads), one at the end
//! measures every figure's SVG and writes the results into the DOM, which Chromium's
//! `--dump-dom` prints. Console messages appear on Chromium's stderr as `CONSOLE` lines.

mod common;

use common::fixture_run;
use common::txn::{txn_fixture, TxnHistory};
use common::unclean::unclean_election_run;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tidewater_reports::pages::matrix::{CellInput, Expectation, MatrixInput, RunOutcome};
use tidewater_reports::pages::report::PLOT_IDS;
use tidewater_reports::{render_index, render_matrix, render_run, summarize_matrix};
use tidewater_workloads::checker::txn_gen::{generate_txns, TxnGenConfig};

/// How long Chromium may take for one page before the test fails.
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(60);

const PROBE_HEAD: &str = "<script>window.__errors=[];window.addEventListener('error',\
    e=>window.__errors.push(String(e.message||(e.target&&e.target.outerHTML))),true);</script>";

const PROBE_END: &str = "<script>window.addEventListener('load',()=>{\
    const figs=[...document.querySelectorAll('figure')].map(f=>{const s=f.querySelector('svg');\
    const r=s?s.getBoundingClientRect():{width:0,height:0};\
    return f.id+'='+Math.round(r.width)+'x'+Math.round(r.height);});\
    const svgs=[...document.querySelectorAll('svg')];\
    const flat=svgs.filter(s=>{const r=s.getBoundingClientRect();return r.width<1||r.height<1;}).length;\
    const dangling=[...document.querySelectorAll('a[href^=\"#\"]')]\
    .filter(a=>!document.getElementById(decodeURIComponent(a.getAttribute('href').slice(1)))).length;\
    const p=document.createElement('pre');p.id='probe';\
    p.textContent='FIGURES '+figs.join(' ')+' SVGS '+svgs.length+' FLAT '+flat+' DANGLING '+dangling\
    +' HEIGHT '+document.documentElement.scrollHeight\
    +' ERRORS '+window.__errors.length+' '+window.__errors.join(' | ');\
    document.body.appendChild(p);});</script>";

fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TIDEWATER_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let names = [
        "chromium-headless-shell",
        "chromium",
        "chromium-browser",
        "google-chrome",
    ];
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

/// Kills Chromium if the test fails or times out while it runs.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Loads `page` with the probe in Chromium; returns (probe line, console lines).
fn probe(chromium: &Path, page: &Path, work: &Path) -> (String, Vec<String>) {
    let html = std::fs::read_to_string(page).unwrap();
    let probed = html
        .replacen("<head>", &format!("<head>{PROBE_HEAD}"), 1)
        .replacen("</body>", &format!("{PROBE_END}</body>"), 1);
    // Beside the original, so relative links resolve the same way.
    let copy = page.with_file_name(".probe.html");
    std::fs::write(&copy, probed).unwrap();
    let out_path = work.join("dom.html");
    let err_path = work.join("stderr.txt");
    let child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!(
            "--user-data-dir={}",
            work.join("profile").display()
        ))
        .args([
            "--window-size=1200,900",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("file://{}", copy.display()))
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("start chromium");
    let mut child = KillOnDrop(child);
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            assert!(status.success(), "chromium exited with {status}");
            break;
        }
        assert!(
            started.elapsed() < CHROMIUM_TIMEOUT,
            "chromium did not finish {}",
            page.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let dom = std::fs::read_to_string(&out_path).unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    std::fs::remove_file(&copy).unwrap();
    let start = dom
        .find("<pre id=\"probe\">")
        .unwrap_or_else(|| panic!("no probe output in:\n{dom}"));
    let line = dom[start..].lines().next().unwrap().to_string();
    let console = stderr
        .lines()
        .filter(|l| l.contains("CONSOLE"))
        .map(str::to_string)
        .collect();
    (line, console)
}

/// A number the probe wrote after `label`.
fn probed(probe: &str, label: &str) -> u64 {
    let at = probe
        .find(&format!(" {label} "))
        .unwrap_or_else(|| panic!("no {label} in {probe}"));
    probe[at + label.len() + 2..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Checks a probed page: no error, no console message, every SVG drawn with a size, every
/// in-page link resolving.
fn assert_clean(page: &Path, line: &str, console: &[String], with_svgs: bool) {
    assert!(
        console.is_empty(),
        "{}: console messages: {console:?}",
        page.display()
    );
    assert!(line.contains("ERRORS 0 "), "{}: {line}", page.display());
    assert_eq!(probed(line, "SVGS") > 0, with_svgs, "{line}");
    assert_eq!(
        probed(line, "FLAT"),
        0,
        "{}: an SVG without size: {line}",
        page.display()
    );
    assert_eq!(probed(line, "DANGLING"), 0, "{}: {line}", page.display());
    let html = std::fs::read_to_string(page).unwrap();
    common::assert_files_resolve(&html, page.parent().unwrap());
}

/// Takes a screenshot of `page` (`width` x `height` px) into `png`.
fn screenshot(chromium: &Path, page: &Path, png: &Path, (width, height): (u32, u32), work: &Path) {
    let status = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!(
            "--user-data-dir={}",
            work.join("profile-shot").display()
        ))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("start chromium");
    assert!(
        status.success(),
        "screenshot of {}: {status}",
        page.display()
    );
    let size = std::fs::metadata(png).map(|m| m.len()).unwrap_or(0);
    assert!(size > 10_000, "{} is {size} bytes", png.display());
}

/// Where the screenshots of one test and the pages they show are kept: `sub` of
/// `$TIDEWATER_ARTIFACTS` or of `<target>/tmp/tidewater-screenshots/`. Each test empties
/// only its own directory, so the tests of this file may run at once.
fn artifacts_dir(sub: &str) -> PathBuf {
    let dir = std::env::var_os("TIDEWATER_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tidewater-screenshots"))
        .join(sub);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The (width, height) the probe measured for figure `id`.
fn size_of(probe: &str, id: &str) -> (u32, u32) {
    let at = probe
        .find(&format!("{id}="))
        .unwrap_or_else(|| panic!("{id} not measured: {probe}"));
    let dims = probe[at + id.len() + 1..].split([' ', '<']).next().unwrap();
    let (w, h) = dims.split_once('x').unwrap();
    (w.parse().unwrap(), h.parse().unwrap())
}

/// Chromium, or `None` when the test is to be skipped (and says so); fails when
/// `TIDEWATER_REQUIRE_CHROMIUM` is set and there is none.
fn chromium_or_skip() -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        assert!(
            std::env::var_os("TIDEWATER_REQUIRE_CHROMIUM").is_none(),
            "TIDEWATER_REQUIRE_CHROMIUM is set but no chromium is on PATH \
             (apt-get install chromium-headless-shell)"
        );
        eprintln!("SKIPPED: no chromium on PATH (set TIDEWATER_CHROMIUM to run this test)");
    }
    found
}

#[test]
fn reports_index_and_matrix_render_every_svg_without_errors_and_their_links_resolve() {
    let Some(chromium) = chromium_or_skip() else {
        return;
    };
    // The pages are kept with their screenshots; the store lives in the artifacts directory.
    let artifacts = artifacts_dir("runs");
    let store = artifacts.join("store");
    let run = store.join("fixture/20261130T230000Z");
    fixture_run(&run, "cell-a", false);
    let unclean = store.join("unclean-election/20261201T120000Z");
    unclean_election_run(&unclean, Some("acks=1 unclean.leader.election.enable=true"));
    std::fs::create_dir_all(unclean.join("nodes/n1")).unwrap();
    std::fs::write(unclean.join("nodes/n1/broker.log"), "started\n").unwrap();
    std::fs::write(unclean.join("harness.log"), "phase setup\n").unwrap();
    // A run whose setup failed: config and an empty history, the reason in harness.log.
    let failed = store.join("unclean-election/20261201T110000Z");
    std::fs::create_dir_all(&failed).unwrap();
    std::fs::write(failed.join("history.jsonl"), "").unwrap();
    std::fs::write(
        failed.join("config.json"),
        r#"{"name": "unclean-election", "plan": "unclean-election", "acks": "1", "matrix_cell": "acks=1 unclean.leader.election.enable=true"}"#,
    )
    .unwrap();
    std::fs::write(
        failed.join("harness.log"),
        "2026-12-01T11:00:09Z ERROR tidewater::cli: setup failed: could not create topic t0: cluster unreachable\n",
    )
    .unwrap();
    let report = render_run(&run).unwrap();
    let unclean_report = render_run(&unclean).unwrap();
    let index = render_index(&store).unwrap();
    let work_dir = tempfile::tempdir().unwrap();
    let work = work_dir.path().to_path_buf();

    for page in [&report, &unclean_report] {
        let (line, console) = probe(&chromium, page, &work);
        assert_clean(page, &line, &console, true);
        for id in PLOT_IDS {
            let (w, h) = size_of(&line, id);
            assert!(w > 100 && h > 60, "{id} renders at {w}x{h}");
        }
    }
    let (line, console) = probe(&chromium, &index, &work);
    assert_clean(&index, &line, &console, false);

    let cell = |label: &str, runs| CellInput {
        label: label.into(),
        settings: [("acks".to_string(), "1".to_string())].into(),
        expectation: Expectation::default(),
        runs,
    };
    let summary = summarize_matrix(&MatrixInput {
        title: "m".into(),
        cells: vec![
            cell("acks=1", vec![RunOutcome::Completed(unclean.clone())]),
            cell(
                "acks=all",
                vec![RunOutcome::Errored {
                    run_dir: Some(failed.clone()),
                    error: "setup failed: cluster unreachable".into(),
                }],
            ),
        ],
    })
    .unwrap();
    let matrix = render_matrix(&summary, &store.join("matrix")).unwrap();
    let (line, console) = probe(&chromium, &matrix, &work);
    assert_clean(&matrix, &line, &console, true);
    for id in [
        "chart-lost-writes",
        "chart-availability",
        "chart-latency",
        "chart-hw-regressions",
    ] {
        let (w, h) = size_of(&line, id);
        assert!(w > 100 && h > 100, "{id} renders at {w}x{h}");
    }

    // Screenshots for humans: the top of the unclean-election report, the whole of it, the
    // index and the matrix page.
    let (line, _) = probe(&chromium, &unclean_report, &work);
    let height = probed(&line, "HEIGHT").clamp(900, 16_000) as u32;
    for (page, png, size) in [
        (
            &unclean_report,
            "unclean-election-report-top.png",
            (1280, 1400),
        ),
        (
            &unclean_report,
            "unclean-election-report.png",
            (1280, height),
        ),
        (&index, "index.png", (1280, 1000)),
        (&matrix, "matrix.png", (1280, 1400)),
    ] {
        screenshot(&chromium, page, &artifacts.join(png), size, &work);
    }
    if let Some(real) = std::env::var_os("TIDEWATER_REPORT_RUN") {
        let page = render_run(Path::new(&real)).unwrap();
        let (line, console) = probe(&chromium, &page, &work);
        assert_clean(&page, &line, &console, true);
        let height = probed(&line, "HEIGHT").clamp(900, 16_000) as u32;
        screenshot(
            &chromium,
            &page,
            &artifacts.join("real-run-report.png"),
            (1280, height),
            &work,
        );
    }
    eprintln!("screenshots and pages kept in {}", artifacts.display());
}

#[test]
fn transactional_reports_render_their_cycles_and_timeline() {
    let Some(chromium) = chromium_or_skip() else {
        return;
    };
    let artifacts = artifacts_dir("transactions");
    // The hand-built run with every transaction anomaly, and a generated one of 600
    // transactions over 5 processes (a timeline of bars with tooltips, G0 and G1c cycles).
    let fixture = artifacts.join("store/txn/20261202T070000Z");
    txn_fixture().history.write_run(&fixture, "txn");
    let generated = artifacts.join("store/txn-gen/20261202T070000Z");
    let ops = generate_txns(TxnGenConfig {
        seed: 3,
        txns: 600,
        ..Default::default()
    });
    TxnHistory::from_ops(ops).write_run(&generated, "txn-gen");
    let work_dir = tempfile::tempdir().unwrap();
    let work = work_dir.path().to_path_buf();
    for (dir, shots) in [(&fixture, "txn-fixture"), (&generated, "txn-generated")] {
        let page = render_run(dir).unwrap();
        let (line, console) = probe(&chromium, &page, &work);
        assert_clean(&page, &line, &console, true);
        for id in PLOT_IDS {
            let (w, h) = size_of(&line, id);
            assert!(w > 100 && h > 60, "{id} renders at {w}x{h}");
        }
        // Every cycle drawn has a size a reader can see.
        let html = std::fs::read_to_string(&page).unwrap();
        let mut drawn = 0;
        for name in ["G0", "G1c", "G-single", "G2"] {
            for n in 0..20 {
                let id = format!("cycle-{name}-{n}");
                if html.contains(&format!("<figure id=\"{id}\"")) {
                    let (w, h) = size_of(&line, &id);
                    assert!(w > 150 && h > 100, "{id} renders at {w}x{h}");
                    drawn += 1;
                }
            }
        }
        assert!(drawn >= 2, "{shots}: {drawn} cycles drawn");
        let height = probed(&line, "HEIGHT").clamp(900, 16_000) as u32;
        screenshot(
            &chromium,
            &page,
            &artifacts.join(format!("{shots}-report.png")),
            (1280, height),
            &work,
        );
    }
    eprintln!("screenshots and pages kept in {}", artifacts.display());
}
