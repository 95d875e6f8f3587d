//! Mount lifecycle: unmounting on drop (also during a panic and while busy), and the
//! `tidewater-lossyfs` binary serving a mount driven from another process.

mod common;

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::mount;
use tidewater_lossyfs::control::{self, status_value};
use tidewater_lossyfs::mount::detach;

fn is_mounted(mountpoint: &Path) -> bool {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
    let wanted = mountpoint.to_string_lossy();
    mounts
        .lines()
        .any(|line| line.split(' ').nth(1) == Some(wanted.as_ref()))
}

#[test]
fn a_panic_while_mounted_still_unmounts() {
    let (tx, rx) = std::sync::mpsc::channel::<PathBuf>();
    let result = std::panic::catch_unwind(move || {
        let m = mount(|_| {});
        tx.send(m.mnt.clone()).unwrap();
        fs::write(m.view("f"), b"x").unwrap();
        panic!("test failure while mounted");
    });
    assert!(result.is_err());
    let mountpoint = rx.recv().unwrap();
    assert!(!is_mounted(&mountpoint));
}

#[test]
fn a_busy_mount_is_detached_and_unmount_reports_it() {
    let m = mount(|b| fs::write(b.join("f"), b"x").unwrap());
    let open = File::open(m.view("f")).unwrap();
    let mountpoint = m.mnt.clone();
    assert!(is_mounted(&mountpoint));
    let error = m.handle.unmount().unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EBUSY));
    assert!(!is_mounted(&mountpoint), "detached lazily");
    drop(open);
}

/// A `tidewater-lossyfs mount` child; stopped (and its mount detached) on drop.
struct Daemon {
    child: Child,
    mountpoint: PathBuf,
}

impl Daemon {
    fn start(backing: &Path, mountpoint: &Path) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tidewater-lossyfs"))
            .arg("mount")
            .arg(backing)
            .arg(mountpoint)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut daemon = Daemon {
            child,
            mountpoint: mountpoint.canonicalize().unwrap(),
        };
        // The daemon prints one line once the mount is usable (EOF if it died).
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        assert_eq!(
            line.trim(),
            format!("mounted {}", daemon.mountpoint.display())
        );
        assert!(daemon.child.try_wait().unwrap().is_none());
        daemon
    }

    fn lossyfs(&self, args: &[&str]) -> String {
        let output = Command::new(env!("CARGO_BIN_EXE_tidewater-lossyfs"))
            .args(args)
            .arg(&self.mountpoint)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    }

    /// SIGTERM, then waits (bounded) for a clean exit.
    fn stop(&mut self) -> std::process::ExitStatus {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "lossyfs did not exit on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if is_mounted(&self.mountpoint) {
            let _ = detach(&self.mountpoint);
        }
    }
}

#[test]
fn the_binary_serves_a_mount_that_another_process_drives() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("backing");
    let mnt = dir.path().join("mnt");
    fs::create_dir(&backing).unwrap();
    fs::create_dir(&mnt).unwrap();
    fs::write(backing.join("f"), b"durable").unwrap();
    let mut daemon = Daemon::start(&backing, &mnt);

    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(mnt.join("f"))
        .unwrap();
    file.write_all(b"+lost").unwrap();
    drop(file);
    let status = daemon.lossyfs(&["status"]);
    assert_eq!(status_value(&status, "unsynced_files"), Some("1"));
    daemon.lossyfs(&["lose", "--torn", "9"]);
    let kept = tidewater_lossyfs::state::torn_prefix_len(9, Path::new("f"), 5) as usize;
    let mut expected = b"durable".to_vec();
    expected.extend_from_slice(&b"+lost"[..kept]);
    assert_eq!(fs::read(mnt.join("f")).unwrap(), expected);
    assert_eq!(
        status_value(&control::read_status(&mnt).unwrap(), "losses"),
        Some("1")
    );

    fs::write(mnt.join("g"), b"synced").unwrap();
    daemon.lossyfs(&["sync"]);
    assert_eq!(fs::read(backing.join("g")).unwrap(), b"synced");

    assert!(daemon.stop().success());
    assert!(!is_mounted(&daemon.mountpoint));
    assert!(
        !backing.join(".lossyfs").exists(),
        "the state directory is removed on unmount"
    );
}

#[test]
fn losses_while_another_thread_writes_neither_hang_nor_break_the_mount() {
    let m = mount(|b| fs::write(b.join("f"), b"durable").unwrap());
    // Opened before any loss: a path lookup racing a loss may itself fail with ESTALE.
    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(m.view("f"))
        .unwrap();
    let writer = std::thread::spawn(move || {
        // Appends until the file handle goes stale under a loss (bounded either way).
        for i in 0..20_000u32 {
            if file.write_all(&i.to_le_bytes()).is_err() {
                return i;
            }
        }
        20_000
    });
    let mut losses = 0;
    while !writer.is_finished() && losses < 1000 {
        m.handle
            .lose_unsynced(tidewater_lossyfs::Mode::Clean)
            .unwrap();
        losses += 1;
    }
    let writes = writer.join().unwrap();
    assert!(losses >= 1);
    m.handle
        .lose_unsynced(tidewater_lossyfs::Mode::Clean)
        .unwrap();
    assert_eq!(
        fs::read(m.view("f")).unwrap(),
        b"durable",
        "after {writes} writes"
    );
    fs::write(m.view("g"), b"still works").unwrap();
    assert_eq!(fs::read(m.view("g")).unwrap(), b"still works");
}
