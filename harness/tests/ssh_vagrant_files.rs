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

/// `vagrant/nightly.sh` against a stand-in `tidewater` (TW_TIDEWATER) and no Vagrant
/// (TW_VAGRANT=0): it runs the matrix with the cluster file into a new night directory, keeps
/// the log, points `latest` at it, exits with the matrix's status, deletes only old night
/// directories, and refuses to start while another night holds the lock.
#[test]
fn nightly_sh_runs_the_matrix_keeps_the_night_and_prunes_old_ones() {
    use std::os::unix::fs::PermissionsExt;
    if !installed("flock", "--version") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let fake = root.join("fake-tidewater");
    std::fs::write(
        &fake,
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$FAKE_ARGS\"\necho 'matrix: 8 cells'\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (matrix, cluster) = (root.join("durability.toml"), root.join("cluster.toml"));
    std::fs::write(&matrix, "name = \"durability\"\n").unwrap();
    std::fs::write(&cluster, "# hosts\n").unwrap();
    let nightly = root.join("nightly");
    for old in ["20200101T000000", "keep-me"] {
        std::fs::create_dir_all(nightly.join(old)).unwrap();
        let touched = Command::new("touch")
            .args(["-d", "100 days ago"])
            .arg(nightly.join(old))
            .status()
            .unwrap();
        assert!(touched.success());
    }
    let run = || {
        Command::new("bash")
            .arg(vagrant_dir().join("nightly.sh"))
            .env("TW_REPO", root)
            .env("TW_TIDEWATER", &fake)
            .env("TW_VAGRANT", "0")
            .env("TW_MATRIX", &matrix)
            .env("TW_CLUSTER", &cluster)
            .env("TW_NIGHTLY", &nightly)
            .env("FAKE_ARGS", root.join("args"))
            .output()
            .unwrap()
    };
    let out = run();
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "the matrix's status:\n{printed}"
    );

    let night = std::fs::canonicalize(nightly.join("latest")).unwrap();
    let args = std::fs::read_to_string(root.join("args")).unwrap();
    let expected = format!(
        "matrix\n{}\n--cluster\n{}\n--store\n{}\n--plain\n",
        matrix.display(),
        cluster.display(),
        night.join("store").display()
    );
    assert_eq!(args, expected);
    let log = std::fs::read_to_string(night.join("nightly.log")).unwrap();
    assert!(log.contains("matrix: 8 cells"), "{log}");
    assert!(log.contains("matrix finished with exit status 1"), "{log}");
    assert!(
        !nightly.join("20200101T000000").exists(),
        "an old night is pruned"
    );
    assert!(
        nightly.join("keep-me").exists(),
        "other directories are never touched"
    );

    // Another night in progress holds the lock: this one does not start.
    let lock = std::fs::File::create(nightly.join(".lock")).unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file we own and keep open for the check.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let out = run();
    assert_eq!(
        out.status.code(),
        Some(75),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(lock);
}
