//! Running shell scripts on hosts with the system `ssh`: one shared master connection per host
//! (ControlMaster in a private directory), batch mode (never a password prompt), a connection
//! timeout, a wall-clock bound on every command and bounded retries of connection failures.

use super::super::{Error, Result};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The exit status `ssh` itself uses for its own errors (connection refused, timed out,
/// authentication failed), as opposed to the remote command's status.
pub const SSH_ERROR_STATUS: i32 = 255;

/// Bound on how long a command may keep running after its time limit before we stop waiting.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// First pause before retrying a connection failure; doubles on each retry.
const RETRY_BACKOFF_FIRST: Duration = Duration::from_millis(250);

/// Extra time allowed per MiB written to a command's standard input (binary uploads).
const STDIN_TIME_PER_MIB: Duration = Duration::from_millis(250);

/// A download (a node's log) may run this many times `command_timeout`: logs of long runs are
/// large, and a slow link must not cut them off.
const DOWNLOAD_TIME_FACTOR: u32 = 5;

/// How bytes of the standard error end up in error messages: the last ones, at most this many.
const STDERR_TAIL_BYTES: usize = 2000;

/// Runs shell scripts on hosts.
pub trait Remote: Send + Sync {
    /// Runs `script` (POSIX sh) on `host` with `stdin`; its stdout on exit status 0.
    fn run(&self, host: &str, script: &str, stdin: &[u8]) -> Result<String>;

    /// Like [`Remote::run`], for the checks before a run: one attempt, no retries, so an
    /// unreachable host is reported as soon as its connection fails.
    fn probe(&self, host: &str, script: &str) -> Result<String> {
        self.run(host, script, b"")
    }

    /// Like [`Remote::run`] with the content of the local file `source` as stdin (a broker
    /// binary: transports should stream it rather than hold it in memory).
    fn upload(&self, host: &str, script: &str, source: &Path) -> Result<String> {
        let bytes = std::fs::read(source)
            .map_err(|e| Error::io(format!("read {}", source.display()), e))?;
        self.run(host, script, &bytes)
    }

    /// Runs `script` on `host` and writes its stdout to the local file `dest` (a node's log:
    /// transports should stream it rather than hold it in memory).
    fn download(&self, host: &str, script: &str, dest: &Path) -> Result<()> {
        let out = self.run(host, script, b"")?;
        std::fs::write(dest, out).map_err(|e| Error::io(format!("write {}", dest.display()), e))
    }

    /// Releases what the transport holds (connections, files). Later calls may reopen them.
    fn close(&self) {}
}

/// A command's standard input.
#[derive(Clone, Copy)]
enum Input<'a> {
    /// These bytes.
    Bytes(&'a [u8]),
    /// This file's content, streamed by the kernel (no copy in memory).
    File(&'a Path),
}

/// How to reach one host: the destination and the `ssh` options for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `user@address`, an address, or a `Host` of the ssh config file.
    pub destination: String,
    /// Options for this host only (`-p PORT`, `-i KEY`, `-F FILE`, `-l USER`, `-o ...`).
    pub options: Vec<String>,
}

/// Bounds of the ssh transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `ConnectTimeout`: how long to wait for a host to answer.
    pub connect_timeout: Duration,
    /// How long one command may run (longer with a large stdin).
    pub command_timeout: Duration,
    /// How many times a connection failure (ssh exit 255) is retried.
    pub retries: u32,
}

/// [`Remote`] over the system `ssh`.
pub struct SshRemote {
    /// Host (the key callers pass) -> how to reach it.
    targets: BTreeMap<String, Target>,
    /// Bounds on connecting, running and retrying.
    limits: Limits,
    /// Private directory of the master connections' sockets; removed on drop.
    control_dir: PathBuf,
}

/// Distinguishes the control directories of several clusters in one process.
static CONTROL_DIRS: AtomicU64 = AtomicU64::new(0);

