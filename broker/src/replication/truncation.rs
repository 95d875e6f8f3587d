//! Follower truncation by OffsetsForLeaderEpoch (KIP-101, with KIP-279's rule), as a pure
//! decision over the follower's epoch cache and the leader's answer.
//!
//! The follower asks the leader for the end offset of its latest epoch `E`. The leader answers
//! with the largest epoch `E' <= E` it knows and the offset where `E'` ends in its log
//! (`LeaderEpochFileCache.endOffsetFor`). Then (`AbstractFetcherThread.getOffsetTruncationState`):
//!
//! - if the follower knows `E'` too, it truncates to `min(its own end of E', leader's end of
//!   E', its LEO)` and is done;
//! - if it does not know `E'` (KIP-279: the leader skipped epochs the follower has), it
//!   truncates to the end of its largest epoch below `E'` and asks again with its new latest
//!   epoch;
//! - if the leader knows no epoch at all at or below `E`, Kafka falls back to the follower's
//!   high watermark.
//!
//! Never to the HW otherwise: truncating to the HW loses committed records when the follower's
//! HW lagged the leader's (the KIP-101 scenario). That old behaviour is kept only behind
//! `tidewater.unsafe.truncate.to.hw.enable`.

/// The outcome of one round of the truncation protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncation {
    /// Truncate the log to this offset (records at or above it are removed).
    pub offset: u64,
    /// False when another OffsetsForLeaderEpoch round is needed (KIP-279).
    pub completed: bool,
}

/// One round: `leader_answer` is the leader's `(epoch, end_offset)` for the follower's latest
/// epoch, or `None` when the leader knows no epoch at or below it; `local_end_for` is the
/// follower's own `end_offset_for_epoch`.
pub fn truncation_round(
    leader_answer: Option<(u32, u64)>,
    local_end_for: impl Fn(u32) -> Option<(u32, u64)>,
    log_end_offset: u64,
    high_watermark: u64,
) -> Truncation {
    let Some((leader_epoch, leader_end_offset)) = leader_answer else {
        return Truncation {
            offset: high_watermark.min(log_end_offset),
            completed: true,
        };
    };
    match local_end_for(leader_epoch) {
        Some((local_epoch, local_end_offset)) if local_epoch != leader_epoch => Truncation {
            offset: local_end_offset.min(log_end_offset),
            completed: false,
        },
        Some((_, local_end_offset)) => Truncation {
            offset: local_end_offset.min(leader_end_offset).min(log_end_offset),
            completed: true,
        },
        // The follower has no epoch at or below the leader's: everything the leader's epoch
        // ended before is safe to keep, nothing after it.
        None => Truncation {
            offset: leader_end_offset.min(log_end_offset),
            completed: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An epoch cache as `(epoch, start_offset)` entries with the given LEO, answering like
    /// `LeaderEpochCache::end_offset_for`.
    fn cache(entries: &'static [(u32, u64)], leo: u64) -> impl Fn(u32) -> Option<(u32, u64)> {
        move |requested| {
            let idx = entries.partition_point(|e| e.0 <= requested);
            let floor = entries[..idx].last()?;
            Some((floor.0, entries.get(idx).map_or(leo, |next| next.1)))
        }
    }

    #[test]
    fn kip101_follower_with_lagging_hw_keeps_committed_records() {
        // Follower has 0..2 from epoch 0, HW 1 (it had not learnt the HW 2 yet). The leader
        // (epoch 1) answers that epoch 0 ends at 2: the follower keeps offset 1.
        let t = truncation_round(Some((0, 2)), cache(&[(0, 0)], 2), 2, 1);
        assert_eq!(
            t,
            Truncation {
                offset: 2,
                completed: true
            }
        );
    }

    #[test]
    fn divergent_tail_is_removed_at_the_leaders_epoch_end() {
        // The follower wrote 5..8 as leader of epoch 1, which the new leader (epoch 2) never
        // got: the new leader knows epoch 0 up to 5 and answers (0, 5) for epoch 1.
        let t = truncation_round(Some((0, 5)), cache(&[(0, 0), (1, 5)], 8), 8, 5);
        assert_eq!(
            t,
            Truncation {
                offset: 5,
                completed: true
            }
        );
    }

    #[test]
    fn kip279_unknown_epoch_truncates_in_rounds() {
        // Follower knows epochs 0 (0..4) and 2 (4..9); the leader answers epoch 1 ending at 6.
        // The follower does not know epoch 1: it truncates to the end of epoch 0 (4) and asks
        // again.
        let t = truncation_round(Some((1, 6)), cache(&[(0, 0), (2, 4)], 9), 9, 3);
        assert_eq!(
            t,
            Truncation {
                offset: 4,
                completed: false
            }
        );
    }

    #[test]
    fn leader_without_any_epoch_falls_back_to_the_hw() {
        let t = truncation_round(None, cache(&[(3, 0)], 9), 9, 4);
        assert_eq!(
            t,
            Truncation {
                offset: 4,
                completed: true
            }
        );
    }

    #[test]
    fn never_truncates_above_the_log_end() {
        let t = truncation_round(Some((0, 50)), cache(&[(0, 0)], 7), 7, 7);
        assert_eq!(
            t,
            Truncation {
                offset: 7,
                completed: true
            }
        );
        let t = truncation_round(Some((4, 50)), cache(&[(5, 0)], 7), 7, 2);
        assert_eq!(
            t,
            Truncation {
                offset: 7,
                completed: true
            },
            "no local epoch <= 4"
        );
    }
}
