//! Property tests of the transaction analysis: histories from a correct model of Kafka's
//! transactional log read at read_committed (`checker::txn_gen`) break no promise, and the
//! transaction counts equal a count straight from the history; aborting a transaction whose
//! records were read, or letting a transaction read its own send, is always flagged with the
//! exact count.

use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use tidewater_workloads::checker::txn_gen::{generate_txns, TxnGenConfig};
use tidewater_workloads::checker::{check, CheckSettings};
use tidewater_workloads::history::{MicroOp, Op, OpType};
use tidewater_workloads::results::{Promise, Validity};

fn config() -> impl Strategy<Value = TxnGenConfig> {
    (
        any::<u64>(),
        20u64..300,
        1u32..5,
        1u32..6,
        1usize..6,
        1usize..6,
        0.0f64..0.3,
        0.0f64..0.1,
    )
        .prop_map(
            |(seed, txns, keys, processes, micro_ops_max, poll_records_max, abort, info)| {
                TxnGenConfig {
                    seed,
                    txns,
                    keys,
                    processes,
                    micro_ops_max,
                    poll_records_max,
                    abort_probability: abort,
                    info_probability: info,
                }
            },
        )
}

/// Values returned by any poll of any op other than `except`.
fn read_values(history: &[Op], except: Option<u64>) -> BTreeSet<i64> {
    let mut out = BTreeSet::new();
    for op in history
        .iter()
        .filter(|op| op.kind != OpType::Invoke && Some(op.index) != except)
    {
        for m in op.micro_ops().unwrap_or_default() {
            if let MicroOp::Poll(reads) = m {
                out.extend(reads.values().flatten().map(|&(_, v)| v));
            }
        }
    }
    out
}

/// The values an op sends, from its micro-ops.
fn sent(op: &Op) -> Vec<(String, Option<u64>, i64)> {
    op.micro_ops()
        .unwrap()
        .into_iter()
        .filter_map(|m| match m {
            MicroOp::Send { key, offset, value } => Some((key, offset, value)),
            MicroOp::Poll(_) => None,
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn correct_transactional_histories_break_no_promise(cfg in config()) {
        let history = generate_txns(cfg);
        let r = check(&history, &CheckSettings::default());
        let counting: Vec<&String> =
            r.anomalies.iter().filter(|(_, a)| a.invalidates || a.breaks_promise).map(|(n, _)| n).collect();
        prop_assert!(counting.is_empty(), "{:?}", r.anomalies);
        // Valid and kept, or unknown where a key saw only aborted sends (nothing was tested
        // there), which `stats.unknown_reasons` says.
        let reasons = r.stats["unknown_reasons"].as_array().cloned().unwrap_or_default();
        prop_assert!(
            reasons.iter().all(|m| {
                let m = m.as_str().unwrap();
                m.starts_with("too little was tested") || m.starts_with("nothing was tested: no send")
            }),
            "{:?}",
            reasons
        );
        let unknown = !reasons.is_empty();
        let expected = if unknown {
            (Validity::Unknown, Promise::Unknown)
        } else {
            (Validity::Valid, Promise::Kept)
        };
        prop_assert_eq!((r.valid, r.promise), expected, "{}", r.stats["unknown_reasons"]);
        let count = |kind: OpType| history.iter().filter(|op| op.f == "txn" && op.kind == kind).count();
        let t = &r.stats["transactions"];
        if history.iter().any(|op| op.f == "txn") {
            prop_assert_eq!(&t["txns"]["committed"], &json!(count(OpType::Ok)));
            prop_assert_eq!(&t["txns"]["aborted"], &json!(count(OpType::Fail)));
            prop_assert_eq!(&t["txns"]["unknown"], &json!(count(OpType::Info)));
        }
    }

    #[test]
    fn aborting_a_transaction_that_was_read_is_an_aborted_read(cfg in config(), pick in any::<prop::sample::Index>()) {
        let mut history = generate_txns(cfg);
        // Committed transactions with a send some other op read.
        let read = read_values(&history, None);
        let candidates: Vec<usize> = history
            .iter()
            .enumerate()
            .filter(|(_, op)| op.kind == OpType::Ok && op.f == "txn")
            .filter(|(_, op)| sent(op).iter().any(|(_, _, v)| read.contains(v)))
            .map(|(i, _)| i)
            .collect();
        prop_assume!(!candidates.is_empty());
        let i = candidates[pick.index(candidates.len())];
        let victim = history[i].clone();
        let invoke: Vec<Value> = victim
            .micro_ops()
            .unwrap()
            .iter()
            .map(MicroOp::to_invoke_value)
            .collect();
        history[i].kind = OpType::Fail;
        history[i].value = json!(invoke);
        let read_elsewhere = read_values(&history, Some(victim.index));
        let expected = sent(&victim).iter().filter(|(_, _, v)| read_elsewhere.contains(v)).count();
        let r = check(&history, &CheckSettings::default());
        let a = &r.anomalies["aborted-read"];
        prop_assert_eq!(a.count as usize, expected);
        prop_assert!(a.breaks_promise);
        prop_assert_eq!(r.valid, Validity::Invalid);
        prop_assert_eq!(r.promise, Promise::Broken);
    }

    #[test]
    fn a_transaction_reading_its_own_send_is_a_precommitted_read(cfg in config(), pick in any::<prop::sample::Index>()) {
        let mut history = generate_txns(cfg);
        let candidates: Vec<usize> = history
            .iter()
            .enumerate()
            .filter(|(_, op)| op.kind == OpType::Ok && op.f == "txn" && !sent(op).is_empty())
            .map(|(i, _)| i)
            .collect();
        prop_assume!(!candidates.is_empty());
        let i = candidates[pick.index(candidates.len())];
        let (key, offset, value) = sent(&history[i])[0].clone();
        let own = json!(["poll", {key: [[offset.unwrap(), value]]}]);
        history[i].value.as_array_mut().unwrap().push(own);
        let r = check(&history, &CheckSettings::default());
        let a = &r.anomalies["precommitted-read"];
        prop_assert_eq!(a.count, 1);
        prop_assert_eq!(&a.examples[0]["value"], &json!(value));
        prop_assert_eq!(&a.examples[0]["own_write"], &json!(true));
        prop_assert_eq!(r.promise, Promise::Broken);
    }
}
