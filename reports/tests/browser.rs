//! Opens a generated report, the index and a matrix page in headless Chromium and checks that every plot
//! renders with a non-zero size and that the page logs no error.
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
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tidewater_reports::matrix::{CellInput, Expectation, MatrixInput, RunOutcome};
use tidewater_reports::report::PLOT_IDS;
use tidewater_reports::{render_index, render_matrix, render_run, summarize_matrix};

/// How long Chromium may take for one page before the test fails.
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(60);

const PROBE_HEAD: &str = "<script>window.__errors=[];window.addEventListener('error',\
    e=>window.__errors.push(String(e.message||(e.target&&e.target.outerHTML))),true);</script>";

const PROBE_END: &str = "<script>window.addEventListener('load',()=>{\
    const figs=[...document.querySelectorAll('figure')].map(f=>{const s=f.querySelector('svg');\
    const r=s?s.getBoundingClientRect():{width:0,height:0};\
    return f.id+'='+Math.round(r.width)+'x'+Math.round(r.height);});\
    const p=document.createElement('pre');p.id='probe';\
    p.textContent='FIGURES '+figs.join(' ')+' ERRORS '+window.__errors.length+' '+window.__errors.join(' | ');\
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

/// The (width, height) the probe measured for figure `id`.
fn size_of(probe: &str, id: &str) -> (u32, u32) {
    let at = probe
        .find(&format!("{id}="))
        .unwrap_or_else(|| panic!("{id} not measured: {probe}"));
    let dims = probe[at + id.len() + 1..].split([' ', '<']).next().unwrap();
    let (w, h) = dims.split_once('x').unwrap();
    (w.parse().unwrap(), h.parse().unwrap())
}

#[test]
fn report_index_and_matrix_render_their_plots_without_errors_in_chromium() {
    let Some(chromium) = chromium() else {
        assert!(
            std::env::var_os("TIDEWATER_REQUIRE_CHROMIUM").is_none(),
            "TIDEWATER_REQUIRE_CHROMIUM is set but no chromium is on PATH \
             (apt-get install chromium-headless-shell)"
        );
        eprintln!("SKIPPED: no chromium on PATH (set TIDEWATER_CHROMIUM to run this test)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let run = store.join("fixture/20261130T230000Z");
    fixture_run(&run, "cell-a", false);
    let report = render_run(&run).unwrap();
    let index = render_index(&store).unwrap();
    let work = tmp.path().join("chromium");
    std::fs::create_dir_all(&work).unwrap();

    let (line, console) = probe(&chromium, &report, &work);
    assert!(console.is_empty(), "console messages: {console:?}");
    assert!(line.contains("ERRORS 0 "), "{line}");
    for id in PLOT_IDS {
        let (w, h) = size_of(&line, id);
        assert!(w > 100 && h > 100, "{id} renders at {w}x{h}");
    }

    let (line, console) = probe(&chromium, &index, &work);
    assert!(console.is_empty(), "console messages: {console:?}");
    assert!(line.contains("ERRORS 0 "), "{line}");

    let cell = CellInput {
        label: "acks=all".into(),
        settings: [("acks".to_string(), "all".to_string())].into(),
        expectation: Expectation::default(),
        runs: vec![RunOutcome::Completed(run)],
    };
    let summary = summarize_matrix(&MatrixInput {
        title: "m".into(),
        cells: vec![cell],
    })
    .unwrap();
    let matrix = render_matrix(&summary, &store.join("matrix")).unwrap();
    let (line, console) = probe(&chromium, &matrix, &work);
    assert!(console.is_empty(), "console messages: {console:?}");
    assert!(line.contains("ERRORS 0 "), "{line}");
    for id in [
        "chart-lost-writes",
        "chart-availability",
        "chart-latency",
        "chart-hw-regressions",
    ] {
        let (w, h) = size_of(&line, id);
        assert!(w > 100 && h > 100, "{id} renders at {w}x{h}");
    }
}
