//! ISR changes on the leader: shrinking it when followers lag more than
//! `replica.lag.time.max.ms`, and proposing every change (shrink or expansion) to the
//! controller as an AlterPartition with the partition epoch, applying the answer when it comes.
//! While a change is pending the leader's HW counts the larger of the old and new ISR
//! (`leader`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::leader::LeaderState;
use super::manager::ReplicaManager;
use super::replica::{advance_leader_hw, Replica, Role};
use crate::bugs::Bug;
use crate::controller::protocol::{AlterPartitionRequest, ControllerError, PartitionMetadata};

impl ReplicaManager {
    /// Sends an AlterPartition for `proposal` and applies the answer when it comes.
    pub(super) fn propose_isr_change(
        self: &Arc<Self>,
        replica: &Arc<Replica>,
        state: &mut LeaderState,
        proposal: Vec<u32>,
    ) {
        let seq = state.begin_isr_change(proposal.clone());
        let request = AlterPartitionRequest {
            broker_id: self.settings.broker_id,
            broker_epoch: self.broker_epoch.load(Ordering::SeqCst),
            topic: replica.topic.clone(),
            partition: replica.partition,
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            new_isr: proposal,
        };
        let manager = self.clone();
        let replica = replica.clone();
        tokio::spawn(async move {
            let result = manager
                .controller_call::<_, PartitionMetadata>("/controller/v1/alter-partition", &request)
                .await;
            manager.complete_isr_change(&replica, request.leader_epoch, seq, result);
        });
    }

    fn complete_isr_change(
        &self,
        replica: &Replica,
        leader_epoch: u32,
        seq: u64,
        result: Result<Result<PartitionMetadata, ControllerError>, String>,
    ) {
        let mut role = replica.role();
        let Role::Leader(state) = &mut role.role else {
            return;
        };
        if state.leader_epoch != leader_epoch {
            return;
        }
        let before = state.isr();
        let accepted = match result {
            Ok(Ok(pm)) => Some((pm.partition_epoch, pm.isr)),
            Ok(Err(e)) => {
                tracing::warn!(topic = %replica.topic, partition = replica.partition, error = %e, "ISR change rejected");
                None
            }
            Err(e) => {
                tracing::warn!(topic = %replica.topic, partition = replica.partition, error = %e, "ISR change not delivered");
                None
            }
        };
        let changed =
            state.complete_isr_change(seq, accepted.as_ref().map(|(e, isr)| (*e, isr.as_slice())));
        if changed {
            let after = state.isr();
            tracing::info!(topic = %replica.topic, partition = replica.partition, ?before, ?after, "ISR updated");
            self.count_isr_change(&before, &after);
            role.isr = after.clone();
            let Role::Leader(state) = &mut role.role else {
                return;
            };
            let mut log = replica.log.lock();
            log.isr = after;
            advance_leader_hw(state, &mut log);
            replica.publish(&log);
        }
    }

    pub(super) fn count_isr_change(&self, before: &[u32], after: &[u32]) {
        if after.len() < before.len() {
            self.isr_shrinks.fetch_add(1, Ordering::Relaxed);
        } else if after.len() > before.len() {
            self.isr_expands.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every half of `replica.lag.time.max.ms`, proposes ISRs without lagging followers.
    pub(super) async fn check_isr_forever(self: Arc<Self>) {
        let period = Duration::from_millis((self.settings.replica_lag_time_max_ms / 2).max(10));
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            for replica in self.all_replicas() {
                let mut role = replica.role();
                let Role::Leader(state) = &mut role.role else {
                    continue;
                };
                let log_end_offset = replica.log.lock().log.log_end_offset();
                if let Some(proposal) = state.shrink_for(
                    log_end_offset,
                    crate::clock::now_ms(),
                    self.settings.replica_lag_time_max_ms,
                ) {
                    tracing::warn!(
                        topic = %replica.topic, partition = replica.partition, isr = ?state.isr(), ?proposal,
                        "followers lag more than replica.lag.time.max.ms; shrinking the ISR"
                    );
                    if self.settings.bugs.on(Bug::ShrinkIsrWithoutController) {
                        let before = state.isr();
                        state.shrink_without_controller(&proposal);
                        self.count_isr_change(&before, &proposal);
                        let mut log = replica.log.lock();
                        log.isr = proposal;
                        advance_leader_hw(state, &mut log);
                        replica.publish(&log);
                        continue;
                    }
                    self.propose_isr_change(&replica, state, proposal);
                }
            }
        }
    }
}
