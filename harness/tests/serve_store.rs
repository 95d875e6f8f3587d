//! `tidewater serve` and the store's index, through the real binary (no root needed):
//!
//! - a store with a run rendered by `tidewater report` is served on a free loopback port: the
//!   index, the report, the history and a node log come back over HTTP, and paths that leave
//!   the store (`..`, `%2e%2e`, an encoded slash, a symlink pointing outside) are refused;
//! - a store with many runs of one matrix cell: the index (served, and rendered to
//!   `index.html`) shows the cell's most recent verdicts as a trend, oldest to newest.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use tidewater_reports::pages::index::TREND_RUNS_MAX;

/// Kills the server when the test ends, pass or fail.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `tidewater serve` on an ephemeral loopback port; the address is read from the
/// line it prints (`serving STORE on http://ADDR/ ...`).
fn serve(store: &Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidewater"))
        .args(["serve", "--store", store.to_str().unwrap()])
        .args(["--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start tidewater serve");
    let stdout = child.stdout.take().unwrap();
    // Owned from here on, so the server is killed even when the checks below fail.
    let mut server = Server {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        child,
    };
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    server.addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .parse()
        .unwrap_or_else(|e| panic!("address in {line:?}: {e}"));
    assert!(
        line.starts_with(&format!("serving {}", store.display())),
        "{line}"
    );
    server
}

/// One raw HTTP/1.1 GET (raw, so `..` reaches the server as written): status and body.
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("status line of {response:?}"));
    let body = match response.find("\r\n\r\n") {
        Some(i) => response[i + 4..].to_string(),
        None => String::new(),
    };
    (status, body)
}

