//! Cycles in the dependency graph, found as Elle finds them: Tarjan's strongly connected
//! components first (a cycle lies inside one), then, per component, a shortest cycle of each
//! kind by breadth-first search from the head of one of its edges back to its tail:
//!
//! - `G0`: ww edges only (components of the ww-only graph: exact).
//! - `G1c`: ww and wr edges, at least one wr. Components of the wr-only graph first (a cycle
//!   of wr edges alone, `wr_only`: exact), then of the ww+wr graph for those without one.
//! - `G-single`: exactly one rw edge, the rest ww or wr (Adya's read skew).
//! - `G2`: two or more rw edges (Adya's G2-item; cycles with exactly one are `G-single`).
//!
//! One cycle per component and kind is reported (its count is the number of components
//! showing that kind). For `G-single` and `G2` at most [`TRIES_MAX`] rw edges per component
//! are tried as the cycle's first edge (an rw edge whose ends share a ww+wr component always
//! gives a `G-single`, so those are tried first); every search is linear in the component,
//! so the whole is linear in the graph.

use super::graph::{kind_name, Edge, Graph, ALL, RW, WR, WW};
use super::Txns;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};

/// At most this many candidate first edges per component and kind.
pub const TRIES_MAX: usize = 8;

/// No component: the vertex is alone in its own (a trivial one).
const ALONE: u32 = u32::MAX;

/// One cycle found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// `G0`, `G1c`, `G-single` or `G2`.
    pub name: &'static str,
    /// For `G1c`: made of wr edges alone.
    pub wr_only: bool,
    /// Each step: the vertex it leaves and the edge it takes; the last edge returns to the
    /// first step's vertex.
    pub steps: Vec<(u32, Edge)>,
}

/// Every cycle found, and the shape of the graph's components.
#[derive(Debug, Default)]
pub struct Found {
    /// In the order: G0, G1c, G-single, G2; within each, by component.
    pub cycles: Vec<Cycle>,
    /// Strongly connected components of two or more vertices (all edge kinds).
    pub components: u64,
    /// Vertices in the largest of them.
    pub largest_component: u64,
}

impl Found {
    /// Cycles per name, for `stats.transactions.cycles`.
    pub fn by_name(&self) -> Value {
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        for c in &self.cycles {
            *counts.entry(c.name).or_default() += 1;
        }
        json!(counts)
    }
}

/// The strongly connected components of the graph restricted to edges in `mask`.
#[derive(Debug)]
pub struct Components {
    /// Per vertex: its component's number, or [`ALONE`].
    pub id: Vec<u32>,
    /// The vertices of each component of two or more, by number.
    pub groups: Vec<Vec<u32>>,
}

impl Components {
    /// Tarjan's algorithm, iterative (no recursion, so no stack overflow on long chains).
    pub fn of(g: &Graph, mask: u8) -> Components {
        let n = g.len();
        const UNSEEN: u32 = u32::MAX;
        let mut index = vec![UNSEEN; n];
        let mut low = vec![0u32; n];
        let mut on_stack = vec![false; n];
        let mut stack: Vec<u32> = Vec::new();
        // (vertex, next edge to look at)
        let mut calls: Vec<(u32, usize)> = Vec::new();
        let mut next_index = 0u32;
        let mut id = vec![ALONE; n];
        let mut groups: Vec<Vec<u32>> = Vec::new();
        for root in 0..n as u32 {
            if index[root as usize] != UNSEEN {
                continue;
            }
            index[root as usize] = next_index;
            low[root as usize] = next_index;
            next_index += 1;
            stack.push(root);
            on_stack[root as usize] = true;
            calls.push((root, 0));
            while let Some(&(v, at)) = calls.last() {
                let out = g.out(v);
                let mut descend = None;
                let mut at = at;
                while at < out.len() {
                    let e = out[at];
                    at += 1;
                    if e.kind & mask == 0 {
                        continue;
                    }
                    let w = e.to as usize;
                    if index[w] == UNSEEN {
                        descend = Some(e.to);
                        break;
                    } else if on_stack[w] {
                        low[v as usize] = low[v as usize].min(index[w]);
                    }
                }
                calls.last_mut().expect("not empty").1 = at;
                if let Some(w) = descend {
                    index[w as usize] = next_index;
                    low[w as usize] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w as usize] = true;
                    calls.push((w, 0));
                    continue;
                }
                calls.pop();
                if let Some(&(parent, _)) = calls.last() {
                    low[parent as usize] = low[parent as usize].min(low[v as usize]);
                }
                if low[v as usize] == index[v as usize] {
                    let mut members = Vec::new();
                    loop {
                        let w = stack.pop().expect("v is on the stack");
                        on_stack[w as usize] = false;
                        members.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if members.len() > 1 {
                        let number = groups.len() as u32;
                        for &w in &members {
                            id[w as usize] = number;
                        }
                        members.sort_unstable();
                        groups.push(members);
                    }
                }
            }
        }
        Components { id, groups }
    }

