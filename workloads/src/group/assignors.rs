//! The assignors as the group's leader member runs them (client-side assignment, as in Kafka):
//! the shared model's definitions (`tidewater_kafka_model::assignor`, the same the broker
//! names), with the assignment given as history keys (`topic/partition`).

use std::collections::BTreeMap;

use tidewater_kafka_model::assignor::{self, Assignment, ROUND_ROBIN};

use crate::history::Key;

/// Kafka's `RangeAssignor` over keys: per topic, members in id order get consecutive ranges,
/// the first `partitions % members` one more.
pub fn range(
    subscriptions: &BTreeMap<String, Vec<String>>,
    counts: &BTreeMap<String, u32>,
) -> BTreeMap<String, Vec<Key>> {
    keys_of(assignor::range(subscriptions, counts))
}

/// Kafka's `RoundRobinAssignor` over keys: partitions sorted by topic then number, dealt in
/// turn to the members in id order, skipping members not subscribed to the topic.
pub fn round_robin(
    subscriptions: &BTreeMap<String, Vec<String>>,
    counts: &BTreeMap<String, u32>,
) -> BTreeMap<String, Vec<Key>> {
    keys_of(assignor::round_robin(subscriptions, counts))
}

/// The assignment of the assignor called `name`: `roundrobin`, or `range` for any other name
/// (the settings' default).
pub(crate) fn assign(
    name: &str,
    subscriptions: &BTreeMap<String, Vec<String>>,
    counts: &BTreeMap<String, u32>,
) -> BTreeMap<String, Vec<Key>> {
    match name {
        ROUND_ROBIN => round_robin(subscriptions, counts),
        _ => range(subscriptions, counts),
    }
}

fn keys_of(assignment: Assignment) -> BTreeMap<String, Vec<Key>> {
    assignment
        .into_iter()
        .map(|(member, partitions)| (member, partitions.iter().map(|tp| tp.to_string()).collect()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(entries: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        entries
            .iter()
            .map(|(m, ts)| (m.to_string(), ts.iter().map(|t| t.to_string()).collect()))
            .collect()
    }

    #[test]
    fn assignors_match_kafkas() {
        let s = subs(&[("c0", &["t0", "t1"]), ("c1", &["t0", "t1"])]);
        let counts = BTreeMap::from([("t0".to_string(), 3), ("t1".to_string(), 3)]);
        let r = range(&s, &counts);
        assert_eq!(r["c0"], ["t0/0", "t0/1", "t1/0", "t1/1"]);
        assert_eq!(r["c1"], ["t0/2", "t1/2"]);
        let rr = round_robin(&s, &counts);
        assert_eq!(rr["c0"], ["t0/0", "t0/2", "t1/1"]);
        assert_eq!(rr["c1"], ["t0/1", "t1/0", "t1/2"]);
    }
}
