//! The harness's inputs are checked before anything is made (issue 22, item 6): the real
//! `tidewater` binary is given bad plans and bad numbers and must refuse them with exit 3 and
//! a message naming the step or the flag, before a run directory exists and with
//! `store/latest` where it was. None of these tests needs root or starts a cluster; each
//! passes a subnet of its own (10.219.x) all the same, so that a harness that failed to
//! refuse could not collide with another test's cluster.

mod run_support;

use run_support::{tidewater, Outcome};
use std::path::{Path, PathBuf};

/// A store holding one earlier run that `latest` points at, as a user's store does.
struct Store {
    dir: tempfile::TempDir,
}

impl Store {
    fn new() -> Store {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("queue/20260101T000000")).unwrap();
        std::os::unix::fs::symlink("queue/20260101T000000", dir.path().join("latest")).unwrap();
        Store { dir }
    }

    fn path(&self) -> &str {
        self.dir.path().to_str().unwrap()
    }

    /// Every path in the store and where `latest` points.
    fn contents(&self) -> (Vec<PathBuf>, PathBuf) {
        let mut paths = Vec::new();
        list(self.dir.path(), &mut paths);
        paths.sort();
        (
            paths,
            std::fs::read_link(self.dir.path().join("latest")).unwrap(),
        )
    }

    /// Asserts that a refused command left the store as [`Store::new`] made it.
    fn assert_untouched(&self, out: &Outcome) {
        let (paths, latest) = self.contents();
        assert_eq!(
            latest,
            PathBuf::from("queue/20260101T000000"),
            "store/latest moved: {}",
            out.transcript()
        );
        let root = self.dir.path();
        let expected = vec![
            root.join("latest"),
            root.join("queue"),
            root.join("queue/20260101T000000"),
        ];
        assert_eq!(
            paths,
            expected,
            "something was created: {}",
            out.transcript()
        );
    }
}

fn list(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        out.push(path.clone());
        if entry.file_type().unwrap().is_dir() {
            list(&path, out);
        }
    }
}

