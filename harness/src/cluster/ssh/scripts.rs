//! The shell scripts that control the companion broker on one host (start, stop, signals,
//! wipe, the lossy filesystem, logs, settings, uploads), as plain strings so tests can read
//! them, and [`NodeControl`], the commands every node's process answers to whatever the hosts
//! run.

use super::kafka::KafkaScripts;
use super::shell::quote;
use super::spec::{Control, Kind, Mode, SshSpec};
use crate::cluster::Role;
use std::path::Path;

/// The scripts that control one host, as plain strings (so tests can read them).
pub(super) struct Scripts<'a> {
    /// The cluster file.
    pub(super) spec: &'a SshSpec,
    /// The node's name (`{node}` in paths).
    pub(super) node: String,
    /// This node's remote directory.
    pub(super) dir: String,
    /// This node's broker binary.
    pub(super) binary: String,
    /// This node's lossy filesystem binary.
    pub(super) lossyfs_binary: String,
    /// This node's settings file (systemd control).
    pub(super) config_path: String,
    /// Whether privileged commands go through `sudo -n`.
    pub(super) sudo: bool,
    /// systemd or process; `None` until preflight decided `Control::Auto` (then systemd).
    pub(super) mode: Option<Mode>,
}

impl<'a> Scripts<'a> {
    pub(super) fn sudo(&self, script: &str) -> String {
        if self.sudo {
            format!("sudo -n sh -c {}", quote(script))
        } else {
            script.to_string()
        }
    }

    pub(super) fn new(spec: &'a SshSpec, node: &str) -> Scripts<'a> {
        let host = spec.host(node).ok();
        let dir = host
            .and_then(|h| h.remote_dir.clone())
            .unwrap_or_else(|| spec.remote_dir.clone());
        Scripts {
            spec,
            node: node.to_string(),
            dir: dir.replace("{node}", node),
            binary: spec.binary.replace("{node}", node),
            lossyfs_binary: spec.lossyfs_binary.replace("{node}", node),
            config_path: spec.config_path.replace("{node}", node),
            sudo: host.and_then(|h| h.sudo).unwrap_or(spec.sudo),
            mode: match (spec.kind, spec.control) {
                (Kind::Kafka, _) => Some(Mode::Process),
                (_, Control::Auto) => None,
                (_, Control::Systemd) => Some(Mode::Systemd),
                (_, Control::Process) => Some(Mode::Process),
            },
        }
    }

    /// This node's Kafka commands (`kind = "kafka"`).
    pub(super) fn kafka(&self) -> KafkaScripts<'a> {
        KafkaScripts::new(
            &self.spec.kafka,
            &self.node,
            &self.dir,
            self.sudo,
            self.spec.stop_timeout_s,
        )
    }

    /// The decided mode: the file's, or what preflight found for `auto`.
    pub(super) fn mode(&self) -> Mode {
        self.mode.unwrap_or(Mode::Systemd)
    }

    pub(super) fn data_dir(&self) -> String {
        format!("{}/data", self.dir)
    }

    pub(super) fn log_file(&self) -> String {
        quote(&format!("{}/broker.log", self.dir))
    }

    pub(super) fn unit(&self) -> String {
        quote(&self.spec.unit)
    }

    pub(super) fn pid_file(&self) -> String {
        quote(&format!("{}/broker.pid", self.dir))
    }

    /// Signals the broker (a process group in process control).
    pub(super) fn signal(&self, sig: &str) -> String {
        match self.mode() {
            Mode::Systemd => self.sudo(&format!("systemctl kill -s {sig} {}", self.unit())),
            Mode::Process => self.sudo(&format!(
                "test -f {p} && kill -{sig} -- -$(cat {p}) 2>/dev/null || true",
                p = self.pid_file()
            )),
        }
    }

    pub(super) fn is_running(&self) -> String {
        match self.mode() {
            Mode::Systemd => format!("systemctl is-active --quiet {}", self.unit()),
            Mode::Process => self.sudo(&format!(
                "test -f {p} && kill -0 $(cat {p}) 2>/dev/null",
                p = self.pid_file()
            )),
        }
    }

