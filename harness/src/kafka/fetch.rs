//! A runnable Kafka without a release tarball: `kafka_2.13` and its runtime dependencies from
//! Maven Central, plus what the tarball adds and the pom does not pull (a log4j2 core and its
//! SLF4J binding, so the broker logs), and a log4j2 configuration written here.
//!
//! The cache holds one directory per version, laid out as the release tarball is where the
//! harness reads it (`libs/*.jar`), so `--kafka-home` can name either:
//!
//! ```text
//! ~/.cache/tidewater/kafka/4.1.1/libs/kafka_2.13-4.1.1.jar ...
//! ~/.cache/tidewater/kafka/4.1.1/config/tidewater-log4j2.properties
//! ~/.cache/tidewater/kafka/4.1.1/.tidewater-complete
//! ```
//!
//! A version is gathered into a temporary directory beside its final place and renamed into
//! it once complete, so an interrupted fetch leaves no half-filled cache entry.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The log4j2 release whose core and SLF4J 1.x binding are added: the one Kafka 4.x ships.
/// SLF4J 1.x because the pom of every Kafka from 3.9 to 4.1 resolves `slf4j-api` 1.7.36
/// (checked: with `log4j-slf4j2-impl` the broker fell back to SLF4J's no-op logger).
const LOG4J_VERSION: &str = "2.24.3";

/// The file that marks a complete cache entry.
const COMPLETE_MARKER: &str = ".tidewater-complete";

/// The log4j2 configuration the harness writes beside a fetched release: everything to the
/// standard output, which the harness appends to `nodes/<node>/broker.log`. Properties
/// syntax, because log4j2's YAML and JSON readers need Jackson, which a 3.9 pom lacks.
const LOG4J2_PROPERTIES: &str = "\
# Written by the Tidewater harness: every Kafka logger to the standard output.
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
# As Kafka's own configuration: one line per request would drown the rest.
logger.request.name = kafka.request.logger
logger.request.level = WARN
";

/// The name of the log4j2 configuration in a fetched release's `config/`.
pub const LOG4J2_FILE: &str = "tidewater-log4j2.properties";

/// A Kafka release on this machine: a directory with `libs/*.jar`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// `X.Y.Z`, as its `kafka_2.13-X.Y.Z.jar` says.
    pub version: String,
    /// The directory holding `libs/`.
    pub home: PathBuf,
}

/// How the JVM finds the logging configuration of a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogConfig {
    /// `-Dlog4j2.configurationFile=PATH` (Kafka 4.x, and any fetched release).
    Log4j2(PathBuf),
    /// `-Dlog4j.configuration=file:PATH` (a 3.x release tarball, reload4j).
    Log4j(PathBuf),
    /// Neither found: the JVM logs what its defaults say.
    None,
}

/// The logging configurations a release may hold, under its home, preferred first: the
/// harness's (a fetched release), a 4.x tarball's, a 3.x tarball's. The local backend looks
/// for them here; the ssh backend's hosts look for the same files in the same order.
pub const LOG_CONFIG_FILES: [&str; 3] = [
    "config/tidewater-log4j2.properties",
    "config/log4j2.yaml",
    "config/log4j.properties",
];

impl LogConfig {
    /// The configuration in the file at `path`, one of [`LOG_CONFIG_FILES`]: log4j 1.x
    /// syntax (reload4j) for a `log4j.properties`, log4j2 otherwise.
    pub fn of(path: PathBuf) -> LogConfig {
        if path.ends_with("log4j.properties") {
            LogConfig::Log4j(path)
        } else {
            LogConfig::Log4j2(path)
        }
    }

    /// The JVM option that names it (`None` when there is none).
    pub fn jvm_option(&self) -> Option<String> {
        match self {
            LogConfig::Log4j2(path) => {
                Some(format!("-Dlog4j2.configurationFile={}", path.display()))
            }
            LogConfig::Log4j(path) => {
                Some(format!("-Dlog4j.configuration=file:{}", path.display()))
            }
            LogConfig::None => None,
        }
    }
}

impl Release {
    /// The classpath of its JVMs, as Kafka's `kafka-run-class.sh` builds it from `libs/`.
    pub fn classpath(&self) -> String {
        format!("{}/*", self.home.join("libs").display())
    }

