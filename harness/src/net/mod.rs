//! Network faults: partitions as grudges, built by pure functions, applied by [`rules`].
//!
//! A grudge maps a node to the nodes whose traffic it drops (Jepsen's term): `{"n1": ["n2"]}`
//! means packets from n2 never reach n1. A complete partition lists both directions. The
//! pseudo-node [`CLIENT`] stands for the harness host, so clients can be cut from a node.
//!
//! Builders take node lists in the order the caller wants (the nemesis shuffles with the run's
//! seeded RNG), so they stay pure and deterministic.

pub mod rules;

use crate::control::{Result, CONTROLLER};
use std::collections::{BTreeMap, BTreeSet};

/// Node -> nodes whose packets it drops.
pub type Grudge = BTreeMap<String, BTreeSet<String>>;

/// The pseudo-node for the harness host (where clients run) in a grudge.
pub const CLIENT: &str = "client";

/// Applies and heals network faults on a cluster.
pub trait Net: Send + Sync {
    /// Replaces the current faults by `grudge` (heals first, so grudges do not stack).
    fn partition(&self, grudge: &Grudge) -> Result<()>;

    /// Removes every rule Tidewater added; touches no other rule.
    fn heal(&self) -> Result<()>;

    /// The grudge in force (empty when healed).
    fn current(&self) -> Grudge;
}

/// A complete partition: every node drops every node of the other components.
pub fn complete(components: &[Vec<String>]) -> Grudge {
    let mut grudge = Grudge::new();
    for (i, component) in components.iter().enumerate() {
        let others: BTreeSet<String> = components
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .flat_map(|(_, c)| c.iter().cloned())
            .collect();
        if others.is_empty() {
            continue;
        }
        for node in component {
            grudge
                .entry(node.clone())
                .or_default()
                .extend(others.iter().cloned());
        }
    }
    grudge
}

/// Cuts `targets` (together, as one component) from every other node.
pub fn isolate(nodes: &[String], targets: &[String]) -> Grudge {
    let rest: Vec<String> = nodes
        .iter()
        .filter(|n| !targets.contains(n))
        .cloned()
        .collect();
    complete(&[targets.to_vec(), rest])
}

/// Cuts the leader of a partition (as found in the metadata) from every other node; `None`
/// when the partition has no leader to isolate.
pub fn isolate_leader(nodes: &[String], leader: Option<&str>) -> Option<Grudge> {
    let leader = leader.filter(|l| nodes.iter().any(|n| n == l))?;
    Some(isolate(nodes, &[leader.to_string()]))
}

/// Cuts the controller, `c1`, from every broker.
pub fn isolate_controller(nodes: &[String]) -> Grudge {
    isolate(nodes, &[CONTROLLER.to_string()])
}

/// Splits the nodes into the first `len / 2` and the rest: a minority and a majority for an
/// odd count, two equal halves (neither a majority) for an even one.
pub fn halves(nodes: &[String]) -> Grudge {
    let (minority, majority) = nodes.split_at(nodes.len() / 2);
    complete(&[minority.to_vec(), majority.to_vec()])
}

/// Every node sees a majority (itself and its ring neighbours), but no two nodes see the same
/// majority: the nodes are placed on a ring in the given order.
///
/// With an even majority size the view leans one way round the ring, so the grudge may be
/// asymmetric; that is intended, as in Jepsen's `majorities-ring`.
pub fn majorities_ring(nodes: &[String]) -> Grudge {
    let n = nodes.len();
    let majority = n / 2 + 1;
    let behind = (majority - 1) / 2;
    let mut grudge = Grudge::new();
    for (i, node) in nodes.iter().enumerate() {
        let visible: BTreeSet<usize> = (0..majority).map(|d| (i + n - behind + d) % n).collect();
        let dropped: BTreeSet<String> = (0..n)
            .filter(|j| !visible.contains(j))
            .map(|j| nodes[j].clone())
            .collect();
        if !dropped.is_empty() {
            grudge.insert(node.clone(), dropped);
        }
    }
    grudge
}

