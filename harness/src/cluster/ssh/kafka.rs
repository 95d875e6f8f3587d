//! The Kafka cluster kind of the ssh backend (`kind = "kafka"` in a cluster file): the hosts
//! run Apache Kafka in KRaft mode instead of the companion broker. Everything here is plain
//! text the harness sends over ssh, so it is unit-tested without Kafka; `docs/real-kafka.md`
//! says what has and has not been run against a real Kafka.
//!
//! [`KafkaScripts`]: format, start, stop, kill, pause, resume, wipe and log reading on one
//! host, by the pid of its Kafka JVM (checked against its command line, never by name), and
//! through the release's scripts or `java` itself ([`Launch`]). The `[kafka]` table, the `--set` mapping and `server.properties` live in
//! [`crate::kafka::properties`], shared with the local backend.

use super::shell::quote;
use crate::kafka::fetch::{LogConfig, LOG_CONFIG_FILES};
use crate::kafka::jvm::JVM_OPTIONS;
pub use crate::kafka::properties::*;

/// How long `start` waits for the launcher to write the pid file, in tenths of a second.
const PID_FILE_WAIT_TENTHS: u64 = 50;

/// How long `kill` waits for the JVM to be gone, in tenths of a second.
const KILL_WAIT_TENTHS: u64 = 50;

/// The commands that control Kafka on one host, as plain strings (so tests can read them).
///
/// Files in the node's remote directory: `server.properties`, `data/` (`log.dirs`),
/// `logs/` (Kafka's own log4j files: `LOG_DIR`), `broker.log` (the launcher's standard
/// output and error, as the companion broker's) and `kafka.pid`.
pub struct KafkaScripts<'a> {
    /// The cluster file's `[kafka]` table.
    kafka: &'a KafkaSpec,
    /// The node's remote directory.
    dir: String,
    /// Where Kafka is unpacked on this host.
    home: String,
    /// Whether the scripts run through `sudo -n`.
    sudo: bool,
    /// Bound between SIGTERM and SIGKILL, in seconds.
    stop_timeout_s: u64,
    /// `--feature NAME=LEVEL` values of the format ([`format_features`]).
    format_features: Vec<String>,
}