    /// Waits (bounded, in tenths of a second) until the broker is gone.
    pub(super) fn wait_gone(&self, tenths: u64) -> String {
        format!(
            "i=0; while {running}; do i=$((i+1)); [ $i -gt {tenths} ] && exit 1; sleep 0.1; done; true",
            running = self.is_running()
        )
    }

    pub(super) fn start(&self, argv: &[String]) -> String {
        match self.mode() {
            Mode::Systemd => self.sudo(&format!(
                "systemctl reset-failed {u} >/dev/null 2>&1; systemctl start {u}",
                u = self.unit()
            )),
            Mode::Process => {
                let dir = quote(&self.dir);
                let words: Vec<String> = argv.iter().map(|a| quote(a)).collect();
                self.sudo(&format!(
                    "if test -f {p} && kill -0 $(cat {p}) 2>/dev/null; then exit 0; fi; \
                     mkdir -p {dir} && cd {dir} || exit 1; \
                     echo '=== tidewater: starting ===' >> broker.log; \
                     setsid {cmd} >> broker.log 2>&1 < /dev/null & echo $! > {p}",
                    p = self.pid_file(),
                    cmd = words.join(" ")
                ))
            }
        }
    }

    pub(super) fn stop(&self) -> String {
        match self.mode() {
            Mode::Systemd => format!(
                "{}; {}",
                self.signal("SIGCONT"),
                self.sudo(&format!("systemctl stop {}", self.unit()))
            ),
            Mode::Process => format!(
                "{}; {}; {} || {{ {}; {}; }}",
                self.signal("CONT"),
                self.signal("TERM"),
                self.wait_gone(self.spec.stop_timeout_s * 10),
                self.signal("KILL"),
                self.wait_gone(50)
            ),
        }
    }

    pub(super) fn kill(&self) -> String {
        let sig = match self.mode() {
            Mode::Systemd => "SIGKILL",
            Mode::Process => "KILL",
        };
        format!("{}; {}", self.signal(sig), self.wait_gone(50))
    }

    pub(super) fn pause(&self) -> String {
        self.signal(match self.mode() {
            Mode::Systemd => "SIGSTOP",
            Mode::Process => "STOP",
        })
    }

    pub(super) fn resume(&self) -> String {
        self.signal(match self.mode() {
            Mode::Systemd => "SIGCONT",
            Mode::Process => "CONT",
        })
    }

    pub(super) fn wipe(&self) -> String {
        let data = quote(&self.data_dir());
        if self.spec.lossy_fs {
            // A mount point cannot be removed: empty it, and make the removal durable.
            return self.sudo(&format!(
                "find {data} -mindepth 1 -maxdepth 1 -exec rm -rf {{}} + && \
                 printf 'sync\\n' > {control}",
                control = self.lossyfs_control()
            ));
        }
        self.sudo(&format!("rm -rf {data} && mkdir -p {data}"))
    }

    /// Wipes the data (and a lossy filesystem's backing directory) and empties the log, so
    /// the logs collected after a run are its own. Run with no lossy filesystem mounted.
    pub(super) fn wipe_all(&self) -> String {
        let data = quote(&self.data_dir());
        self.sudo(&format!(
            "rm -rf {data} {durable} && mkdir -p {data} && : > {log}",
            durable = quote(&self.durable_dir()),
            log = self.log_file()
        ))
    }

    /// The lossy filesystem's backing directory: what the node made durable.
    pub(super) fn durable_dir(&self) -> String {
        format!("{}/data.durable", self.dir)
    }

    pub(super) fn lossyfs_pid_file(&self) -> String {
        quote(&format!("{}/lossyfs.pid", self.dir))
    }

    pub(super) fn lossyfs_control(&self) -> String {
        quote(&format!(
            "{}/{}",
            self.data_dir(),
            tidewater_lossyfs::CONTROL_FILE_NAME
        ))
    }

