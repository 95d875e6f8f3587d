//! Leader and ISR of each partition over time, from the leaders' samples, with the periods
//! when no leader answered made explicit.
//!
//! The harness samples every broker's status route every half second and keeps the answers
//! of each partition's leader. A partition without a leader has no such answer, so a line
//! that simply held its last value would show a healthy ISR while the partition was offline.
//! Here a partition is offline from one sampling round after its last leader sample until its
//! next one, whenever that gap exceeds [`GAP_ROUNDS`] rounds; the sampling interval is the
//! median gap between rounds. Before its first leader sample and after its last one (while
//! other partitions were still sampled) it is offline too. When two replicas both claim to
//! lead in one round (a deposed leader that has not heard the news), the higher leader epoch
//! wins.

use crate::scan::run_files::Sample;
use std::collections::BTreeMap;

/// A gap of more than this many sampling rounds without a leader sample is an offline period.
pub const GAP_ROUNDS: f64 = 2.5;

/// What a partition's leader reported in one sampling round.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderPoint {
    /// When, ns.
    pub time_ns: u64,
    /// The leader (the node that answered as leader).
    pub leader: Option<String>,
    /// The size of the ISR it reported.
    pub isr_len: Option<usize>,
    /// Its leader epoch.
    pub leader_epoch: Option<u64>,
    /// Its high watermark.
    pub high_watermark: Option<u64>,
}

/// One partition over time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyReplicas {
    /// One point per round with a leader answer, in time order.
    pub points: Vec<LeaderPoint>,
    /// Periods without any leader answer, (start ns, end ns), in time order.
    pub offline: Vec<(u64, u64)>,
}

impl KeyReplicas {
    /// Total time without a leader within `[from_ns, to_ns]`, and the longest such period.
    pub fn offline_within(&self, from_ns: u64, to_ns: u64) -> (u64, u64) {
        let mut total = 0;
        let mut longest = 0;
        for &(a, b) in &self.offline {
            let d = b.min(to_ns).saturating_sub(a.max(from_ns));
            total += d;
            longest = longest.max(d);
        }
        (total, longest)
    }
}

/// Every partition's leader and ISR over time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replicas {
    /// The sampling interval, ns (0 without samples).
    pub interval_ns: u64,
    /// By partition.
    pub by_key: BTreeMap<String, KeyReplicas>,
}

/// Builds the partitions' histories from leader samples (any order).
pub fn replica_states(samples: &[Sample]) -> Replicas {
    let mut rounds: Vec<u64> = samples.iter().map(|s| s.time).collect();
    rounds.sort_unstable();
    rounds.dedup();
    let (Some(&first), Some(&last)) = (rounds.first(), rounds.last()) else {
        return Replicas::default();
    };
    let mut gaps: Vec<u64> = rounds.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_unstable();
    let interval_ns = gaps.get(gaps.len() / 2).copied().unwrap_or(0);
    // One point per key and round: the highest leader epoch wins.
    let mut by_round: BTreeMap<(&str, u64), &Sample> = BTreeMap::new();
    for s in samples {
        let slot = by_round.entry((s.key.as_str(), s.time)).or_insert(s);
        if s.leader_epoch > slot.leader_epoch {
            *slot = s;
        }
    }
    let mut by_key: BTreeMap<String, KeyReplicas> = BTreeMap::new();
    for ((key, time_ns), s) in by_round {
        by_key
            .entry(key.to_string())
            .or_default()
            .points
            .push(LeaderPoint {
                time_ns,
                leader: s.node.clone().or_else(|| s.leader.clone()),
                isr_len: s.isr.as_ref().map(Vec::len),
                leader_epoch: s.leader_epoch,
                high_watermark: s.high_watermark,
            });
    }
    let gap_max = (interval_ns as f64 * GAP_ROUNDS) as u64;
    for k in by_key.values_mut() {
        let times: Vec<u64> = k.points.iter().map(|p| p.time_ns).collect();
        let mut offline = Vec::new();
        if times[0] > first && times[0] - first > gap_max {
            offline.push((first, times[0]));
        }
        for w in times.windows(2) {
            if interval_ns > 0 && w[1] - w[0] > gap_max {
                offline.push((w[0] + interval_ns, w[1]));
            }
        }
        let end = *times.last().expect("a key has a point");
        if last > end && last - end > gap_max {
            offline.push((end + interval_ns, last));
        }
        k.offline = offline;
    }
    Replicas {
        interval_ns,
        by_key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_ms: u64, key: &str, node: &str, isr: &[&str], epoch: u64) -> Sample {
        Sample {
            time: t_ms * 1_000_000,
            key: key.into(),
            isr: Some(isr.iter().map(|s| s.to_string()).collect()),
            leader: Some(node.into()),
            leader_epoch: Some(epoch),
            high_watermark: Some(t_ms),
            node: Some(node.into()),
            role: Some("leader".into()),
        }
    }

    #[test]
    fn a_gap_without_leader_answers_is_an_offline_period() {
        let mut samples = Vec::new();
        for t in (0..=20_000).step_by(500) {
            // b has no leader from 5 s to 12 s; a stays up (its rounds set the interval).
            samples.push(sample(t, "a", "n1", &["n1", "n2"], 1));
            if !(5_000..12_000).contains(&t) {
                samples.push(sample(t, "b", "n2", &["n2"], 1));
            }
        }
        // A deposed leader still answering in one round: the newer epoch wins.
        samples.push(sample(1_000, "a", "n3", &["n3"], 0));
        let r = replica_states(&samples);
        assert_eq!(r.interval_ns, 500_000_000);
        assert!(r.by_key["a"].offline.is_empty());
        assert_eq!(r.by_key["a"].points[2].leader.as_deref(), Some("n1"));
        assert_eq!(r.by_key["b"].offline, vec![(5_000_000_000, 12_000_000_000)]);
        assert_eq!(
            r.by_key["b"].offline_within(0, 8_000_000_000),
            (3_000_000_000, 3_000_000_000)
        );
    }
}
