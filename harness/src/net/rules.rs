//! Turning a grudge into packet-dropping rules on each node, and removing them again.
//!
//! Two methods drop the same packets (everything arriving at a node from a node it holds a
//! grudge against):
//!
//! - `iptables`: a chain of Tidewater's own, [`CHAIN`], holding one `-s ADDR -j DROP` rule per
//!   dropped peer, jumped to from `INPUT`. Heal deletes the jump and the chain, nothing else.
//! - `ip rule` (where iptables is missing): one `from ADDR blackhole` policy-routing rule per
//!   dropped peer at priority [`BLACKHOLE_PRIORITY`]. The kernel's `lookup local` rule sits at
//!   priority 0, before any rule one can add, so [`prepare_commands`] moves it behind ours
//!   (to [`LOCAL_PRIORITY`]) once per node; this is only done inside Tidewater's own network
//!   namespaces. Heal deletes the rules at our priority, nothing else.
//!
//! The commands are plain data ([`Cmd`]) so they can be checked without root and run through
//! any [`NodeShell`] (a network namespace locally, ssh for remote hosts).

use super::{Grudge, Net, CLIENT};
use crate::control::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

/// The iptables chain that holds Tidewater's rules.
pub const CHAIN: &str = "TIDEWATER";

/// The `ip rule` priority of Tidewater's blackhole rules.
pub const BLACKHOLE_PRIORITY: u32 = 10;

/// Where the `lookup local` rule moves to, behind the blackhole rules.
pub const LOCAL_PRIORITY: u32 = 100;

/// The environment variable that forces a method: `iptables` or `iproute`.
pub const METHOD_ENV: &str = "TIDEWATER_NET";

/// Bound on repetitions of an idempotent delete (e.g. one `ip rule del` per rule).
const DELETE_REPEAT_MAX: usize = 1024;

/// How packets are dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// A `TIDEWATER` chain jumped to from `INPUT`.
    Iptables,
    /// `ip rule ... blackhole` policy-routing rules.
    Iproute,
}

impl Method {
    /// `TIDEWATER_NET=iptables|iproute` if set, else iptables when `iptables -V` runs, else
    /// the `ip rule` fallback.
    pub fn detect() -> Result<Method> {
        match std::env::var(METHOD_ENV) {
            Ok(v) if v == "iptables" => Ok(Method::Iptables),
            Ok(v) if v == "iproute" => Ok(Method::Iproute),
            Ok(v) if !v.is_empty() => Err(Error::Config(format!(
                "{METHOD_ENV}={v:?}: expected \"iptables\" or \"iproute\""
            ))),
            _ => Ok(if iptables_available() {
                Method::Iptables
            } else {
                Method::Iproute
            }),
        }
    }
}

/// Whether the `iptables` command exists and runs.
pub fn iptables_available() -> bool {
    std::process::Command::new("iptables")
        .arg("-V")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What a failing command means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFail {
    /// An error: stop and report it.
    Error,
    /// Expected when there is nothing to remove: ignore it.
    Ignore,
    /// Run again until it fails (deleting one matching rule per run), bounded.
    RepeatUntilFail,
}

/// One command to run on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// How to treat a non-zero exit.
    pub on_fail: OnFail,
}

fn cmd(on_fail: OnFail, argv: &[&str]) -> Cmd {
    Cmd {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        on_fail,
    }
}

/// One-time setup of a node for `method` (moves `lookup local` behind the blackhole rules).
pub fn prepare_commands(method: Method) -> Vec<Cmd> {
    match method {
        Method::Iptables => vec![],
        Method::Iproute => vec![
            cmd(
                OnFail::Error,
                &[
                    "ip",
                    "rule",
                    "add",
                    "pref",
                    &LOCAL_PRIORITY.to_string(),
                    "lookup",
                    "local",
                ],
            ),
            cmd(
                OnFail::Error,
                &["ip", "rule", "del", "pref", "0", "lookup", "local"],
            ),
        ],
    }
}

/// Rules that drop every packet from `dropped` arriving at the node.
pub fn apply_commands(method: Method, dropped: &BTreeSet<Ipv4Addr>) -> Vec<Cmd> {
    if dropped.is_empty() {
        return vec![];
    }
    match method {
        Method::Iptables => {
            let mut cmds = vec![cmd(OnFail::Error, &["iptables", "-w", "-N", CHAIN])];
            for ip in dropped {
                let src = format!("{ip}/32");
                cmds.push(cmd(
                    OnFail::Error,
                    &["iptables", "-w", "-A", CHAIN, "-s", &src, "-j", "DROP"],
                ));
            }
            cmds.push(cmd(
                OnFail::Error,
                &["iptables", "-w", "-I", "INPUT", "1", "-j", CHAIN],
            ));
            cmds
        }
        Method::Iproute => dropped
            .iter()
            .map(|ip| {
                let pref = BLACKHOLE_PRIORITY.to_string();
                let src = format!("{ip}/32");
                cmd(
                    OnFail::Error,
                    &[
                        "ip",
                        "rule",
                        "add",
                        "pref",
                        &pref,
                        "from",
                        &src,
                        "blackhole",
                    ],
                )
            })
            .collect(),
    }
}

