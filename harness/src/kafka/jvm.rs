//! The `java` command lines of a Kafka node, as Kafka's scripts would run them
//! (`kafka-storage.sh format` runs `kafka.tools.StorageTool`, `kafka-server-start.sh` runs
//! `kafka.Kafka`), without the scripts: the harness starts the JVM itself, so the pid it
//! signals is the JVM's.

use super::fetch::Release;
use std::path::Path;

/// The JVM options of every Kafka node, sized for several JVMs on a small machine (the
/// harness's default cluster is four JVMs on two cores): a heap that fits 512 MiB,
/// the serial collector (no parallel GC threads competing with the other nodes), one
/// processor as the JVM sees it (fewer JIT and common-pool threads), the quick compiler
/// only (C2's compilations cost seconds of CPU at every start, which four JVMs on two shared
/// cores pay at once; a test's hundreds of operations per second do not need its code), and
/// no `/tmp/hsperfdata_*` file to leave behind.
pub const JVM_OPTIONS: &[&str] = &[
    "-Xms256m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:ActiveProcessorCount=1",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
];

/// How one node's JVMs are started.
#[derive(Debug, Clone)]
pub struct Jvm {
    /// The `java` executable.
    pub java: String,
    /// The release whose `libs/` is the classpath.
    pub release: Release,
}

impl Jvm {
    /// `java` from `$JAVA_HOME/bin`, else the one on the `PATH`, running `release`.
    pub fn new(release: Release) -> Jvm {
        let java = std::env::var_os("JAVA_HOME")
            .map(|home| Path::new(&home).join("bin/java"))
            .filter(|p| p.is_file())
            .map_or_else(|| "java".to_string(), |p| p.display().to_string());
        Jvm { java, release }
    }

    /// `java`, the options, the logging configuration (Kafka's `kafka.logs.dir` is `logs`),
    /// the classpath and the main class.
    fn prefix(&self, main: &str, logs: &Path) -> Vec<String> {
        let mut argv = vec![self.java.clone()];
        argv.extend(JVM_OPTIONS.iter().map(|o| o.to_string()));
        argv.push(format!("-Dkafka.logs.dir={}", logs.display()));
        argv.extend(self.release.log_config().jvm_option());
        argv.push("-cp".into());
        argv.push(self.release.classpath());
        argv.push(main.into());
        argv
    }

    /// `kafka-storage.sh format -t CLUSTER_ID -c PROPERTIES --ignore-formatted [--feature
    /// NAME=LEVEL ...]`: writes the log directory's `meta.properties` (and, from 3.9, the
    /// bootstrap metadata with the release's default feature levels, or `features`).
    pub fn format_argv(
        &self,
        properties: &Path,
        cluster_id: &str,
        logs: &Path,
        features: &[String],
    ) -> Vec<String> {
        let mut argv = self.prefix("kafka.tools.StorageTool", logs);
        argv.extend([
            "format".to_string(),
            "-t".into(),
            cluster_id.into(),
            "-c".into(),
            properties.display().to_string(),
            "--ignore-formatted".into(),
        ]);
        for feature in features {
            argv.extend(["--feature".to_string(), feature.clone()]);
        }
        argv
    }

    /// `kafka-server-start.sh PROPERTIES`: the node itself.
    pub fn server_argv(&self, properties: &Path, logs: &Path) -> Vec<String> {
        let mut argv = self.prefix("kafka.Kafka", logs);
        argv.push(properties.display().to_string());
        argv
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_command_lines_are_kafkas_classes_with_the_releases_libs() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(dir.path().join("config/tidewater-log4j2.properties"), "").unwrap();
        let jvm = Jvm {
            java: "java".into(),
            release: Release {
                version: "4.1.1".into(),
                home: dir.path().to_path_buf(),
            },
        };
        let props = PathBuf::from("/run/nodes/n1/server.properties");
        let logs = PathBuf::from("/run/nodes/n1/logs");
        let home = dir.path().display();
        assert_eq!(
            jvm.server_argv(&props, &logs).join(" "),
            format!(
                "java -Xms256m -Xmx512m -XX:+UseSerialGC -XX:ActiveProcessorCount=1 \
                 -XX:TieredStopAtLevel=1 -XX:-UsePerfData -Djava.awt.headless=true -Dkafka.logs.dir=/run/nodes/n1/logs \
                 -Dlog4j2.configurationFile={home}/config/tidewater-log4j2.properties \
                 -cp {home}/libs/* kafka.Kafka /run/nodes/n1/server.properties"
            )
        );
        let format = jvm.format_argv(&props, "VGlkZXdhdGVyS2Fma2EwMQ", &logs, &[]);
        assert_eq!(
            format[format.len() - 7..].join(" "),
            "kafka.tools.StorageTool format -t VGlkZXdhdGVyS2Fma2EwMQ -c \
             /run/nodes/n1/server.properties --ignore-formatted"
        );
        let features = ["eligible.leader.replicas.version=0".to_string()];
        let format = jvm.format_argv(&props, "VGlkZXdhdGVyS2Fma2EwMQ", &logs, &features);
        assert_eq!(
            format[format.len() - 3..].join(" "),
            "--ignore-formatted --feature eligible.leader.replicas.version=0"
        );
    }
}
