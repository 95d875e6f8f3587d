//! The consumer-group workload: `group-split-ownership`, `commit-regression` and
//! `group-undelivered`.
//!
//! Format (see `docs/history.md`, "Consumer groups"):
//! - `rebalance`: a member's join/sync completed. Ok value:
//!   `{"group": "g0", "generation": 3, "assignment": ["t0/0", "t0/1"]}`. The process is that
//!   generation's member. Rebalancing is eager: every partition is revoked and positions
//!   restart from the committed offsets, so the process's remembered positions are forgotten.
//! - `commit`: invoke and ok value `[["commit", key, offset], ...]` (offset = the next offset
//!   to read, as in Kafka), for the group the process joined at its last rebalance.
//!
//! Definitions:
//! - `group-split-ownership`: two processes own one key in the same group and generation.
//! - `commit-regression`: an ok commit B for (group, key), invoked after an ok commit A for
//!   the same group and key completed, committed a lower offset than A.
//! - `group-undelivered`: an acknowledged value at an offset below the highest offset its
//!   key's group committed, yet no poll by a member of any group returned it (the group
//!   claims to have consumed past a record it never saw).
//!
//! Figures (not anomalies; at-least-once delivery allows them), in `stats`:
//! - `rebalances`: `rebalance` ops by outcome, their durations (invoke to completion) and a
//!   series `[[completion_ms, duration_ms], ...]` for the report;
//! - `redeliveries`: records an ok poll by a member returned to a group that a member of that
//!   group had already been given (after a rebalance, a crash, or an uncommitted position).

use super::found::Findings;
use super::fxhash::FxHashMap;
use super::watermark::Watermarks;
use crate::history::{OpType, Val};
use serde_json::{json, Value};

/// At most this many points in `stats.rebalances.series`; beyond it every other point is
/// dropped (the count, mean and max still cover every rebalance).
pub const REBALANCE_SERIES_MAX: usize = 2_000;

/// Counts and durations of `rebalance` ops.
#[derive(Debug, Default)]
struct RebalanceStats {
    /// Completions by type: ok, fail, info.
    by_kind: [u64; 3],
    duration_ms_sum: u64,
    duration_ms_max: u64,
    /// `[completion_ms, duration_ms]`, thinned to [`REBALANCE_SERIES_MAX`] points.
    series: Vec<[u64; 2]>,
    /// Keep every `stride`-th rebalance in the series.
    stride: u64,
}

/// Group state across the history.
#[derive(Debug, Default)]
pub struct Groups {
    /// Group name -> id.
    ids: FxHashMap<String, u32>,
    /// Group names by id.
    names: Vec<String>,
    /// The group each process joined at its last rebalance.
    member_of: FxHashMap<u64, u32>,
    /// (group, generation, key) -> (owning process, rebalance op).
    owners: FxHashMap<(u32, u64, u32), (u64, u64)>,
    /// (group, key) -> dense id for the commit running maxima.
    commit_ids: FxHashMap<(u32, u32), u32>,
    /// Dense id -> (group, key).
    commit_keys: Vec<(u32, u32)>,
    /// Running maximum committed offset per (group, key); regressions are commit
    /// regressions. Reuses the high-watermark logic: same definition, other numbers.
    commits: Watermarks,
    /// Highest committed offset per (group, key) by dense id.
    committed_max: Vec<u64>,
    rebalances: RebalanceStats,
    /// (group, value) -> times an ok poll by a member of the group returned it.
    deliveries: FxHashMap<(u32, Val), u32>,
    /// Deliveries beyond the first of a value to its group.
    redeliveries: u64,
}

/// A parsed `rebalance` completion.
pub struct Rebalance<'a> {
    /// The group's name.
    pub group: &'a str,
    /// The generation the member joined.
    pub generation: u64,
    /// The keys assigned to the member.
    pub assignment: Vec<&'a str>,
}

/// Parses a `rebalance` ok value; `None` when malformed.
pub fn parse_rebalance(v: &Value) -> Option<Rebalance<'_>> {
    Some(Rebalance {
        group: v.get("group")?.as_str()?,
        generation: v.get("generation")?.as_u64()?,
        assignment: v
            .get("assignment")?
            .as_array()?
            .iter()
            .map(Value::as_str)
            .collect::<Option<Vec<_>>>()?,
    })
}

impl Groups {
    /// How many groups were seen.
    pub fn group_count(&self) -> usize {
        self.names.len()
    }