    /// Its logging configuration: the harness's for a fetched release, else the tarball's
    /// (the first of [`LOG_CONFIG_FILES`] it has).
    pub fn log_config(&self) -> LogConfig {
        LOG_CONFIG_FILES
            .iter()
            .map(|file| self.home.join(file))
            .find(|path| path.is_file())
            .map_or(LogConfig::None, LogConfig::of)
    }

    /// An unpacked release at `home` (`--kafka-home`): its version from its
    /// `libs/kafka_2.13-X.Y.Z.jar` (any Scala build).
    pub fn from_home(home: &Path) -> Result<Release, String> {
        let libs = home.join("libs");
        let entries = std::fs::read_dir(&libs).map_err(|e| {
            format!(
                "--kafka-home {}: cannot list {} ({e}); expected an unpacked Kafka release \
                 (the tarball's layout, with libs/kafka_2.13-X.Y.Z.jar)",
                home.display(),
                libs.display()
            )
        })?;
        let version = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| core_jar_version(&e.file_name().to_string_lossy()))
            .next()
            .ok_or_else(|| {
                format!(
                    "--kafka-home {}: no libs/kafka_2.1X-X.Y.Z.jar, so not a Kafka release",
                    home.display()
                )
            })?;
        Ok(Release {
            version,
            home: home.to_path_buf(),
        })
    }
}

/// `X.Y.Z` of Kafka's core jar name (`kafka_2.13-4.1.1.jar`), `None` for any other file.
fn core_jar_version(name: &str) -> Option<String> {
    let rest = name.strip_prefix("kafka_2.1")?.strip_suffix(".jar")?;
    let (_, version) = rest.split_once('-')?;
    super::is_version(version).then(|| version.to_string())
}

/// Where fetched releases go: `$XDG_CACHE_HOME/tidewater/kafka`, else
/// `~/.cache/tidewater/kafka`.
pub fn default_cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/var/cache"));
    base.join("tidewater").join("kafka")
}

/// The pom whose runtime dependencies are a runnable Kafka of `version`.
pub fn pom(version: &str) -> String {
    let dependency = |group: &str, artifact: &str, version: &str| {
        format!(
            "    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>\
             <version>{version}</version></dependency>\n"
        )
    };
    format!(
        "<project xmlns=\"http://maven.apache.org/POM/4.0.0\">\n  \
         <modelVersion>4.0.0</modelVersion>\n  \
         <groupId>tidewater</groupId><artifactId>kafka-{version}</artifactId>\
         <version>1</version><packaging>pom</packaging>\n  <dependencies>\n{}{}{}  \
         </dependencies>\n</project>\n",
        dependency("org.apache.kafka", "kafka_2.13", version),
        dependency("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION),
        dependency(
            "org.apache.logging.log4j",
            "log4j-slf4j-impl",
            LOG4J_VERSION
        ),
    )
}

/// The advice every failure to fetch ends with.
fn supply_instead(version: &str) -> String {
    format!(
        "or supply an unpacked release instead: download kafka_2.13-{version}.tgz from \
         https://kafka.apache.org/downloads on a machine that can, unpack it and pass \
         --kafka-home DIR (the directory holding libs/)"
    )
}

/// The release of `version` in `cache`, fetched with Maven unless already there. Returns
/// at once, without Maven, when the cache holds it.
pub fn fetch(version: &str, cache: &Path) -> Result<Release, String> {
    fetch_with(version, cache, "mvn")
}

/// [`fetch`] with Maven's executable named (`mvn` on the `PATH` for [`fetch`]).
pub fn fetch_with(version: &str, cache: &Path, mvn: &str) -> Result<Release, String> {
    if !super::is_version(version) {
        return Err(format!("Kafka version {version:?}: expected X.Y.Z"));
    }
    let home = cache.join(version);
    if home.join(COMPLETE_MARKER).is_file() {
        return Ok(Release {
            version: version.into(),
            home,
        });
    }
    std::fs::create_dir_all(cache)
        .map_err(|e| format!("cannot create the Kafka cache {}: {e}", cache.display()))?;
    let staging = cache.join(format!(".{version}.partial-{}", std::process::id()));
    let gathered = gather(version, &staging, mvn);
    let placed = gathered.and_then(|()| place(&staging, &home));
    let _ = std::fs::remove_dir_all(&staging);
    placed?;
    Ok(Release {
        version: version.into(),
        home,
    })
}

/// Fills `staging` with `libs/` and `config/`, then the completion marker.
fn gather(version: &str, staging: &Path, mvn: &str) -> Result<(), String> {
    let io = |what: &str, e: std::io::Error| format!("{what} in {}: {e}", staging.display());
    let _ = std::fs::remove_dir_all(staging);
    std::fs::create_dir_all(staging.join("config")).map_err(|e| io("create config/", e))?;
    std::fs::write(staging.join("pom.xml"), pom(version)).map_err(|e| io("write pom.xml", e))?;
    run_maven(version, staging, mvn)?;
    let core = staging
        .join("libs")
        .join(format!("kafka_2.13-{version}.jar"));
    if !core.is_file() {
        return Err(format!(
            "Maven finished but {} is missing; {}",
            core.display(),
            supply_instead(version)
        ));
    }
    std::fs::write(staging.join("config").join(LOG4J2_FILE), LOG4J2_PROPERTIES)
        .map_err(|e| io("write the log4j2 configuration", e))?;
    std::fs::write(staging.join(COMPLETE_MARKER), format!("{version}\n"))
        .map_err(|e| io("write the completion marker", e))
}

/// `mvn dependency:copy-dependencies` of the generated pom into `staging/libs`.
fn run_maven(version: &str, staging: &Path, mvn: &str) -> Result<(), String> {
    let output = Command::new(mvn)
        .args([
            "-B",
            "-q",
            "-Dstyle.color=never",
            "-f",
            "pom.xml",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            "-DoutputDirectory=libs",
        ])
        .current_dir(staging)
        .output();
    let output = match output {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "cannot fetch Kafka {version}: Maven (`mvn`) is not on the PATH; install it \
                 (e.g. `apt-get install maven`, with a JDK 17 or later) and a route to Maven \
                 Central, {}",
                supply_instead(version)
            ))
        }
        Err(e) => return Err(format!("cannot run mvn: {e}")),
    };
    if output.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    Err(format!(
        "cannot fetch Kafka {version}: `mvn dependency:copy-dependencies` of \
         org.apache.kafka:kafka_2.13:{version} failed (no route to Maven Central, or no such \
         version?):\n{}\n{}",
        maven_errors(&text),
        supply_instead(version)
    ))
}

