//! Tests of the ssh backend through a recording [`Remote`]: the scripts it sends, to which
//! host and in which order, and what it makes of the answers.

use super::scripts::Scripts;
use super::spec::{Control, Kind, Mode, SshSpec};
use super::transport::Remote;
use super::{cluster::local_digest, Quorum, SshCluster};
use crate::cluster::{Cluster, Error, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

/// Records scripts; fails those containing any of `failing`; answers those containing a
/// key of `answers` with its value.
#[derive(Default)]
struct FakeRemote {
    log: Mutex<Vec<(String, String, String)>>,
    failing: Vec<&'static str>,
    answers: Vec<(&'static str, &'static str)>,
}

impl Remote for FakeRemote {
    fn run(&self, host: &str, script: &str, stdin: &[u8]) -> Result<String> {
        let stdin = String::from_utf8_lossy(stdin).into_owned();
        self.log
            .lock()
            .unwrap()
            .push((host.into(), script.into(), stdin));
        if self.failing.iter().any(|f| script.contains(f)) {
            return Err(Error::Command {
                command: script.into(),
                status: Some(1),
                stderr: String::new(),
            });
        }
        let answer = self.answers.iter().find(|(k, _)| script.contains(k));
        Ok(answer.map_or(String::new(), |(_, v)| v.to_string()))
    }
}

const SPEC: &str = r#"
        client_ip = "192.168.56.1"
        ssh_options = ["-F", "ssh-config"]
        [[node]]
        name = "c1"
        host = "c1"
        ip = "192.168.56.10"
        [[node]]
        name = "n2"
        host = "vagrant@192.168.56.12"
        ip = "192.168.56.12"
        [[node]]
        name = "n1"
        host = "n1"
        ip = "192.168.56.11"
    "#;

fn cluster(remote: Arc<FakeRemote>) -> SshCluster {
    let spec: SshSpec = toml::from_str(SPEC).unwrap();
    let settings = vec![("min.insync.replicas".to_string(), "2".to_string())];
    SshCluster::with_remote(spec, settings, remote).unwrap()
}

#[test]
fn setup_stops_wipes_heals_and_writes_each_nodes_settings() {
    let remote = Arc::new(FakeRemote::default());
    let c = cluster(remote.clone());
    let names: Vec<_> = c.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["c1", "n1", "n2"]);
    let log = remote.log.lock().unwrap().clone();
    let config = log
        .iter()
        .find(|(h, s, _)| {
            h == "vagrant@192.168.56.12" && s.contains("cat > /etc/tidewater/broker.toml")
        })
        .expect("n2's settings written");
    assert_eq!(
        config.2,
        "# Written by the Tidewater harness for this run.\n\
             \"broker.id\" = \"2\"\n\
             \"controller.address\" = \"http://192.168.56.10:9092\"\n\
             \"kafka.listeners\" = \"PLAINTEXT://192.168.56.12:9093\"\n\
             \"listeners\" = \"http://192.168.56.12:9092\"\n\
             \"log.dirs\" = \"/var/lib/tidewater/data\"\n\
             \"min.insync.replicas\" = \"2\"\n"
    );
    assert!(config
        .1
        .contains("echo TIDEWATER_ROLE=broker > /etc/tidewater/role.env"));
    let c1_stop = log
        .iter()
        .position(|(h, s, _)| h == "c1" && s.contains("systemctl stop"))
        .unwrap();
    let c1_wipe = log
        .iter()
        .position(|(h, s, _)| h == "c1" && s.contains("rm -rf"))
        .unwrap();
    assert!(c1_stop < c1_wipe, "wipe only after the broker stopped");
    assert!(log
        .iter()
        .any(|(h, s, _)| h == "n1" && s.contains("sudo -n iptables -w -X TIDEWATER")));
    drop(c);
}