/// A small run directory: config, a history of two sends and a poll, results, a node log.
fn write_run(dir: &Path, cell: Option<&str>, valid: &str) {
    std::fs::create_dir_all(dir.join("nodes/n1")).unwrap();
    let mut config = serde_json::json!({
        "name": "queue", "seed": 7, "acks": "all", "nemesis": [],
        "settings": {"min.insync.replicas": "2"},
    });
    if let Some(cell) = cell {
        config["matrix_cell"] = cell.into();
    }
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let history = [
        r#"{"index":0,"time":1000000,"process":0,"type":"invoke","f":"send","value":[["send","t0/0",1]]}"#,
        r#"{"index":1,"time":4000000,"process":0,"type":"ok","f":"send","value":[["send","t0/0",[0,1]]]}"#,
        r#"{"index":2,"time":5000000,"process":1,"type":"invoke","f":"poll","value":[["poll"]]}"#,
        r#"{"index":3,"time":9000000,"process":1,"type":"ok","f":"poll","value":[["poll",{"t0/0":[[0,1]]}]]}"#,
    ];
    std::fs::write(dir.join("history.jsonl"), history.join("\n") + "\n").unwrap();
    std::fs::write(
        dir.join("results.json"),
        format!(r#"{{"valid":{valid},"anomalies":{{}}}}"#),
    )
    .unwrap();
    std::fs::write(dir.join("nodes/n1/broker.log"), "n1 started as broker\n").unwrap();
}

#[test]
fn serve_returns_the_index_report_history_and_logs_and_nothing_outside_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let run = store.join("queue/20261201T000000Z");
    write_run(&run, None, "true");
    let report = Command::new(env!("CARGO_BIN_EXE_tidewater"))
        .args(["report", run.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(report.status.success(), "{report:?}");
    assert!(run.join("report.html").is_file());
    std::fs::write(tmp.path().join("secret.txt"), "outside the store").unwrap();
    std::os::unix::fs::symlink(tmp.path().join("secret.txt"), store.join("escape")).unwrap();
    std::os::unix::fs::symlink(&run, store.join("latest")).unwrap();

    let server = serve(&store);
    let (status, index) = get(server.addr, "/");
    assert_eq!(status, 200, "{index}");
    assert!(
        index.contains("<a href=\"queue/20261201T000000Z/report.html\">20261201T000000Z</a>"),
        "{index}"
    );
    let (status, page) = get(server.addr, "/queue/20261201T000000Z/report.html");
    assert_eq!(status, 200);
    assert_eq!(
        page,
        std::fs::read_to_string(run.join("report.html")).unwrap(),
        "the report, byte for byte"
    );
    assert!(page.contains("id=\"plot-latency\""), "a rendered report");
    let (status, history) = get(server.addr, "/latest/history.jsonl");
    assert_eq!(status, 200);
    assert_eq!(
        history,
        std::fs::read_to_string(run.join("history.jsonl")).unwrap()
    );
    let (status, log) = get(server.addr, "/queue/20261201T000000Z/nodes/n1/broker.log");
    assert_eq!((status, log.as_str()), (200, "n1 started as broker\n"));

    for outside in [
        "/../secret.txt",
        "/queue/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/queue/%2E%2E/%2e%2e/secret.txt",
        "/..%2fsecret.txt",
        "/queue/%2e%2e%2f%2e%2e%2fsecret.txt",
        "/escape",
    ] {
        let (status, body) = get(server.addr, outside);
        assert!(status == 400 || status == 404, "{outside}: {status} {body}");
        assert!(!body.contains("outside the store"), "{outside}: {body}");
    }
    assert_eq!(get(server.addr, "/queue/nope.txt").0, 404);
}

#[test]
fn the_index_shows_each_matrix_cells_recent_verdicts_oldest_to_newest() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let cell = "acks=all min.insync.replicas=2";
    // 35 nights of one cell (more than the trend shows), a verdict pattern that tells
    // positions apart, and two runs of another cell and one run outside any matrix.
    let verdict = |night: usize| match night % 7 {
        3 => "false",
        5 => "\"unknown\"",
        _ => "true",
    };
    // The standing classes (verdict and promise together): these results.json files have no
    // promise and no anomaly, so an invalid run counts as allowed by its settings.
    let class = |night: usize| match verdict(night) {
        "false" => "allowed",
        "\"unknown\"" => "unknown",
        _ => "clean",
    };
    let stamp = |night: usize| format!("202611{:02}T{:02}0000Z", 1 + night / 24, night % 24);
    let nights = 35;
    for night in 0..nights {
        write_run(
            &store.join(format!("durability/{}", stamp(night))),
            Some(cell),
            verdict(night),
        );
    }
    write_run(
        &store.join("durability/20261101T003000Z"),
        Some("acks=1 min.insync.replicas=1"),
        "false",
    );
    write_run(
        &store.join("durability/20261101T013000Z"),
        Some("acks=1 min.insync.replicas=1"),
        "true",
    );
    write_run(&store.join("queue/20261130T000000Z"), None, "true");

    let rendered = tidewater_reports::render_index(&store).unwrap();
    let server = serve(&store);
    let (status, served) = get(server.addr, "/");
    assert_eq!(status, 200);
    assert_eq!(
        served,
        std::fs::read_to_string(rendered).unwrap(),
        "served and rendered index agree"
    );

    let trends = &served[served.find("id=\"trends\"").expect("a trends section")
        ..served.find("id=\"runs\"").unwrap()];
    let row_of = |label: &str| {
        let start = trends
            .find(&format!("<code>{label}</code>"))
            .unwrap_or_else(|| panic!("{label} has a trend"));
        &trends[start..start + trends[start..].find("</tr>").unwrap()]
    };
    let row = row_of(cell);
    let shown: Vec<(String, String)> = row
        .split("<a class=\"")
        .skip(1)
        .map(|square| {
            let class = square[..square.find('"').unwrap()].to_string();
            let title = square.split("title=\"").nth(1).unwrap();
            let stamp = title[..title.find(' ').unwrap()].to_string();
            (class, stamp)
        })
        .collect();
    let expected: Vec<(String, String)> = (nights - TREND_RUNS_MAX..nights)
        .map(|night| (class(night).to_string(), stamp(night)))
        .collect();
    assert_eq!(
        shown, expected,
        "the last {TREND_RUNS_MAX} nights, oldest first"
    );
    assert!(
        row.contains(&format!("href=\"durability/{}/\"", stamp(nights - 1))),
        "each square links to its run: {row}"
    );
    let latest = format!("<span class=\"verdict {}\"", class(nights - 1));
    assert!(row.contains(&latest), "latest verdict {latest}: {row}");
    assert!(
        row.contains(&format!("<td class=\"num\">{nights}</td>")),
        "{row}"
    );

    let other = row_of("acks=1 min.insync.replicas=1");
    assert!(
        other.find("<a class=\"allowed\"").unwrap() < other.find("<a class=\"clean\"").unwrap(),
        "{other}"
    );
    assert_eq!(other.matches("<a class=\"").count(), 2);
    assert_eq!(
        trends.matches("<tr><td><code>").count(),
        2,
        "a run outside any matrix has no trend"
    );
}