/// Renames the complete `staging` into `home`; a concurrent fetch that got there first wins.
fn place(staging: &Path, home: &Path) -> Result<(), String> {
    if home.join(COMPLETE_MARKER).is_file() {
        return Ok(());
    }
    // A directory without the marker is a leftover of an older, unfinished layout.
    if home.exists() {
        std::fs::remove_dir_all(home)
            .map_err(|e| format!("remove the incomplete {}: {e}", home.display()))?;
    }
    match std::fs::rename(staging, home) {
        Ok(()) => Ok(()),
        Err(_) if home.join(COMPLETE_MARKER).is_file() => Ok(()),
        Err(e) => Err(format!(
            "move {} to {}: {e}",
            staging.display(),
            home.display()
        )),
    }
}

/// Maven's `[ERROR]` lines that say what failed (not its advice on its own flags and
/// wiki), or its last lines when it printed none.
fn maven_errors(text: &str) -> String {
    const ADVICE: &[&str] = &["To see", "Re-run", "For more", "[Help"];
    let errors: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_once("[ERROR]").map(|(_, said)| said.trim()))
        .filter(|said| !said.is_empty() && !ADVICE.iter().any(|a| said.starts_with(a)))
        .take(2)
        .map(|said| format!("  {said}"))
        .collect();
    if errors.is_empty() {
        last_lines(text, 8)
    } else {
        errors.join("\n")
    }
}

/// The last `n` non-empty lines of `text`, indented, without the frames of Java stack traces
/// (a JVM that dies of an exception ends its log with a dozen of them; the exception's own
/// line, which says why, is kept).
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !is_stack_frame(l))
        .collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `line` is a frame of a Java stack trace (`\tat a.b.C.m(C.java:9)`, `\t... 3 more`).