#[test]
fn faults_become_systemctl_signals_and_iptables_rules_on_the_right_host() {
    let remote = Arc::new(FakeRemote::default());
    let c = cluster(remote.clone());
    remote.log.lock().unwrap().clear();
    c.kill("n1").unwrap();
    c.pause("n2").unwrap();
    assert!(c.is_paused("n2"));
    c.net()
        .partition(&crate::net::cut_clients(&["n2".to_string()]))
        .unwrap();
    let log = remote.log.lock().unwrap().clone();
    let scripts: Vec<(&str, &str)> = log
        .iter()
        .map(|(h, s, _)| (h.as_str(), s.as_str()))
        .collect();
    assert!(
        scripts[0].0 == "n1"
            && scripts[0]
                .1
                .starts_with("sudo -n sh -c 'systemctl kill -s SIGKILL tidewater-broker'")
    );
    assert!(scripts.contains(&(
        "vagrant@192.168.56.12",
        "sudo -n sh -c 'systemctl kill -s SIGSTOP tidewater-broker'"
    )));
    assert!(scripts.iter().any(|(h, s)| {
        *h == "vagrant@192.168.56.12"
            && s.lines().any(|l| {
                l == "sudo -n iptables -w -A TIDEWATER -s 192.168.56.1/32 -j DROP || exit 1"
            })
    }));
    let rule_hosts: BTreeSet<&str> = scripts
        .iter()
        .filter(|(_, s)| s.contains("-j DROP"))
        .map(|(h, _)| *h)
        .collect();
    assert_eq!(
        rule_hosts,
        BTreeSet::from(["vagrant@192.168.56.12"]),
        "rules on n2 only"
    );
    remote.log.lock().unwrap().clear();
    c.teardown().unwrap();
    let log = remote.log.lock().unwrap().clone();
    assert!(log.iter().any(|(h, s, _)| h == "vagrant@192.168.56.12"
        && s.contains("SIGCONT")
        && s.contains("systemctl stop")));
}

#[test]
fn power_loss_mounts_lossyfs_kills_then_loses_and_teardown_unmounts() {
    let remote = Arc::new(FakeRemote::default());
    let c = cluster(remote.clone());
    assert!(matches!(
        c.power_loss("n1", None),
        Err(Error::Unsupported(_))
    ));
    assert!(
        !remote
            .log
            .lock()
            .unwrap()
            .iter()
            .any(|(_, s, _)| s.contains("lossyfs mount") || s.contains("tidewater-lossyfs' mount")),
        "nothing mounted without lossy_fs"
    );

    let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
    spec.lossy_fs = true;
    spec.lossyfs_binary = "/opt/tw/{node}/tidewater".into();
    let remote = Arc::new(FakeRemote::default());
    let c = SshCluster::with_remote(spec, vec![], remote.clone()).unwrap();
    let log = remote.log.lock().unwrap().clone();
    let on_n1 = |what: &str| {
        log.iter()
            .position(|(h, s, _)| h == "n1" && s.contains(what))
            .unwrap_or_else(|| panic!("no {what:?} on n1: {log:#?}"))
    };
    let mount = on_n1("lossyfs mount");
    assert!(log[mount].1.contains(
        "setsid /opt/tw/n1/tidewater lossyfs mount /var/lib/tidewater/data.durable \
             /var/lib/tidewater/data"
    ));
    assert!(log[mount]
        .1
        .contains("test -e /var/lib/tidewater/data/.lossyfs-control"));
    assert!(
        on_n1("umount -l") < on_n1("rm -rf"),
        "leftovers unmounted before the wipe"
    );
    assert!(on_n1("rm -rf") < mount, "mounted over the wiped data");
    assert!(
        log.iter().any(|(_, s, _)| s.contains("test -c /dev/fuse")),
        "preflight checks FUSE"
    );

    remote.log.lock().unwrap().clear();
    c.power_loss("n1", Some(7)).unwrap();
    let log = remote.log.lock().unwrap().clone();
    assert_eq!(log.len(), 2, "{log:#?}");
    assert!(log[0].1.contains("SIGKILL"), "killed first: {log:#?}");
    assert!(log[1].1.contains("lose-unsynced torn 7"), "{log:#?}");
    assert!(log[1]
        .1
        .contains("> /var/lib/tidewater/data/.lossyfs-control"));

    remote.log.lock().unwrap().clear();
    c.teardown().unwrap();
    let log = remote.log.lock().unwrap().clone();
    let stop = log
        .iter()
        .position(|(h, s, _)| h == "n1" && s.contains("systemctl stop"))
        .unwrap();
    let unmount = log
        .iter()
        .position(|(h, s, _)| h == "n1" && s.contains("kill -TERM $pid"))
        .unwrap();
    assert!(stop < unmount, "unmounted once the broker stopped");
    assert!(log[unmount]
        .1
        .contains(" /var/lib/tidewater/data fuse.lossyfs "));
    assert!(log[unmount].1.contains("umount -l /var/lib/tidewater/data"));
}

