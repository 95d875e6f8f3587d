//! Runs fault plans against a cluster and records what it did.

use super::plan::{Action, FaultPlan, Partition, PartitionKind, Step, Wait, When};
use super::target::Target;
use super::view::{ClusterView, PartitionState};
use super::Recorder;
use crate::cluster::{self, Cluster, CONTROLLER};
use crate::net::{self, Grudge};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;
use rand::SeedableRng;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tidewater_workloads::nemesis::{NemesisOp, TargetRole, WaitFor};
use tokio::time::Instant;

/// Mixed into the run's seed so the nemesis's draws do not mirror the workload's.
const SEED_SALT: u64 = 0x6e65_6d65_7369_7331;

/// How often waits look at the metadata again.
const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Drives faults into one cluster. Every step's outcome goes to the [`Recorder`]; a failed
/// step is recorded with its error and the plan goes on (a fault that could not be injected
/// must not stop the test, and the final step repairs whatever state is left).
pub struct Nemesis {
    /// The cluster faults go into.
    cluster: Arc<dyn Cluster>,
    /// Partition metadata, to resolve `leader:`/`isr:` targets and run waits.
    view: Arc<dyn ClusterView>,
    /// Where operations are recorded.
    recorder: Arc<dyn Recorder>,
    /// Every random choice (`one`, `minority`, partition shapes), from the run's seed.
    rng: StdRng,
    /// Nodes bound by `bind = "name"`, for `@name` targets.
    bindings: BTreeMap<String, Vec<String>>,
    /// Nodes whose power is cut and that have not been started since: their start ends a
    /// `power-loss` window (`stop-power-loss`), not a `kill` one.
    powered_off: BTreeSet<String>,
}

impl Nemesis {
    /// A nemesis whose random choices follow `seed`.
    pub fn new(
        cluster: Arc<dyn Cluster>,
        view: Arc<dyn ClusterView>,
        recorder: Arc<dyn Recorder>,
        seed: u64,
    ) -> Nemesis {
        Nemesis {
            cluster,
            view,
            recorder,
            rng: StdRng::seed_from_u64(seed ^ SEED_SALT),
            bindings: BTreeMap::new(),
            powered_off: BTreeSet::new(),
        }
    }

    /// The nodes bound so far by `bind`.
    pub fn bindings(&self) -> &BTreeMap<String, Vec<String>> {
        &self.bindings
    }

    /// Runs the plan's steps in order, `at_s` counted from `started`, until the plan ends or
    /// the next step would start at or after `deadline` (tokio instants;
    /// `tokio::time::Instant::from_std` converts). Waits end at `deadline` too, so this
    /// returns soon after it (at most one node stop later); await it rather than cancelling
    /// it, so no fault goes unrecorded. Returns how many steps ran.
    pub async fn run(&mut self, plan: &FaultPlan, started: Instant, deadline: Instant) -> usize {
        let mut done = 0;
        for step in &plan.step {
            let now = Instant::now();
            let when = match step.when {
                When::At { at_s } => started + Duration::from_secs_f64(at_s),
                When::After { after_s } => now + Duration::from_secs_f64(after_s),
                When::Now => now,
            };
            if when >= deadline {
                break;
            }
            tokio::time::sleep_until(when).await;
            if let Err(e) = self.execute(step, deadline).await {
                tracing::warn!(action = step.action.name(), "nemesis step failed: {e}");
            }
            done += 1;
        }
        done
    }