fn is_stack_frame(line: &str) -> bool {
    let indented = line.starts_with(char::is_whitespace);
    let body = line.trim_start();
    indented && (body.starts_with("at ") || (body.starts_with("... ") && body.ends_with(" more")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_tail_keeps_an_exceptions_reason_and_leaves_its_frames_out() {
        let log = "[x] INFO Registered MBean\n\
                   Exception in thread \"main\" ConfigException: Invalid value 1 for log.segment.bytes\n\
                   \tat org.apache.kafka.common.config.ConfigDef.parse(ConfigDef.java:524)\n\
                   \t... 3 more\n\
                   \tat kafka.tools.StorageTool.main(StorageTool.scala)\n";
        assert_eq!(
            last_lines(log, 2),
            "  [x] INFO Registered MBean\n  Exception in thread \"main\" ConfigException: \
             Invalid value 1 for log.segment.bytes"
        );
        assert_eq!(
            last_lines("a\n  at the end, words\n", 5),
            "  a",
            "an indented 'at'"
        );
    }

    #[test]
    fn the_pom_asks_for_kafka_and_a_log4j2_binding_for_slf4j_1() {
        let pom = pom("4.1.1");
        assert!(pom.contains(
            "<groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>\
             <version>4.1.1</version>"
        ));
        assert!(pom.contains("<artifactId>log4j-core</artifactId><version>2.24.3</version>"));
        assert!(pom.contains("<artifactId>log4j-slf4j-impl</artifactId>"));
    }

    #[test]
    fn a_complete_cache_entry_is_used_without_maven_and_a_bad_version_is_refused() {
        let cache = tempfile::tempdir().unwrap();
        let home = cache.path().join("4.1.1");
        std::fs::create_dir_all(home.join("libs")).unwrap();
        std::fs::write(home.join(COMPLETE_MARKER), "4.1.1\n").unwrap();
        let release = fetch("4.1.1", cache.path()).unwrap();
        assert_eq!(release.home, home);
        assert_eq!(release.classpath(), format!("{}/libs/*", home.display()));
        assert!(fetch("4.1", cache.path())
            .unwrap_err()
            .contains("expected X.Y.Z"));
    }

    #[test]
    fn an_unpacked_release_is_known_by_its_core_jar_and_logging_config() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Release::from_home(dir.path())
            .unwrap_err()
            .contains("expected an unpacked Kafka release"));
        std::fs::create_dir_all(dir.path().join("libs")).unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(dir.path().join("libs/kafka-clients-3.9.1.jar"), "").unwrap();
        assert!(Release::from_home(dir.path())
            .unwrap_err()
            .contains("not a Kafka release"));
        std::fs::write(dir.path().join("libs/kafka_2.13-3.9.1.jar"), "").unwrap();
        std::fs::write(dir.path().join("config/log4j.properties"), "").unwrap();
        let release = Release::from_home(dir.path()).unwrap();
        assert_eq!(release.version, "3.9.1");
        assert_eq!(
            release.log_config(),
            LogConfig::Log4j(dir.path().join("config/log4j.properties"))
        );
        std::fs::write(dir.path().join("config").join(LOG4J2_FILE), "").unwrap();
        assert_eq!(LOG_CONFIG_FILES[0], format!("config/{LOG4J2_FILE}"));
        assert_eq!(
            release.log_config(),
            LogConfig::Log4j2(dir.path().join("config").join(LOG4J2_FILE))
        );
    }

    #[test]
    fn mavens_failure_is_its_cause_without_its_advice() {
        let out =
            "\u{1b}[0m[ERROR] Failed to execute goal: Could not find artifact x -> [Help 1]\n\
                   [ERROR] \n[ERROR] Re-run Maven using the -X switch\n\
                   [ERROR] [Help 1] http://cwiki.apache.org/x\n";
        assert_eq!(
            maven_errors(out),
            "  Failed to execute goal: Could not find artifact x -> [Help 1]"
        );
    }

    #[test]
    fn without_maven_the_message_says_how_to_supply_a_release() {
        let cache = tempfile::tempdir().unwrap();
        let missing = cache.path().join("no-mvn-here").display().to_string();
        let e = fetch_with("4.1.1", cache.path(), &missing).unwrap_err();
        assert!(e.contains("Maven (`mvn`) is not on the PATH"), "{e}");
        assert!(e.contains("--kafka-home DIR"), "{e}");
        assert!(
            !cache.path().join("4.1.1").exists(),
            "nothing half-filled is left"
        );
    }
}
