//! One partition replica hosted by a broker in a cluster ([`Replica`]): its role (leader,
//! follower, offline) behind the role lock, its log, the follower fetch task, and the acks=all
//! produces waiting for the HW (Kafka's produce purgatory), completed by [`Replica::publish`].
//!
//! Locking: the role lock is always taken before the partition's own lock (log + HW); neither
//! is held across an `.await`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::leader::LeaderState;
use crate::partition::{Partition, PartitionState};

/// What a replica currently is.
#[derive(Debug, Clone)]
pub enum Role {
    /// Leads the partition.
    Leader(Box<LeaderState>),
    /// Follows `leader`.
    Follower {
        /// The leader's broker id.
        leader: u32,
    },
    /// The partition has no leader (or this replica has not been told its role yet).
    Offline,
}

/// A replica's replication state (behind the role lock).
#[derive(Debug, Clone)]
pub struct RoleState {
    /// Leader, follower or offline.
    pub role: Role,
    /// The leader epoch of the role.
    pub leader_epoch: u32,
    /// Assigned replicas, from the metadata.
    pub replicas: Vec<u32>,
    /// The ISR as the metadata last said (the leader's own view is in its `LeaderState`).
    pub isr: Vec<u32>,
}

/// One partition replica hosted by this broker in a cluster.
pub struct Replica {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: u32,
    /// The log, HW and waiters (shared with the client API).
    pub log: Arc<Partition>,
    /// Role state; locked before `log`.
    pub(super) role: Mutex<RoleState>,
    /// The follower fetch task, while following.
    pub(super) fetcher: Mutex<Option<JoinHandle<()>>>,
    /// acks=all produces waiting for the HW; locked after `log`, never held across an await.
    pub(super) delayed_produces: Mutex<DelayedProduces>,
}

/// acks=all produces waiting for the HW to pass their last offset (Kafka's produce purgatory),
/// completed by [`Replica::publish`]: a publish wakes only the requests it completes. (Waiting on
/// the partition's offsets watch instead woke every request in flight at every append and every
/// fetch, each to find its condition still false.)
#[derive(Debug, Default)]
pub(super) struct DelayedProduces {
    /// The id of the next registration, which keeps equal last offsets apart.
    next_id: u64,
    /// The leader epoch of the last publish; `None` before the first.
    epoch: Option<u32>,
    /// (last offset, id) -> (leader epoch of the append, completion).
    pub(super) waiting: BTreeMap<(u64, u64), (u32, oneshot::Sender<()>)>,
}

impl Replica {
    /// Locks the role state.
    pub fn role(&self) -> MutexGuard<'_, RoleState> {
        self.role.lock().expect("replica role lock poisoned")
    }

    pub(super) fn delayed_produces(&self) -> MutexGuard<'_, DelayedProduces> {
        self.delayed_produces
            .lock()
            .expect("delayed produces lock poisoned")
    }

    /// Registers an acks=all produce of a batch ending at `last_offset`, appended in
    /// `leader_epoch`: the receiver completes when a publish shows the HW past it or another
    /// epoch. The caller removes the returned key from `waiting` when it stops waiting.
    pub(super) fn delay_produce(
        &self,
        last_offset: u64,
        leader_epoch: u32,
    ) -> ((u64, u64), oneshot::Receiver<()>) {
        let (completion, completed) = oneshot::channel();
        let mut delayed = self.delayed_produces();
        let key = (last_offset, delayed.next_id);
        delayed.next_id += 1;
        delayed.waiting.insert(key, (leader_epoch, completion));
        (key, completed)
    }

    /// Publishes the offsets of `log` to the partition's waiters, then completes the delayed
    /// produces whose batch the HW passed, and all those of another leader epoch (they wake to
    /// find the leadership lost). Call with the log lock held after every change, as for
    /// [`Partition::publish`]; every HW and epoch change of a replica goes through here.
    pub(super) fn publish(&self, log: &PartitionState) {
        self.log.publish(log);
        let mut delayed = self.delayed_produces();
        if delayed.epoch != Some(log.leader_epoch) {
            delayed.epoch = Some(log.leader_epoch);
            let epoch = log.leader_epoch;
            let stale: Vec<_> = delayed
                .waiting
                .iter()
                .filter(|(_, (e, _))| *e != epoch)
                .map(|(key, _)| *key)
                .collect();
            for key in stale {
                if let Some((_, done)) = delayed.waiting.remove(&key) {
                    let _ = done.send(());
                }
            }
        }
        if delayed
            .waiting
            .first_key_value()
            .is_some_and(|((last_offset, _), _)| *last_offset < log.high_watermark)
        {
            let pending = delayed.waiting.split_off(&(log.high_watermark, 0));
            for (_, (_, done)) in std::mem::replace(&mut delayed.waiting, pending) {
                let _ = done.send(());
            }
        }
    }

    pub(super) fn stop_fetcher(&self) {
        if let Some(task) = self.fetcher.lock().expect("fetcher lock poisoned").take() {
            task.abort();
        }
    }
}

/// Moves the partition's HW to the leader's (min LEO over the maximal ISR, forward only).
pub(super) fn advance_leader_hw(state: &mut LeaderState, log: &mut PartitionState) {
    if let Some(high_watermark) = state.maybe_advance_high_watermark(log.log.log_end_offset()) {
        Partition::advance_high_watermark(log, high_watermark);
    }
    debug_assert_eq!(
        log.high_watermark,
        state.high_watermark(),
        "leader HW and partition HW agree"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{LogConfig, Record};

    #[test]
    fn publish_completes_exactly_the_delayed_produces_the_hw_passed_or_whose_epoch_ended() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(Partition::open("t", 0, dir.path(), LogConfig::default(), 1).unwrap());
        let replica = Replica {
            topic: "t".into(),
            partition: 0,
            log: log.clone(),
            role: Mutex::new(RoleState {
                role: Role::Offline,
                leader_epoch: 1,
                replicas: Vec::new(),
                isr: Vec::new(),
            }),
            fetcher: Mutex::new(None),
            delayed_produces: Mutex::new(DelayedProduces::default()),
        };
        let mut state = log.lock();
        state.leader_epoch = 1;
        let records = (0..10)
            .map(|i| Record {
                key: None,
                value: vec![i],
                timestamp_ms: 0,
            })
            .collect();
        state.log.append(records, 1).unwrap();
        state.high_watermark = 0;
        replica.publish(&state);
        let (_, mut first) = replica.delay_produce(4, 1);
        let (_, mut second) = replica.delay_produce(4, 1);
        let (third_key, mut third) = replica.delay_produce(9, 1);
        // HW 4 does not pass offset 4: nothing completes.
        state.high_watermark = 4;
        replica.publish(&state);
        assert!(first.try_recv().is_err() && second.try_recv().is_err());
        // HW 5 passes offset 4 (both produces ending there), not offset 9.
        state.high_watermark = 5;
        replica.publish(&state);
        assert_eq!(first.try_recv(), Ok(()));
        assert_eq!(second.try_recv(), Ok(()));
        assert_eq!(third.try_recv(), Err(oneshot::error::TryRecvError::Empty));
        assert_eq!(
            replica
                .delayed_produces()
                .waiting
                .keys()
                .copied()
                .collect::<Vec<_>>(),
            vec![third_key]
        );
        // A new leader epoch completes the rest, whatever the HW.
        state.leader_epoch = 2;
        replica.publish(&state);
        assert_eq!(third.try_recv(), Ok(()));
        assert!(replica.delayed_produces().waiting.is_empty());
    }
}