    /// True when `a` and `b` lie in one component of two or more.
    fn together(&self, a: u32, b: u32) -> bool {
        let id = self.id[a as usize];
        id != ALONE && id == self.id[b as usize]
    }
}

/// Reusable breadth-first search state over (vertex, layer) pairs: layer 1 once the path
/// took an rw edge, so "at least one rw edge" is a reachability question too.
struct Search {
    /// Per state `2 * vertex + layer`: the state it was reached from and the edge's position
    /// in that vertex's edges, or unseen.
    prev: Vec<(u32, u32)>,
    /// States set in `prev`, to reset them in time proportional to the search.
    touched: Vec<u32>,
    queue: VecDeque<u32>,
}

const UNREACHED: (u32, u32) = (u32::MAX, u32::MAX);

impl Search {
    fn new(n: usize) -> Search {
        Search {
            prev: vec![UNREACHED; 2 * n],
            touched: Vec::new(),
            queue: VecDeque::new(),
        }
    }

    /// A shortest path from `from` to `to` over edges in `mask` whose every vertex
    /// satisfies `within`; with `need_rw`, one that takes at least one rw edge.
    fn path(
        &mut self,
        g: &Graph,
        from: u32,
        to: u32,
        mask: u8,
        need_rw: bool,
        within: impl Fn(u32) -> bool,
    ) -> Option<Vec<(u32, Edge)>> {
        for &s in &self.touched {
            self.prev[s as usize] = UNREACHED;
        }
        self.touched.clear();
        self.queue.clear();
        let start = 2 * from;
        let goal = 2 * to + need_rw as u32;
        self.prev[start as usize] = (start, u32::MAX);
        self.touched.push(start);
        self.queue.push_back(start);
        while let Some(s) = self.queue.pop_front() {
            if s == goal {
                break;
            }
            let (v, layer) = (s / 2, s % 2);
            for (i, e) in g.out(v).iter().enumerate() {
                if e.kind & mask == 0 || !within(e.to) {
                    continue;
                }
                let next_layer = if need_rw && e.kind == RW { 1 } else { layer };
                let t = 2 * e.to + next_layer;
                if self.prev[t as usize] == UNREACHED {
                    self.prev[t as usize] = (s, i as u32);
                    self.touched.push(t);
                    self.queue.push_back(t);
                }
            }
        }
        if self.prev[goal as usize] == UNREACHED {
            return None;
        }
        let mut steps = Vec::new();
        let mut s = goal;
        while s != start {
            let (p, i) = self.prev[s as usize];
            let v = p / 2;
            steps.push((v, g.out(v)[i as usize]));
            s = p;
        }
        steps.reverse();
        Some(steps)
    }
}

/// The shortest of the cycles that begin with one of `candidates` (edges `(from, edge)`)
/// and return over `mask` within `within`.
fn shortest(
    g: &Graph,
    search: &mut Search,
    candidates: impl Iterator<Item = (u32, Edge)>,
    mask: u8,
    need_rw: bool,
    within: impl Fn(u32) -> bool + Copy,
) -> Option<Vec<(u32, Edge)>> {
    let mut best: Option<Vec<(u32, Edge)>> = None;
    for (a, e) in candidates.take(TRIES_MAX) {
        let Some(back) = search.path(g, e.to, a, mask, need_rw, within) else {
            continue;
        };
        if best.as_ref().is_some_and(|b| back.len() + 1 >= b.len()) {
            continue;
        }
        let mut cycle = vec![(a, e)];
        cycle.extend(back);
        // The layered search may return a walk through one op twice (an rw edge taken
        // around a shorter cycle); only simple cycles are reported.
        let mut vertices: Vec<u32> = cycle.iter().map(|&(v, _)| v).collect();
        vertices.sort_unstable();
        vertices.dedup();
        if vertices.len() == cycle.len() {
            best = Some(cycle);
        }
    }
    best
}

/// The edges of `kind` from a member of `group` to a member of the same component.
fn internal<'a>(
    g: &'a Graph,
    comps: &'a Components,
    group: &'a [u32],
    kind: u8,
) -> impl Iterator<Item = (u32, Edge)> + 'a {
    group.iter().flat_map(move |&a| {
        g.out(a)
            .iter()
            .filter(move |e| e.kind == kind && comps.together(a, e.to))
            .map(move |&e| (a, e))
    })
}