#[test]
fn process_control_starts_with_setsid_and_signals_the_group() {
    let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
    spec.control = Control::Process;
    spec.sudo = false;
    spec.remote_dir = "/srv/tw run/{node}".into();
    let scripts = Scripts::new(&spec, "n1");
    let start = scripts.start(&["/bin/b".into(), "--set".into(), "k=v w".into()]);
    assert!(start.contains("cd '/srv/tw run/n1'"), "{start}");
    assert!(
        start.contains("setsid /bin/b --set 'k=v w' >> broker.log"),
        "{start}"
    );
    assert!(
        start.contains("echo $! > '/srv/tw run/n1/broker.pid'"),
        "{start}"
    );
    assert!(scripts
        .kill()
        .starts_with("test -f '/srv/tw run/n1/broker.pid' && kill -KILL -- -$(cat"));
}

#[test]
fn unreachable_hosts_and_bad_node_lists_are_refused() {
    let remote = Arc::new(FakeRemote {
        failing: vec!["true"],
        ..FakeRemote::default()
    });
    let spec: SshSpec = toml::from_str(SPEC).unwrap();
    let err = SshCluster::with_remote(spec, vec![], remote)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("preflight failed"), "{err}");
    assert!(err.contains("c1 (c1): unreachable over ssh"), "{err}");
    assert!(err.contains("n1 (n1): unreachable over ssh"), "{err}");
    let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
    spec.nodes[1].name = "n5".into();
    assert!(spec
        .validate()
        .unwrap_err()
        .to_string()
        .contains("c1 and n1..nN"));
}

#[test]
fn per_node_paths_and_sudo_come_from_the_node_or_the_node_name() {
    let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
    spec.remote_dir = "/srv/{node}".into();
    spec.binary = "/srv/{node}/bin/broker".into();
    spec.nodes[0].remote_dir = Some("/data/controller".into());
    spec.nodes[0].sudo = Some(false);
    let c1 = Scripts::new(&spec, "c1");
    assert_eq!(c1.data_dir(), "/data/controller/data");
    assert!(!c1.wipe().starts_with("sudo"), "{}", c1.wipe());
    let n1 = Scripts::new(&spec, "n1");
    assert_eq!(n1.data_dir(), "/srv/n1/data");
    assert_eq!(n1.binary, "/srv/n1/bin/broker");
    assert!(n1.wipe().starts_with("sudo -n sh -c"), "{}", n1.wipe());
}

