//! Cluster files: the TOML that points `tidewater run --cluster FILE` at remote hosts (the
//! ssh backend, [`crate::cluster::ssh`]), e.g. `vagrant/cluster.toml`. The format is
//! [`SshSpec`]; `docs/ssh.md` describes every field.
//!
//! Paths in the file (`ssh_config`, `identity_file`, `install_binary`) are relative to the
//! file's directory (`~/` is the home directory), so `vagrant/cluster.toml` can name `ssh-config` next to it whatever the
//! working directory is.

use crate::cluster::ssh::{kafka, Kind, SshCluster, SshSpec};
use crate::cluster::{local, Cluster, Error, Result};
use crate::runner::config::RunConfig;
use crate::runner::ClusterFactory;
use crate::store::RunDir;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The `install_binary` value meaning "the harness's own broker binary".
pub const INSTALL_AUTO: &str = "auto";

/// Reads and checks a cluster file, resolving its relative paths against its directory.
pub fn load(path: &Path) -> Result<SshSpec> {
    let mut spec = SshSpec::load(path)?;
    let base = path.parent().unwrap_or(Path::new("."));
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let resolve = |p: &mut PathBuf| {
        if let (Ok(rest), Some(home)) = (p.strip_prefix("~"), home.as_ref()) {
            *p = home.join(rest);
        } else if p.is_relative() {
            *p = base.join(&*p);
        }
    };
    spec.ssh_config.as_mut().map(resolve);
    spec.identity_file.as_mut().map(resolve);
    for node in &mut spec.nodes {
        node.ssh_config.as_mut().map(resolve);
        node.identity_file.as_mut().map(resolve);
    }
    if let Some(bin) = spec.install_binary.as_mut() {
        if bin != INSTALL_AUTO && Path::new(bin).is_relative() {
            *bin = base.join(&*bin).display().to_string();
        }
    }
    for file in spec
        .ssh_config
        .iter()
        .chain(spec.nodes.iter().filter_map(|n| n.ssh_config.as_ref()))
    {
        if !file.is_file() {
            return Err(Error::Config(format!(
                "{}: ssh_config {} does not exist (for Vagrant: `vagrant ssh-config > {}`)",
                path.display(),
                file.display(),
                file.display()
            )));
        }
    }
    Ok(spec)
}

/// The local broker binary a cluster file asks to install, if any.
pub fn binary_to_install(spec: &SshSpec) -> Result<Option<PathBuf>> {
    match spec.install_binary.as_deref() {
        None => Ok(None),
        Some(INSTALL_AUTO) => local::find_broker_binary().map(Some),
        Some(path) => {
            let path = PathBuf::from(path);
            if path.is_file() {
                Ok(Some(path))
            } else {
                Err(Error::Config(format!(
                    "install_binary {} is not a file",
                    path.display()
                )))
            }
        }
    }
}

/// The local `tidewater-lossyfs` a run copies to the hosts with the broker binary: only when
/// the file installs a binary (`broker`) and the run cuts power, and not when the hosts serve
/// the filesystem as `tidewater lossyfs`. It is the one beside `broker` (as `cargo build
/// --release --bins` leaves them), else the one beside this executable; without either, the
/// hosts' own copy is used and the preflight checks it.
pub fn lossyfs_to_install(spec: &SshSpec, broker: Option<&Path>) -> Option<PathBuf> {
    let broker = broker?;
    let remote_name = Path::new(&spec.lossyfs_binary).file_name();
    if !spec.lossy_fs || remote_name == Some("tidewater".as_ref()) {
        return None;
    }
    let exe = std::env::current_exe().ok();
    let found = [broker.parent(), exe.as_deref().and_then(Path::parent)]
        .into_iter()
        .flatten()
        .map(|dir| dir.join("tidewater-lossyfs"))
        .find(|path| path.is_file());
    found
}

