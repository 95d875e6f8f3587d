//! The Vagrant cluster's files are valid: the shell scripts pass `shellcheck` and the
//! Vagrantfile passes `vagrant validate`. Each check is skipped with a message when its tool
//! is not installed (CI installs shellcheck; vagrant is optional).

use std::path::{Path, PathBuf};
use std::process::Command;

fn vagrant_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../vagrant")
}

fn installed(tool: &str, version_flag: &str) -> bool {
    let ok = Command::new(tool)
        .arg(version_flag)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: {tool} is not installed");
    }
    ok
}

#[test]
fn the_vagrant_shell_scripts_pass_shellcheck() {
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(vagrant_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sh"))
        .collect();
    scripts.sort();
    let names: Vec<String> = scripts
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for expected in ["provision.sh", "nightly.sh"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    if !installed("shellcheck", "--version") {
        return;
    }
    let out = Command::new("shellcheck")
        .args(["--severity=style", "--shell=bash"])
        .args(&scripts)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "shellcheck found problems:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_vagrantfile_validates() {
    if !installed("vagrant", "--version") {
        return;
    }
    let out = Command::new("vagrant")
        .arg("validate")
        .current_dir(vagrant_dir())
        // Validation must not depend on the user's provider plugins.
        .env("VAGRANT_CHECKPOINT_DISABLE", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "vagrant validate failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