fn count(cycle: &[(u32, Edge)], kind: u8) -> usize {
    cycle.iter().filter(|(_, e)| e.kind == kind).count()
}

/// Finds the cycles of every kind, one per component and kind.
pub fn search(g: &Graph) -> Found {
    let all = Components::of(g, ALL);
    let mut found = Found {
        components: all.groups.len() as u64,
        largest_component: all.groups.iter().map(Vec::len).max().unwrap_or(0) as u64,
        ..Found::default()
    };
    if all.groups.is_empty() {
        return found;
    }
    let mut search = Search::new(g.len());
    let push =
        |found: &mut Found, name: &'static str, wr_only: bool, steps: Option<Vec<(u32, Edge)>>| {
            if let Some(steps) = steps {
                found.cycles.push(Cycle {
                    name,
                    wr_only,
                    steps,
                });
            }
        };
    let ww = Components::of(g, WW);
    for (number, group) in ww.groups.iter().enumerate() {
        let within = |v: u32| ww.id[v as usize] == number as u32;
        let c = shortest(
            g,
            &mut search,
            internal(g, &ww, group, WW),
            WW,
            false,
            within,
        );
        push(&mut found, "G0", false, c);
    }
    let wr = Components::of(g, WR);
    for (number, group) in wr.groups.iter().enumerate() {
        let within = |v: u32| wr.id[v as usize] == number as u32;
        let c = shortest(
            g,
            &mut search,
            internal(g, &wr, group, WR),
            WR,
            false,
            within,
        );
        push(&mut found, "G1c", true, c);
    }
    let wwwr = Components::of(g, WW | WR);
    for (number, group) in wwwr.groups.iter().enumerate() {
        // A component holding a cycle of wr edges alone was reported as one.
        if group.iter().any(|&v| wr.id[v as usize] != ALONE) {
            continue;
        }
        let within = |v: u32| wwwr.id[v as usize] == number as u32;
        let candidates = internal(g, &wwwr, group, WR);
        let c = shortest(g, &mut search, candidates, WW | WR, false, within);
        push(&mut found, "G1c", false, c);
    }
    for (number, group) in all.groups.iter().enumerate() {
        let within = |v: u32| all.id[v as usize] == number as u32;
        // An rw edge whose ends share a ww+wr component closes a G-single for sure.
        let wwwr = &wwwr;
        let sure = group.iter().flat_map(|&a| {
            g.out(a)
                .iter()
                .filter(move |e| e.kind == RW && wwwr.together(a, e.to))
                .map(move |&e| (a, e))
        });
        let mut single = shortest(g, &mut search, sure, WW | WR, false, within);
        if single.is_none() {
            let candidates = internal(g, &all, group, RW);
            single = shortest(g, &mut search, candidates, WW | WR, false, within);
        }
        push(&mut found, "G-single", false, single);
        let candidates = internal(g, &all, group, RW);
        let g2 = shortest(g, &mut search, candidates, ALL, true, within);
        debug_assert!(g2.as_ref().is_none_or(|c| count(c, RW) >= 2));
        push(&mut found, "G2", false, g2);
    }
    found
}

