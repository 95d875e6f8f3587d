//! Apache Kafka on the local backend (`tidewater run --system kafka`): each node's JVM in the
//! node's namespace, at the node's address, with the same `server.properties` writer as the
//! ssh backend's `kind = "kafka"` ([`crate::kafka::properties`]).
//!
//! Files in `RUN_DIR/nodes/<node>/`: `server.properties` (written before every start, the
//! same text each time), `data/` (`log.dirs`, formatted by `kafka.tools.StorageTool` when it
//! has no `meta.properties`), `broker.log` (the JVM's output: with a fetched release, every
//! log4j logger) and `logs/` (`kafka.logs.dir`, for a release tarball's own log4j files).

use crate::cluster::{Error, NodeInfo, Result, Role};
use crate::kafka::jvm::Jvm;
use crate::kafka::properties::{self, KafkaSpec};
use crate::kafka::Release;
use std::collections::BTreeMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};

/// Bound on one `StorageTool format` (a JVM start, a few files written).
pub const FORMAT_TIME_LIMIT_MS: u64 = 60_000;

pub use crate::kafka::LOG_TAIL_LINES;

/// What every node of a local Kafka cluster runs.
#[derive(Debug, Clone)]
pub struct KafkaProgram {
    /// The release and the `java` that runs it.
    pub jvm: Jvm,
    /// The layout: ports, the quorum (`c1` alone, dedicated), the cluster id, extra
    /// properties. Its `home` and `heap_opts` are the ssh backend's; locally the release
    /// and [`crate::kafka::jvm::JVM_OPTIONS`] say.
    pub layout: KafkaSpec,
    /// The run's broker settings in Kafka's names (from [`properties::broker_properties`]).
    pub settings: Vec<(String, String)>,
    /// The run's settings Kafka takes as feature levels at format
    /// ([`properties::format_features`]): `--feature` values.
    pub format_features: Vec<String>,
}

impl KafkaProgram {
    /// The program for `release` with the run's broker settings (Tidewater's `--set` names),
    /// refused as for a Kafka cluster file when Kafka has no equivalent.
    pub fn new(release: Release, settings: &[(String, String)]) -> Result<KafkaProgram> {
        let format_features = properties::format_features(settings).map_err(Error::Config)?;
        let settings = properties::broker_properties(settings).map_err(Error::Config)?;
        Ok(KafkaProgram {
            jvm: Jvm::new(release),
            layout: KafkaSpec::default(),
            settings,
            format_features,
        })
    }

    /// Where a node serves what the harness waits for: a broker's client listener, the
    /// controller's KRaft listener.
    pub fn listener(&self, node: &NodeInfo) -> SocketAddr {
        let port = match node.role {
            Role::Broker => self.layout.port,
            Role::Controller => self.layout.controller_port,
        };
        SocketAddr::V4(SocketAddrV4::new(node.ip, port))
    }

    /// Each broker's Kafka address, by node name.
    pub fn bootstrap(&self, nodes: &[NodeInfo]) -> BTreeMap<String, SocketAddr> {
        self.layout.bootstrap(nodes)
    }

    /// The node's `server.properties` path in its directory.
    pub fn properties_path(node_dir: &Path) -> PathBuf {
        node_dir.join("server.properties")
    }

    /// Writes the node's `server.properties` into `node_dir`.
    pub fn write_properties(
        &self,
        node: &NodeInfo,
        nodes: &[NodeInfo],
        node_dir: &Path,
    ) -> Result<()> {
        let data = node_dir.join("data").display().to_string();
        let text = properties::server_properties(&self.layout, node, nodes, &data, &self.settings);
        let path = Self::properties_path(node_dir);
        std::fs::write(&path, text).map_err(|e| Error::io(format!("write {}", path.display()), e))
    }

    /// Whether the node's log directory still needs `StorageTool format`.
    pub fn needs_format(node_dir: &Path) -> bool {
        !node_dir.join("data").join("meta.properties").is_file()
    }

    /// The argv that formats the node's log directory.
    pub fn format_argv(&self, node_dir: &Path) -> Vec<String> {
        self.jvm.format_argv(
            &Self::properties_path(node_dir),
            &self.layout.cluster_id,
            &node_dir.join("logs"),
            &self.format_features,
        )
    }

    /// The argv of the node's Kafka JVM.
    pub fn server_argv(&self, node_dir: &Path) -> Vec<String> {
        self.jvm
            .server_argv(&Self::properties_path(node_dir), &node_dir.join("logs"))
    }
}

/// The last `n` lines of the file at `path` (its end only: a log can be large), indented.
pub fn log_tail(path: &Path, n: usize) -> String {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL_BYTES_MAX: u64 = 16 * 1024;
    let Ok(mut file) = std::fs::File::open(path) else {
        return format!("  ({} is missing)", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES_MAX)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    crate::kafka::fetch::last_lines(&String::from_utf8_lossy(&bytes), n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::node_list;
    use std::net::Ipv4Addr;

    #[test]
    fn nodes_listen_where_the_layout_says_and_refused_settings_are_named() {
        let release = Release {
            version: "4.1.1".into(),
            home: "/cache/4.1.1".into(),
        };
        let settings = [("flush.messages".to_string(), "1".to_string())];
        let program = KafkaProgram::new(release.clone(), &settings).unwrap();
        assert_eq!(
            program.settings,
            [("log.flush.interval.messages".to_string(), "1".to_string())]
        );
        let nodes = node_list(3, 9092, |i| Ipv4Addr::new(10, 230, 9, 10 + i as u8));
        assert_eq!(program.listener(&nodes[0]).to_string(), "10.230.9.10:9093");
        assert_eq!(program.listener(&nodes[2]).to_string(), "10.230.9.12:9092");
        assert_eq!(program.bootstrap(&nodes).len(), 3);
        let bad = [(
            "tidewater.unsafe.truncate.to.hw.enable".into(),
            "true".into(),
        )];
        let e = KafkaProgram::new(release, &bad).unwrap_err().to_string();
        assert!(e.contains("Kafka has no equivalent"), "{e}");
    }

    #[test]
    fn properties_are_written_beside_the_data_and_a_format_is_needed_until_meta_exists() {
        let dir = tempfile::tempdir().unwrap();
        let release = Release {
            version: "4.1.1".into(),
            home: "/cache/4.1.1".into(),
        };
        let program = KafkaProgram::new(release, &[]).unwrap();
        let nodes = node_list(1, 9092, |i| Ipv4Addr::new(10, 230, 9, 10 + i as u8));
        program
            .write_properties(&nodes[1], &nodes, dir.path())
            .unwrap();
        let text = std::fs::read_to_string(dir.path().join("server.properties")).unwrap();
        assert!(text.contains("process.roles=broker\nnode.id=1\n"), "{text}");
        assert!(text.contains(&format!("log.dirs={}/data\n", dir.path().display())));
        assert!(KafkaProgram::needs_format(dir.path()));
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        std::fs::write(dir.path().join("data/meta.properties"), "").unwrap();
        assert!(!KafkaProgram::needs_format(dir.path()));
    }

    #[test]
    fn the_log_tail_is_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.log");
        std::fs::write(&path, "a\nb\nc\n").unwrap();
        assert_eq!(log_tail(&path, 2), "  b\n  c");
        assert!(log_tail(&dir.path().join("none"), 2).contains("is missing"));
    }
}