#[test]
fn preflight_reports_every_problem_of_every_host_at_once() {
    let remote = Arc::new(FakeRemote {
        answers: vec![(
            "client=",
            "client=192.168.56.1\nproblem: iptables is not installed\n",
        )],
        ..FakeRemote::default()
    });
    let spec: SshSpec = toml::from_str(SPEC).unwrap();
    let err = SshCluster::with_remote(spec, vec![], remote.clone())
        .err()
        .unwrap()
        .to_string();
    for node in ["c1 (c1)", "n1 (n1)", "n2 (vagrant@192.168.56.12)"] {
        assert!(
            err.contains(&format!("{node}: iptables is not installed")),
            "{err}"
        );
    }
    let log = remote.log.lock().unwrap();
    assert_eq!(log.len(), 3, "nothing but the preflight ran: {log:?}");
    assert!(log[0].1.contains("sudo -n true"), "{}", log[0].1);
    assert!(log[0].1.contains("systemctl cat tidewater-broker"));
    assert!(
        log[0].1.contains("df -Pk"),
        "free disk is checked: {}",
        log[0].1
    );
}

#[test]
fn the_client_address_is_learnt_from_ssh_client_when_not_given() {
    let remote = Arc::new(FakeRemote {
        answers: vec![("client=", "client=10.9.0.1\nsshport=2222\n")],
        ..FakeRemote::default()
    });
    let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
    spec.client_ip = None;
    let c = SshCluster::with_remote(spec, vec![], remote.clone()).unwrap();
    assert_eq!(c.client_ip(), Some(Ipv4Addr::new(10, 9, 0, 1)));
    remote.log.lock().unwrap().clear();
    c.net()
        .partition(&crate::net::cut_clients(&["n1".to_string()]))
        .unwrap();
    let log = remote.log.lock().unwrap();
    let rules = log
        .iter()
        .find(|(h, s, _)| h == "n1" && s.contains("-j DROP"))
        .map(|(_, s, _)| s.clone())
        .expect("rules on n1");
    let lines: Vec<&str> = rules.lines().collect();
    let exempt = lines
        .iter()
        .position(|l| l.contains("-A TIDEWATER -p tcp --dport 2222 -j RETURN"))
        .expect("the harness's ssh port stays open");
    let drop = lines
        .iter()
        .position(|l| l.contains("-A TIDEWATER -s 10.9.0.1/32 -j DROP"))
        .expect("the client is cut off");
    assert!(exempt < drop, "the exemption comes first:\n{rules}");
}

#[test]
fn a_binary_is_uploaded_only_where_its_digest_differs() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("broker");
    std::fs::write(&local, b"binary v2").unwrap();
    let digest = local_digest(&local).unwrap();
    assert_eq!(digest.len(), 64);
    let same: &'static str = Box::leak(format!("{digest}\n").into_boxed_str());
    // c1 has this binary already, n1 another one, n2 none.
    let remote = Arc::new(HostAnswers {
        inner: FakeRemote::default(),
        preflight_of: BTreeMap::new(),
        digest_of: BTreeMap::from([
            ("c1", same),
            ("n1", "0000\n"),
            ("vagrant@192.168.56.12", ""),
        ]),
    });
    let spec: SshSpec = toml::from_str(SPEC).unwrap();
    let c = SshCluster::with_remote(spec, vec![], remote.clone()).unwrap();
    let mut installed = c.install_binary(&local).unwrap();
    installed.sort();
    assert_eq!(installed, ["n1", "n2"]);
    let log = remote.inner.log.lock().unwrap();
    let upload = log
        .iter()
        .find(|(h, s, _)| h == "n1" && s.contains(".tw-new."))
        .expect("an upload to n1");
    assert_eq!(upload.2, "binary v2");
    assert!(upload.1.contains(
        "mv -f /usr/local/bin/tidewater-broker.tw-new.$$ /usr/local/bin/tidewater-broker"
    ));
}