impl<'a> KafkaScripts<'a> {
    /// The scripts of node `node` whose remote directory is `dir`.
    pub fn new(
        kafka: &'a KafkaSpec,
        node: &str,
        dir: &str,
        sudo: bool,
        stop_timeout_s: u64,
    ) -> KafkaScripts<'a> {
        KafkaScripts {
            kafka,
            dir: dir.replace("{node}", node),
            home: kafka.home.replace("{node}", node),
            sudo,
            stop_timeout_s,
            format_features: Vec::new(),
        }
    }

    /// The same scripts, formatting with these `--feature NAME=LEVEL` values.
    pub fn with_format_features(mut self, features: &[String]) -> KafkaScripts<'a> {
        self.format_features = features.to_vec();
        self
    }

    fn wrap(&self, script: &str) -> String {
        if self.sudo {
            format!("sudo -n sh -c {}", quote(script))
        } else {
            script.to_string()
        }
    }

    /// The node's `log.dirs`.
    pub fn data_dir(&self) -> String {
        format!("{}/data", self.dir)
    }

    /// The node's `server.properties`.
    pub fn properties_path(&self) -> String {
        format!("{}/server.properties", self.dir)
    }

    fn path(&self, name: &str) -> String {
        quote(&format!("{}/{name}", self.dir))
    }

    fn bin(&self, script: &str) -> String {
        quote(&format!("{}/bin/{script}", self.home))
    }

    /// The environment of Kafka's scripts, as `NAME=value` words for `env`.
    fn env_words(&self) -> String {
        let mut words = vec![
            format!("KAFKA_HEAP_OPTS={}", self.kafka.heap_opts()),
            format!("LOG_DIR={}/logs", self.dir),
        ];
        if let Some(java) = &self.kafka.java_home {
            words.push(format!("JAVA_HOME={java}"));
        }
        words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
    }

    /// The words that run Kafka's class `main` (the script `script` runs it): the script
    /// under `env`, or `java` with the release's `libs/` and the harness's JVM options (then
    /// `$log` must hold the logging option, [`Self::choose_log_config`]).
    fn launcher(&self, script: &str, main: &str) -> String {
        match self.kafka.launch {
            Launch::Scripts => format!("env {} {}", self.env_words(), self.bin(script)),
            Launch::Java => {
                let java = match &self.kafka.java_home {
                    Some(home) => format!("{home}/bin/java"),
                    None => "java".into(),
                };
                let mut words = vec![quote(&java)];
                words.extend(JVM_OPTIONS.iter().map(|o| quote(o)));
                words.extend(self.kafka.heap_opts().split_whitespace().map(quote));
                words.push(quote(&format!("-Dkafka.logs.dir={}/logs", self.dir)));
                words.push("${log:+\"$log\"}".into());
                words.push("-cp".into());
                words.push(quote(&format!("{}/libs/*", self.home)));
                words.push(main.into());
                words.join(" ")
            }
        }
    }

    /// Sets `$log` to the JVM option of the release's logging configuration, the first of
    /// [`LOG_CONFIG_FILES`] the host has (as the local backend chooses), or to nothing.
    fn choose_log_config(&self) -> String {
        let mut script = "log=".to_string();
        for (i, file) in LOG_CONFIG_FILES.iter().enumerate() {
            let path = format!("{}/{file}", self.home);
            let option = LogConfig::of(path.clone().into())
                .jvm_option()
                .expect("a file names a configuration");
            let keyword = if i == 0 { "if" } else { "elif" };
            script.push_str(&format!(
                "; {keyword} [ -f {} ]; then log={}",
                quote(&path),
                quote(&option)
            ));
        }
        script.push_str("; fi");
        script
    }

    /// Sets `$pid` and succeeds when the pid file names a live process started with this
    /// node's properties file: the JVM (or its launcher scripts, which `exec` it under the
    /// same pid). A stale file whose pid was reused by another process does not match.
    fn find_pid(&self) -> String {
        format!(
            "pid=$(cat {pidfile} 2>/dev/null) && [ -n \"$pid\" ] && \
             tr '\\0' ' ' 2>/dev/null < /proc/$pid/cmdline | grep -qF -- {props}",
            pidfile = self.path("kafka.pid"),
            props = quote(&self.properties_path())
        )
    }

    /// Sends `sig` to the JVM's process group if the JVM runs: the launcher's `setsid` made
    /// the JVM its group's leader, so the group is the JVM and anything a release's scripts
    /// left running beside it. (`kill -SIG -PGID`: dash's `kill` takes no `--`.)
    fn signal_body(&self, sig: &str) -> String {
        format!(
            "if {}; then kill -{sig} -\"$pid\" 2>/dev/null; fi",
            self.find_pid()
        )
    }

    /// Waits, at most `tenths` tenths of a second, until the JVM is gone; fails after that.
    fn wait_gone_body(&self, tenths: u64) -> String {
        format!(
            "i=0; while {}; do i=$((i+1)); [ $i -gt {tenths} ] && exit 1; sleep 0.1; done",
            self.find_pid()
        )
    }

    /// Writes standard input to the node's `server.properties`.
    pub fn configure(&self) -> String {
        self.wrap(&format!(
            "mkdir -p {dir} && cat > {props}",
            dir = quote(&self.dir),
            props = quote(&self.properties_path())
        ))
    }

    /// Formats the node's log directory for KRaft (`kafka-storage.sh format`) unless it is.
    /// On a lossy filesystem the format is then made durable (its control file's `sync`):
    /// Kafka's format does not fsync `bootstrap.checkpoint`, and a host formatted at
    /// provisioning has it written back long before any fault (docs/real-kafka.md).
    fn format_body(&self) -> String {
        format!(
            "if [ ! -f {meta} ]; then {storage} format -t {id} -c {props} \
             --ignore-formatted{features} >> broker.log 2>&1 || {{ echo 'kafka-storage.sh \
             format failed; see broker.log' >&2; exit 1; }}; \
             if [ -e {control} ]; then printf 'sync\\n' > {control} || {{ echo 'cannot sync \
             the lossy filesystem after the format' >&2; exit 1; }}; fi; fi",
            control = quote(&format!(
                "{}/{}",
                self.data_dir(),
                tidewater_lossyfs::CONTROL_FILE_NAME
            )),
            features = self
                .format_features
                .iter()
                .map(|f| format!(" --feature {}", quote(f)))
                .collect::<String>(),
            meta = quote(&format!("{}/meta.properties", self.data_dir())),
            storage = self.launcher("kafka-storage.sh", "kafka.tools.StorageTool"),
            id = quote(&self.kafka.cluster_id),
            props = quote(&self.properties_path())
        )
    }

    /// Starts Kafka unless it runs: formats the log directory if it is new, then starts
    /// `kafka-server-start.sh` (or `java`) in a session of its own, its output appended to
    /// `broker.log`. The launcher writes its own pid (`$$`) before it `exec`s the script,
    /// which `exec`s the JVM (or `exec`s `java`): the pid in `kafka.pid` is the JVM's.
    /// Returns once the pid file is written, not when Kafka listens (the harness then waits
    /// for that: [`crate::cluster::ssh::SshCluster::wait_kafka_listening`]).
    pub fn start(&self) -> String {
        let launch = format!(
            "setsid sh -c 'echo $$ > \"$0\" && exec \"$@\"' {pidfile} {start} \
             {props} >> broker.log 2>&1 < /dev/null &",
            pidfile = self.path("kafka.pid"),
            start = self.launcher("kafka-server-start.sh", "kafka.Kafka"),
            props = quote(&self.properties_path())
        );
        let log_config = match self.kafka.launch {
            Launch::Scripts => String::new(),
            Launch::Java => format!("{}; ", self.choose_log_config()),
        };
        self.wrap(&format!(
            "if {running}; then exit 0; fi; \
             mkdir -p {data} {logs} && cd {dir} || exit 1; rm -f {pidfile}; \
             echo '=== tidewater: starting ===' >> broker.log; \
             {log_config}{format}; \
             {launch} \
             i=0; until [ -s {pidfile} ]; do i=$((i+1)); [ $i -gt {PID_FILE_WAIT_TENTHS} ] && exit 1; \
             sleep 0.1; done",
            running = self.find_pid(),
            data = quote(&self.data_dir()),
            logs = self.path("logs"),
            dir = quote(&self.dir),
            pidfile = self.path("kafka.pid"),
            format = self.format_body(),
        ))
    }

    /// SIGCONT (a paused JVM cannot shut down), SIGTERM (Kafka's controlled shutdown), and
    /// SIGKILL if it is still there after `stop_timeout_s`.
    pub fn stop(&self) -> String {
        self.wrap(&format!(
            "{cont}; {term}; ( {wait} ) || {{ {kill}; {wait_kill}; }}",
            cont = self.signal_body("CONT"),
            term = self.signal_body("TERM"),
            wait = self.wait_gone_body(self.stop_timeout_s * 10),
            kill = self.signal_body("KILL"),
            wait_kill = self.wait_gone_body(KILL_WAIT_TENTHS)
        ))
    }

    /// SIGKILL, then waits until the JVM is gone.
    pub fn kill(&self) -> String {
        self.wrap(&format!(
            "{}; {}",
            self.signal_body("KILL"),
            self.wait_gone_body(KILL_WAIT_TENTHS)
        ))
    }

    /// SIGSTOP of the JVM.
    pub fn pause(&self) -> String {
        self.wrap(&self.signal_body("STOP"))
    }

    /// SIGCONT of the JVM.
    pub fn resume(&self) -> String {
        self.wrap(&self.signal_body("CONT"))
    }

    /// Succeeds while the JVM lives (paused or not).
    pub fn is_running(&self) -> String {
        self.wrap(&self.find_pid())
    }

    /// Deletes the node's data (formatted again at the next start).
    pub fn wipe(&self) -> String {
        let data = quote(&self.data_dir());
        self.wrap(&format!("rm -rf {data} && mkdir -p {data}"))
    }

    /// Deletes the data and Kafka's logs and empties `broker.log`, so the logs collected
    /// after a run are its own.
    pub fn wipe_all(&self) -> String {
        let data = quote(&self.data_dir());
        self.wrap(&format!(
            "rm -rf {data} {logs} && mkdir -p {data} {logs} && : > {console}",
            logs = self.path("logs"),
            console = self.path("broker.log")
        ))
    }

    /// Prints the last `lines` lines of `broker.log` (why a JVM did not come up; ask for more
    /// than are shown, stack frames are left out of them).
    pub fn log_tail(&self, lines: usize) -> String {
        self.wrap(&format!(
            "tail -n {lines} {} 2>/dev/null; true",
            self.path("broker.log")
        ))
    }

    /// The files copied into `nodes/<node>/` and the scripts that print them: `broker.log`,
    /// the `server.properties` the node ran with, and Kafka's log4j files (rotated hours
    /// first, then the current one).
    pub fn logs(&self) -> Vec<(String, String)> {
        let mut out = vec![
            (
                "broker.log".to_string(),
                self.wrap(&format!(
                    "cat {} 2>/dev/null; true",
                    self.path("broker.log")
                )),
            ),
            (
                "server.properties".to_string(),
                self.wrap(&format!(
                    "cat {} 2>/dev/null; true",
                    quote(&self.properties_path())
                )),
            ),
        ];
        for name in ["server.log", "controller.log", "state-change.log"] {
            let current = format!("{}/logs/{name}", self.dir);
            out.push((
                name.to_string(),
                self.wrap(&format!(
                    "for f in {cur}.*; do [ -f \"$f\" ] && cat \"$f\"; done; \
                     cat {cur} 2>/dev/null; true",
                    cur = quote(&current)
                )),
            ));
        }
        out
    }

    /// The checks of this host's Kafka (run inside the preflight's privileged part): the
    /// scripts of a KRaft-capable release (with `launch = "java"`, its `libs/`), a Java
    /// runtime and `setsid`; one `problem: ...` line each.
    pub fn preflight_checks(&self) -> Vec<String> {
        let mut checks = vec![
            "command -v setsid >/dev/null 2>&1 || echo 'problem: setsid is missing'".to_string(),
        ];
        let scripts: &[&str] = match self.kafka.launch {
            Launch::Scripts => &["kafka-server-start.sh", "kafka-storage.sh"],
            Launch::Java => {
                let libs = format!("{}/libs", self.home);
                checks.push(format!(
                    "ls {l}/kafka_2.1*-*.jar >/dev/null 2>&1 || echo {msg}",
                    l = quote(&libs),
                    msg = quote(&format!(
                        "problem: {libs} holds no kafka_2.1X-X.Y.Z.jar (with launch = \"java\", \
                         kafka.home names a Kafka release's directory: what `tidewater kafka \
                         fetch` gathers, or an unpacked tarball)"
                    ))
                ));
                &[]
            }
        };
        for script in scripts {
            let path = format!("{}/bin/{script}", self.home);
            checks.push(format!(
                "test -x {p} || echo {msg}",
                p = quote(&path),
                msg = quote(&format!(
                    "problem: {path} is not an executable (kafka.home in the cluster file names \
                     where a Kafka release with KRaft, 3.3 or later, is unpacked; \
                     vagrant/provision.sh installs one from TW_KAFKA_TARBALL)"
                ))
            ));
        }
        let java = match &self.kafka.java_home {
            Some(home) => format!(
                "test -x {p} || echo {msg}",
                p = quote(&format!("{home}/bin/java")),
                msg = quote(&format!(
                    "problem: {home}/bin/java is not an executable (kafka.java_home)"
                ))
            ),
            None => "command -v java >/dev/null 2>&1 || echo 'problem: no java on the PATH \
                     (install a JRE, 17 or later, or set kafka.java_home)'"
                .to_string(),
        };
        checks.push(java);
        checks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn scripts(kafka: &KafkaSpec, sudo: bool) -> KafkaScripts<'_> {
        KafkaScripts::new(kafka, "n1", "/srv/tw/{node}", sudo, 10)
    }

    #[test]
    fn start_formats_a_new_log_directory_then_launches_kafka_recording_the_jvms_pid() {
        let kafka = KafkaSpec::default();
        let start = scripts(&kafka, false).start();
        let find = "pid=$(cat /srv/tw/n1/kafka.pid 2>/dev/null) && [ -n \"$pid\" ] && \
                    tr '\\0' ' ' 2>/dev/null < /proc/$pid/cmdline | grep -qF -- \
                    /srv/tw/n1/server.properties";
        let env = "'KAFKA_HEAP_OPTS=-Xmx512m -Xms512m' LOG_DIR=/srv/tw/n1/logs";
        assert_eq!(
            start,
            format!(
                "if {find}; then exit 0; fi; \
                 mkdir -p /srv/tw/n1/data /srv/tw/n1/logs && cd /srv/tw/n1 || exit 1; \
                 rm -f /srv/tw/n1/kafka.pid; \
                 echo '=== tidewater: starting ===' >> broker.log; \
                 if [ ! -f /srv/tw/n1/data/meta.properties ]; then env {env} \
                 /opt/kafka/bin/kafka-storage.sh format -t VGlkZXdhdGVyS2Fma2EwMQ \
                 -c /srv/tw/n1/server.properties --ignore-formatted >> broker.log 2>&1 || \
                 {{ echo 'kafka-storage.sh format failed; see broker.log' >&2; exit 1; }}; \
                 if [ -e /srv/tw/n1/data/.lossyfs-control ]; then printf 'sync\\n' > \
                 /srv/tw/n1/data/.lossyfs-control || {{ echo 'cannot sync the lossy filesystem \
                 after the format' >&2; exit 1; }}; fi; fi; \
                 setsid sh -c 'echo $$ > \"$0\" && exec \"$@\"' /srv/tw/n1/kafka.pid env {env} \
                 /opt/kafka/bin/kafka-server-start.sh /srv/tw/n1/server.properties \
                 >> broker.log 2>&1 < /dev/null & \
                 i=0; until [ -s /srv/tw/n1/kafka.pid ]; do i=$((i+1)); [ $i -gt 50 ] && exit 1; \
                 sleep 0.1; done"
            )
        );
        let kafka = KafkaSpec {
            java_home: Some("/usr/lib/jvm/java-17".into()),
            home: "/opt/kafka-{node}".into(),
            ..KafkaSpec::default()
        };
        let start = scripts(&kafka, true).start();
        assert!(start.starts_with("sudo -n sh -c 'if pid=$(cat"), "{start}");
        assert!(
            start.contains("LOG_DIR=/srv/tw/n1/logs JAVA_HOME=/usr/lib/jvm/java-17 /opt/kafka-n1/bin/kafka-server-start.sh"),
            "{start}"
        );
        // The launcher's own quotes survive the sudo quoting.
        assert!(
            start.contains(r#"setsid sh -c '\''echo $$ > "$0" && exec "$@"'\'' "#),
            "{start}"
        );
    }

    #[test]
    fn java_launch_runs_kafkas_classes_from_libs_with_the_harness_jvm_options() {
        let kafka = KafkaSpec {
            launch: Launch::Java,
            home: "/cache/kafka/4.1.1".into(),
            java_home: Some("/usr/lib/jvm/java-17".into()),
            ..KafkaSpec::default()
        };
        let start = scripts(&kafka, false).start();
        let java = "/usr/lib/jvm/java-17/bin/java -Xms256m -Xmx512m -XX:+UseSerialGC \
                    -XX:ActiveProcessorCount=1 -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
                    -Djava.awt.headless=true -Dkafka.logs.dir=/srv/tw/n1/logs ${log:+\"$log\"} \
                    -cp '/cache/kafka/4.1.1/libs/*'";
        let log = "log=; if [ -f /cache/kafka/4.1.1/config/tidewater-log4j2.properties ]; then \
                   log=-Dlog4j2.configurationFile=/cache/kafka/4.1.1/config/tidewater-log4j2.properties; \
                   elif [ -f /cache/kafka/4.1.1/config/log4j2.yaml ]; then \
                   log=-Dlog4j2.configurationFile=/cache/kafka/4.1.1/config/log4j2.yaml; \
                   elif [ -f /cache/kafka/4.1.1/config/log4j.properties ]; then \
                   log=-Dlog4j.configuration=file:/cache/kafka/4.1.1/config/log4j.properties; fi";
        let format = format!(
            "if [ ! -f /srv/tw/n1/data/meta.properties ]; then {java} kafka.tools.StorageTool \
             format -t VGlkZXdhdGVyS2Fma2EwMQ -c /srv/tw/n1/server.properties \
             --ignore-formatted >> broker.log 2>&1 || {{ echo 'kafka-storage.sh format failed; \
             see broker.log' >&2; exit 1; }}; if [ -e /srv/tw/n1/data/.lossyfs-control ]; then \
             printf 'sync\\n' > /srv/tw/n1/data/.lossyfs-control || {{ echo 'cannot sync the \
             lossy filesystem after the format' >&2; exit 1; }}; fi; fi"
        );
        let launch = format!(
            "setsid sh -c 'echo $$ > \"$0\" && exec \"$@\"' /srv/tw/n1/kafka.pid {java} \
             kafka.Kafka /srv/tw/n1/server.properties >> broker.log 2>&1 < /dev/null &"
        );
        assert!(
            start.contains(&format!("{log}; {format}; {launch}")),
            "{start}"
        );
        assert!(!start.contains("bin/kafka-"), "no scripts: {start}");
        // Settings Kafka takes at format time go to the format, not to the JVM.
        let features = ["eligible.leader.replicas.version=0".to_string()];
        let start = scripts(&kafka, false)
            .with_format_features(&features)
            .start();
        assert!(
            start.contains(
                "--ignore-formatted --feature eligible.leader.replicas.version=0 >> broker.log"
            ),
            "{start}"
        );
        assert_eq!(start.matches("--feature").count(), 1, "{start}");
        // The cluster file's heap options follow the harness's, so they win.
        let kafka = KafkaSpec {
            heap_opts: Some("-Xms128m  -Xmx384m".into()),
            ..kafka
        };
        let start = scripts(&kafka, false).start();
        assert!(
            start.contains("-Djava.awt.headless=true -Xms128m -Xmx384m -Dkafka.logs.dir="),
            "{start}"
        );
        // The preflight looks for the release's core jar instead of its scripts.
        let checks = scripts(&kafka, false).preflight_checks().join("; ");
        assert!(
            checks.contains("ls /cache/kafka/4.1.1/libs/kafka_2.1*-*.jar >/dev/null 2>&1 ||"),
            "{checks}"
        );
        assert!(!checks.contains("kafka-server-start.sh"), "{checks}");
        assert!(
            checks.contains("test -x /usr/lib/jvm/java-17/bin/java"),
            "{checks}"
        );
    }

    #[test]
    fn the_hosts_pick_the_logging_configuration_the_local_backend_would() {
        let dir = tempfile::tempdir().unwrap();
        let kafka = KafkaSpec {
            launch: Launch::Java,
            home: dir.path().display().to_string(),
            ..KafkaSpec::default()
        };
        let chosen = || {
            let script = format!(
                "{}; printf %s \"$log\"",
                scripts(&kafka, false).choose_log_config()
            );
            let out = std::process::Command::new("sh")
                .args(["-c", &script])
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap()
        };
        let release = crate::kafka::Release {
            version: "3.9.1".into(),
            home: dir.path().to_path_buf(),
        };
        let local = || release.log_config().jvm_option().unwrap_or_default();
        assert_eq!(chosen(), "", "no configuration");
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        // A 3.x tarball, then a fetched release (the harness's file wins).
        for file in LOG_CONFIG_FILES.iter().rev() {
            std::fs::write(dir.path().join(file), "").unwrap();
            assert_eq!(chosen(), local(), "with {file}");
        }
        assert!(chosen().ends_with("tidewater-log4j2.properties"));
    }

    #[test]
    fn faults_signal_the_pid_whose_command_line_names_this_nodes_properties() {
        let kafka = KafkaSpec::default();
        let s = scripts(&kafka, false);
        let find = s.find_pid();
        assert_eq!(
            s.pause(),
            format!("if {find}; then kill -STOP -\"$pid\" 2>/dev/null; fi")
        );
        assert_eq!(
            s.resume(),
            format!("if {find}; then kill -CONT -\"$pid\" 2>/dev/null; fi")
        );
        assert_eq!(s.is_running(), find);
        let wait = |tenths: u64| {
            format!(
                "i=0; while {find}; do i=$((i+1)); [ $i -gt {tenths} ] && exit 1; sleep 0.1; done"
            )
        };
        let signal = |sig: &str| format!("if {find}; then kill -{sig} -\"$pid\" 2>/dev/null; fi");
        assert_eq!(s.kill(), format!("{}; {}", signal("KILL"), wait(50)));
        assert_eq!(
            s.stop(),
            format!(
                "{}; {}; ( {} ) || {{ {}; {}; }}",
                signal("CONT"),
                signal("TERM"),
                wait(100),
                signal("KILL"),
                wait(50)
            )
        );
        assert_eq!(
            s.wipe_all(),
            "rm -rf /srv/tw/n1/data /srv/tw/n1/logs && mkdir -p /srv/tw/n1/data /srv/tw/n1/logs \
             && : > /srv/tw/n1/broker.log"
        );
        assert_eq!(
            s.configure(),
            "mkdir -p /srv/tw/n1 && cat > /srv/tw/n1/server.properties"
        );
    }

    #[test]
    fn logs_are_the_launchers_output_the_properties_and_kafkas_own_files() {
        let kafka = KafkaSpec::default();
        let logs = scripts(&kafka, false).logs();
        let files: Vec<&str> = logs.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            files,
            [
                "broker.log",
                "server.properties",
                "server.log",
                "controller.log",
                "state-change.log"
            ]
        );
        assert_eq!(
            logs[2].1,
            "for f in /srv/tw/n1/logs/server.log.*; do [ -f \"$f\" ] && cat \"$f\"; done; \
             cat /srv/tw/n1/logs/server.log 2>/dev/null; true"
        );
    }

    #[test]
    fn the_script_behaves_in_a_real_shell_with_a_stand_in_for_kafka() {
        // A stand-in release: kafka-storage.sh writes meta.properties, kafka-server-start.sh
        // execs `tail -f server.properties` (as the real one execs the JVM with that argument),
        // so the pid, the command-line check and the signals are exercised for real, without
        // Kafka.
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("kafka");
        std::fs::create_dir_all(home.join("bin")).unwrap();
        let write = |name: &str, body: &str| {
            use std::os::unix::fs::PermissionsExt;
            let path = home.join("bin").join(name);
            std::fs::write(&path, body).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        write(
            "kafka-storage.sh",
            "#!/bin/sh\necho \"format $*\"\nmkdir -p \"$(dirname \"$5\")/data\"\n\
             echo cluster.id=$3 > \"$(dirname \"$5\")/data/meta.properties\"\n",
        );
        write(
            "kafka-server-start.sh",
            "#!/bin/sh\necho \"heap=$KAFKA_HEAP_OPTS logs=$LOG_DIR\"\nexec tail -f \"$1\"\n",
        );
        let kafka = KafkaSpec {
            home: home.display().to_string(),
            ..KafkaSpec::default()
        };
        let node_dir = dir.path().join("{node}").display().to_string();
        let s = KafkaScripts::new(&kafka, "n1", &node_dir, false, 1);
        let sh = |script: &str| {
            std::process::Command::new("sh")
                .args(["-c", script])
                .status()
                .unwrap()
                .success()
        };
        assert!(!sh(&s.is_running()));
        std::fs::create_dir_all(dir.path().join("n1")).unwrap();
        std::fs::write(s.properties_path(), "node.id=1\n").unwrap();
        assert!(sh(&s.start()));
        assert!(sh(&s.is_running()));
        assert!(sh(&s.start()), "a second start finds it running");
        let pid: i32 = std::fs::read_to_string(dir.path().join("n1/kafka.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let state = || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.rsplit(')').next().unwrap_or("").trim().chars().next()
        };
        // A signal is delivered asynchronously: wait (bounded) for the state to show it.
        let state_becomes = |stopped: bool| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while (state() == Some('T')) != stopped && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            (state() == Some('T')) == stopped
        };
        assert!(sh(&s.pause()));
        assert!(state_becomes(true), "stopped");
        assert!(sh(&s.resume()));
        assert!(state_becomes(false), "running again");
        assert!(sh(&s.stop()));
        assert!(!sh(&s.is_running()));
        let log = std::fs::read_to_string(dir.path().join("n1/broker.log")).unwrap();
        assert!(log.contains("format -t VGlkZXdhdGVyS2Fma2EwMQ -c"), "{log}");
        assert!(log.contains("heap=-Xmx512m -Xms512m logs="), "{log}");
        // Started again, the formatted directory is kept; then a kill.
        assert!(sh(&s.start()));
        assert!(sh(&s.kill()));
        assert!(!sh(&s.is_running()));
        let log = std::fs::read_to_string(dir.path().join("n1/broker.log")).unwrap();
        assert_eq!(log.matches("format -t").count(), 1, "{log}");
        // A pid file whose pid now belongs to another process is not ours.
        std::fs::write(
            dir.path().join("n1/kafka.pid"),
            format!("{}\n", std::process::id()),
        )
        .unwrap();
        assert!(!sh(&s.is_running()));
        assert!(sh(&s.kill()), "nothing to kill");
    }
}
