//! The preflight: before anything changes on any host, every host is checked at once
//! (reachable, `sudo -n` works, iptables, the unit or binary, free disk, FUSE for power
//! loss) and every problem is reported in one error.

use super::parallel::on_each;
use super::scripts::Scripts;
use super::shell::quote;
use super::spec::{Control, Kind, Mode, SshSpec};
use super::transport::Remote;
use crate::cluster::{Error, Result, CONTROLLER};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// What the preflight found on one host.
struct Preflight {
    /// The harness host's address as this host sees it (`$SSH_CLIENT`).
    client_ip: Option<Ipv4Addr>,
    /// The port this host's sshd answered on (`$SSH_CONNECTION`).
    ssh_port: Option<u16>,
    /// What `control = "auto"` found on this host.
    mode: Option<Mode>,
    /// Missing prerequisites.
    problems: Vec<String>,
}

/// What the preflight learnt about the hosts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// The harness host's address as the controller's host sees it (`$SSH_CLIENT`).
    pub client_ip: Option<Ipv4Addr>,
    /// Node -> the port its sshd answered on, which network faults must leave open.
    pub ssh_ports: BTreeMap<String, u16>,
    /// Node -> how its broker is run, where `control = "auto"` had to find out.
    pub modes: BTreeMap<String, Mode>,
}

/// Free disk space each host needs under its node directory, checked by the preflight.
pub const FREE_DISK_MIN_MIB: u64 = 1024;

/// Checks every host at once, before anything changes on any of them; one error lists every
/// unreachable host and every problem.
pub fn preflight(spec: &SshSpec, remote: &dyn Remote, installing: bool) -> Result<HostFacts> {
    let names: Vec<String> = spec.nodes.iter().map(|n| n.name.clone()).collect();
    let results = on_each(&names, |node| {
        let host = spec.host(node)?;
        let out = remote.probe(&host.host, &Scripts::new(spec, node).preflight(installing))?;
        let mut found = Preflight {
            client_ip: None,
            ssh_port: None,
            mode: None,
            problems: vec![],
        };
        for line in out.lines() {
            if let Some(ip) = line.strip_prefix("client=") {
                found.client_ip = ip.trim().parse().ok();
            } else if let Some(port) = line.strip_prefix("sshport=") {
                found.ssh_port = port.trim().parse().ok();
            } else if let Some(mode) = line.strip_prefix("control=") {
                found.mode = match mode.trim() {
                    "systemd" => Some(Mode::Systemd),
                    "process" => Some(Mode::Process),
                    _ => None,
                };
            } else if let Some(p) = line.strip_prefix("problem: ") {
                found.problems.push(p.to_string());
            }
        }
        Ok(found)
    });
    let mut lines = vec![];
    let mut facts = HostFacts::default();
    for (node, result) in results {
        let host = &spec.host(&node)?.host;
        match result {
            Err(e) => lines.push(format!(
                "  {node} ({host}): unreachable over ssh: {}",
                connection_failure(&e)
            )),
            Ok(found) => {
                for p in found.problems {
                    lines.push(format!("  {node} ({host}): {p}"));
                }
                if node == CONTROLLER {
                    facts.client_ip = found.client_ip;
                }
                if let Some(port) = found.ssh_port {
                    facts.ssh_ports.insert(node.clone(), port);
                }
                if let Some(mode) = found.mode {
                    facts.modes.insert(node, mode);
                }
            }
        }
    }
    if !lines.is_empty() {
        return Err(Error::State(format!(
            "ssh cluster preflight failed, nothing was changed on any host:\n{}",
            lines.join("\n")
        )));
    }
    Ok(facts)
}

/// What went wrong with a connection, without the script (ssh's own message says it all).
fn connection_failure(e: &Error) -> String {
    match e {
        Error::Command {
            stderr,
            status: Some(_),
            ..
        } if !stderr.trim().is_empty() => stderr.trim().to_string(),
        Error::Command {
            stderr,
            status: None,
            ..
        } => stderr.trim().to_string(),
        other => other.to_string(),
    }
}

