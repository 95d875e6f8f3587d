//! Property tests: histories from a correct in-memory log (random concurrency, failed and
//! indeterminate sends, crashed polls, reassignments, final reads) have no anomaly; deleting,
//! reordering or overwriting one acknowledged record in the reads is always flagged.

use proptest::prelude::*;
use serde_json::Value;
use tidewater_workloads::checker::gen::{generate, GenConfig};
use tidewater_workloads::checker::{check, CheckSettings};
use tidewater_workloads::history::{Op, OpType};
use tidewater_workloads::results::Validity;

fn config() -> impl Strategy<Value = GenConfig> {
    (
        any::<u64>(),
        50u64..400,
        1u32..4,
        1u32..5,
        1u32..5,
        1usize..4,
        0.0f64..0.2,
        0.0f64..0.1,
        0u32..3,
    )
        .prop_map(
            |(seed, ops, keys, producers, consumers, sends, info, fail, members)| GenConfig {
                seed,
                ops,
                keys,
                producers,
                consumers,
                group_members: members,
                sends_per_op_max: sends,
                poll_records_max: 6,
                info_probability: info,
                fail_probability: fail,
                reassign_probability: 0.05,
                final_reads: true,
                unclean_truncation_probability: 0.0,
                final_tail_cut_max: 0,
            },
        )
}

/// Every acknowledged (key, offset, value) in the history.
fn acked(history: &[Op]) -> Vec<(String, u64, i64)> {
    let mut out = Vec::new();
    for op in history
        .iter()
        .filter(|op| op.kind == OpType::Ok && op.f == "send")
    {
        for m in op.value.as_array().unwrap() {
            let pair = m[2].as_array().unwrap();
            out.push((
                m[1].as_str().unwrap().to_string(),
                pair[0].as_u64().unwrap(),
                pair[1].as_i64().unwrap(),
            ));
        }
    }
    out
}