/// Removes every rule `apply_commands` may have added, and nothing else.
pub fn heal_commands(method: Method) -> Vec<Cmd> {
    match method {
        Method::Iptables => vec![
            cmd(
                OnFail::RepeatUntilFail,
                &["iptables", "-w", "-D", "INPUT", "-j", CHAIN],
            ),
            cmd(OnFail::Ignore, &["iptables", "-w", "-F", CHAIN]),
            cmd(OnFail::Ignore, &["iptables", "-w", "-X", CHAIN]),
        ],
        Method::Iproute => vec![cmd(
            OnFail::RepeatUntilFail,
            &["ip", "rule", "del", "pref", &BLACKHOLE_PRIORITY.to_string()],
        )],
    }
}

/// Runs commands on a node (inside its network namespace, over ssh, ...).
pub trait NodeShell: Send + Sync {
    /// Runs `argv` on `node`; a non-zero exit is an [`Error::Command`].
    fn exec(&self, node: &str, argv: &[String]) -> Result<()>;

    /// Runs `cmds` on `node` with their failure semantics. Shells with a costly round trip
    /// (ssh) override this to send them all at once.
    fn exec_all(&self, node: &str, cmds: &[Cmd]) -> Result<()> {
        run_commands(self, node, cmds)
    }
}

/// The commands as one POSIX sh script with the same failure semantics, each word quoted
/// by `quote` and each command prefixed by `prefix` (e.g. `sudo -n `).
pub fn commands_script(cmds: &[Cmd], prefix: &str, quote: impl Fn(&str) -> String) -> String {
    let mut script = vec!["set -u".to_string()];
    for c in cmds {
        let line: Vec<String> = c.argv.iter().map(|a| quote(a)).collect();
        let line = format!("{prefix}{}", line.join(" "));
        script.push(match c.on_fail {
            OnFail::Error => format!("{line} || exit 1"),
            OnFail::Ignore => format!("{line} >/dev/null 2>&1 || true"),
            OnFail::RepeatUntilFail => format!(
                "i=0; while {line} >/dev/null 2>&1; do i=$((i+1)); \
                 if [ $i -ge {DELETE_REPEAT_MAX} ]; then echo 'still succeeds: {}' >&2; exit 1; fi; done",
                c.argv.join(" ")
            ),
        });
    }
    script.join("\n")
}