#[test]
fn the_lossy_filesystem_is_installed_at_lossyfs_binary_and_not_asked_of_the_preflight() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("tidewater-lossyfs");
    std::fs::write(&local, b"lossyfs v2").unwrap();
    let remote = Arc::new(FakeRemote::default());
    let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
    spec.lossy_fs = true;
    spec.lossyfs_binary = "/opt/tw/{node}/lossyfs".into();
    spec.install_lossyfs = Some(local.clone());
    let c = SshCluster::with_remote(spec, vec![], remote.clone()).unwrap();
    let mut installed = c.install_lossyfs(&local).unwrap();
    installed.sort();
    assert_eq!(installed, ["c1", "n1", "n2"]);
    let log = remote.log.lock().unwrap();
    let preflight = &log[0].1;
    assert!(preflight.contains("/dev/fuse"), "{preflight}");
    assert!(
        !preflight.contains("is not an executable (power loss"),
        "what is about to be installed is not checked: {preflight}"
    );
    let upload = log
        .iter()
        .find(|(h, s, _)| h == "n1" && s.contains(".tw-new."))
        .expect("an upload to n1");
    assert_eq!(upload.2, "lossyfs v2");
    assert!(
        upload
            .1
            .contains("mv -f /opt/tw/n1/lossyfs.tw-new.$$ /opt/tw/n1/lossyfs"),
        "{}",
        upload.1
    );
    // Without the install, the preflight asks each host for its own copy.
    let remote = Arc::new(FakeRemote::default());
    let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
    spec.lossy_fs = true;
    SshCluster::with_remote(spec, vec![], remote.clone()).unwrap();
    let log = remote.log.lock().unwrap();
    assert!(
        log[0].1.contains("tidewater-lossyfs is not an executable"),
        "{}",
        log[0].1
    );
}

#[test]
fn auto_control_uses_the_unit_where_the_host_has_it_and_a_process_elsewhere() {
    let remote = Arc::new(HostAnswers {
        inner: FakeRemote::default(),
        digest_of: BTreeMap::new(),
        preflight_of: BTreeMap::from([
            ("c1", "client=10.9.0.1\ncontrol=systemd\n"),
            ("n1", "client=10.9.0.1\ncontrol=process\n"),
            (
                "vagrant@192.168.56.12",
                "client=10.9.0.1\ncontrol=systemd\n",
            ),
        ]),
    });
    let spec: SshSpec = toml::from_str(SPEC).unwrap();
    assert_eq!(spec.control, Control::Auto, "the default");
    let c = SshCluster::with_remote(spec, vec![], remote.clone()).unwrap();
    let log = remote.inner.log.lock().unwrap().clone();
    let preflight = &log.iter().find(|(h, _, _)| h == "n1").unwrap().1;
    assert!(
        preflight.contains("if systemctl cat tidewater-broker >/dev/null 2>&1; then"),
        "{preflight}"
    );
    assert_eq!(c.mode("n1"), Mode::Process);
    assert_eq!(c.mode("c1"), Mode::Systemd);
    let configured: BTreeSet<&str> = log
        .iter()
        .filter(|(_, s, _)| s.contains("cat > /etc/tidewater/broker.toml"))
        .map(|(h, _, _)| h.as_str())
        .collect();
    assert_eq!(configured, BTreeSet::from(["c1", "vagrant@192.168.56.12"]));
    remote.inner.log.lock().unwrap().clear();
    c.start("n1").unwrap();
    c.start("c1").unwrap();
    let log = remote.inner.log.lock().unwrap().clone();
    assert!(log[0]
        .1
        .contains("setsid /usr/local/bin/tidewater-broker --role broker"));
    assert!(log[1].1.contains("systemctl start tidewater-broker"));
}