    /// Heals the network, resumes every paused node and starts every stopped one (controller
    /// first). Every run ends with this, whatever the plan left.
    pub async fn final_step(&mut self) -> Result<(), String> {
        let mut errors = vec![];
        let healed = self
            .blocking(|c| c.net().heal().map_err(|e| e.to_string()))
            .await;
        self.record(NemesisOp::StopPartition, healed.clone().err());
        errors.extend(healed.err());
        // Node state queries may be remote round trips (ssh): off the async threads.
        let paused = self
            .blocking(|c| {
                Ok(c.node_names()
                    .into_iter()
                    .filter(|n| c.is_paused(n))
                    .collect::<Vec<_>>())
            })
            .await
            .unwrap_or_default();
        if !paused.is_empty() {
            let e = self.each(&paused, |c, n| c.resume(n)).await;
            self.record(NemesisOp::StopPause { nodes: paused }, e.clone());
            errors.extend(e);
        }
        let down = self
            .blocking(|c| {
                Ok(c.node_names()
                    .into_iter()
                    .filter(|n| !c.is_running(n))
                    .collect::<Vec<_>>())
            })
            .await
            .unwrap_or_default();
        if !down.is_empty() {
            errors.extend(self.start_nodes(&down).await.err());
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// Runs one step now. Waits give up at `deadline` at the latest.
    pub async fn execute(&mut self, step: &Step, deadline: Instant) -> Result<(), String> {
        let nodes = match step.action.target() {
            Some(t) => self.resolve_recorded(step, TargetRole::Target, t).await?,
            None => vec![],
        };
        if let Some(name) = &step.bind {
            self.bindings.insert(name.clone(), nodes.clone());
        }
        let all = self.cluster.node_names();
        match &step.action {
            Action::Isolate { .. } => self.partition(net::isolate(&all, &nodes)).await,
            Action::Cut { from, .. } => {
                let from_nodes = self.resolve_recorded(step, TargetRole::From, from).await?;
                let target: Vec<String> = nodes
                    .iter()
                    .filter(|n| !from_nodes.contains(n))
                    .cloned()
                    .collect();
                self.partition(net::complete(&[target, from_nodes])).await
            }
            Action::CutClients { .. } => self.partition(net::cut_clients(&nodes)).await,
            Action::Partition(Partition::Grudge(grudge)) => self.partition(grudge.clone()).await,
            Action::Partition(Partition::Random(kind)) => {
                let grudge = self.shape(*kind);
                self.partition(grudge).await
            }
            Action::Heal => {
                let r = self
                    .blocking(|c| c.net().heal().map_err(|e| e.to_string()))
                    .await;
                self.record(NemesisOp::StopPartition, r.clone().err());
                r
            }
            Action::Kill { .. } => self.on_nodes(start_kill, &nodes, |c, n| c.kill(n)).await,
            Action::Stop { .. } => self.on_nodes(start_kill, &nodes, |c, n| c.stop(n)).await,
            Action::PowerLoss { torn, .. } => {
                let torn_seed = torn.then(|| self.rng.gen::<u64>());
                let r = self.power_loss(&nodes, torn_seed).await;
                self.powered_off.extend(nodes.iter().cloned());
                r
            }
            Action::Start { .. } => self.start_nodes(&nodes).await,
            Action::Restart { .. } => {
                // A node without power has nothing to stop: its start ends the power loss.
                let up: Vec<String> = nodes
                    .iter()
                    .filter(|n| !self.powered_off.contains(*n))
                    .cloned()
                    .collect();
                let stopped = if up.is_empty() {
                    Ok(())
                } else {
                    self.on_nodes(start_kill, &up, |c, n| c.stop(n)).await
                };
                let started = self.start_nodes(&nodes).await;
                stopped.and(started)
            }
            Action::Pause { .. } => {
                let start_pause = |nodes| NemesisOp::StartPause { nodes };
                self.on_nodes(start_pause, &nodes, |c, n| c.pause(n)).await
            }
            Action::Resume { .. } => {
                let stop_pause = |nodes| NemesisOp::StopPause { nodes };
                self.on_nodes(stop_pause, &nodes, |c, n| c.resume(n)).await
            }
            Action::Wait(wait) => self.wait(wait, &nodes, deadline).await,
        }
    }

    /// The nodes `target` (the step's `role` target) names now; when it names none, records
    /// the step's op with the target instead of nodes, and the error.
    async fn resolve_recorded(
        &mut self,
        step: &Step,
        role: TargetRole,
        target: &Target,
    ) -> Result<Vec<String>, String> {
        match self.resolve(target).await {
            Ok(nodes) => Ok(nodes),
            Err(e) => {
                let e = format!("{} {target}: {e}", role.name());
                let op = NemesisOp::Unresolved {
                    name: step.action.op_name(),
                    role,
                    target: target.to_string(),
                };
                self.record(op, Some(e.clone()));
                Err(e)
            }
        }
    }

    fn record(&self, op: NemesisOp, error: Option<String>) {
        self.recorder.nemesis(op, error);
    }

    /// Runs a blocking cluster call off the async runtime.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn Cluster) -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        let cluster = self.cluster.clone();
        tokio::task::spawn_blocking(move || f(cluster.as_ref()))
            .await
            .unwrap_or_else(|e| Err(format!("cluster call panicked: {e}")))
    }

    /// Applies `op` to each node (all of them, even after a failure); the errors joined.
    async fn each(
        &self,
        nodes: &[String],
        op: impl Fn(&dyn Cluster, &str) -> cluster::Result<()> + Send + 'static,
    ) -> Option<String> {
        let nodes = nodes.to_vec();
        let r = self
            .blocking(move |c| {
                let errors: Vec<String> = nodes
                    .iter()
                    .filter_map(|n| op(c, n).err().map(|e| format!("{n}: {e}")))
                    .collect();
                if errors.is_empty() {
                    Ok(())
                } else {
                    Err(errors.join("; "))
                }
            })
            .await;
        r.err()
    }

    /// Applies `op` to each node and records `recorded` of the nodes, with the errors.
    async fn on_nodes(
        &self,
        recorded: fn(Vec<String>) -> NemesisOp,
        nodes: &[String],
        op: fn(&dyn Cluster, &str) -> cluster::Result<()>,
    ) -> Result<(), String> {
        let error = self.each(nodes, op).await;
        self.record(recorded(nodes.to_vec()), error.clone());
        error.map_or(Ok(()), Err)
    }

    /// Cuts the nodes' power; records `start-power-loss` with the nodes, or with
    /// `{"nodes", "torn_seed"}` for torn losses (so a replay tears the same way).
    async fn power_loss(&self, nodes: &[String], torn_seed: Option<u64>) -> Result<(), String> {
        let error = self
            .each(nodes, move |c, n| c.power_loss(n, torn_seed))
            .await;
        let op = NemesisOp::StartPowerLoss {
            nodes: nodes.to_vec(),
            torn_seed,
        };
        self.record(op, error.clone());
        error.map_or(Ok(()), Err)
    }

    /// Starts the nodes: those whose power was cut end a `power-loss` window, the others a
    /// `kill` window.
    async fn start_nodes(&mut self, nodes: &[String]) -> Result<(), String> {
        let (powered, killed): (Vec<String>, Vec<String>) = nodes
            .iter()
            .cloned()
            .partition(|n| self.powered_off.contains(n));
        let mut result = Ok(());
        if !powered.is_empty() {
            let stop_power_loss = |nodes| NemesisOp::StopPowerLoss { nodes };
            let r = self
                .on_nodes(stop_power_loss, &powered, |c, n| c.start(n))
                .await;
            for n in &powered {
                self.powered_off.remove(n);
            }
            result = result.and(r);
        }
        if !killed.is_empty() {
            let stop_kill = |nodes| NemesisOp::StopKill { nodes };
            let r = self.on_nodes(stop_kill, &killed, |c, n| c.start(n)).await;
            result = result.and(r);
        }
        result
    }

    async fn partition(&self, grudge: Grudge) -> Result<(), String> {
        let applied = grudge.clone();
        let r = self
            .blocking(move |c| c.net().partition(&applied).map_err(|e| e.to_string()))
            .await;
        self.record(NemesisOp::StartPartition { grudge }, r.clone().err());
        r
    }

    /// A random partition of every node (controller included).
    fn shape(&mut self, kind: PartitionKind) -> Grudge {
        let mut nodes = self.cluster.node_names();
        nodes.shuffle(&mut self.rng);
        kind.grudge(&nodes)
    }

    async fn state(&self, key: &str) -> Result<PartitionState, String> {
        self.view
            .partition_state(key)
            .await
            .ok_or_else(|| format!("no node answered metadata for {key}"))
    }

    /// The nodes a target names now.
    pub async fn resolve(&mut self, target: &Target) -> Result<Vec<String>, String> {
        let nodes = self.resolve_any(target).await?;
        if nodes.is_empty() {
            return Err("names no node".into());
        }
        Ok(nodes)
    }

    /// The nodes a target names now, possibly none (a difference may leave nothing).
    fn resolve_any<'a>(
        &'a mut self,
        target: &'a Target,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<String>, String>> + Send + 'a>>
    {
        Box::pin(async move {
            match target {
                Target::Union(parts) => {
                    let mut nodes = Vec::new();
                    for part in parts {
                        for n in self.resolve_any(part).await? {
                            if !nodes.contains(&n) {
                                nodes.push(n);
                            }
                        }
                    }
                    nodes.sort_by_key(|n| node_order(n));
                    Ok(nodes)
                }
                Target::Except(left, right) => {
                    let left = self.resolve_any(left).await?;
                    let right = self.resolve_any(right).await?;
                    Ok(left.into_iter().filter(|n| !right.contains(n)).collect())
                }
                simple => self.resolve_simple(simple).await,
            }
        })
    }

    /// The nodes a target that is neither a union nor a difference names now.
    async fn resolve_simple(&mut self, target: &Target) -> Result<Vec<String>, String> {
        let brokers = self.cluster.broker_names();
        let pick = |k: usize, from: &[String], rng: &mut StdRng| -> Result<Vec<String>, String> {
            if k == 0 || from.len() < k {
                return Err(format!("cannot pick {k} of {from:?}"));
            }
            let mut chosen: Vec<String> = from.choose_multiple(rng, k).cloned().collect();
            chosen.sort_by_key(|n| node_order(n));
            Ok(chosen)
        };
        let nodes = match target {
            Target::Nodes(nodes) => {
                let known = self.cluster.node_names();
                if let Some(unknown) = nodes.iter().find(|n| !known.contains(n)) {
                    return Err(format!("no node {unknown} in this cluster"));
                }
                nodes.clone()
            }
            Target::One => pick(1, &brokers, &mut self.rng)?,
            Target::Minority => pick(brokers.len() / 2, &brokers, &mut self.rng)?,
            Target::Majority => pick(brokers.len() / 2 + 1, &brokers, &mut self.rng)?,
            Target::All => brokers,
            Target::Controller => vec![CONTROLLER.to_string()],
            Target::Leader(key) => {
                let leader = self.state(key).await?.leader;
                vec![leader.ok_or_else(|| format!("{key} has no leader"))?]
            }
            Target::Follower(key) => {
                let state = self.state(key).await?;
                let not_leader = |n: &&String| Some(*n) != state.leader.as_ref();
                let mut followers: Vec<String> =
                    state.isr.iter().filter(not_leader).cloned().collect();
                if followers.is_empty() {
                    followers = state.replicas.iter().filter(not_leader).cloned().collect();
                }
                followers.sort_by_key(|n| node_order(n));
                pick(1, &followers, &mut self.rng).map_err(|_| format!("{key} has no follower"))?
            }
            Target::Isr(key) => self.state(key).await?.isr,
            Target::Replicas(key) => self.state(key).await?.replicas,
            Target::Bound(name) => self
                .bindings
                .get(name)
                .cloned()
                .ok_or_else(|| format!("@{name} is not bound"))?,
            Target::Union(_) | Target::Except(..) => {
                unreachable!("resolve_any handles compound targets")
            }
        };
        Ok(nodes)
    }

    /// Polls the metadata until the wait's condition holds, its bound passes or `deadline`.
    async fn wait(&self, wait: &Wait, nodes: &[String], deadline: Instant) -> Result<(), String> {
        let key = wait.key();
        let until = wait.until();
        let timeout = Duration::from_secs_f64(wait.bound_s());
        let end = deadline.min(Instant::now() + timeout);
        let started = Instant::now();
        loop {
            let state = self.view.partition_state(key).await;
            let holds = state.as_ref().is_some_and(|s| match until {
                WaitFor::IsrShrink => nodes.iter().all(|n| !s.isr.contains(n)),
                WaitFor::IsrExpand => nodes.iter().all(|n| s.isr.contains(n)),
                WaitFor::IsrFull => {
                    !s.replicas.is_empty() && s.replicas.iter().all(|n| s.isr.contains(n))
                }
                WaitFor::Leader => s
                    .leader
                    .as_ref()
                    .is_some_and(|l| nodes.is_empty() || nodes.contains(l)),
            });
            if holds || Instant::now() >= end {
                let s = state.unwrap_or_default();
                let op = NemesisOp::Waited {
                    until,
                    key: key.to_string(),
                    nodes: nodes.to_vec(),
                    leader: s.leader,
                    isr: s.isr,
                    waited_ms: started.elapsed().as_millis() as u64,
                };
                let error = (!holds).then(|| format!("still not so after {:?}", started.elapsed()));
                self.record(op, error.clone());
                return error.map_or(Ok(()), Err);
            }
            tokio::time::sleep(WAIT_POLL_INTERVAL).await;
        }
    }
}

/// The op of nodes killed or stopped.
fn start_kill(nodes: Vec<String>) -> NemesisOp {
    NemesisOp::StartKill { nodes }
}

/// Sorts `c1` before `n1 < n2 < n10`.
fn node_order(name: &str) -> (bool, u32) {
    let number = name[1..].parse().unwrap_or(u32::MAX);
    (name != CONTROLLER, number)
}
