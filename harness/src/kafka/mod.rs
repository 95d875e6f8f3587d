//! Apache Kafka as the system under test: which release, where it comes from, and how its
//! JVMs are started.
//!
//! - [`fetch`]: `tidewater kafka fetch`, a runnable Kafka gathered from Maven Central into a
//!   per-version cache (`~/.cache/tidewater/kafka/<version>/libs/`), or an unpacked release
//!   named with `--kafka-home`.
//! - [`jvm`]: the `java` command lines of the classes Kafka's scripts run
//!   (`kafka.tools.StorageTool format`, `kafka.Kafka server.properties`), with heaps sized
//!   for a small machine.
//! - [`driver`]: the Java client's driver (`harness/java/TidewaterDriver.java`) compiled
//!   against the release's kafka-clients jar, for `--client java`.
//! - [`properties`]: the `[kafka]` layout, the `--set` mapping to Kafka's names and each
//!   node's `server.properties`, shared by the local and the ssh backends.

pub mod driver;
pub mod fetch;
pub mod jvm;
pub mod properties;

pub use fetch::Release;

/// The Kafka version `--system kafka` and `tidewater kafka fetch` use unless told otherwise:
/// a 4.x whose new clusters have KIP-966's eligible leader replicas on
/// (`eligible.leader.replicas.version=1` at format, seen in 4.1.1's format output; 4.0
/// left it off).
pub const DEFAULT_VERSION: &str = "4.1.1";

/// The older system a matrix compares with: the last 3.x, the first KRaft release that
/// honours `unclean.leader.election.enable` (KAFKA-12670).
pub const OLDER_VERSION: &str = "3.9.1";

/// Bound on Kafka's JVMs coming up (listening) after they are started, on the local cluster
/// and on the hosts of a `kind = "kafka"` cluster file: a start takes seconds on an idle
/// machine, minutes on two cores shared with compilers.
pub const START_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(240);

/// Lines of a node's log quoted when it fails to come up.
pub const LOG_TAIL_LINES: usize = 15;

/// The system under test of a run: `tidewater` (the companion broker) or `kafka[:VERSION]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum System {
    /// The companion broker, `tidewater-broker`.
    Tidewater,
    /// Apache Kafka of this version (a fetched one, or the release of `--kafka-home`).
    Kafka {
        /// `X.Y.Z`.
        version: String,
    },
}

impl System {
    /// Parses `--system`: `tidewater` (also spelled `companion`, as a matrix's `system` axis
    /// may name it), `kafka` (the [`DEFAULT_VERSION`]) or `kafka:X.Y.Z`.
    pub fn parse(text: &str) -> Result<System, String> {
        match text.split_once(':') {
            None if text == "tidewater" || text == "companion" => Ok(System::Tidewater),
            None if text == "kafka" => Ok(System::Kafka {
                version: DEFAULT_VERSION.into(),
            }),
            Some(("kafka", version)) if is_version(version) => Ok(System::Kafka {
                version: version.into(),
            }),
            _ => Err(format!(
                "--system {text:?}: expected tidewater (or companion), kafka or kafka:X.Y.Z (e.g. \
                 kafka:{DEFAULT_VERSION} or kafka:{OLDER_VERSION})"
            )),
        }
    }

    /// The text `--system` takes for it (`kafka:4.1.1`), as stored in `config.json`.
    pub fn as_flag(&self) -> String {
        match self {
            System::Tidewater => "tidewater".into(),
            System::Kafka { version } => format!("kafka:{version}"),
        }
    }
}

/// The release a local run of Kafka `version` uses: the unpacked one at `kafka_home` when
/// given (whose version must be `version`), else the cached or freshly fetched one.
pub fn release_for(version: &str, kafka_home: Option<&std::path::Path>) -> Result<Release, String> {
    let Some(home) = kafka_home else {
        return fetch::fetch(version, &fetch::default_cache_dir());
    };
    let release = Release::from_home(home)?;
    if release.version != version {
        return Err(format!(
            "--kafka-home {} holds Kafka {}, but the run asks for kafka:{version} (--system \
             kafka:{} runs it)",
            home.display(),
            release.version,
            release.version
        ));
    }
    Ok(release)
}

/// Whether `v` is a release version `X.Y.Z` (digits only: it goes into a pom and a path).
pub fn is_version(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_names_parse_and_print_back() {
        assert_eq!(System::parse("tidewater").unwrap(), System::Tidewater);
        assert_eq!(System::parse("companion").unwrap().as_flag(), "tidewater");
        let default = System::parse("kafka").unwrap();
        assert_eq!(default.as_flag(), format!("kafka:{DEFAULT_VERSION}"));
        let older = System::parse("kafka:3.9.1").unwrap();
        assert_eq!(older.as_flag(), "kafka:3.9.1");
        for bad in [
            "kafka:",
            "kafka:4.1",
            "kafka:4.1.1;rm",
            "kafka:../x",
            "zookeeper",
        ] {
            assert!(System::parse(bad).is_err(), "{bad}");
        }
    }
}