    fn group_id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }

    /// True when `process` is a group member (its reads count as deliveries).
    pub fn is_member(&self, process: u64) -> bool {
        self.member_of.contains_key(&process)
    }

    /// A `rebalance` op completed (any type), invoked at `invoke_ns` and completed at `end_ns`.
    pub fn rebalance_ended(&mut self, kind: OpType, invoke_ns: u64, end_ns: u64) {
        let r = &mut self.rebalances;
        let slot = match kind {
            OpType::Ok => 0,
            OpType::Fail => 1,
            _ => 2,
        };
        r.by_kind[slot] += 1;
        let duration_ms = end_ns.saturating_sub(invoke_ns) / 1_000_000;
        r.duration_ms_sum += duration_ms;
        r.duration_ms_max = r.duration_ms_max.max(duration_ms);
        let n = r.by_kind.iter().sum::<u64>() - 1;
        r.stride = r.stride.max(1);
        if n % r.stride == 0 {
            r.series.push([end_ns / 1_000_000, duration_ms]);
            if r.series.len() > REBALANCE_SERIES_MAX {
                let mut i = 0;
                r.series.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                r.stride *= 2;
            }
        }
    }

    /// Why the group part of the history tested nothing: rebalances were tried and none
    /// completed, so no group ever formed and none of the group checks had a member to
    /// judge. `None` when no rebalance was tried (not a group run) or one completed.
    pub fn untested_reason(&self) -> Option<String> {
        let [ok, fail, info] = self.rebalances.by_kind;
        (ok == 0 && fail + info > 0).then(|| {
            format!(
                "nothing of the groups was tested: no rebalance completed ({fail} failed, \
                 {info} indeterminate), so no group formed"
            )
        })
    }

    /// `stats.rebalances`.
    pub fn rebalance_stats(&self) -> Value {
        let r = &self.rebalances;
        let total: u64 = r.by_kind.iter().sum();
        json!({
            "count": total, "ok": r.by_kind[0], "fail": r.by_kind[1], "info": r.by_kind[2],
            "duration_ms_mean": if total == 0 { 0.0 } else { r.duration_ms_sum as f64 / total as f64 },
            "duration_ms_max": r.duration_ms_max,
            "series": r.series,
        })
    }

    /// An ok poll by member `process` returned `value`.
    pub fn deliver(&mut self, process: u64, value: Val) {
        let Some(&g) = self.member_of.get(&process) else {
            return;
        };
        let n = self.deliveries.entry((g, value)).or_insert(0);
        *n += 1;
        if *n > 1 {
            self.redeliveries += 1;
        }
    }

    /// `stats.redeliveries`.
    pub fn redelivery_stats(&self) -> Value {
        let records = self.deliveries.values().filter(|&&n| n > 1).count();
        json!({
            "delivered": self.deliveries.len(),
            "redelivered_records": records,
            "redeliveries": self.redeliveries,
        })
    }

    /// A rebalance completed: `process` owns `keys` (interned, with names) in the generation.
    pub fn rebalance(
        &mut self,
        process: u64,
        group: &str,
        generation: u64,
        keys: &[(u32, &str)],
        op: u64,
        findings: &mut Findings,
    ) {
        let g = self.group_id(group);
        self.member_of.insert(process, g);
        for &(key, name) in keys {
            let (owner, owner_op) = *self
                .owners
                .entry((g, generation, key))
                .or_insert((process, op));
            if owner != process {
                findings.add("group-split-ownership", true, || {
                    json!({"group": group, "generation": generation, "key": name,
                           "processes": [owner, process], "ops": [owner_op, op]})
                });
            }
        }
    }

    /// An ok commit of `offset` on `key` by `process`, invoked at `invoke_op`, completed at `op`.
    #[allow(clippy::too_many_arguments)]
    pub fn commit(
        &mut self,
        process: u64,
        key: u32,
        key_name: &str,
        offset: u64,
        invoke_op: u64,
        op: u64,
        findings: &mut Findings,
    ) -> Result<(), String> {
        let Some(&g) = self.member_of.get(&process) else {
            return Err(format!(
                "op {op}: process {process} commits without having joined a group"
            ));
        };
        let next = self.commit_keys.len() as u32;
        let id = *self.commit_ids.entry((g, key)).or_insert(next);
        if id == next {
            self.commit_keys.push((g, key));
            self.committed_max.push(0);
        }
        let before = self.commits.regressions.len();
        self.commits.observe(id, invoke_op, op, offset);
        let max = &mut self.committed_max[id as usize];
        *max = (*max).max(offset);
        if let Some(r) = self.commits.regressions.get(before).copied() {
            let group = &self.names[g as usize];
            findings.add("commit-regression", true, || {
                json!({"group": group, "key": key_name, "offsets": [r.a_hw, r.b_hw], "ops": [r.a_op, r.b_op]})
            });
        }
        Ok(())
    }

    /// For every interned key below `keys`, the highest offset any group committed on it and
    /// that group's name.
    pub fn committed_by_key(&self, keys: usize) -> Vec<Option<(&str, u64)>> {
        let mut out: Vec<Option<(&str, u64)>> = vec![None; keys];
        for (&(g, key), &max) in self.commit_keys.iter().zip(&self.committed_max) {
            if let Some(slot) = out.get_mut(key as usize) {
                if slot.is_none_or(|(_, m)| max > m) {
                    *slot = Some((&self.names[g as usize], max));
                }
            }
        }
        out
    }
}