/// Opens the cluster of a cluster file for a run with broker `settings` (Kafka names): checks
/// every host (one error listing every unreachable host or missing prerequisite, within
/// `connect_timeout_s`), stops what an earlier run left, wipes data and logs, installs the
/// broker binary where asked and where it differs, then starts the controller and brokers.
///
/// `brokers`, when given, must match the file (the run's `--nodes`).
pub fn open_cluster_file(
    path: &Path,
    settings: Vec<(String, String)>,
    brokers: Option<usize>,
) -> Result<SshCluster> {
    open_spec(load(path)?, path, settings, brokers)
}

/// [`open_cluster_file`] for a spec already loaded from `path` (the runner sets
/// [`SshSpec::lossy_fs`] on it first).
fn open_spec(
    spec: SshSpec,
    path: &Path,
    settings: Vec<(String, String)>,
    brokers: Option<usize>,
) -> Result<SshCluster> {
    if let Some(n) = brokers {
        if n != spec.brokers() {
            return Err(Error::Config(format!(
                "{} lists {} brokers but the run asks for {n} (--nodes)",
                path.display(),
                spec.brokers()
            )));
        }
    }
    // Find or build the binary before touching any host, so a build failure changes nothing.
    let binary = binary_to_install(&spec)?;
    let mut spec = spec;
    spec.install_lossyfs = lossyfs_to_install(&spec, binary.as_deref());
    let lossyfs = spec.install_lossyfs.clone();
    let cluster = SshCluster::create(spec, settings)?;
    if let Some(binary) = binary {
        let copied = cluster.install_binary(&binary)?;
        tracing::info!(
            "broker binary {} installed on {copied:?} (the other hosts had it)",
            binary.display()
        );
    }
    if let Some(lossyfs) = lossyfs {
        let copied = cluster.install_lossyfs(&lossyfs)?;
        tracing::info!(
            "lossy filesystem {} installed on {copied:?} (the other hosts had it)",
            lossyfs.display()
        );
    }
    cluster.start_all()?;
    if cluster.spec().kind == Kind::Kafka {
        // The start only launched the JVMs.
        cluster.wait_kafka_listening(crate::kafka::START_TIME_LIMIT)?;
    }
    Ok(cluster)
}

/// Removes what a run killed beyond its signal handlers (SIGKILL, a lost harness host) left on
/// the hosts of a cluster file: Tidewater's iptables rules, running or paused brokers and
/// lossy filesystems still mounted over their data (after a sync). Data
/// and logs stay for a look; the next run wipes them anyway. Meant for `tidewater clean
/// --cluster FILE`; every run also does this itself before it starts.
pub fn clean_cluster_file(path: &Path) -> Result<()> {
    let mut spec = load(path)?;
    spec.wipe_on_setup = false;
    spec.install_binary = None;
    // Setup heals and stops every broker; teardown confirms both and closes the connections.
    let cluster = SshCluster::create(spec, vec![])?;
    cluster.teardown()
}

/// Checks every host of a cluster file (ssh, sudo, iptables, the broker binary or unit, free
/// disk) without changing anything: what a night checks before its first run, so an
/// unreachable cluster stops it with one message instead of failing every run.
pub fn preflight_cluster_file(path: &Path) -> Result<()> {
    let spec = load(path)?;
    SshCluster::preflight_only(&spec).map(|_| ())
}

/// Checks what a run against the hosts of a cluster file needs of its settings and client,
/// before anything starts, and returns what the hosts run. A Kafka cluster (`kind =
/// "kafka"`) takes only `--set` names Kafka has an equivalent for ([`kafka::check_sets`]),
/// and only a client that speaks Kafka's protocol: `client` is the run's (`http` or `kafka`).
pub fn check_run(
    path: &Path,
    sets: &BTreeMap<String, String>,
    client: &str,
) -> std::result::Result<Kind, String> {
    let spec = load(path).map_err(|e| format!("cluster file {}: {e}", path.display()))?;
    if spec.kind == Kind::Kafka {
        kafka::check_sets(sets)?;
        if client != "kafka" {
            return Err(format!(
                "cluster file {} runs Apache Kafka (kind = \"kafka\"), which speaks only \
                 Kafka's binary protocol: the run needs the Kafka-protocol client (--client \
                 kafka), but its client is {client:?}, which speaks only the companion broker's \
                 HTTP API (docs/real-kafka.md)",
                path.display()
            ));
        }
    }
    Ok(spec.kind)
}