/// A cycle as its example shows it: the ops in order, and each step with its edge kind, key,
/// values and one sentence.
pub fn describe(cycle: &Cycle, txns: &Txns, key_names: &[&str]) -> Value {
    let ops = txns.ops();
    let name = |v: u32| ops[v as usize].index();
    let mut edges: BTreeMap<&str, u64> = BTreeMap::new();
    let steps: Vec<Value> = cycle
        .steps
        .iter()
        .map(|&(from, e)| {
            let kind = kind_name(e.kind);
            *edges.entry(kind).or_default() += 1;
            let key = key_names[e.key as usize];
            let (a, b) = (name(from), name(e.to));
            let explanation = match e.kind {
                WW => format!(
                    "op {a} sent {} to {key}; op {b} sent {}, the next value of {key}",
                    e.a, e.b
                ),
                WR => format!("op {a} sent {} to {key}, which op {b} polled", e.a),
                _ => format!(
                    "op {a}'s last read of {key} was {}; op {b} sent {}, the next value of {key}",
                    e.a, e.b
                ),
            };
            match e.kind {
                WR => json!({"from": a, "to": b, "kind": kind, "key": key, "value": e.a,
                             "explanation": explanation}),
                _ => json!({"from": a, "to": b, "kind": kind, "key": key, "values": [e.a, e.b],
                            "explanation": explanation}),
            }
        })
        .collect();
    let cycle_ops: Vec<Value> = cycle
        .steps
        .iter()
        .map(|&(v, _)| ops[v as usize].describe())
        .collect();
    let mut example = json!({"ops": cycle_ops, "steps": steps, "edges": edges});
    if cycle.name == "G1c" {
        example["wr_only"] = json!(cycle.wr_only);
    }
    example
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(to: u32, kind: u8) -> Edge {
        Edge {
            to,
            kind,
            key: 0,
            a: 0,
            b: 0,
        }
    }

    fn graph(n: usize, edges: &[(u32, u32, u8)]) -> Graph {
        let raw = edges.iter().map(|&(a, b, k)| (a, edge(b, k))).collect();
        Graph::from_edges(n, raw, n)
    }

    fn names(found: &Found) -> Vec<(&'static str, usize)> {
        found
            .cycles
            .iter()
            .map(|c| (c.name, c.steps.len()))
            .collect()
    }

    #[test]
    fn tarjan_finds_components_of_two_or_more() {
        // 0 <-> 1, 2 -> 3 -> 4 -> 2, 5 alone, 1 -> 2 joins nothing.
        let g = graph(
            6,
            &[
                (0, 1, WW),
                (1, 0, WW),
                (1, 2, WW),
                (2, 3, WW),
                (3, 4, WW),
                (4, 2, WW),
            ],
        );
        let c = Components::of(&g, ALL);
        assert_eq!(c.groups.len(), 2);
        let mut groups = c.groups.clone();
        groups.sort();
        assert_eq!(groups, vec![vec![0, 1], vec![2, 3, 4]]);
        assert_eq!(c.id[5], ALONE);
        // Restricted to wr edges, nothing is connected.
        assert!(Components::of(&g, WR).groups.is_empty());
    }

    #[test]
    fn each_kind_is_classified_by_its_edges() {
        // G0: 0 ww 1 ww 0. G1c (wr only): 2 wr 3 wr 2. G1c with ww: 4 ww 5 wr 4.
        // G-single: 6 rw 7 wr 6. G2: 8 rw 9 rw 8.
        let g = graph(
            10,
            &[
                (0, 1, WW),
                (1, 0, WW),
                (2, 3, WR),
                (3, 2, WR),
                (4, 5, WW),
                (5, 4, WR),
                (6, 7, RW),
                (7, 6, WR),
                (8, 9, RW),
                (9, 8, RW),
            ],
        );
        let found = search(&g);
        assert_eq!(
            names(&found),
            vec![
                ("G0", 2),
                ("G1c", 2),
                ("G1c", 2),
                ("G-single", 2),
                ("G2", 2)
            ]
        );
        let wr_only: Vec<bool> = found
            .cycles
            .iter()
            .filter(|c| c.name == "G1c")
            .map(|c| c.wr_only)
            .collect();
        assert_eq!(wr_only, vec![true, false]);
        assert_eq!(found.components, 5);
    }

    #[test]
    fn a_chain_without_a_way_back_has_no_cycle() {
        let g = graph(4, &[(0, 1, WW), (1, 2, WR), (2, 3, RW), (0, 3, RW)]);
        let found = search(&g);
        assert!(found.cycles.is_empty());
        assert_eq!(found.components, 0);
    }

    #[test]
    fn the_shortest_cycle_through_a_component_is_reported() {
        // A long way back 1 -> 2 -> 3 -> 0 and a short one 1 -> 0, all ww.
        let g = graph(
            4,
            &[(0, 1, WW), (1, 2, WW), (2, 3, WW), (3, 0, WW), (1, 0, WW)],
        );
        let found = search(&g);
        assert_eq!(names(&found), vec![("G0", 2)]);
    }

    #[test]
    fn g2_needs_two_rw_edges_and_g_single_exactly_one() {
        // 0 rw 1 ww 2 rw 0: two rw edges, no way back without rw: G2 only.
        let g = graph(3, &[(0, 1, RW), (1, 2, WW), (2, 0, RW)]);
        let found = search(&g);
        assert_eq!(names(&found), vec![("G2", 3)]);
        assert_eq!(count(&found.cycles[0].steps, RW), 2);
        // Adding 1 wr 0 makes 0 rw 1 wr 0 a G-single; the G2 remains.
        let g = graph(3, &[(0, 1, RW), (1, 2, WW), (2, 0, RW), (1, 0, WR)]);
        let found = search(&g);
        assert_eq!(names(&found), vec![("G-single", 2), ("G2", 3)]);
    }

    #[test]
    fn a_long_chain_does_not_overflow_the_stack() {
        let n = 200_000u32;
        let mut edges: Vec<(u32, u32, u8)> = (0..n - 1).map(|v| (v, v + 1, WW)).collect();
        edges.push((n - 1, 0, WR));
        let g = graph(n as usize, &edges);
        let found = search(&g);
        assert_eq!(names(&found), vec![("G1c", n as usize)]);
        assert_eq!(found.largest_component, n as u64);
    }
}
