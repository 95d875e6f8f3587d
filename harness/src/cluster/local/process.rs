//! A node's process: spawned inside its network namespace, in a process group of its own so
//! signals reach it and its children, and the terminal's Ctrl-C does not (the harness decides
//! when nodes stop).

use super::sys;
use crate::cluster::{Error, Result};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Bound on waiting for SIGSTOP to take effect.
const PAUSE_WAIT_MAX: Duration = Duration::from_secs(2);

/// How often bounded waits look again.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// A running node process.
#[derive(Debug)]
pub struct NodeProcess {
    /// The child, kept to reap it (no zombies) and to see when it exits.
    child: Child,
    /// Whether we stopped it with SIGSTOP and have not resumed it.
    paused: bool,
}

impl NodeProcess {
    /// Starts `argv` inside the network namespace at `netns_path`, appending stdout and
    /// stderr to `log_path` after a line that marks the start.
    pub fn spawn(
        netns_path: &Path,
        argv: &[String],
        log_path: &Path,
        cwd: &Path,
    ) -> Result<NodeProcess> {
        let ctx = |what: &str| format!("{what} for `{}`", argv.join(" "));
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)
            .map_err(|e| Error::io(ctx(&format!("open {}", log_path.display())), e))?;
        let _ = writeln!(log, "=== tidewater: starting `{}` ===", argv.join(" "));
        let stderr = log.try_clone().map_err(|e| Error::io(ctx("dup log"), e))?;
        let ns = File::open(netns_path)
            .map_err(|e| Error::io(ctx(&format!("open {}", netns_path.display())), e))?;
        let ns_fd = ns.as_raw_fd();
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr)
            .process_group(0);
        // SAFETY: between fork and exec only the async-signal-safe setns(2) runs.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(ns_fd, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| Error::io(ctx("spawn"), e))?;
        drop(ns);
        Ok(NodeProcess {
            child,
            paused: false,
        })
    }

    /// The process id (also its process group id).
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Whether it is still alive (reaps it if it exited).
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Whether it is paused.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    fn signal(&self, sig: Signal) {
        // ESRCH (already gone) is fine: the caller reaps it next.
        let _ = killpg(Pid::from_raw(self.pid()), sig);
    }

    /// SIGSTOP, then waits (bounded) until the kernel reports it stopped.
    pub fn pause(&mut self) -> Result<()> {
        self.signal(Signal::SIGSTOP);
        self.paused = true;
        let deadline = Instant::now() + PAUSE_WAIT_MAX;
        while sys::process_state(self.pid()) != Some('T') {
            if Instant::now() > deadline || !self.is_alive() {
                return Err(Error::State(format!(
                    "process {} did not stop within {PAUSE_WAIT_MAX:?}",
                    self.pid()
                )));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        Ok(())
    }

    /// SIGCONT.
    pub fn resume(&mut self) {
        self.signal(Signal::SIGCONT);
        self.paused = false;
    }

    /// Waits, at most `limit`, for the process to exit on its own: `Some(success)` once it
    /// has, `None` if it still ran at the bound (it is then killed, so nothing is left).
    pub fn wait_exit(mut self, limit: Duration) -> Result<Option<bool>> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok(Some(status.success())),
                Ok(None) => std::thread::sleep(POLL_INTERVAL),
                Err(e) => return Err(Error::io("wait for a node's command", e)),
            }
        }
        self.kill().map(|()| None)
    }

    /// SIGKILL and reap.
    pub fn kill(mut self) -> Result<()> {
        self.signal(Signal::SIGKILL);
        self.child
            .wait()
            .map(|_| ())
            .map_err(|e| Error::io("wait for a killed node", e))
    }

    /// SIGCONT (a paused process cannot handle SIGTERM), SIGTERM, and SIGKILL if it is still
    /// alive after `timeout`.
    pub fn stop(mut self, timeout: Duration) -> Result<()> {
        self.resume();
        self.signal(Signal::SIGTERM);
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if !self.is_alive() {
                return Ok(());
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        self.kill()
    }
}
