//! Runs that test nothing are `unknown` (exit 2) with their reason, never valid (root only;
//! skipped otherwise):
//!
//! - `min.insync.replicas=4` with replication factor 3: every acks=all send is refused, so no
//!   write is acknowledged;
//! - `--time-limit 0`: no op at all;
//! - a time limit too short for the random schedule's first fault: a warning at the start, and
//!   no fault injected.
//!
//! About a minute: three short runs with setup and teardown.

mod run_support;

use run_support::{can_run, run_into};

fn run(
    store: &std::path::Path,
    subnet: &str,
    extra: &[&str],
) -> (run_support::Outcome, serde_json::Value) {
    let mut args = vec!["--seed", "3", "--rate", "50"];
    args.extend_from_slice(extra);
    run_into(store, subnet, &args)
}

#[test]
fn runs_that_test_nothing_are_unknown_with_their_reason() {
    if !can_run("run_vacuous") {
        return;
    }
    let store = tempfile::tempdir().unwrap();

    let (out, results) = run(
        store.path(),
        "10.214.5.0/24",
        &[
            "--time-limit",
            "6",
            "--nemesis",
            "none",
            "--set",
            "min.insync.replicas=4",
        ],
    );
    assert_eq!(out.code, 2, "{}", out.transcript());
    assert_eq!(results["valid"], "unknown");
    assert_eq!(results["stats"]["sends"]["acked"], 0);
    assert!(
        out.stdout.contains("no send was acknowledged"),
        "{}",
        out.transcript()
    );

    let (out, results) = run(store.path(), "10.214.5.0/24", &["--time-limit", "0"]);
    assert_eq!(out.code, 2, "{}", out.transcript());
    assert_eq!(results["valid"], "unknown");
    assert!(
        out.stdout.contains("no send was acknowledged"),
        "{}",
        out.transcript()
    );

    let (out, results) = run(
        store.path(),
        "10.214.5.0/24",
        &[
            "--time-limit",
            "4",
            "--nemesis",
            "kill",
            "--nemesis-interval",
            "10",
        ],
    );
    assert!(
        out.stderr
            .contains("warning: --time-limit 4 leaves no room for a fault"),
        "{}",
        out.transcript()
    );
    assert_eq!(out.code, 2, "{}", out.transcript());
    assert_eq!(results["valid"], "unknown");
    assert!(
        out.stdout
            .contains("none of the requested faults (kill) was injected"),
        "{}",
        out.transcript()
    );
}
