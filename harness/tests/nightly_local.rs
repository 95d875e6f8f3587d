//! The whole nightly path on one machine (root only; skipped otherwise): `vagrant/nightly.sh`
//! with `TW_CLUSTER=local`, under cron's minimal environment (`env -i PATH=/usr/bin:/bin`),
//! runs two short nights of a two-cell matrix into one store. The second night raises
//! `min.insync.replicas` above the replication factor, so the acks=all cell acknowledges
//! nothing: its summary must name that change as a regression and exit 1, while the first
//! night exits 0. The index lists both nights, each cell's trend spans both, and nothing of
//! the clusters is left behind.
//!
//! About a minute: four 4-second runs with their set-up, recovery and final reads.

mod run_support;

use run_support::{can_run, json};
use std::path::Path;
use std::process::Command;
use tidewater::cluster::local::find_broker_binary;
use tidewater::cluster::local::state::{RunState, DEFAULT_STATE_DIR};

const SUBNET: &str = "10.214.7.0/24";

fn matrix(extra_run: &str) -> String {
    format!(
        r#"
name = "nightly-mini"
repetitions = 1

[run]
nemesis = []
rate = 40.0
partitions = 1
recovery_time_limit_s = 15
final_time_limit_s = 15
{extra_run}

[axes]
acks = ["1", "all"]

[[expect]]
description = "most sends acknowledged"
availability_min = 0.5
"#
    )
}

fn night(root: &Path, matrix_file: &Path, broker: &Path) -> (i32, String) {
    let out = Command::new("/bin/bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../vagrant/nightly.sh"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("TW_REPO", root)
        .env("TW_STORE", root.join("store"))
        .env("TW_MATRIX", matrix_file)
        .env("TW_CLUSTER", "local")
        .env("TW_SUBNET", SUBNET)
        .env("TW_TIDEWATER", env!("CARGO_BIN_EXE_tidewater"))
        .env("TW_BROKER", broker)
        .env("TW_TIME_LIMIT", "4")
        .env("TW_SEEDS", "3")
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), all)
}

/// The night stamps of the store, oldest first.
fn nights(store: &Path) -> Vec<String> {
    let mut stamps: Vec<String> = std::fs::read_dir(store.join("nightly-mini/nights"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    stamps.sort();
    stamps
}

#[test]
fn two_local_nights_in_one_store_compare_and_leave_nothing_behind() {
    if !can_run("nightly_local") {
        return;
    }
    let broker = find_broker_binary().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let store = root.join("store");
    let (first, second) = (root.join("first.toml"), root.join("second.toml"));
    std::fs::write(&first, matrix("")).unwrap();
    std::fs::write(
        &second,
        matrix("sets = { \"min.insync.replicas\" = \"4\" }"),
    )
    .unwrap();

    let (code, out) = night(root, &first, &broker);
    assert_eq!(code, 0, "the first night holds:\n{out}");
    // Stamps have a resolution of a second; the nights must not share one.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (code, out) = night(root, &second, &broker);
    assert_eq!(code, 1, "the second night regressed:\n{out}");

    let stamps = nights(&store);
    assert_eq!(stamps.len(), 2, "{stamps:?}\n{out}");
    let summary = json(
        &store
            .join("nightly-mini/nights")
            .join(&stamps[1])
            .join("summary.json"),
    );
    assert_eq!(summary["previous"], stamps[0].as_str(), "{summary}");
    assert_eq!(summary["exit_code"], 1);
    let changes = summary["changes"].as_array().unwrap();
    assert_eq!(
        changes[0]["regression"], true,
        "regressions first: {summary}"
    );
    let regression_of_all = |what: &dyn Fn(&str) -> bool| {
        changes.iter().any(|c| {
            c["cell"] == "acks=all" && c["regression"] == true && what(c["what"].as_str().unwrap())
        })
    };
    assert!(
        regression_of_all(&|w| w == "expectation held -> failed"),
        "{summary}"
    );
    assert!(
        regression_of_all(&|w| w.starts_with("availability ") && w.ends_with(" -> 0%")),
        "{summary}"
    );
    // acks=1 does not wait for the ISR: min.insync.replicas changes nothing it is judged on.
    assert!(
        !changes.iter().any(
            |c| c["cell"] == "acks=1" && c["what"].as_str().unwrap().starts_with("expectation")
        ),
        "{summary}"
    );
    for stamp in &stamps {
        for file in ["summary.html", "matrix.html", "junit.xml"] {
            let path = store.join("nightly-mini/nights").join(stamp).join(file);
            assert!(path.is_file(), "{}", path.display());
        }
        let log = store.join("nights").join(format!("{stamp}.log"));
        assert!(log.is_file(), "the night's log is kept: {}", log.display());
    }

    // The index: both nights listed, and each cell's trend spans both of them.
    let index = std::fs::read_to_string(store.join("index.html")).unwrap();
    for stamp in &stamps {
        assert!(
            index.contains(&format!("nightly-mini/nights/{stamp}/summary.html")),
            "{stamp} in the index"
        );
    }
    let runs = tidewater_reports::pages::index::list_runs(&store).unwrap();
    for cell in ["acks=1", "acks=all"] {
        let in_cell = runs
            .iter()
            .filter(|r| r.matrix_cell() == Some(cell))
            .count();
        assert_eq!(in_cell, 2, "{cell}: one run per night in its trend");
    }

    // Nothing left: no run record, namespace or process of this store.
    let records = RunState::list(Path::new(DEFAULT_STATE_DIR)).unwrap_or_default();
    assert!(
        records.iter().all(|(_, r)| !r.run_dir.starts_with(&store)),
        "run records left"
    );
    let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(
        !ps.lines().any(|l| l.contains(store.to_str().unwrap())),
        "processes left:\n{ps}"
    );
}
