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

/// With `TW_KAFKA_TARBALL` the Vagrantfile copies the tarball into every VM and provisions
/// Kafka; a path that is not a file stops it with a message naming the variable.
#[test]
fn the_vagrantfile_validates_with_a_kafka_tarball_and_refuses_a_missing_one() {
    if !installed("vagrant", "--version") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tarball = dir.path().join("kafka_2.13-3.9.1.tgz");
    std::fs::write(&tarball, b"not read by validate").unwrap();
    let validate = |tarball: &Path| {
        Command::new("vagrant")
            .arg("validate")
            .current_dir(vagrant_dir())
            .env("VAGRANT_CHECKPOINT_DISABLE", "1")
            .env("TW_KAFKA_TARBALL", tarball)
            .output()
            .unwrap()
    };
    let out = validate(&tarball);
    assert!(
        out.status.success(),
        "vagrant validate failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = validate(&dir.path().join("missing.tgz"));
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("TW_KAFKA_TARBALL="), "{text}");
}

/// `vagrant/nightly.sh` against a stand-in `tidewater` (TW_TIDEWATER) and no Vagrant
/// (TW_VAGRANT=0), in cron's minimal environment (`env -i PATH=/usr/bin:/bin`): it runs the
/// matrix with the cluster file into the one store with the night's stamp, keeps the night's
/// log in the store, hands the summary to TW_NOTIFY, exits with the matrix's status, deletes
/// only old night logs, and refuses to start while another night holds the lock.
#[test]
fn nightly_sh_runs_the_matrix_into_one_store_keeps_the_log_and_prunes_old_ones() {
    use std::os::unix::fs::PermissionsExt;
    if !installed("flock", "--version") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let fake = root.join("bin/tidewater");
    std::fs::create_dir_all(fake.parent().unwrap()).unwrap();
    // The stand-in writes its arguments and the summary a real matrix would write.
    std::fs::write(
        &fake,
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$FAKE_ARGS\"\necho 'matrix: 8 cells'\n\
         night=$(printf '%s\\n' \"$@\" | sed -n '/^--night$/{n;p}')\n\
         mkdir -p \"$FAKE_STORE/durability/nights/$night\"\n\
         echo '{}' > \"$FAKE_STORE/durability/nights/$night/summary.json\"\nexit 1\n",
    )
    .unwrap();
    std::fs::write(root.join("bin/tidewater-broker"), "#!/bin/sh\n").unwrap();
    let notify = root.join("notify");
    std::fs::write(
        &notify,
        "#!/bin/sh\necho \"$1 $NIGHTLY_EXIT\" > \"$FAKE_NOTIFIED\"\n",
    )
    .unwrap();
    for f in [&fake, &root.join("bin/tidewater-broker"), &notify] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (matrix, cluster) = (root.join("durability.toml"), root.join("cluster.toml"));
    std::fs::write(&matrix, "name = \"durability\"\n").unwrap();
    std::fs::write(&cluster, "# hosts\n").unwrap();
    let store = root.join("store");
    let nights = store.join("nights");
    std::fs::create_dir_all(&nights).unwrap();
    for old in ["20200101T000000.log", "keep-me.log"] {
        std::fs::write(nights.join(old), "old\n").unwrap();
        let touched = Command::new("touch")
            .args(["-d", "100 days ago"])
            .arg(nights.join(old))
            .status()
            .unwrap();
        assert!(touched.success());
    }
    let run = || {
        Command::new("/bin/bash")
            .arg(vagrant_dir().join("nightly.sh"))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("TW_REPO", root)
            .env("TW_TIDEWATER", &fake)
            .env("TW_VAGRANT", "0")
            .env("TW_MATRIX", &matrix)
            .env("TW_CLUSTER", &cluster)
            .env("TW_STORE", &store)
            .env("TW_SEEDS", "1,2")
            .env("TW_NOTIFY", &notify)
            .env("FAKE_ARGS", root.join("args"))
            .env("FAKE_STORE", &store)
            .env("FAKE_NOTIFIED", root.join("notified"))
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

    let args = std::fs::read_to_string(root.join("args")).unwrap();
    let stamp = args
        .lines()
        .skip_while(|l| *l != "--night")
        .nth(1)
        .expect("--night STAMP")
        .to_string();
    let expected = format!(
        "matrix\n{}\n--cluster\n{}\n--store\n{}\n--night\n{stamp}\n--seeds\n1,2\n--plain\n",
        matrix.display(),
        cluster.display(),
        store.display(),
    );
    assert_eq!(args, expected);
    let log = std::fs::read_to_string(nights.join(format!("{stamp}.log"))).unwrap();
    assert!(log.contains("matrix: 8 cells"), "{log}");
    assert!(log.contains("matrix finished with exit status 1"), "{log}");
    let summary = store.join(format!("durability/nights/{stamp}/summary.json"));
    assert_eq!(
        std::fs::read_to_string(root.join("notified")).unwrap(),
        format!("{} 1\n", summary.display()),
        "TW_NOTIFY gets the summary and the exit status"
    );
    assert!(
        !nights.join("20200101T000000.log").exists(),
        "an old night log is pruned"
    );
    assert!(
        nights.join("keep-me.log").exists(),
        "other files are never touched"
    );

    // Another night in progress holds the lock: this one does not start.
    let lock = std::fs::File::create(nights.join(".lock")).unwrap();
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