impl Scripts<'_> {
    /// Checks run before anything changes: prints `client=ADDR` (the harness host as this host
    /// sees it), `sshport=PORT` (the port this host's sshd got the connection on) and one
    /// `problem: ...` line per missing prerequisite. Exits 0 unless the shell
    /// itself fails, so a problem is told apart from an unreachable host.
    pub(super) fn preflight(&self, installing: bool) -> String {
        // Free space where the node's data goes (or the nearest existing parent): a night
        // that fills a disk half-way would end in errors that look like broker bugs.
        let free = format!(
            "d={dir}; while [ ! -d \"$d\" ]; do d=$(dirname \"$d\"); done; \
             kb=$(df -Pk \"$d\" | awk 'NR==2 {{print $4}}'); \
             [ \"${{kb:-0}}\" -ge {min_kb} ] || echo \"problem: only ${{kb:-0}} KiB free under $d \
             (at least {min_mib} MiB needed)\"",
            dir = quote(&self.dir),
            min_kb = FREE_DISK_MIN_MIB * 1024,
            min_mib = FREE_DISK_MIN_MIB
        );
        let mut checks = vec![
            "command -v iptables >/dev/null 2>&1 || test -x /usr/sbin/iptables || \
             test -x /sbin/iptables || echo 'problem: iptables is not installed'"
                .to_string(),
            free,
        ];
        if self.spec.lossy_fs {
            checks.push(
                "test -c /dev/fuse || echo 'problem: /dev/fuse is missing (power loss mounts \
                 a FUSE filesystem over the data directory; modprobe fuse)'"
                    .to_string(),
            );
            if self.spec.install_lossyfs.is_none() {
                checks.push(format!(
                    "test -x {b} || echo 'problem: {b} is not an executable (power loss needs \
                     tidewater-lossyfs on every host; set lossyfs_binary in the cluster file)'",
                    b = quote(&self.lossyfs_binary)
                ));
            }
        }
        if self.spec.kind == Kind::Kafka {
            checks.extend(self.kafka().preflight_checks());
            return self.preflight_script(&checks);
        }
        let unit_exists = format!("systemctl cat {} >/dev/null 2>&1", self.unit());
        let mut process_checks =
            vec!["command -v setsid >/dev/null 2>&1 || echo 'problem: setsid is missing'".into()];
        if !installing {
            process_checks.push(format!(
                "test -x {b} || echo 'problem: {b} is not an executable (install it, \
                 or set install_binary in the cluster file)'",
                b = quote(&self.binary)
            ));
        }
        match self.spec.control {
            Control::Systemd => checks.push(format!(
                "{unit_exists} || echo 'problem: no systemd unit {u} \
                 (install it as vagrant/provision.sh does, or use control = \"process\")'",
                u = self.unit()
            )),
            Control::Process => checks.extend(process_checks),
            Control::Auto => checks.push(format!(
                "if {unit_exists}; then echo control=systemd; else echo control=process; {}; fi",
                process_checks.join("; ")
            )),
        }
        self.preflight_script(&checks)
    }

    /// The preflight around `checks` (run privileged): the client address and ssh port, then
    /// whether `sudo -n` works, then the checks.
    pub(super) fn preflight_script(&self, checks: &[String]) -> String {
        let checks = self.sudo(&checks.join("; "));
        let sudo_check = if self.sudo {
            "sudo -n true 2>/dev/null || { echo \"problem: sudo -n fails for $(id -un) \
             (passwordless sudo is needed, or sudo = false when logging in as root)\"; exit 0; }; "
        } else {
            ""
        };
        format!(
            "echo \"client=${{SSH_CLIENT%% *}}\"; echo \"sshport=${{SSH_CONNECTION##* }}\"; \
             {sudo_check}{checks}; true"
        )
    }
}
