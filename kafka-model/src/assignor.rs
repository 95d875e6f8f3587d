//! Kafka's client-side partition assignors as pure functions: the group leader computes an
//! assignment with one of them and hands it to the coordinator on sync. The broker's
//! coordinator never runs them itself; the workloads' group members do, and the broker's tests
//! do, so both share this one definition.

use std::collections::BTreeMap;

use crate::TopicPartition;

/// Name of the range assignor (Kafka's `RangeAssignor`, protocol name `range`).
pub const RANGE: &str = "range";
/// Name of the round-robin assignor (Kafka's `RoundRobinAssignor`, protocol name `roundrobin`).
pub const ROUND_ROBIN: &str = "roundrobin";

/// Member id -> its partitions. Every member of the input appears, possibly with none.
pub type Assignment = BTreeMap<String, Vec<TopicPartition>>;

/// Runs the assignor called `name` (`range` or `roundrobin`); `None` for an unknown name.
pub fn assign(
    name: &str,
    subscriptions: &BTreeMap<String, Vec<String>>,
    partition_counts: &BTreeMap<String, u32>,
) -> Option<Assignment> {
    match name {
        RANGE => Some(range(subscriptions, partition_counts)),
        ROUND_ROBIN => Some(round_robin(subscriptions, partition_counts)),
        _ => None,
    }
}

/// Kafka's `RangeAssignor`: per topic, the members subscribed to it in member-id order get
/// consecutive ranges; the first `partitions % members` members get one partition more.
/// Topics missing from `partition_counts` (unknown to the cluster) are skipped.
pub fn range(
    subscriptions: &BTreeMap<String, Vec<String>>,
    partition_counts: &BTreeMap<String, u32>,
) -> Assignment {
    let mut assignment = empty_assignment(subscriptions);
    let mut members_by_topic: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (member, topics) in subscriptions {
        for topic in topics {
            members_by_topic.entry(topic).or_default().push(member);
        }
    }
    for (topic, mut members) in members_by_topic {
        let Some(&count) = partition_counts.get(topic) else {
            continue;
        };
        members.sort_unstable();
        members.dedup();
        let per_member = count / members.len() as u32;
        let extra = count % members.len() as u32;
        for (index, member) in members.iter().enumerate() {
            let index = index as u32;
            let start = per_member * index + index.min(extra);
            let length = per_member + u32::from(index < extra);
            let owned = assignment
                .get_mut(*member)
                .expect("every member is present");
            owned.extend((start..start + length).map(|p| TopicPartition::new(topic, p)));
        }
    }
    assignment
}

/// Kafka's `RoundRobinAssignor`: every partition of every subscribed topic, sorted by topic
/// then partition, dealt in turn to the members (member-id order), skipping members not
/// subscribed to the partition's topic.
pub fn round_robin(
    subscriptions: &BTreeMap<String, Vec<String>>,
    partition_counts: &BTreeMap<String, u32>,
) -> Assignment {
    let mut assignment = empty_assignment(subscriptions);
    let members: Vec<&String> = subscriptions.keys().collect();
    if members.is_empty() {
        return assignment;
    }
    let mut topics: Vec<&String> = subscriptions.values().flatten().collect();
    topics.sort_unstable();
    topics.dedup();
    let mut next = 0usize;
    for topic in topics {
        let Some(&count) = partition_counts.get(topic.as_str()) else {
            continue;
        };
        for partition in 0..count {
            // At least one member subscribes to `topic`, so this finds one within a lap.
            for _ in 0..members.len() {
                let member = members[next % members.len()];
                next += 1;
                if subscriptions[member].contains(topic) {
                    let owned = assignment.get_mut(member).expect("member present");
                    owned.push(TopicPartition::new(topic.as_str(), partition));
                    break;
                }
            }
        }
    }
    assignment
}

fn empty_assignment(subscriptions: &BTreeMap<String, Vec<String>>) -> Assignment {
    subscriptions
        .keys()
        .map(|m| (m.clone(), Vec::new()))
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

    fn counts(entries: &[(&str, u32)]) -> BTreeMap<String, u32> {
        entries.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    fn names(assignment: &Assignment, member: &str) -> Vec<String> {
        assignment[member].iter().map(|tp| tp.to_string()).collect()
    }

    #[test]
    fn range_gives_the_first_members_the_extra_partitions() {
        let s = subs(&[("c0", &["t0", "t1"]), ("c1", &["t0", "t1"])]);
        let a = range(&s, &counts(&[("t0", 3), ("t1", 3)]));
        assert_eq!(names(&a, "c0"), ["t0/0", "t0/1", "t1/0", "t1/1"]);
        assert_eq!(names(&a, "c1"), ["t0/2", "t1/2"]);
    }

    #[test]
    fn round_robin_deals_partitions_in_turn() {
        let s = subs(&[("c0", &["t0", "t1"]), ("c1", &["t0", "t1"])]);
        let a = round_robin(&s, &counts(&[("t0", 3), ("t1", 3)]));
        assert_eq!(names(&a, "c0"), ["t0/0", "t0/2", "t1/1"]);
        assert_eq!(names(&a, "c1"), ["t0/1", "t1/0", "t1/2"]);
    }

    #[test]
    fn assignors_respect_subscriptions_and_skip_unknown_topics() {
        let s = subs(&[("a", &["t0"]), ("b", &["t1", "gone"]), ("c", &["t0", "t1"])]);
        let n = counts(&[("t0", 2), ("t1", 2)]);
        for name in [RANGE, ROUND_ROBIN] {
            let a = assign(name, &s, &n).unwrap();
            let mut all: Vec<String> = a.values().flatten().map(|tp| tp.to_string()).collect();
            all.sort();
            assert_eq!(all, ["t0/0", "t0/1", "t1/0", "t1/1"], "{name}: each once");
            assert!(a["a"].iter().all(|tp| tp.topic == "t0"), "{name}");
            assert!(a["b"].iter().all(|tp| tp.topic == "t1"), "{name}");
        }
        assert!(assign("sticky", &s, &n).is_none());
    }

    #[test]
    fn more_members_than_partitions_leaves_some_empty() {
        let s = subs(&[("a", &["t0"]), ("b", &["t0"]), ("c", &["t0"])]);
        let a = range(&s, &counts(&[("t0", 2)]));
        assert_eq!(names(&a, "a"), ["t0/0"]);
        assert_eq!(names(&a, "b"), ["t0/1"]);
        assert!(a["c"].is_empty());
    }
}
