//! `hw-regression`: an ok op B, invoked after an ok op A completed, saw a lower high watermark
//! on some key than A did.
//!
//! For each key we keep the running maximum of the high watermarks reported by completed ok
//! ops as a step function over the history index (an entry is added only when the maximum
//! grows). When B completes, a binary search finds the maximum among ops that completed
//! before B was invoked. That is O(log n) per observation and never looks at B's
//! concurrent ops, which may legitimately have seen more.

/// One regression: A's high watermark was higher than B's, and A completed before B began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regression {
    /// Interned key.
    pub key: u32,
    /// The op that completed first with the higher watermark.
    pub a_op: u64,
    /// A's high watermark.
    pub a_hw: u64,
    /// The later op.
    pub b_op: u64,
    /// B's (lower) high watermark.
    pub b_hw: u64,
}

/// Running maxima per key and the regressions found.
#[derive(Debug, Default)]
pub struct Watermarks {
    /// Per interned key: (index of the completing op, running maximum high watermark), both
    /// strictly increasing.
    steps: Vec<Vec<(u64, u64)>>,
    /// Every regression found, in history order.
    pub regressions: Vec<Regression>,
}

impl Watermarks {
    /// An ok op invoked at `invoke_index` completed at `op_index` reporting `hw` on `key`.
    pub fn observe(&mut self, key: u32, invoke_index: u64, op_index: u64, hw: u64) {
        let k = key as usize;
        if self.steps.len() <= k {
            self.steps.resize_with(k + 1, Vec::new);
        }
        let steps = &mut self.steps[k];
        // Entries whose completion index is before B's invoke.
        let before = steps.partition_point(|&(done, _)| done < invoke_index);
        if before > 0 {
            let (a_op, a_hw) = steps[before - 1];
            if a_hw > hw {
                self.regressions.push(Regression {
                    key,
                    a_op,
                    a_hw,
                    b_op: op_index,
                    b_hw: hw,
                });
            }
        }
        let grows = steps.last().is_none_or(|&(_, max)| hw > max);
        // Completions arrive in history order, so pushing keeps the index sorted.
        if grows && steps.last().is_none_or(|&(done, _)| done < op_index) {
            steps.push((op_index, hw));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_ops_may_see_less_but_later_ops_may_not() {
        let mut w = Watermarks::default();
        // A: invoked 0, completed 2 with hw 10.
        w.observe(0, 0, 2, 10);
        // B: invoked 1 (before A completed), completed 3 with hw 5: concurrent, fine.
        w.observe(0, 1, 3, 5);
        assert!(w.regressions.is_empty());
        // C: invoked 4 (after A completed), completed 5 with hw 9: regression against A.
        w.observe(0, 4, 5, 9);
        assert_eq!(
            w.regressions,
            vec![Regression {
                key: 0,
                a_op: 2,
                a_hw: 10,
                b_op: 5,
                b_hw: 9
            }]
        );
        // Another key is independent.
        w.observe(1, 6, 7, 1);
        assert_eq!(w.regressions.len(), 1);
    }
}
