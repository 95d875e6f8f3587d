//! A cluster that runs nothing and records every call: for tests of code that drives a
//! cluster (the nemesis, the runner) without root or processes.

use super::{node_list, Cluster, Error, NodeInfo, Result};
use crate::net::{Grudge, Net};
use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Mutex;

/// Records calls as `"kill n1"`, `"partition {...}"`, `"heal"`, and keeps node states so
/// `is_running` / `is_paused` answer like a real cluster would.
pub struct NoopCluster {
    /// Controller first, then brokers, on 127.0.0.0/8 addresses that nothing listens on.
    nodes: Vec<NodeInfo>,
    /// Every call, in order.
    calls: Mutex<Vec<String>>,
    /// Nodes whose (imaginary) process runs.
    running: Mutex<BTreeSet<String>>,
    /// Nodes paused.
    paused: Mutex<BTreeSet<String>>,
    /// The grudge in force.
    grudge: Mutex<Grudge>,
}

impl NoopCluster {
    /// A cluster of `brokers` brokers plus `c1`, all considered running.
    pub fn new(brokers: usize) -> NoopCluster {
        let nodes = node_list(brokers, 9092, |i| Ipv4Addr::new(127, 77, 0, 10 + i as u8));
        let running = nodes.iter().map(|n| n.name.clone()).collect();
        NoopCluster {
            nodes,
            calls: Mutex::new(vec![]),
            running: Mutex::new(running),
            paused: Mutex::new(BTreeSet::new()),
            grudge: Mutex::new(Grudge::new()),
        }
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn log(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    fn known(&self, node: &str) -> Result<()> {
        self.node(node).map(|_| ())
    }

    fn down(&self, node: &str, verb: &str) -> Result<()> {
        self.known(node)?;
        self.log(format!("{verb} {node}"));
        self.running.lock().unwrap().remove(node);
        self.paused.lock().unwrap().remove(node);
        Ok(())
    }
}

impl Cluster for NoopCluster {
    fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    fn start(&self, node: &str) -> Result<()> {
        self.known(node)?;
        self.log(format!("start {node}"));
        self.running.lock().unwrap().insert(node.to_string());
        Ok(())
    }

    fn stop(&self, node: &str) -> Result<()> {
        self.down(node, "stop")
    }

    fn power_loss(&self, node: &str, torn_seed: Option<u64>) -> Result<()> {
        match torn_seed {
            Some(seed) => self.down(node, &format!("power-loss torn {seed}")),
            None => self.down(node, "power-loss"),
        }
    }

    fn kill(&self, node: &str) -> Result<()> {
        self.down(node, "kill")
    }

    fn pause(&self, node: &str) -> Result<()> {
        self.known(node)?;
        if !self.is_running(node) {
            return Err(Error::State(format!(
                "cannot pause {node}: it is not running"
            )));
        }
        self.log(format!("pause {node}"));
        self.paused.lock().unwrap().insert(node.to_string());
        Ok(())
    }

    fn resume(&self, node: &str) -> Result<()> {
        self.known(node)?;
        self.log(format!("resume {node}"));
        self.paused.lock().unwrap().remove(node);
        Ok(())
    }

    fn wipe(&self, node: &str) -> Result<()> {
        self.known(node)?;
        self.log(format!("wipe {node}"));
        Ok(())
    }

    fn is_running(&self, node: &str) -> bool {
        self.running.lock().unwrap().contains(node)
    }

    fn is_paused(&self, node: &str) -> bool {
        self.paused.lock().unwrap().contains(node)
    }

    fn collect_logs(&self, node: &str, _dest: &Path) -> Result<()> {
        self.known(node)?;
        self.log(format!("collect-logs {node}"));
        Ok(())
    }

    fn net(&self) -> &dyn Net {
        self
    }

    fn teardown(&self) -> Result<()> {
        self.log("teardown".into());
        Ok(())
    }
}

impl Net for NoopCluster {
    fn partition(&self, grudge: &Grudge) -> Result<()> {
        for (node, dropped) in grudge {
            self.known(node)?;
            for d in dropped.iter().filter(|d| *d != crate::net::CLIENT) {
                self.known(d)?;
            }
        }
        self.log(format!(
            "partition {}",
            serde_json::to_string(grudge).unwrap_or_default()
        ));
        *self.grudge.lock().unwrap() = grudge.clone();
        Ok(())
    }

    fn heal(&self) -> Result<()> {
        self.log("heal".into());
        self.grudge.lock().unwrap().clear();
        Ok(())
    }

    fn current(&self) -> Grudge {
        self.grudge.lock().unwrap().clone()
    }
}