/// `tidewater run ARGS --store STORE --subnet SUBNET --plain --nemesis none`.
fn run(store: &Store, subnet: &str, args: &[&str]) -> Outcome {
    let mut all = vec!["run", "--nemesis", "none"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--store", store.path(), "--subnet", subnet, "--plain"]);
    tidewater(&all)
}

/// Asserts exit 3 and that standard error holds `want`.
fn assert_refused(out: &Outcome, want: &str) {
    assert_eq!(
        out.code,
        3,
        "want exit 3 for {want:?}: {}",
        out.transcript()
    );
    assert!(
        out.stderr.contains(want),
        "want {want:?}: {}",
        out.transcript()
    );
}

#[test]
fn a_plan_step_beyond_any_run_is_refused_naming_the_step_before_anything_is_made() {
    let store = Store::new();
    let dir = tempfile::tempdir().unwrap();
    for (at_s, want) in [
        (
            "1e300",
            "step 2 (heal): at_s = 1e300 is beyond the longest run (604800 s)",
        ),
        (
            "1e12",
            "step 2 (heal): at_s = 1e12 is beyond the longest run",
        ),
    ] {
        let plan = dir.path().join("far.toml");
        let text = format!(
            "name = \"far\"\n[[step]]\nat_s = 1\naction = \"heal\"\n[[step]]\nat_s = {at_s}\naction = \"heal\"\n"
        );
        std::fs::write(&plan, text).unwrap();
        let out = run(&store, "10.219.1.0/24", &["--plan", plan.to_str().unwrap()]);
        assert_refused(&out, want);
        store.assert_untouched(&out);
    }
}

#[test]
fn a_json_plan_is_validated_before_anything_is_made() {
    let store = Store::new();
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("stored.json");
    std::fs::write(
        &plan,
        r#"{"name": "stored", "step": [{"action": "kill", "at_s": 1}]}"#,
    )
    .unwrap();
    let out = run(&store, "10.219.2.0/24", &["--plan", plan.to_str().unwrap()]);
    assert_refused(&out, "stored.json: step 1 (kill): needs a target");
    store.assert_untouched(&out);
}

#[test]
fn a_plan_that_cannot_start_within_the_time_limit_is_refused_naming_the_limit() {
    let store = Store::new();
    let out = run(
        &store,
        "10.219.3.0/24",
        &["--plan", "leader-isolation", "--time-limit", "4"],
    );
    assert_refused(
        &out,
        "plan leader-isolation: no step can run within --time-limit 4: step 1 (isolate) starts \
         at 5 s at the earliest",
    );
    store.assert_untouched(&out);
}

#[test]
fn rates_that_are_not_finite_positive_numbers_are_refused_naming_the_flag() {
    let store = Store::new();
    for (rate, shown) in [
        ("1e-300", "1e-300"),
        ("-5", "-5"),
        ("NaN", "NaN"),
        ("inf", "inf"),
    ] {
        let out = run(&store, "10.219.4.0/24", &["--rate", rate]);
        assert_refused(
            &out,
            &format!("--rate {shown} must be 0 (as fast as possible) or from"),
        );
        store.assert_untouched(&out);
    }
}

#[test]
fn a_local_cluster_too_big_for_its_subnet_is_refused_before_a_run_directory_exists() {
    let store = Store::new();
    let out = run(&store, "10.219.5.0/24", &["--nodes", "100"]);
    assert_refused(&out, "--nodes 100: a local cluster holds 1 to 99 brokers");
    store.assert_untouched(&out);
}

#[test]
fn negative_and_absurd_numbers_are_refused_as_values_of_their_flag() {
    let store = Store::new();
    for (args, want) in [
        (
            &["--time-limit", "-1"][..],
            "invalid value '-1' for '--time-limit <SECS>'",
        ),
        (
            &["--nodes", "-3"][..],
            "invalid value '-3' for '--nodes <N>'",
        ),
        (
            &["--time-limit", "604801"][..],
            "--time-limit 604801 is longer than 604800 s",
        ),
        (
            &["--final-time-limit", "1000000000"][..],
            "--final-time-limit 1000000000 is longer",
        ),
        (
            &["--nemesis-interval", "nan"][..],
            "--nemesis-interval NaN must be",
        ),
        (
            &["--partitions", "100000"][..],
            "--partitions 100000 must be between 1 and 1000",
        ),
        (
            &["--concurrency", "0"][..],
            "--concurrency 0 must be between 1 and 10000",
        ),
    ] {
        let out = run(&store, "10.219.6.0/24", args);
        assert_refused(&out, want);
        store.assert_untouched(&out);
    }
}

#[test]
fn a_matrix_naming_a_missing_plan_is_refused_before_any_cell_runs() {
    let store = Store::new();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("inputs.toml");
    std::fs::write(
        &file,
        "name = \"inputs\"\n[run]\ntime_limit_s = 10\n[axes]\nplan = [\"leader-isolation\", \"no-such-plan\"]\n",
    )
    .unwrap();
    let out = tidewater(&[
        "matrix",
        file.to_str().unwrap(),
        "--store",
        store.path(),
        "--subnet",
        "10.219.7.0/24",
        "--plain",
    ]);
    assert_refused(
        &out,
        "matrix cell plan=no-such-plan: no plan file \"no-such-plan\"",
    );
    assert!(
        !out.stdout.contains("matrix cell"),
        "no cell ran: {}",
        out.transcript()
    );
    store.assert_untouched(&out);
    let out = tidewater(&["matrix", file.to_str().unwrap(), "--time-limit", "-1"]);
    assert_refused(&out, "invalid value '-1' for '--time-limit <SECONDS>'");
    // --resume takes finished runs by their seed, so it needs --seeds (a usage error, 2).
    let out = tidewater(&["matrix", file.to_str().unwrap(), "--resume"]);
    assert_eq!(out.code, 2, "{}", out.transcript());
    assert!(
        out.stderr.contains("--seeds <SEED,SEED,...>"),
        "{}",
        out.transcript()
    );
    // --only names an axis and a value of it.
    let out = tidewater(&["matrix", file.to_str().unwrap(), "--only", "system"]);
    assert_refused(&out, "\"system\": AXIS=VALUE");
    let out = tidewater(&[
        "matrix",
        file.to_str().unwrap(),
        "--only",
        "plan=kill-isr",
        "--store",
        store.path(),
    ]);
    assert_refused(
        &out,
        "--only plan=kill-isr: axis plan has no value \"kill-isr\" (its values: \
         leader-isolation, no-such-plan)",
    );
    store.assert_untouched(&out);
}

#[test]
fn detect_and_serve_refuse_bad_numbers_before_building_or_binding_anything() {
    let store = Store::new();
    // A broker binary that does not exist: were the numbers not checked first, detect would
    // stop on it instead, with another message.
    let detect = |args: &[&str]| {
        let mut all = vec!["detect", "--broker-bin", "/nonexistent/tidewater-broker"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--store", store.path(), "--plain"]);
        tidewater(&all)
    };
    let out = detect(&["--seeds", "2001"]);
    assert_refused(
        &out,
        "--seeds 2001 is more than the 2000 runs a benchmark holds",
    );
    let out = detect(&["--seeds", "2", "--first-seed", "18446744073709551615"]);
    assert_refused(
        &out,
        "--first-seed 18446744073709551615 with --seeds 2 runs past",
    );
    let out = detect(&["--time-limit", "-5"]);
    assert_refused(&out, "invalid value '-5' for '--time-limit <SECS>'");
    let out = detect(&["--workload", "txn", "--idempotence"]);
    assert_refused(&out, "--idempotence is for the queue workload");
    store.assert_untouched(&out);
    // A table of another workload at --out is not resumed into this one, nor overwritten.
    let tables = tempfile::tempdir().unwrap();
    let json = tables.path().join("detection.json");
    let txn_table = r#"{"bugs":["none"],"columns":[{"plan":null,"seed":1}],"time_limit_s":60,
        "workload_flags":" --workload txn","results":[]}"#;
    std::fs::write(&json, txn_table).unwrap();
    let md = tables.path().join("detection.md");
    let out = detect(&[
        "--bugs",
        "none",
        "--plans",
        "none",
        "--seeds",
        "1",
        "--out",
        md.to_str().unwrap(),
    ]);
    assert_refused(
        &out,
        "holds a table of another workload (\"--workload txn\", this one \"\")",
    );
    assert_eq!(std::fs::read_to_string(&json).unwrap(), txn_table);
    assert!(!md.exists());
    store.assert_untouched(&out);
    let out = tidewater(&[
        "serve",
        "--store",
        store.path(),
        "--bind",
        "127.0.0.1:99999",
    ]);
    assert_refused(&out, "expected ADDR:PORT with a port from 0 to 65535");
}

#[test]
fn check_names_the_line_of_a_history_that_is_not_utf8() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.jsonl");
    let mut bytes = br#"{"index":0,"time":1,"process":0,"type":"invoke","f":"send","value":[["send","t0/0",1]]}"#.to_vec();
    bytes.extend_from_slice(b"\n\xff\xfe\x00binary\n");
    std::fs::write(&history, bytes).unwrap();
    let out = tidewater(&["check", "--history", history.to_str().unwrap()]);
    assert!(
        out.stdout.contains("line 2: not UTF-8 text"),
        "{}",
        out.transcript()
    );
    assert_eq!(
        out.code,
        2,
        "a damaged history is at best unknown: {}",
        out.transcript()
    );
}