/// The number of brokers a cluster file lists (for the run's `nodes` setting).
pub fn brokers_in(path: &Path) -> Result<usize> {
    load(path).map(|spec| spec.brokers())
}

/// The runner's cluster factory for a cluster file: [`open_cluster_file`] with the run's
/// `--set` settings, and a lossy filesystem under every node's data when the run cuts power
/// (or asks for `--lossy-fs`). The run directory is not needed on the hosts; node logs are
/// copied into it at teardown by the runner.
pub fn cluster_factory(path: PathBuf) -> ClusterFactory {
    Box::new(move |config: &RunConfig, _run_dir: &RunDir| {
        let settings = config.broker_settings().into_iter().collect();
        let cluster = load(&path)
            .and_then(|mut spec| {
                spec.lossy_fs = config.lossy_fs || crate::runner::faults::cuts_power(config);
                open_spec(spec, &path, settings, Some(config.nodes))
            })
            .map_err(|e| format!("cluster file {}: {e}", path.display()))?;
        Ok(Arc::new(cluster) as Arc<dyn Cluster>)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn power_loss_runs_install_the_lossy_filesystem_found_beside_the_broker() {
        let dir = tempfile::tempdir().unwrap();
        let broker = write(dir.path(), "tidewater-broker", "broker");
        let lossyfs = write(dir.path(), "tidewater-lossyfs", "lossyfs");
        let mut spec = SshSpec {
            lossy_fs: true,
            ..SshSpec::default()
        };
        assert_eq!(lossyfs_to_install(&spec, Some(&broker)), Some(lossyfs));
        assert_eq!(lossyfs_to_install(&spec, None), None, "nothing installed");
        spec.lossyfs_binary = "/usr/local/bin/tidewater".into();
        assert_eq!(
            lossyfs_to_install(&spec, Some(&broker)),
            None,
            "the hosts serve it as `tidewater lossyfs`"
        );
        spec.lossyfs_binary = SshSpec::default().lossyfs_binary;
        spec.lossy_fs = false;
        assert_eq!(
            lossyfs_to_install(&spec, Some(&broker)),
            None,
            "no power cut"
        );
    }

    const NODES: &str = r#"
        [[node]]
        name = "c1"
        host = "c1"
        ip = "192.168.56.10"
        [[node]]
        name = "n1"
        host = "n1"
        ip = "192.168.56.11"
        identity_file = "/abs/key"
    "#;

    #[test]
    fn relative_paths_are_resolved_against_the_files_directory() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "ssh-config", "Host c1\n");
        let text = format!(
            "ssh_config = \"ssh-config\"\nidentity_file = \"keys/id\"\n\
             install_binary = \"bin/broker\"\n{}",
            NODES.replace("/abs/key", "~/.ssh/tw")
        );
        let spec = load(&write(dir.path(), "cluster.toml", &text)).unwrap();
        assert_eq!(spec.ssh_config, Some(dir.path().join("ssh-config")));
        assert_eq!(spec.identity_file, Some(dir.path().join("keys/id")));
        let home = PathBuf::from(std::env::var_os("HOME").unwrap());
        assert_eq!(spec.nodes[1].identity_file, Some(home.join(".ssh/tw")));
        let bin = dir.path().join("bin/broker").display().to_string();
        assert_eq!(spec.install_binary.as_deref(), Some(bin.as_str()));
        assert_eq!(spec.brokers(), 1);
    }

    #[test]
    fn a_missing_ssh_config_says_how_to_make_it() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("ssh_config = \"ssh-config\"\n{NODES}");
        let err = load(&write(dir.path(), "cluster.toml", &text))
            .unwrap_err()
            .to_string();
        assert!(err.contains("vagrant ssh-config >"), "{err}");
    }

    #[test]
    fn unknown_fields_and_bad_node_lists_are_refused_with_the_file_named() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("sudoo = false\n{NODES}");
        let err = load(&write(dir.path(), "typo.toml", &text))
            .unwrap_err()
            .to_string();
        assert!(err.contains("typo.toml") && err.contains("sudoo"), "{err}");
        let text = NODES.replace("\"n1\"", "\"n2\"");
        let err = load(&write(dir.path(), "gap.toml", &text))
            .unwrap_err()
            .to_string();
        assert!(err.contains("c1 and n1..nN"), "{err}");
    }

    #[test]
    fn the_run_must_ask_for_as_many_brokers_as_the_file_lists() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "cluster.toml", NODES);
        let err = open_cluster_file(&path, vec![], Some(3))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("lists 1 brokers but the run asks for 3"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_binary_to_install_is_refused_before_any_host_is_touched() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("install_binary = \"nope/broker\"\n{NODES}");
        let path = write(dir.path(), "cluster.toml", &text);
        let err = open_cluster_file(&path, vec![], None)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("nope/broker is not a file"), "{err}");
    }

    #[test]
    fn the_shipped_vagrant_kafka_cluster_file_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../vagrant/cluster-kafka.toml");
        let spec = SshSpec::load(&path).unwrap();
        assert_eq!(spec.kind, Kind::Kafka);
        assert_eq!(spec.brokers(), 3);
        assert_eq!(spec.kafka.home, "/opt/kafka");
        assert_eq!(spec.kafka.launch, crate::cluster::ssh::Launch::Scripts);
        assert_eq!(spec.kafka.heap_opts(), "-Xmx512m -Xms512m");
        assert_eq!(
            spec.kafka_bootstrap()["n3"].to_string(),
            "192.168.56.13:9092"
        );
        assert_eq!(spec.install_binary, None);
    }

    #[test]
    fn a_kafka_cluster_file_needs_the_kafka_client_and_kafkas_setting_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "kafka.toml",
            &format!("kind = \"kafka\"\n{NODES}"),
        );
        let sets: BTreeMap<String, String> =
            [("min.insync.replicas".to_string(), "2".to_string())].into();
        let err = check_run(&path, &sets, "http").unwrap_err();
        assert!(
            err.contains("runs Apache Kafka") && err.contains("--client kafka"),
            "{err}"
        );
        assert_eq!(check_run(&path, &sets, "kafka"), Ok(Kind::Kafka));
        let bad: BTreeMap<String, String> = [(
            "tidewater.unsafe.truncate.to.hw.enable".to_string(),
            "true".to_string(),
        )]
        .into();
        let err = check_run(&path, &bad, "kafka").unwrap_err();
        assert!(err.contains("Kafka has no equivalent"), "{err}");
        let companion = write(dir.path(), "tw.toml", NODES);
        assert_eq!(check_run(&companion, &bad, "http"), Ok(Kind::Tidewater));
    }

    #[test]
    fn the_shipped_vagrant_cluster_file_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../vagrant/cluster.toml");
        let spec = SshSpec::load(&path).unwrap();
        assert_eq!(spec.brokers(), 3);
        assert_eq!(spec.nodes[0].ip.to_string(), "192.168.56.10");
        assert_eq!(spec.install_binary.as_deref(), Some(INSTALL_AUTO));
        assert_eq!(
            spec.client_ip.map(|ip| ip.to_string()).as_deref(),
            Some("192.168.56.1")
        );
    }
}
