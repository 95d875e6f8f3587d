//! Reads of transactions that Kafka's read_committed isolation rules out, or that show a part
//! of one transaction:
//!
//! - `precommitted-read`: a read of a transaction's record before the transaction committed,
//!   by real time. Either the transaction read its own send (Jepsen's definition: it
//!   commits only after its last micro-op; found while streaming, in `Txns::read`), or the
//!   read completed before the transaction was even invoked (here).
//! - `intermediate-read` (Adya's G1b, in Jepsen's Kafka meaning): an ok op whose last read
//!   of a key is a value that a transaction sent to that key before another value of its
//!   own there: the reader saw part of the transaction's writes to the key and stopped.

use super::super::found::Findings;
use super::super::{Checker, NONE};
use super::Function;
use crate::history::Val;
use serde_json::{json, Value};

/// `precommitted-read` instances read before their transaction's invoke.
pub fn precommitted_before_invoke(c: &Checker, key_names: &[&str], findings: &mut Findings) {
    let txns = &c.txns;
    let mut instances: Vec<(u32, u64, Val, Value)> = c
        .values
        .iter()
        .filter(|(_, s)| {
            s.by_txn
                && s.invoke_op != NONE
                && s.first_read_op != NONE
                && s.first_read_op < s.invoke_op
        })
        .map(|(&value, s)| {
            let writer = txns
                .position(s.invoke_op)
                .map_or(Value::Null, |w| txns.ops()[w].describe());
            let example = json!({"key": key_names[s.first_read_key as usize], "value": value,
                "offset": s.first_read_offset, "read_op": s.first_read_op, "writer": writer,
                "before_invoke": true});
            (s.first_read_key, s.first_read_offset, value, example)
        })
        .collect();
    // Values live in a hash map: sort so that examples do not depend on its order.
    instances.sort_by_key(|&(key, offset, value, _)| (key, offset, value));
    for (_, _, _, example) in instances {
        findings.add("precommitted-read", true, || example);
    }
}

/// `intermediate-read` instances, in the order of the reading ops.
pub fn intermediate(c: &Checker, key_names: &[&str], findings: &mut Findings) {
    let txns = &c.txns;
    let ops = txns.ops();
    for (pos, reader) in ops.iter().enumerate() {
        if reader.ended != super::Ended::Ok {
            continue;
        }
        for &(key, offset, value) in txns.last_reads_of(reader) {
            let Some(w) = c
                .values
                .get(&value)
                .and_then(|s| txns.position(s.invoke_op))
            else {
                continue;
            };
            let writer = &ops[w];
            if w == pos || writer.f != Function::Txn || !writer.in_graph() {
                continue;
            }
            let sent: Vec<Val> = txns
                .writes_of(writer)
                .iter()
                .filter(|&&(k, _)| k == key)
                .map(|&(_, v)| v)
                .collect();
            let Some(at) = sent.iter().position(|&v| v == value) else {
                continue;
            };
            if at + 1 < sent.len() {
                let (read_op, writer) = (reader.index(), writer.describe());
                findings.add("intermediate-read", true, || {
                    json!({"key": key_names[key as usize], "value": value, "offset": offset,
                           "read_op": read_op, "writer": writer, "writer_values": sent})
                });
            }
        }
    }
}