#[test]
fn logs_and_the_units_journal_are_copied_into_the_node_directory() {
    let remote = Arc::new(FakeRemote {
        answers: vec![
            ("broker.log", "line 1\nline 2\n"),
            ("journalctl", "Started tidewater-broker.service\n"),
        ],
        ..FakeRemote::default()
    });
    let spec: SshSpec = toml::from_str(SPEC).unwrap();
    let c = SshCluster::with_remote(spec, vec![], remote.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("nodes/n1");
    c.collect_logs("n1", &dest).unwrap();
    let log = std::fs::read_to_string(dest.join("broker.log")).unwrap();
    assert_eq!(log, "line 1\nline 2\n");
    let journal = std::fs::read_to_string(dest.join("journal.log")).unwrap();
    assert_eq!(journal, "Started tidewater-broker.service\n");
}

fn kafka_spec() -> SshSpec {
    let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
    spec.kind = Kind::Kafka;
    spec
}

#[test]
fn a_kafka_cluster_writes_each_nodes_properties_and_controls_kafka_by_its_pid() {
    let remote = Arc::new(FakeRemote {
        answers: vec![("server.log", "INFO [KafkaServer id=1] started\n")],
        ..FakeRemote::default()
    });
    let settings = vec![
        ("min.insync.replicas".to_string(), "2".to_string()),
        ("flush.messages".to_string(), "1".to_string()),
    ];
    let c = SshCluster::with_remote(kafka_spec(), settings, remote.clone()).unwrap();
    assert_eq!(c.mode("n1"), Mode::Process);
    let log = remote.log.lock().unwrap().clone();
    let written = log
        .iter()
        .find(|(h, s, _)| {
            h == "vagrant@192.168.56.12" && s.contains("cat > /var/lib/tidewater/server.properties")
        })
        .expect("n2's server.properties written");
    for line in [
        "process.roles=broker",
        "node.id=2",
        "controller.quorum.voters=0@192.168.56.10:9093",
        "advertised.listeners=PLAINTEXT://192.168.56.12:9092",
        "log.dirs=/var/lib/tidewater/data",
        "min.insync.replicas=2",
        "log.flush.interval.messages=1",
    ] {
        assert!(
            written.2.lines().any(|l| l == line),
            "{line}:\n{}",
            written.2
        );
    }
    assert!(
        !log.iter()
            .any(|(_, s, _)| s.contains("broker.toml") || s.contains("systemctl")),
        "nothing of the companion broker's unit"
    );
    let wipe = log
        .iter()
        .position(|(h, s, _)| h == "c1" && s.contains("rm -rf /var/lib/tidewater/data"))
        .expect("c1 wiped");
    let stop = log
        .iter()
        .position(|(h, s, _)| h == "c1" && s.contains("kill -TERM"))
        .expect("c1 stopped");
    assert!(stop < wipe, "wipe only after Kafka stopped");
    remote.log.lock().unwrap().clear();
    c.start("n1").unwrap();
    c.kill("n1").unwrap();
    c.pause("n2").unwrap();
    c.resume("n2").unwrap();
    let log = remote.log.lock().unwrap().clone();
    let on = |host: &str| -> Vec<String> {
        log.iter()
            .filter(|(h, _, _)| h == host)
            .map(|(_, s, _)| s.clone())
            .collect()
    };
    let n1 = on("n1");
    assert!(
        n1[0].contains("/opt/kafka/bin/kafka-server-start.sh"),
        "{}",
        n1[0]
    );
    assert!(n1[0].contains("kafka-storage.sh format -t VGlkZXdhdGVyS2Fma2EwMQ"));
    assert!(n1[1].contains("kill -KILL -\"$pid\""), "{}", n1[1]);
    let n2 = on("vagrant@192.168.56.12");
    assert!(
        n2.iter().any(|s| s.contains("kill -STOP -\"$pid\"")),
        "{n2:?}"
    );
    assert!(
        n2.last().unwrap().contains("kill -CONT -\"$pid\""),
        "{n2:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    c.collect_logs("n1", dir.path()).unwrap();
    for file in [
        "broker.log",
        "server.properties",
        "server.log",
        "controller.log",
    ] {
        assert!(dir.path().join(file).is_file(), "{file}");
    }
    let server = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert_eq!(server, "INFO [KafkaServer id=1] started\n");
    let bootstrap: Vec<String> = c
        .kafka_bootstrap()
        .iter()
        .map(|(n, a)| format!("{n}={a}"))
        .collect();
    assert_eq!(
        bootstrap,
        ["n1=192.168.56.11:9092", "n2=192.168.56.12:9092"]
    );
    remote.log.lock().unwrap().clear();
    c.teardown().unwrap();
    let log = remote.log.lock().unwrap().clone();
    assert_eq!(
        log.iter()
            .filter(|(_, s, _)| s.contains("kill -TERM") && !s.contains("lossyfs.pid"))
            .count(),
        3,
        "teardown stops Kafka on every host"
    );
}

#[test]
fn a_kafka_cluster_refuses_settings_kafka_lacks_before_touching_any_host() {
    let remote = Arc::new(FakeRemote::default());
    let settings = vec![(
        "tidewater.unsafe.serve.lagging.hw.enable".to_string(),
        "true".to_string(),
    )];
    let err = SshCluster::with_remote(kafka_spec(), settings, remote.clone())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("Kafka has no equivalent"), "{err}");
    assert!(remote.log.lock().unwrap().is_empty(), "no host was touched");
}

#[test]
fn the_preflight_of_a_kafka_host_checks_kafka_and_java_instead_of_the_unit() {
    let remote = Arc::new(FakeRemote {
        answers: vec![(
            "client=",
            "client=192.168.56.1\nproblem: /opt/kafka/bin/kafka-server-start.sh is not an \
                 executable\n",
        )],
        ..FakeRemote::default()
    });
    let err = SshCluster::with_remote(kafka_spec(), vec![], remote.clone())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("n1 (n1): /opt/kafka/bin/kafka-server-start.sh"),
        "{err}"
    );
    let log = remote.log.lock().unwrap();
    let preflight = &log[0].1;
    for check in [
        "test -x /opt/kafka/bin/kafka-server-start.sh",
        "test -x /opt/kafka/bin/kafka-storage.sh",
        "command -v java",
        "command -v setsid",
        "command -v iptables",
    ] {
        assert!(preflight.contains(check), "{check}: {preflight}");
    }
    assert!(!preflight.contains("systemctl"), "{preflight}");
}

