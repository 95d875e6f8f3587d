//! The dependency graph between ops, from each key's offset order (a partition's log gives
//! its versions an order: offset order), with Jepsen's Kafka definitions:
//!
//! - **ww**: T1 sent v1 to k, T2 sent v2 to k, and v2 is the next value after v1 in k's
//!   offset order.
//! - **wr**: T1 sent v to k and T2 polled v.
//! - **rw**: T1's highest read of k was v1, T2 sent v2 to k, and v2 is the next value after
//!   v1 in k's offset order (T1 did not see T2's write although T2's write came right after
//!   what T1 saw). Values of v1's own writer right after v1 are passed over: a version is
//!   a transaction's writes, so the next version is the next other writer's.
//!
//! The offset order of a key holds the values of committed (or possibly committed) sends:
//! the checker's offset map (ok and proven info sends, and every read) without values whose
//! writer aborted or is unknown. No self-edges. One witness (key and values) per edge.

use super::super::{Checker, NONE};
use super::Txns;
use crate::history::Val;

/// A write-write edge.
pub const WW: u8 = 1;
/// A write-read edge.
pub const WR: u8 = 2;
/// A read-write (anti-dependency) edge.
pub const RW: u8 = 4;
/// Every kind.
pub const ALL: u8 = WW | WR | RW;

/// The name of one edge kind.
pub fn kind_name(kind: u8) -> &'static str {
    match kind {
        WW => "ww",
        WR => "wr",
        _ => "rw",
    }
}

/// One edge out of a vertex, with its witness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// The vertex it points to (a position in the recorded ops).
    pub to: u32,
    /// [`WW`], [`WR`] or [`RW`].
    pub kind: u8,
    /// The key of the witness.
    pub key: u32,
    /// ww: the earlier value; wr: the value read; rw: the last value read.
    pub a: Val,
    /// ww: the next value; wr: the value read; rw: the next value, unseen by the reader.
    pub b: Val,
}

/// The graph in compressed sparse rows: vertex `v`'s edges are `edges[start[v]..start[v+1]]`.
#[derive(Debug, Default)]
pub struct Graph {
    start: Vec<usize>,
    edges: Vec<Edge>,
    /// Vertices that are ops not aborted.
    vertices: usize,
}

impl Graph {
    /// The number of vertex slots (recorded ops, aborted ones included, without edges).
    pub fn len(&self) -> usize {
        self.start.len().saturating_sub(1)
    }

    /// The ops that are vertices: every recorded op that did not abort.
    pub fn vertex_count(&self) -> usize {
        self.vertices
    }

    /// The edges out of `v`.
    pub fn out(&self, v: u32) -> &[Edge] {
        &self.edges[self.start[v as usize]..self.start[v as usize + 1]]
    }

    /// The number of edges of `kind`.
    pub fn edge_count(&self, kind: u8) -> u64 {
        self.edges.iter().filter(|e| e.kind == kind).count() as u64
    }

    /// A graph from `(from, edge)` pairs over `n` vertices (tests and [`build`]).
    pub fn from_edges(n: usize, mut raw: Vec<(u32, Edge)>, vertices: usize) -> Graph {
        raw.sort_unstable_by_key(|&(from, e)| (from, e.to, e.kind));
        raw.dedup_by_key(|&mut (from, e)| (from, e.to, e.kind));
        let mut start = vec![0usize; n + 1];
        for &(from, _) in &raw {
            assert!((from as usize) < n, "edge from vertex {from} of {n}");
            start[from as usize + 1] += 1;
        }
        for v in 0..n {
            start[v + 1] += start[v];
        }
        let edges = raw.into_iter().map(|(_, e)| e).collect();
        Graph {
            start,
            edges,
            vertices,
        }
    }
}

/// The position of the op that sent `value`, if it is a vertex.
fn writer(c: &Checker, txns: &Txns, value: Val) -> Option<u32> {
    let state = c.values.get(&value)?;
    if state.invoke_op == NONE {
        return None;
    }
    let pos = txns.position(state.invoke_op)?;
    txns.ops()[pos].in_graph().then_some(pos as u32)
}

/// Builds the graph of every op `c` recorded.
pub fn build(c: &Checker) -> Graph {
    let txns = &c.txns;
    let ops = txns.ops();
    // Each key's offset order, restricted to values whose writer is a vertex.
    let orders: Vec<Vec<(u64, Val, u32)>> = c
        .keys
        .iter()
        .map(|k| {
            let mut order: Vec<(u64, Val, u32)> = k
                .at_offset
                .iter()
                .filter_map(|(&offset, &(value, _))| {
                    writer(c, txns, value).map(|w| (offset, value, w))
                })
                .collect();
            order.sort_unstable_by_key(|&(offset, _, _)| offset);
            order
        })
        .collect();
    let mut raw: Vec<(u32, Edge)> = Vec::new();
    for (key, order) in orders.iter().enumerate() {
        for pair in order.windows(2) {
            let ((_, v1, w1), (_, v2, w2)) = (pair[0], pair[1]);
            if w1 != w2 {
                raw.push((
                    w1,
                    Edge {
                        to: w2,
                        kind: WW,
                        key: key as u32,
                        a: v1,
                        b: v2,
                    },
                ));
            }
        }
    }
    for (pos, op) in ops.iter().enumerate() {
        if !op.in_graph() {
            continue;
        }
        let pos = pos as u32;
        for &(writer_invoke, key, value) in txns.read_from_of(op) {
            let Some(w) = txns.position(writer_invoke) else {
                continue;
            };
            if w as u32 != pos && ops[w].in_graph() {
                raw.push((
                    w as u32,
                    Edge {
                        to: pos,
                        kind: WR,
                        key,
                        a: value,
                        b: value,
                    },
                ));
            }
        }
        for &(key, offset, value) in txns.last_reads_of(op) {
            let order = &orders[key as usize];
            // The next version is the next record of another writer: a reader that stopped
            // inside one transaction's records saw that transaction (an intermediate read,
            // reported on its own), not a state before it.
            let read_writer = writer(c, txns, value);
            let mut next = order.partition_point(|&(o, _, _)| o <= offset);
            while order
                .get(next)
                .is_some_and(|&(_, _, w)| Some(w) == read_writer)
            {
                next += 1;
            }
            if let Some(&(_, next_value, w)) = order.get(next) {
                if w != pos {
                    raw.push((
                        pos,
                        Edge {
                            to: w,
                            kind: RW,
                            key,
                            a: value,
                            b: next_value,
                        },
                    ));
                }
            }
        }
    }
    let vertices = ops.iter().filter(|op| op.in_graph()).count();
    Graph::from_edges(ops.len(), raw, vertices)
}
