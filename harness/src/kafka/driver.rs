//! The Java client's driver (`harness/java/TidewaterDriver.java`): compiled with `javac`
//! against the kafka-clients jar of the Kafka release under test, so Kafka 3.9.1 is driven by
//! 3.9.1's client and 4.1.1 by 4.1.1's, into a cache directory keyed by the source's hash and
//! the version:
//!
//! ```text
//! ~/.cache/tidewater/java-driver/<hash>-4.1.1/TidewaterDriver.class ...
//! ~/.cache/tidewater/java-driver/<hash>-4.1.1/log4j2.properties
//! ```
//!
//! Compiled into a temporary directory beside its final place and renamed into it, so an
//! interrupted compile leaves nothing half made; a second run finds it at once.

use super::fetch::Release;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The driver's source, compiled in.
pub const DRIVER_SOURCE: &str = include_str!("../../java/TidewaterDriver.java");

/// The driver's main class.
pub const DRIVER_CLASS: &str = "TidewaterDriver";

/// The JVM options of the driver: a small heap (it holds a producer and a consumer per
/// logical client, with small batches), the serial collector, the quick compiler only, no
/// `/tmp/hsperfdata_*`.
pub const DRIVER_JVM_OPTIONS: &[&str] = &[
    "-Xms64m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:ActiveProcessorCount=1",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
];

/// The client library's logging: warnings and worse to the standard error, which the
/// harness appends to the run's `java-driver.log` (the standard output is the protocol's).
const LOG4J2_PROPERTIES: &str = "\
# Written by the Tidewater harness: the Java client's warnings to the standard error.
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p [%t] %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
";

/// The compiled driver for one Kafka release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Driver {
    /// The directory of its classes and logging configuration.
    pub classes: PathBuf,
    /// The release whose `libs/` (kafka-clients and its dependencies) is its classpath.
    pub release: Release,
}

/// 64-bit FNV-1a: a hash that stays the same across Rust releases (the cache key must).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `$JAVA_HOME/bin/NAME`, else `NAME` on the `PATH`.
fn java_tool(name: &str) -> String {
    std::env::var_os("JAVA_HOME")
        .map(|home| Path::new(&home).join("bin").join(name))
        .filter(|p| p.is_file())
        .map_or_else(|| name.to_string(), |p| p.display().to_string())
}

/// Where compiled drivers are cached: `$XDG_CACHE_HOME/tidewater/java-driver`, else
/// `~/.cache/tidewater/java-driver`.
pub fn default_cache_dir() -> PathBuf {
    super::fetch::default_cache_dir()
        .parent()
        .map(|p| p.join("java-driver"))
        .unwrap_or_else(|| PathBuf::from("java-driver"))
}

impl Driver {
    /// The driver for `release`, compiled now unless `cache` has it. The error names what
    /// failed (no `javac`, a compile error with its output).
    pub fn prepare(release: &Release, cache: &Path) -> Result<Driver, String> {
        let name = format!("{:016x}-{}", fnv1a(DRIVER_SOURCE), release.version);
        let classes = cache.join(&name);
        let driver = Driver {
            classes: classes.clone(),
            release: release.clone(),
        };
        if classes.join(format!("{DRIVER_CLASS}.class")).is_file() {
            return Ok(driver);
        }
        std::fs::create_dir_all(cache).map_err(|e| format!("{}: {e}", cache.display()))?;
        let work = cache.join(format!(".{name}.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
        let built = compile(release, &work);
        if let Err(e) = built {
            let _ = std::fs::remove_dir_all(&work);
            return Err(e);
        }
        // Another run may have finished the same compile first: its result is as good.
        if std::fs::rename(&work, &classes).is_err() {
            let _ = std::fs::remove_dir_all(&work);
        }
        Ok(driver)
    }

    /// The driver's command line, without its settings argument (the client adds it).
    pub fn argv(&self) -> Vec<String> {
        let mut argv = vec![java_tool("java")];
        argv.extend(DRIVER_JVM_OPTIONS.iter().map(|o| o.to_string()));
        argv.push(format!(
            "-Dlog4j2.configurationFile={}",
            self.classes.join("log4j2.properties").display()
        ));
        argv.push("-cp".into());
        argv.push(format!(
            "{}:{}",
            self.classes.display(),
            self.release.classpath()
        ));
        argv.push(DRIVER_CLASS.into());
        argv
    }
}

/// Writes the source and the logging configuration into `work` and compiles the source there.
fn compile(release: &Release, work: &Path) -> Result<(), String> {
    let source = work.join(format!("{DRIVER_CLASS}.java"));
    std::fs::write(&source, DRIVER_SOURCE).map_err(|e| format!("{}: {e}", source.display()))?;
    std::fs::write(work.join("log4j2.properties"), LOG4J2_PROPERTIES)
        .map_err(|e| format!("{}: {e}", work.display()))?;
    let javac = java_tool("javac");
    let out = Command::new(&javac)
        .args(["-nowarn", "-encoding", "UTF-8", "-cp"])
        .arg(release.classpath())
        .arg("-d")
        .arg(work)
        .arg(&source)
        .output()
        .map_err(|e| {
            format!(
                "cannot run {javac} to compile the Java client's driver: {e} (--client java \
                 needs a JDK 17 or later; set JAVA_HOME)"
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "compiling the Java client's driver against Kafka {} failed: {}",
            release.version,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_key_is_stable_and_the_classpath_is_the_release_under_test() {
        // FNV-1a's published test vector: the key must not change with the Rust release.
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
        let release = Release {
            version: "3.9.1".into(),
            home: "/k/3.9.1".into(),
        };
        let driver = Driver {
            classes: "/cache/abc-3.9.1".into(),
            release,
        };
        let argv = driver.argv();
        assert!(argv.contains(&"-Xmx256m".to_string()));
        let cp = argv.iter().position(|a| a == "-cp").unwrap();
        assert_eq!(argv[cp + 1], "/cache/abc-3.9.1:/k/3.9.1/libs/*");
        assert_eq!(argv.last().unwrap(), DRIVER_CLASS);
    }
}
