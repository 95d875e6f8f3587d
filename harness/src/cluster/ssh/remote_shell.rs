//! Tidewater's iptables rules applied on the hosts over ssh, with the harness's own ssh
//! connections exempted (see [`crate::net::rules`]).

use super::shell::quote;
use super::transport::Remote;
use crate::cluster::{Error, Result};
use crate::net::rules::{commands_script, Cmd, NodeShell};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Runs rule commands on a host over the [`Remote`].
pub(super) struct RemoteShell {
    /// Runs the scripts.
    pub(super) remote: Arc<dyn Remote>,
    /// Node name -> (host key for the remote, whether to use sudo).
    pub(super) hosts: BTreeMap<String, (String, bool)>,
    /// Node name -> its sshd's port. The harness controls the host through it, often from the
    /// very address a "cut clients" fault drops: without an exemption the harness could not
    /// heal the fault it made.
    pub(super) ssh_ports: BTreeMap<String, u16>,
}

impl RemoteShell {
    fn host(&self, node: &str) -> Result<&(String, bool)> {
        self.hosts
            .get(node)
            .ok_or_else(|| Error::UnknownNode(node.to_string()))
    }

    /// `cmds` with, right after the creation of Tidewater's chain, a rule that lets the
    /// harness's ssh connections through (`-p tcp --dport SSH_PORT -j RETURN`). Heal deletes
    /// the chain, and the exemption with it.
    fn with_ssh_exemption(&self, node: &str, cmds: &[Cmd]) -> Vec<Cmd> {
        let mut out = Vec::with_capacity(cmds.len() + 1);
        for c in cmds {
            out.push(c.clone());
            let creates_chain = c.argv.len() == 4
                && c.argv[0] == "iptables"
                && c.argv[2] == "-N"
                && c.argv[3] == crate::net::rules::CHAIN;
            if let (true, Some(port)) = (creates_chain, self.ssh_ports.get(node)) {
                let rule = [
                    "iptables",
                    "-w",
                    "-A",
                    crate::net::rules::CHAIN,
                    "-p",
                    "tcp",
                    "--dport",
                    &port.to_string(),
                    "-j",
                    "RETURN",
                ];
                out.push(Cmd {
                    argv: rule.iter().map(|w| w.to_string()).collect(),
                    on_fail: c.on_fail,
                });
            }
        }
        out
    }
}

impl NodeShell for RemoteShell {
    fn exec(&self, node: &str, argv: &[String]) -> Result<()> {
        let (host, sudo) = self.host(node)?;
        let words: Vec<String> = argv.iter().map(|a| quote(a)).collect();
        let script = if *sudo {
            format!("sudo -n {}", words.join(" "))
        } else {
            words.join(" ")
        };
        self.remote.run(host, &script, b"").map(|_| ())
    }

    fn exec_all(&self, node: &str, cmds: &[Cmd]) -> Result<()> {
        if cmds.is_empty() {
            return Ok(());
        }
        let (host, sudo) = self.host(node)?;
        let prefix = if *sudo { "sudo -n " } else { "" };
        let script = commands_script(&self.with_ssh_exemption(node, cmds), prefix, quote);
        self.remote.run(host, &script, b"").map(|_| ())
    }
}