impl SshRemote {
    /// A transport to `targets` (host key -> target) with `limits`.
    ///
    /// Creates a private (0700) directory for the master connections' sockets. Its path is
    /// short on purpose: a unix socket path must fit in 108 bytes, and ssh adds a 40-character
    /// hash (`%C`).
    pub fn new(targets: BTreeMap<String, Target>, limits: Limits) -> Result<SshRemote> {
        let n = CONTROL_DIRS.fetch_add(1, Ordering::Relaxed);
        remove_dead_control_dirs(&std::env::temp_dir());
        let control_dir = std::env::temp_dir().join(format!("tw-ssh-{}-{n}", std::process::id()));
        if control_dir.exists() {
            // Left by an earlier process that had our pid; its sockets are dead.
            let _ = std::fs::remove_dir_all(&control_dir);
        }
        let remote = SshRemote {
            targets,
            limits,
            control_dir,
        };
        remote.ensure_control_dir()?;
        Ok(remote)
    }

    /// Creates the control directory if it is missing (after [`Remote::close`]).
    fn ensure_control_dir(&self) -> Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        match std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&self.control_dir)
        {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(Error::io(
                format!("create {}", self.control_dir.display()),
                e,
            )),
            _ => Ok(()),
        }
    }

    /// The directory holding the master connections' sockets.
    pub fn control_dir(&self) -> &Path {
        &self.control_dir
    }

    /// The `ssh` arguments up to and including the destination.
    pub fn ssh_args(&self, target: &Target) -> Vec<String> {
        let control_path = self.control_dir.join("%C");
        let mut args: Vec<String> = [
            "BatchMode=yes".to_string(),
            format!(
                "ConnectTimeout={}",
                self.limits.connect_timeout.as_secs().max(1)
            ),
            "ServerAliveInterval=5".into(),
            "ServerAliveCountMax=3".into(),
            "ControlMaster=auto".into(),
            format!("ControlPath={}", control_path.display()),
            "ControlPersist=120".into(),
        ]
        .into_iter()
        .flat_map(|o| ["-o".to_string(), o])
        .collect();
        args.extend(target.options.iter().cloned());
        args.push(target.destination.clone());
        args
    }

    fn target(&self, host: &str) -> Target {
        self.targets.get(host).cloned().unwrap_or_else(|| Target {
            destination: host.to_string(),
            options: vec![],
        })
    }

    /// One attempt: runs the script with a time limit.
    ///
    /// With `dest`, stdout goes to that file (created or truncated) and the result is empty.
    fn attempt(
        &self,
        host: &str,
        script: &str,
        input: Input<'_>,
        dest: Option<&Path>,
    ) -> Result<String> {
        let target = self.target(host);
        self.ensure_control_dir()?;
        let (stdin, bytes, len) = match input {
            Input::Bytes(b) => (Stdio::piped(), b, b.len() as u64),
            Input::File(path) => {
                let file = std::fs::File::open(path)
                    .map_err(|e| Error::io(format!("open {}", path.display()), e))?;
                let len = file.metadata().map(|m| m.len()).unwrap_or(0);
                (Stdio::from(file), &[][..], len)
            }
        };
        let stdout = match dest {
            None => Stdio::piped(),
            Some(path) => Stdio::from(
                std::fs::File::create(path)
                    .map_err(|e| Error::io(format!("create {}", path.display()), e))?,
            ),
        };
        let mut child = Command::new("ssh")
            .args(self.ssh_args(&target))
            .arg("--")
            .arg(script)
            .stdin(stdin)
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::io("run ssh (is the openssh client installed?)", e))?;
        let mib = u32::try_from(len.div_ceil(1 << 20)).unwrap_or(u32::MAX);
        let base = match dest {
            None => self.limits.command_timeout,
            Some(_) => self.limits.command_timeout * DOWNLOAD_TIME_FACTOR,
        };
        let limit = base + STDIN_TIME_PER_MIB * mib;
        let outcome = wait_bounded(&mut child, bytes, limit);
        let command = format!("ssh {} {}", target.destination, first_line(script));
        match outcome {
            Err(e) => Err(Error::io(command, e)),
            Ok(Finished::TimedOut) => Err(Error::Command {
                command,
                status: None,
                stderr: format!("no answer within {} s; stopped waiting", limit.as_secs()),
            }),
            Ok(Finished::Exited {
                status,
                stdout,
                stderr,
            }) => {
                if status == Some(0) {
                    Ok(String::from_utf8_lossy(&stdout).into_owned())
                } else {
                    Err(Error::Command {
                        command,
                        status,
                        stderr: tail(&stderr),
                    })
                }
            }
        }
    }

    /// Closes the master connections (they would otherwise linger for `ControlPersist`).
    fn close_masters(&self) {
        for target in self.targets.values() {
            let mut args = self.ssh_args(target);
            let destination = args.pop().expect("the destination is the last argument");
            let _ = Command::new("ssh")
                .args(args)
                .args(["-O", "exit"])
                .arg(destination)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl SshRemote {
    /// Attempts with bounded retries of connection failures.
    fn with_retries(
        &self,
        host: &str,
        script: &str,
        input: Input<'_>,
        dest: Option<&Path>,
    ) -> Result<String> {
        let mut backoff = RETRY_BACKOFF_FIRST;
        let mut attempt = 0;
        loop {
            match self.attempt(host, script, input, dest) {
                Err(Error::Command {
                    status: Some(SSH_ERROR_STATUS),
                    ..
                }) if attempt < self.limits.retries => {
                    attempt += 1;
                    tracing::warn!("ssh {host}: connection failed, retry {attempt}");
                    std::thread::sleep(backoff);
                    backoff *= 2;
                }
                other => return other,
            }
        }
    }
}

impl Remote for SshRemote {
    fn run(&self, host: &str, script: &str, stdin: &[u8]) -> Result<String> {
        self.with_retries(host, script, Input::Bytes(stdin), None)
    }

    fn probe(&self, host: &str, script: &str) -> Result<String> {
        self.attempt(host, script, Input::Bytes(b""), None)
    }

    fn upload(&self, host: &str, script: &str, source: &Path) -> Result<String> {
        self.with_retries(host, script, Input::File(source), None)
    }

    fn download(&self, host: &str, script: &str, dest: &Path) -> Result<()> {
        self.with_retries(host, script, Input::Bytes(b""), Some(dest))
            .map(|_| ())
    }

    /// Closes the master connections and removes their directory (teardown does this, since
    /// a harness that exits from its signal handler never drops the transport).
    fn close(&self) {
        self.close_masters();
        let _ = std::fs::remove_dir_all(&self.control_dir);
    }
}

impl Drop for SshRemote {
    fn drop(&mut self) {
        self.close();
    }
}

/// Removes the control directories (`tw-ssh-<pid>-<n>`) of harness processes that are gone,
/// e.g. killed with SIGKILL before their teardown; nothing else in `tmp` is touched.
fn remove_dead_control_dirs(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("tw-ssh-")
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, n)| n.parse::<u64>().ok().and(pid.parse::<u32>().ok()))
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// How a bounded wait ended.
enum Finished {
    /// The process exited (`status` is `None` when a signal ended it).
    Exited {
        status: Option<i32>,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
    },
    /// It ran past its time limit and was killed.
    TimedOut,
}

/// Feeds `stdin`, collects the output and waits at most `limit` for `child` to exit, killing it
/// otherwise. Input and output go through threads so a full pipe never blocks the wait.
fn wait_bounded(child: &mut Child, stdin: &[u8], limit: Duration) -> std::io::Result<Finished> {
    let input = child.stdin.take().map(|mut pipe| {
        let data = stdin.to_vec();
        std::thread::spawn(move || {
            // A remote side that exits early closes the pipe: its status tells what happened.
            let _ = pipe.write_all(&data);
        })
    });
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = reader(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = reader(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(1);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    };
    let Some(status) = status else {
        // Killed: reap it, but never wait without a bound for the pipes' other holders.
        let reap_deadline = Instant::now() + KILL_GRACE;
        while child.try_wait()?.is_none() && Instant::now() < reap_deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        return Ok(Finished::TimedOut);
    };
    if let Some(t) = input {
        let _ = t.join();
    }
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    Ok(Finished::Exited {
        status: status.code(),
        stdout,
        stderr,
    })
}

fn first_line(script: &str) -> String {
    let line = script.lines().next().unwrap_or("");
    if line.len() > 120 || script.lines().nth(1).is_some() {
        let cut: String = line.chars().take(120).collect();
        format!("{cut} ...")
    } else {
        line.to_string()
    }
}

fn tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(STDERR_TAIL_BYTES);
    String::from_utf8_lossy(&bytes[start..]).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(limits: Limits) -> SshRemote {
        let targets = BTreeMap::from([(
            "n1".to_string(),
            Target {
                destination: "root@10.0.0.11".into(),
                options: vec!["-p".into(), "2222".into()],
            },
        )]);
        SshRemote::new(targets, limits).unwrap()
    }

    const LIMITS: Limits = Limits {
        connect_timeout: Duration::from_secs(3),
        command_timeout: Duration::from_secs(30),
        retries: 2,
    };

    #[test]
    fn arguments_reuse_a_private_master_connection_and_never_prompt() {
        let r = remote(LIMITS);
        let args = r.ssh_args(&r.target("n1"));
        let joined = args.join(" ");
        assert!(joined.starts_with("-o BatchMode=yes -o ConnectTimeout=3 "));
        let control = format!("-o ControlPath={}/%C", r.control_dir().display());
        assert!(joined.contains(&control), "{joined}");
        assert!(joined.ends_with("-p 2222 root@10.0.0.11"), "{joined}");
        let mode = std::fs::metadata(r.control_dir()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(mode.permissions().mode() & 0o777, 0o700);
        let dir = r.control_dir().to_path_buf();
        drop(r);
        assert!(!dir.exists(), "the control directory goes with the remote");
    }

    #[test]
    fn close_removes_the_control_directory_and_a_later_command_makes_it_again() {
        let r = remote(LIMITS);
        let dir = r.control_dir().to_path_buf();
        r.close();
        assert!(!dir.exists());
        r.ensure_control_dir().unwrap();
        assert!(
            dir.is_dir(),
            "commands after teardown still get a private directory"
        );
        drop(r);
        assert!(!dir.exists());
    }

    #[test]
    fn control_directories_of_dead_processes_are_removed_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        // Pids above the kernel's maximum (4194304) never exist.
        for name in ["tw-ssh-4999999-0", "tw-ssh-4999999-x", "other"] {
            std::fs::create_dir(tmp.path().join(name)).unwrap();
        }
        let live = format!("tw-ssh-{}-7", std::process::id());
        std::fs::create_dir(tmp.path().join(&live)).unwrap();
        remove_dead_control_dirs(tmp.path());
        assert!(!tmp.path().join("tw-ssh-4999999-0").exists());
        assert!(
            tmp.path().join("tw-ssh-4999999-x").exists(),
            "not our pattern"
        );
        assert!(tmp.path().join("other").exists());
        assert!(
            tmp.path().join(live).exists(),
            "a live process keeps its directory"
        );
    }

    #[test]
    fn an_unknown_host_key_is_used_as_the_destination() {
        let r = remote(LIMITS);
        assert_eq!(
            r.target("vagrant@c1"),
            Target {
                destination: "vagrant@c1".into(),
                options: vec![]
            }
        );
    }

    #[test]
    fn a_bounded_wait_kills_a_command_that_runs_too_long() {
        let mut child = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_bounded(&mut child, b"", Duration::from_millis(100)).unwrap();
        assert!(matches!(out, Finished::TimedOut));
        assert!(child.try_wait().unwrap().is_some(), "killed and reaped");
    }

    #[test]
    fn a_bounded_wait_passes_stdin_and_collects_both_outputs() {
        let mut child = Command::new("sh")
            .args(["-c", "cat; echo oops >&2; exit 3"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let big = vec![b'x'; 1 << 20];
        match wait_bounded(&mut child, &big, Duration::from_secs(30)).unwrap() {
            Finished::Exited {
                status,
                stdout,
                stderr,
            } => {
                assert_eq!(status, Some(3));
                assert_eq!(stdout.len(), big.len());
                assert_eq!(stderr, b"oops\n");
            }
            Finished::TimedOut => panic!("timed out"),
        }
    }

    #[test]
    fn long_scripts_are_shortened_in_messages() {
        assert_eq!(first_line("true"), "true");
        assert_eq!(first_line("set -u\nexit 1"), "set -u ...");
        assert_eq!(tail(&vec![b'a'; 5000]).len(), STDERR_TAIL_BYTES);
    }
}
