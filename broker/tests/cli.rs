//! The binary's command line: help, settings from a file and `--set`, start-up failures that
//! name the offending setting or role, and the log-dir lock.

mod common;

use common::{run_to_exit, Broker, Client};

#[test]
fn help_lists_the_options() {
    let (code, stdout, _) = run_to_exit(&["--help"]);
    assert_eq!(code, Some(0));
    for option in ["--config", "--set", "--role"] {
        assert!(
            stdout.contains(option),
            "{option} missing from --help:\n{stdout}"
        );
    }
}

#[test]
fn unknown_and_invalid_settings_fail_naming_the_setting() {
    let (code, _, stderr) = run_to_exit(&["--set", "log.segmnet.bytes=10"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("log.segmnet.bytes"), "{stderr}");
    let (code, _, stderr) = run_to_exit(&["--set", "min.insync.replicas=two"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("min.insync.replicas") && stderr.contains("two"),
        "{stderr}"
    );
    let (code, _, stderr) = run_to_exit(&["--set", "novalue"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("novalue"), "{stderr}");
    let (code, _, stderr) = run_to_exit(&["--config", "/nonexistent/broker.toml"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("/nonexistent/broker.toml"), "{stderr}");
}

#[tokio::test]
async fn config_file_is_read_and_set_overrides_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broker.toml");
    std::fs::write(
        &file,
        "\"broker.id\" = 3\n\"num.partitions\" = 2\n\"auto.create.topics.enable\" = true\n",
    )
    .unwrap();
    let log_dir = dir.path().join("logs");
    let config = format!("--config={}", file.display());
    let broker = Broker::start_with_args(&log_dir, &["--set", "num.partitions=5", &config]);
    let client = Client::new(&broker.url);
    client.produce("auto", 0, &["x".to_string()], "1").await;
    let (_, described) = client.get("/v1/topics/auto").await;
    assert_eq!(
        described["partitions"].as_array().unwrap().len(),
        5,
        "--set wins over the file"
    );
    assert_eq!(
        described["partitions"][0]["leader"], 3,
        "broker.id from the file"
    );
}

#[test]
fn unknown_role_is_refused() {
    // The controller role itself is tested by the replication helper's cluster tests.
    let (code, _, stderr) = run_to_exit(&["--role", "janitor"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("process.roles") && stderr.contains("janitor"),
        "{stderr}"
    );
}

#[test]
fn second_broker_on_the_same_log_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("logs");
    let _first = Broker::start(&log_dir, &[]);
    let (code, _, stderr) = run_to_exit(&[
        "--set",
        &format!("log.dirs={}", log_dir.display()),
        "--set",
        "listeners=http://127.0.0.1:0",
    ]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("already locked"), "{stderr}");
}