#[test]
fn the_kind_and_the_kafka_table_must_agree_with_the_rest_of_the_file() {
    let mut spec = kafka_spec();
    spec.control = Control::Systemd;
    assert!(spec.validate().unwrap_err().to_string().contains("control"));
    let mut spec = kafka_spec();
    spec.install_binary = Some("auto".into());
    assert!(spec
        .validate()
        .unwrap_err()
        .to_string()
        .contains("remove install_binary"));
    let mut spec: SshSpec = toml::from_str(SPEC).unwrap();
    spec.kafka.port = 19092;
    assert!(spec
        .validate()
        .unwrap_err()
        .to_string()
        .contains("kind = \"kafka\" only"));
    assert!(spec.kafka_bootstrap().is_empty() || spec.kind == Kind::Kafka);
    let spec: SshSpec = toml::from_str(&format!(
        "kind = \"kafka\"\n{SPEC}\n[kafka]\nhome = \"/srv/kafka\"\nquorum = \"combined\"\n\
             [kafka.properties]\n\"num.io.threads\" = 4\n"
    ))
    .unwrap();
    spec.validate().unwrap();
    assert_eq!(spec.kafka.quorum, Quorum::Combined);
    assert_eq!(spec.kafka.properties["num.io.threads"], "4");
}

/// Answers `sha256sum` and the preflight per host.
struct HostAnswers {
    inner: FakeRemote,
    digest_of: BTreeMap<&'static str, &'static str>,
    preflight_of: BTreeMap<&'static str, &'static str>,
}

impl Remote for HostAnswers {
    fn run(&self, host: &str, script: &str, stdin: &[u8]) -> Result<String> {
        let out = self.inner.run(host, script, stdin)?;
        if script.contains("sha256sum") {
            return Ok(self.digest_of.get(host).copied().unwrap_or("").to_string());
        }
        if script.contains("client=") {
            return Ok(self
                .preflight_of
                .get(host)
                .copied()
                .unwrap_or("")
                .to_string());
        }
        Ok(out)
    }
}