    /// Mounts the lossy filesystem over `data` (backed by `data.durable`) as a process of
    /// its own (setsid, like the broker in process control), then waits (bounded, 10 s)
    /// until its control file answers. A mount already served is kept.
    pub(super) fn mount_lossyfs(&self) -> String {
        let data = quote(&self.data_dir());
        let durable = quote(&self.durable_dir());
        let mut cmd = vec![quote(&self.lossyfs_binary)];
        if Path::new(&self.lossyfs_binary).file_name() == Some("tidewater".as_ref()) {
            cmd.push("lossyfs".into());
        }
        cmd.extend(["mount".into(), durable.clone(), data.clone()]);
        self.sudo(&format!(
            "if test -f {p} && kill -0 $(cat {p}) 2>/dev/null; then exit 0; fi; \
             mkdir -p {data} {durable} && cd {dir} || exit 1; \
             setsid {cmd} >> lossyfs.log 2>&1 < /dev/null & echo $! > {p}; \
             i=0; until test -e {control}; do i=$((i+1)); \
             if [ $i -gt 100 ] || ! kill -0 $(cat {p}) 2>/dev/null; then \
             echo 'lossyfs did not mount:' >&2; tail -n 5 lossyfs.log >&2; exit 1; fi; \
             sleep 0.1; done",
            p = self.lossyfs_pid_file(),
            dir = quote(&self.dir),
            cmd = cmd.join(" "),
            control = self.lossyfs_control()
        ))
    }

    /// Cuts the power under a killed broker: every write it had not fsynced is lost (`torn`
    /// keeps a seeded prefix of each file's last unsynced write, `docs/lossyfs.md`).
    pub(super) fn lose_unsynced(&self, torn_seed: Option<u64>) -> String {
        let command = match torn_seed {
            Some(seed) => format!("lose-unsynced torn {seed}"),
            None => "lose-unsynced clean".to_string(),
        };
        self.sudo(&format!(
            "printf '%s\\n' {} > {}",
            quote(&command),
            self.lossyfs_control()
        ))
    }

    /// Unmounts the lossy filesystem, if this run's (or an earlier one's) is there: a sync
    /// first, so the data directory stays as evidence, then SIGTERM (lossyfs unmounts and
    /// exits; SIGKILL after 5 s), then a lazy unmount of a mount left without its process.
    /// Only a `fuse.lossyfs` mount at `data` is touched. Run with the broker stopped.
    pub(super) fn unmount_lossyfs(&self) -> String {
        let data = self.data_dir();
        self.sudo(&format!(
            "if test -f {p}; then pid=$(cat {p}); \
             if kill -0 $pid 2>/dev/null; then printf 'sync\\n' 2>/dev/null > {control}; \
             kill -TERM $pid; i=0; while kill -0 $pid 2>/dev/null; do i=$((i+1)); \
             if [ $i -gt 50 ]; then kill -KILL $pid; break; fi; sleep 0.1; done; fi; \
             rm -f {p}; fi; \
             if grep -qF {mounted} /proc/mounts; then umount -l {quoted}; fi; true",
            p = self.lossyfs_pid_file(),
            control = self.lossyfs_control(),
            mounted = quote(&format!(" {data} fuse.lossyfs ")),
            quoted = quote(&data)
        ))
    }

    pub(super) fn read_log(&self) -> String {
        self.sudo(&format!("cat {} 2>/dev/null || true", self.log_file()))
    }

    /// The unit's own messages (start, stop, killed by a signal), where systemd manages it.
    pub(super) fn read_journal(&self) -> Option<String> {
        match self.mode() {
            Mode::Systemd => Some(self.sudo(&format!(
                "journalctl --no-pager -o short-iso -n 5000 -u {} 2>&1 || true",
                self.unit()
            ))),
            Mode::Process => None,
        }
    }