/// Applies `f` to every record `[offset, value]` of every poll on `key`.
fn for_each_read(history: &mut [Op], key: &str, mut f: impl FnMut(&mut Vec<Value>)) {
    for op in history
        .iter_mut()
        .filter(|op| op.f == "poll" && op.kind == OpType::Ok)
    {
        for m in op.value.as_array_mut().unwrap() {
            if let Some(recs) = m
                .get_mut(1)
                .and_then(|r| r.get_mut(key))
                .and_then(Value::as_array_mut)
            {
                f(recs);
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Mutation {
    Delete,
    Reorder,
    Overwrite,
}

fn mutate(history: &mut [Op], target: &(String, u64, i64), mutation: Mutation) {
    let (key, offset, value) = target.clone();
    match mutation {
        Mutation::Delete => for_each_read(history, &key, |recs| recs.retain(|r| r[1] != value)),
        Mutation::Overwrite => for_each_read(history, &key, |recs| {
            for r in recs.iter_mut().filter(|r| r[1] == value) {
                r[1] = Value::from(1_000_000_000_000i64);
            }
        }),
        Mutation::Reorder => {
            // Swap the target with the record at the next (or previous) offset in every read.
            let other_offset = if offset == 0 { 1 } else { offset - 1 };
            let mut other = None;
            for_each_read(history, &key, |recs| {
                for r in recs.iter() {
                    if r[0] == other_offset {
                        other = r[1].as_i64();
                    }
                }
            });
            let Some(other) = other else {
                return mutate(history, target, Mutation::Delete);
            };
            for_each_read(history, &key, |recs| {
                for r in recs.iter_mut() {
                    if r[1] == value {
                        r[1] = Value::from(other);
                    } else if r[1] == other {
                        r[1] = Value::from(value);
                    }
                }
            });
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn correct_histories_have_no_anomaly(cfg in config()) {
        let history = generate(cfg);
        // Anomaly-freedom is the point here, not how much a short random history tested: a
        // partition whose few sends all failed would make the default floor say unknown.
        let settings = CheckSettings { min_acked_per_key: 0, ..CheckSettings::default() };
        let r = check(&history, &settings);
        prop_assert!(r.anomalies.is_empty(), "{:#?}", r.anomalies);
        let expected = if r.acknowledged() == 0 { Validity::Unknown } else { Validity::Valid };
        prop_assert_eq!(r.valid, expected, "{:?}", r.stats["unknown_reasons"]);
        prop_assert_eq!(r.stats["final_reads"]["coverage"].as_f64().unwrap_or(1.0), 1.0);
    }

    #[test]
    fn one_corrupted_acknowledged_record_is_always_flagged(
        cfg in config(),
        pick in any::<prop::sample::Index>(),
        mutation in prop_oneof![Just(Mutation::Delete), Just(Mutation::Reorder), Just(Mutation::Overwrite)],
    ) {
        let mut history = generate(cfg);
        let targets = acked(&history);
        prop_assume!(!targets.is_empty());
        let target = pick.get(&targets).clone();
        mutate(&mut history, &target, mutation);
        let r = check(&history, &CheckSettings::default());
        prop_assert_eq!(r.valid, Validity::Invalid, "{:?} of {:?}: {:#?}", mutation, target, r.anomalies);
    }
}

/// Plausible-looking but arbitrary micro-ops and values: offsets and values from small
/// ranges so that collisions (duplicates, conflicts, regressions) are frequent.
fn junk_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![Just("t0/0"), Just("t0/1"), Just("x")].prop_map(Value::from);
    let small = (-2i64..6).prop_map(Value::from);
    let send = (
        key.clone(),
        prop_oneof![
            small.clone(),
            (small.clone(), small.clone()).prop_map(|(o, v)| Value::Array(vec![o, v])),
            Just(Value::Null),
        ],
    )
        .prop_map(|(k, v)| Value::Array(vec!["send".into(), k, v]));
    let recs = prop::collection::vec((small.clone(), small.clone()), 0..4).prop_map(|rs| {
        Value::Array(
            rs.into_iter()
                .map(|(o, v)| Value::Array(vec![o, v]))
                .collect(),
        )
    });
    let poll = (key.clone(), recs).prop_map(|(k, rs)| {
        let mut m = serde_json::Map::new();
        m.insert(k.as_str().unwrap().to_string(), rs);
        Value::Array(vec!["poll".into(), Value::Object(m)])
    });
    let micro = prop_oneof![
        send,
        poll,
        Just(serde_json::json!(["poll"])),
        small.clone(),
        Just(Value::Null)
    ];
    prop_oneof![
        prop::collection::vec(micro, 0..3).prop_map(Value::Array),
        prop::collection::vec(key, 0..3).prop_map(Value::Array),
        small,
        Just(Value::Null),
    ]
}

fn junk_op() -> impl Strategy<Value = (u64, u8, u8, Value, bool, Option<u64>)> {
    (
        0u64..4,
        0u8..4,
        0u8..6,
        junk_value(),
        any::<bool>(),
        prop::option::of(0u64..6),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Checkers never panic: any sequence of odd ops gets a verdict.
    #[test]
    fn arbitrary_histories_never_panic(ops in prop::collection::vec(junk_op(), 0..40)) {
        use std::collections::BTreeMap;
        use tidewater_workloads::history::Process;
        let fs = ["send", "poll", "assign", "subscribe", "txn", "crash"];
        let kinds = [OpType::Invoke, OpType::Ok, OpType::Fail, OpType::Info];
        let history: Vec<Op> = ops
            .into_iter()
            .enumerate()
            .map(|(i, (p, kind, f, value, fin, hw))| {
                let process = if p == 3 { Process::Nemesis } else { Process::Client(p) };
                Op {
                    index: i as u64,
                    time: i as u64 * 1000,
                    high_watermarks: hw.map(|h| BTreeMap::from([("t0/0".to_string(), h)])),
                    log_start_offsets: hw.map(|h| BTreeMap::from([("t0/1".to_string(), h)])),
                    r#final: fin,
                    ..Op::new(process, kinds[kind as usize], fs[f as usize], value)
                }
            })
            .collect();
        let r = check(&history, &CheckSettings::default());
        prop_assert!(r.stats["ops"].as_u64() == Some(history.len() as u64));
        for a in r.anomalies.values() {
            prop_assert!(a.count >= a.examples.len() as u64);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Removing, from every group member's polls, a record the group later committed past is
    /// always flagged as `group-undelivered`.
    #[test]
    fn a_record_committed_past_but_never_delivered_is_flagged(
        cfg in config(),
        members in 1u32..4,
        pick in any::<prop::sample::Index>(),
    ) {
        use std::collections::BTreeSet;
        use tidewater_workloads::history::Process;
        let mut history = generate(GenConfig { group_members: members, ..cfg });
        let member_processes: BTreeSet<Process> =
            history.iter().filter(|op| op.f == "rebalance").map(|op| op.process).collect();
        // (key, committed offset) of every ok commit past offset 0.
        let commits: Vec<(String, u64)> = history
            .iter()
            .filter(|op| op.f == "commit" && op.kind == OpType::Ok)
            .flat_map(|op| op.value.as_array().unwrap().clone())
            .filter_map(|c| Some((c[1].as_str()?.to_string(), c[2].as_u64()?)))
            .filter(|(_, offset)| *offset > 0)
            .collect();
        prop_assume!(!commits.is_empty());
        let (key, committed) = pick.get(&commits).clone();
        let target = committed - 1;
        for op in history
            .iter_mut()
            .filter(|op| op.f == "poll" && op.kind == OpType::Ok && member_processes.contains(&op.process))
        {
            for m in op.value.as_array_mut().unwrap() {
                if let Some(recs) = m.get_mut(1).and_then(|r| r.get_mut(&key)).and_then(Value::as_array_mut) {
                    recs.retain(|r| r[0] != target);
                }
            }
        }
        let r = check(&history, &CheckSettings::default());
        let undelivered = r.anomalies.get("group-undelivered");
        prop_assert!(undelivered.is_some_and(|a| a.breaks_promise && a.invalidates), "{:#?}", r.anomalies);
        prop_assert_eq!(r.valid, Validity::Invalid);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Truncations discard acknowledged records: log tails rewritten by later appends (an
    /// unclean election, a divergent suffix replaced by the new leader's) and tails cut just
    /// before the end, above the final high watermark, after consumers read them. Every
    /// acknowledged value that the final reads did not return is counted exactly once, as
    /// lost-write or unseen at its acknowledged offset, and `stats.lost_acknowledged` equals
    /// their number, counted here straight from the history. The history is invalid
    /// whatever the settings; only the safe settings call it a broken promise.
    #[test]
    fn every_acknowledged_value_absent_from_the_final_reads_is_counted_once(
        cfg in config(),
        truncation in 0.0f64..0.05,
        final_cut in 0usize..6,
    ) {
        use std::collections::{BTreeMap, BTreeSet};
        use tidewater_workloads::results::Promise;
        let cfg = GenConfig {
            unclean_truncation_probability: truncation,
            final_tail_cut_max: final_cut,
            group_members: 0,
            ..cfg
        };
        let history = generate(cfg);
        let mut read_final = BTreeSet::new();
        let mut log_start: BTreeMap<String, u64> = BTreeMap::new();
        for op in history.iter().filter(|op| op.r#final && op.kind == OpType::Ok) {
            for (key, start) in op.log_start_offsets.iter().flatten() {
                let s = log_start.entry(key.clone()).or_default();
                *s = (*s).max(*start);
            }
            for m in op.micro_ops().unwrap_or_default() {
                if let tidewater_workloads::history::MicroOp::Poll(recs) = m {
                    read_final.extend(recs.values().flatten().map(|&(_, v)| v));
                }
            }
        }
        let acked_list = acked(&history);
        let acked_at: BTreeMap<i64, u64> = acked_list.iter().map(|(_, o, v)| (*v, *o)).collect();
        let gone: BTreeSet<i64> = acked_list
            .iter()
            .filter(|(key, o, v)| {
                !read_final.contains(v) && *o >= log_start.get(key).copied().unwrap_or(0)
            })
            .map(|(_, _, v)| *v)
            .collect();

        let unclean = CheckSettings {
            unclean_leader_election_enable: true,
            acks: tidewater_workloads::checker::Acks::One,
            examples_max: usize::MAX,
            ..CheckSettings::default()
        };
        let r = check(&history, &unclean);
        let mut reported = BTreeSet::new();
        for name in ["lost-write", "unseen"] {
            for e in r.anomalies.get(name).map(|a| a.examples.as_slice()).unwrap_or_default() {
                let v = e["value"].as_i64().unwrap();
                prop_assert_eq!(e["offset"].as_u64(), acked_at.get(&v).copied(), "{}", e);
                prop_assert!(reported.insert(v), "{} reported twice", v);
            }
        }
        prop_assert_eq!(&reported, &gone);
        prop_assert_eq!(r.lost_acknowledged(), gone.len() as u64);
        let by_key: u64 = r.stats["lost_acknowledged"]["by_key"]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum();
        prop_assert_eq!(by_key, gone.len() as u64);
        let safe = check(&history, &CheckSettings::default());
        prop_assert_eq!(safe.lost_acknowledged(), gone.len() as u64);
        if gone.is_empty() {
            prop_assert!(!r.anomalies.contains_key("lost-write"), "{:#?}", r.anomalies);
        } else {
            prop_assert_eq!(r.valid, Validity::Invalid);
            // Allowed by these settings: kept, or unknown when the history also fell short of
            // what a run must test (a partition without an acknowledged write); never broken.
            prop_assert_ne!(r.promise, Promise::Broken, "{}", r.promise_reason);
            prop_assert_eq!(safe.valid, Validity::Invalid);
            prop_assert_eq!(safe.promise, Promise::Broken);
        }
    }
}
