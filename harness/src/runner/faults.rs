//! The runner's side of the nemesis: resolving the fault schedule before the run (so it is
//! stored in `config.json` and a replay repeats it), running it during the main phase, and
//! the final step that heals, resumes and restarts every node.

use crate::cluster::Cluster;
use crate::recorder::Recorder;
use serde_json::{json, Value};
use std::sync::Arc;
use tidewater_workloads::client::BrokerClient;

/// The resolved schedule of a run.
pub fn resolve_schedule(config: &super::config::RunConfig) -> Result<Value, String> {
    if config.plan.is_none() && config.nemesis.is_empty() {
        return Ok(json!([]));
    }
    Err("fault injection is not available in this build yet: use --nemesis none".into())
}

/// A running nemesis.
pub struct NemesisHandle {
    task: Option<tokio::task::JoinHandle<Result<(), String>>>,
}

impl NemesisHandle {
    /// Stops the schedule (faults in force stay until [`final_step`]) and waits for it.
    pub async fn stop(self) -> Result<(), String> {
        match self.task {
            Some(task) => {
                task.abort();
                match task.await {
                    Ok(r) => r,
                    Err(e) if e.is_cancelled() => Ok(()),
                    Err(e) => Err(format!("nemesis task failed: {e}")),
                }
            }
            None => Ok(()),
        }
    }
}

/// Starts the run's fault schedule.
pub fn spawn(
    config: &super::config::RunConfig,
    _cluster: Arc<dyn Cluster>,
    _client: Arc<BrokerClient>,
    _recorder: Arc<Recorder>,
) -> Result<NemesisHandle, String> {
    match config.schedule.as_array() {
        Some(steps) if steps.is_empty() => Ok(NemesisHandle { task: None }),
        _ => Err("fault injection is not available in this build yet".into()),
    }
}

/// Heals the network, resumes paused nodes and starts stopped ones, recording each as a
/// nemesis op. Blocking: run it on a blocking thread.
pub fn final_step(cluster: &dyn Cluster, recorder: &Recorder) -> Result<(), String> {
    let mut errors = Vec::new();
    if !cluster.net().current().is_empty() {
        recorder.nemesis("stop-partition", json!(null));
    }
    if let Err(e) = cluster.net().heal() {
        errors.push(format!("heal: {e}"));
    }
    let paused: Vec<String> = cluster
        .node_names()
        .into_iter()
        .filter(|n| cluster.is_paused(n))
        .collect();
    for node in &paused {
        if let Err(e) = cluster.resume(node) {
            errors.push(format!("resume {node}: {e}"));
        }
    }
    if !paused.is_empty() {
        recorder.nemesis("stop-pause", json!(paused));
    }
    let stopped: Vec<String> = cluster
        .node_names()
        .into_iter()
        .filter(|n| !cluster.is_running(n))
        .collect();
    for node in &stopped {
        if let Err(e) = cluster.start(node) {
            errors.push(format!("start {node}: {e}"));
        }
    }
    if !stopped.is_empty() {
        recorder.nemesis("stop-kill", json!(stopped));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}