    /// Writes the settings file (stdin) and the role for the systemd unit.
    pub(super) fn configure(&self, role: Role) -> String {
        let config = quote(&self.config_path);
        let dir = Path::new(&self.config_path)
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "/etc/tidewater".into());
        let role_env = quote(&format!("{dir}/role.env"));
        self.sudo(&format!(
            "mkdir -p {d} && cat > {config} && echo TIDEWATER_ROLE={role} > {role_env}",
            d = quote(&dir),
            role = role.as_flag()
        ))
    }

    /// Prints the sha256 of the installed file at `path` (nothing if there is none).
    pub(super) fn file_digest(&self, path: &str) -> String {
        self.sudo(&format!(
            "sha256sum {} 2>/dev/null | cut -d' ' -f1; true",
            quote(path)
        ))
    }

    /// Replaces the executable at `path` with stdin, atomically (a reader never sees half a
    /// file; hosts that share a file system may upload at the same time, hence the per-shell
    /// temporary name).
    pub(super) fn install_file(&self, path: &str) -> String {
        let bin = quote(path);
        let dir = Path::new(path)
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| ".".into());
        self.sudo(&format!(
            "mkdir -p {d} && cat > {bin}.tw-new.$$ && chmod 0755 {bin}.tw-new.$$ && \
             mv -f {bin}.tw-new.$$ {bin}",
            d = quote(&dir)
        ))
    }
}

/// The commands that control one node's process, whatever the hosts run: the companion
/// broker ([`Scripts`]) or Kafka ([`KafkaScripts`]). Starting and configuring differ in what
/// they need and are chosen by [`Inner`].
pub(super) trait NodeControl {
    /// SIGCONT, SIGTERM, SIGKILL after a bound; succeeds once the process is gone.
    fn stop(&self) -> String;
    /// SIGKILL; succeeds once the process is gone.
    fn kill(&self) -> String;
    /// SIGSTOP.
    fn pause(&self) -> String;
    /// SIGCONT.
    fn resume(&self) -> String;
    /// Succeeds while the process lives (paused or not).
    fn is_running(&self) -> String;
    /// Deletes the node's data.
    fn wipe(&self) -> String;
    /// Deletes the node's data and empties its logs.
    fn wipe_all(&self) -> String;
    /// The files copied into `nodes/<node>/`, each with the script that prints it.
    fn logs(&self) -> Vec<(String, String)>;
}

impl NodeControl for Scripts<'_> {
    fn stop(&self) -> String {
        Scripts::stop(self)
    }
    fn kill(&self) -> String {
        Scripts::kill(self)
    }
    fn pause(&self) -> String {
        Scripts::pause(self)
    }
    fn resume(&self) -> String {
        Scripts::resume(self)
    }
    fn is_running(&self) -> String {
        Scripts::is_running(self)
    }
    fn wipe(&self) -> String {
        Scripts::wipe(self)
    }
    fn wipe_all(&self) -> String {
        Scripts::wipe_all(self)
    }
    fn logs(&self) -> Vec<(String, String)> {
        let mut logs = vec![("broker.log".to_string(), self.read_log())];
        if let Some(journal) = self.read_journal() {
            logs.push(("journal.log".to_string(), journal));
        }
        logs
    }
}

impl NodeControl for KafkaScripts<'_> {
    fn stop(&self) -> String {
        KafkaScripts::stop(self)
    }
    fn kill(&self) -> String {
        KafkaScripts::kill(self)
    }
    fn pause(&self) -> String {
        KafkaScripts::pause(self)
    }
    fn resume(&self) -> String {
        KafkaScripts::resume(self)
    }
    fn is_running(&self) -> String {
        KafkaScripts::is_running(self)
    }
    fn wipe(&self) -> String {
        KafkaScripts::wipe(self)
    }
    fn wipe_all(&self) -> String {
        KafkaScripts::wipe_all(self)
    }
    fn logs(&self) -> Vec<(String, String)> {
        KafkaScripts::logs(self)
    }
}