/// Runs `cmds` on `node` with their failure semantics.
pub fn run_commands<S: NodeShell + ?Sized>(shell: &S, node: &str, cmds: &[Cmd]) -> Result<()> {
    for c in cmds {
        match c.on_fail {
            OnFail::Error => shell.exec(node, &c.argv)?,
            OnFail::Ignore => {
                let _ = shell.exec(node, &c.argv);
            }
            OnFail::RepeatUntilFail => {
                let mut runs = 0;
                while shell.exec(node, &c.argv).is_ok() {
                    runs += 1;
                    if runs >= DELETE_REPEAT_MAX {
                        return Err(Error::State(format!(
                            "`{}` on {node} still succeeds after {runs} runs",
                            c.argv.join(" ")
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}

/// A [`Net`] that applies grudges as rules on each node through a [`NodeShell`].
pub struct RuleNet {
    /// Runs the rule commands on the nodes.
    shell: Arc<dyn NodeShell>,
    /// iptables or ip rule.
    method: Method,
    /// Address of every node, and of [`CLIENT`] (the harness host), to name rule sources.
    addrs: BTreeMap<String, Ipv4Addr>,
    /// The grudge in force; the lock also serialises apply and heal.
    current: Mutex<Grudge>,
    /// Set by [`RuleNet::heal_and_close`]: no partition is applied any more.
    closed: std::sync::atomic::AtomicBool,
}

impl RuleNet {
    /// A network of `addrs` (node name -> address; include [`CLIENT`] for the harness host).
    ///
    /// Runs the method's one-time preparation on every node but [`CLIENT`].
    pub fn new(
        shell: Arc<dyn NodeShell>,
        method: Method,
        addrs: BTreeMap<String, Ipv4Addr>,
    ) -> Result<RuleNet> {
        let net = RuleNet {
            shell,
            method,
            addrs,
            current: Mutex::new(Grudge::new()),
            closed: std::sync::atomic::AtomicBool::new(false),
        };
        for node in net.rule_nodes() {
            net.shell.exec_all(&node, &prepare_commands(method))?;
        }
        Ok(net)
    }

    /// Heals every node and refuses every later partition: a teardown's heal, which a
    /// partition the nemesis issues afterwards (a signal in the main phase) must not undo.
    pub fn heal_and_close(&self) -> Result<()> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.heal_all()?;
        current.clear();
        Ok(())
    }

    /// The method in use.
    pub fn method(&self) -> Method {
        self.method
    }

    fn rule_nodes(&self) -> Vec<String> {
        self.addrs
            .keys()
            .filter(|n| *n != CLIENT)
            .cloned()
            .collect()
    }

    /// Heals every node, in parallel (each node is a round trip or a few commands).
    fn heal_all(&self) -> Result<()> {
        let nodes = self.rule_nodes();
        let cmds = heal_commands(self.method);
        self.on_nodes(nodes.iter().map(|n| (n.as_str(), cmds.clone())).collect())
    }

    /// Runs each node's commands, nodes in parallel; the first error.
    fn on_nodes(&self, work: Vec<(&str, Vec<Cmd>)>) -> Result<()> {
        let results: Vec<Result<()>> = std::thread::scope(|scope| {
            let handles: Vec<_> = work
                .iter()
                .map(|(node, cmds)| scope.spawn(move || self.shell.exec_all(node, cmds)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::State("a rule command panicked".into())))
                })
                .collect()
        });
        results.into_iter().find(|r| r.is_err()).unwrap_or(Ok(()))
    }

    fn addresses(&self, grudge: &Grudge) -> Result<BTreeMap<String, BTreeSet<Ipv4Addr>>> {
        let mut out = BTreeMap::new();
        for (node, dropped) in grudge {
            if node == CLIENT || !self.addrs.contains_key(node) {
                return Err(Error::UnknownNode(node.clone()));
            }
            let ips = dropped
                .iter()
                .map(|d| {
                    self.addrs
                        .get(d)
                        .copied()
                        .ok_or_else(|| Error::UnknownNode(d.clone()))
                })
                .collect::<Result<BTreeSet<_>>>()?;
            out.insert(node.clone(), ips);
        }
        Ok(out)
    }
}

impl Net for RuleNet {
    fn partition(&self, grudge: &Grudge) -> Result<()> {
        let by_node = self.addresses(grudge)?;
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::State(
                "the cluster is being torn down: no partition is applied".into(),
            ));
        }
        self.heal_all()?;
        current.clear();
        let work = by_node
            .iter()
            .map(|(node, ips)| (node.as_str(), apply_commands(self.method, ips)))
            .collect();
        if let Err(e) = self.on_nodes(work) {
            // Leave no half-applied partition behind.
            let _ = self.heal_all();
            return Err(e);
        }
        *current = grudge.clone();
        current.retain(|_, d| !d.is_empty());
        Ok(())
    }

    fn heal(&self) -> Result<()> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        self.heal_all()?;
        current.clear();
        Ok(())
    }

    fn current(&self) -> Grudge {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records commands; fails the ones listed in `failing` (by joined argv).
    #[derive(Default)]
    struct FakeShell {
        log: Mutex<Vec<(String, String)>>,
        failing: Vec<String>,
    }

    impl NodeShell for FakeShell {
        fn exec(&self, node: &str, argv: &[String]) -> Result<()> {
            let line = argv.join(" ");
            self.log
                .lock()
                .unwrap()
                .push((node.to_string(), line.clone()));
            if self.failing.contains(&line) {
                return Err(Error::Command {
                    command: line,
                    status: Some(1),
                    stderr: String::new(),
                });
            }
            Ok(())
        }
    }

    fn addrs() -> BTreeMap<String, Ipv4Addr> {
        BTreeMap::from([
            (CLIENT.to_string(), Ipv4Addr::new(10, 9, 0, 1)),
            ("n1".to_string(), Ipv4Addr::new(10, 9, 0, 11)),
            ("n2".to_string(), Ipv4Addr::new(10, 9, 0, 12)),
        ])
    }

    #[test]
    fn iptables_rules_live_in_tidewaters_own_chain() {
        let ips = BTreeSet::from([Ipv4Addr::new(10, 9, 0, 12)]);
        let lines: Vec<String> = apply_commands(Method::Iptables, &ips)
            .iter()
            .map(|c| c.argv.join(" "))
            .collect();
        assert_eq!(
            lines,
            [
                "iptables -w -N TIDEWATER",
                "iptables -w -A TIDEWATER -s 10.9.0.12/32 -j DROP",
                "iptables -w -I INPUT 1 -j TIDEWATER",
            ]
        );
        for c in heal_commands(Method::Iptables) {
            assert!(
                c.argv.iter().any(|a| a == CHAIN),
                "{:?} must only touch {CHAIN}",
                c.argv
            );
        }
    }

    #[test]
    fn ip_rules_are_blackholes_at_tidewaters_priority() {
        let ips = BTreeSet::from([Ipv4Addr::new(10, 9, 0, 1), Ipv4Addr::new(10, 9, 0, 12)]);
        let lines: Vec<String> = apply_commands(Method::Iproute, &ips)
            .iter()
            .map(|c| c.argv.join(" "))
            .collect();
        assert_eq!(
            lines,
            [
                "ip rule add pref 10 from 10.9.0.1/32 blackhole",
                "ip rule add pref 10 from 10.9.0.12/32 blackhole",
            ]
        );
        assert_eq!(
            heal_commands(Method::Iproute)[0].argv.join(" "),
            "ip rule del pref 10"
        );
    }

    #[test]
    fn partition_heals_first_then_applies_on_the_grudging_nodes_only() {
        let shell = Arc::new(FakeShell {
            // The repeated delete stops at its first failure.
            failing: vec!["iptables -w -D INPUT -j TIDEWATER".into()],
            ..FakeShell::default()
        });
        let net = RuleNet::new(shell.clone(), Method::Iptables, addrs()).unwrap();
        let grudge = super::super::cut_clients(&["n2".to_string()]);
        net.partition(&grudge).unwrap();
        let log = shell.log.lock().unwrap().clone();
        let applied: Vec<_> = log.iter().filter(|(_, l)| l.contains("DROP")).collect();
        assert_eq!(
            applied,
            [&(
                "n2".to_string(),
                "iptables -w -A TIDEWATER -s 10.9.0.1/32 -j DROP".to_string()
            )]
        );
        let heals = log.iter().filter(|(_, l)| l.contains("-X")).count();
        assert_eq!(heals, 2, "heal runs on both nodes before applying: {log:?}");
        assert_eq!(net.current(), grudge);
        net.heal().unwrap();
        // After the teardown's heal no partition lands any more.
        net.heal_and_close().unwrap();
        assert!(
            net.partition(&grudge).is_err(),
            "a closed network takes no partition"
        );
        assert!(net.current().is_empty());
    }

    #[test]
    fn a_script_keeps_each_commands_failure_semantics() {
        let mut cmds = heal_commands(Method::Iptables);
        cmds.extend(apply_commands(
            Method::Iptables,
            &BTreeSet::from([Ipv4Addr::new(10, 9, 0, 1)]),
        ));
        let script = commands_script(&cmds, "sudo -n ", |w| w.to_string());
        let lines: Vec<&str> = script.lines().collect();
        assert_eq!(lines[0], "set -u");
        assert!(lines[1].starts_with(
            "i=0; while sudo -n iptables -w -D INPUT -j TIDEWATER >/dev/null 2>&1; do"
        ));
        assert_eq!(
            lines[2],
            "sudo -n iptables -w -F TIDEWATER >/dev/null 2>&1 || true"
        );
        assert_eq!(lines[4], "sudo -n iptables -w -N TIDEWATER || exit 1");
        assert_eq!(lines.len(), 7);
    }

    #[test]
    fn a_grudge_naming_an_unknown_node_is_refused_before_any_command() {
        let shell = Arc::new(FakeShell::default());
        let net = RuleNet::new(shell.clone(), Method::Iproute, addrs()).unwrap();
        let prepared = shell.log.lock().unwrap().len();
        assert_eq!(prepared, 4, "two preparation commands on each of n1, n2");
        let grudge = Grudge::from([("n1".to_string(), BTreeSet::from(["n7".to_string()]))]);
        assert!(matches!(net.partition(&grudge), Err(Error::UnknownNode(n)) if n == "n7"));
        assert_eq!(shell.log.lock().unwrap().len(), prepared);
    }

    #[test]
    fn a_failed_apply_heals_what_was_applied() {
        let shell = Arc::new(FakeShell {
            failing: vec![
                "ip rule del pref 10".into(),
                "ip rule add pref 10 from 10.9.0.11/32 blackhole".into(),
            ],
            ..FakeShell::default()
        });
        let net = RuleNet::new(shell.clone(), Method::Iproute, addrs()).unwrap();
        let grudge = super::super::isolate(&["n1".into(), "n2".into()], &["n1".into()]);
        assert!(net.partition(&grudge).is_err());
        assert!(net.current().is_empty());
        let log = shell.log.lock().unwrap();
        let last = &log.last().unwrap().1;
        assert_eq!(last, "ip rule del pref 10", "the last command heals");
    }
}