/// Two halves that only the middle node connects: it sees everyone, the halves do not see
/// each other.
pub fn bridge(nodes: &[String]) -> Grudge {
    let middle = nodes.len() / 2;
    let left = nodes[..middle].to_vec();
    let right = nodes[middle + 1..].to_vec();
    complete(&[left, right])
}

/// Cuts the harness host (clients) from each of `targets`: the node drops the host's packets,
/// so no client connection reaches it, while its peers still do.
pub fn cut_clients(targets: &[String]) -> Grudge {
    targets
        .iter()
        .map(|t| (t.clone(), BTreeSet::from([CLIENT.to_string()])))
        .collect()
}

/// Merges two grudges (the union of what each node drops).
pub fn merge(mut a: Grudge, b: &Grudge) -> Grudge {
    for (node, dropped) in b {
        a.entry(node.clone())
            .or_default()
            .extend(dropped.iter().cloned());
    }
    a.retain(|_, d| !d.is_empty());
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    fn set(xs: &[&str]) -> BTreeSet<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn isolating_one_node_cuts_it_both_ways_and_leaves_the_rest_connected() {
        let g = isolate(&names(&["c1", "n1", "n2", "n3"]), &names(&["n2"]));
        assert_eq!(g["n2"], set(&["c1", "n1", "n3"]));
        assert_eq!(g["n1"], set(&["n2"]));
        assert_eq!(g["c1"], set(&["n2"]));
        assert_eq!(g["n3"], set(&["n2"]));
    }

    #[test]
    fn the_leader_and_the_controller_are_isolated_like_any_node() {
        let nodes = names(&["c1", "n1", "n2", "n3"]);
        let g = isolate_leader(&nodes, Some("n3")).unwrap();
        assert_eq!(g["n3"], set(&["c1", "n1", "n2"]));
        assert_eq!(isolate_leader(&nodes, None), None);
        assert_eq!(
            isolate_leader(&nodes, Some("n9")),
            None,
            "a leader we do not run"
        );
        assert_eq!(isolate_controller(&nodes)["c1"], set(&["n1", "n2", "n3"]));
    }

    #[test]
    fn halves_put_the_smaller_side_first() {
        let g = halves(&names(&["n1", "n2", "n3", "n4", "n5"]));
        assert_eq!(g["n1"], set(&["n3", "n4", "n5"]));
        assert_eq!(g["n2"], set(&["n3", "n4", "n5"]));
        assert_eq!(g["n5"], set(&["n1", "n2"]));
    }

    #[test]
    fn majorities_ring_gives_every_node_a_distinct_majority() {
        let nodes = names(&["n1", "n2", "n3", "n4", "n5"]);
        let g = majorities_ring(&nodes);
        let mut views = BTreeSet::new();
        for node in &nodes {
            let seen: BTreeSet<String> = nodes
                .iter()
                .filter(|m| !g.get(node).is_some_and(|d| d.contains(*m)))
                .cloned()
                .collect();
            assert_eq!(seen.len(), 3, "{node} sees {seen:?}");
            assert!(seen.contains(node));
            views.insert(seen);
        }
        assert_eq!(views.len(), 5);
        assert_eq!(g["n1"], set(&["n3", "n4"]));
    }

    #[test]
    fn bridge_connects_both_halves_only_through_the_middle_node() {
        let g = bridge(&names(&["n1", "n2", "n3", "n4", "n5"]));
        assert!(!g.contains_key("n3"));
        assert_eq!(g["n1"], set(&["n4", "n5"]));
        assert_eq!(g["n5"], set(&["n1", "n2"]));
    }

    #[test]
    fn cutting_clients_names_the_host_pseudo_node() {
        let g = cut_clients(&names(&["n1"]));
        assert_eq!(g.len(), 1);
        assert_eq!(g["n1"], set(&[CLIENT]));
    }

    #[test]
    fn merge_unions_and_drops_empty_entries() {
        let a = isolate(&names(&["n1", "n2"]), &names(&["n1"]));
        let mut b = cut_clients(&names(&["n2"]));
        b.insert("n3".into(), BTreeSet::new());
        let m = merge(a, &b);
        assert_eq!(m["n2"], set(&["n1", CLIENT]));
        assert!(!m.contains_key("n3"));
    }
}
