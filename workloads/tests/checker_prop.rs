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
        let r = check(&history, &CheckSettings::default());
        prop_assert!(r.anomalies.is_empty(), "{:#?}", r.anomalies);
        prop_assert_eq!(r.valid, Validity::Valid);
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
            .map(|(i, (p, kind, f, value, fin, hw))| Op {
                index: i as u64,
                time: i as u64 * 1000,
                process: if p == 3 { Process::Nemesis } else { Process::Client(p) },
                kind: kinds[kind as usize],
                f: fs[f as usize].into(),
                value,
                node: None,
                high_watermarks: hw.map(|h| BTreeMap::from([("t0/0".to_string(), h)])),
                log_start_offsets: hw.map(|h| BTreeMap::from([("t0/1".to_string(), h)])),
                error: None,
                r#final: fin,
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
        prop_assert!(undelivered.is_some_and(|a| a.violation), "{:#?}", r.anomalies);
        prop_assert_eq!(r.valid, Validity::Invalid);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Unclean elections discard log tails. With unclean election enabled that is expected
    /// (valid), yet every acknowledged value that no read returned, or that the final reads no
    /// longer return, is reported, as lost-write or unseen, at its acknowledged offset; with the
    /// safe settings the run is invalid.
    #[test]
    fn unclean_elections_report_every_unread_acknowledged_write(
        cfg in config(),
        truncation in 0.005f64..0.05,
    ) {
        use std::collections::{BTreeMap, BTreeSet};
        let cfg = GenConfig { unclean_truncation_probability: truncation, group_members: 0, ..cfg };
        let history = generate(cfg);
        let mut read = BTreeSet::new();
        let mut read_final = BTreeSet::new();
        // Per key, the lowest and highest offset the final reads returned.
        let mut final_span: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for op in history.iter().filter(|op| op.f == "poll" && op.kind == OpType::Ok) {
            for m in op.micro_ops().unwrap() {
                if let tidewater_workloads::history::MicroOp::Poll(recs) = m {
                    read.extend(recs.values().flatten().map(|&(_, v)| v));
                    if op.r#final {
                        read_final.extend(recs.values().flatten().map(|&(_, v)| v));
                        for (key, pairs) in &recs {
                            for &(o, _) in pairs {
                                let span = final_span.entry(key.clone()).or_insert((o, o));
                                *span = (span.0.min(o), span.1.max(o));
                            }
                        }
                    }
                }
            }
        }
        let acked_list = acked(&history);
        let acked_at: BTreeMap<i64, u64> = acked_list.iter().map(|(_, o, v)| (*v, *o)).collect();
        // Unread, or read once but gone from the final reads that covered its offset.
        let gone: BTreeSet<i64> = acked_list
            .iter()
            .filter(|(key, o, v)| {
                !read.contains(v)
                    || (!read_final.contains(v)
                        && final_span.get(key).is_some_and(|&(lo, hi)| lo <= *o && *o <= hi))
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
        prop_assert_eq!(r.valid, Validity::Valid, "{:#?}", r.anomalies);
        let mut reported = BTreeSet::new();
        for name in ["lost-write", "unseen"] {
            for e in r.anomalies.get(name).map(|a| a.examples.as_slice()).unwrap_or_default() {
                let v = e["value"].as_i64().unwrap();
                prop_assert_eq!(e["offset"].as_u64(), acked_at.get(&v).copied(), "{}", e);
                reported.insert(v);
            }
        }
        prop_assert_eq!(&reported, &gone);
        if !gone.is_empty() {
            prop_assert_eq!(check(&history, &CheckSettings::default()).valid, Validity::Invalid);
        }
    }
}
