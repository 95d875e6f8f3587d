//! Which nodes a fault hits, written as a short string in plans and stored schedules.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// The nodes a step acts on. Random choices are drawn from the nemesis's seeded RNG, and
/// partition-relative ones are looked up in the cluster's metadata when the step runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Named nodes: `n1`, `c1`, `n1,n2`.
    Nodes(Vec<String>),
    /// `one`: one random broker.
    One,
    /// `minority`: a random minority of the brokers (`brokers / 2` of them).
    Minority,
    /// `majority`: a random majority of the brokers (`brokers / 2 + 1`).
    Majority,
    /// `all`: every broker.
    All,
    /// `controller`: the controller node.
    Controller,
    /// `leader:t0/0`: the current leader of a partition.
    Leader(String),
    /// `follower:t0/0`: one random in-sync follower of a partition (any non-leader replica if
    /// the ISR holds only the leader).
    Follower(String),
    /// `isr:t0/0`: every in-sync replica of a partition.
    Isr(String),
    /// `replicas:t0/0`: every replica of a partition.
    Replicas(String),
    /// `@name`: the nodes an earlier step bound with `bind = "name"`.
    Bound(String),
    /// `A+B`: the nodes of both targets (e.g. `controller+follower:t0/0`), each once.
    Union(Vec<Target>),
    /// `A except B`: the nodes of `A` that `B` does not name (e.g. `isr:t0/0 except @old`).
    Except(Box<Target>, Box<Target>),
}

/// A target string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetError(pub String);

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "target {:?}: expected one, minority, majority, all, controller, leader:KEY, \
             follower:KEY, isr:KEY, replicas:KEY, @NAME, or node names such as n1,n2; \
             joined with + (union) or \" except \" (difference)",
            self.0
        )
    }
}

impl std::error::Error for TargetError {}

fn is_node_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some('c' | 'n'))
        && chars.clone().next().is_some()
        && chars.all(|c| c.is_ascii_digit())
}

fn is_key(s: &str) -> bool {
    s.split_once('/').is_some_and(|(t, p)| {
        !t.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Whether a binding name is acceptable: letters, digits, `-` and `_`.
pub fn is_binding_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Target {
    /// The binding names (`@name`) this target refers to, however deeply nested.
    pub fn bindings(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        match self {
            Target::Bound(name) => Box::new(std::iter::once(name.as_str())),
            Target::Union(parts) => Box::new(parts.iter().flat_map(Target::bindings)),
            Target::Except(left, right) => Box::new(left.bindings().chain(right.bindings())),
            _ => Box::new(std::iter::empty()),
        }
    }
}

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(s: &str) -> Result<Target, TargetError> {
        let err = || TargetError(s.to_string());
        // Difference binds loosest, then union: `a+b except c` is `(a+b) except c`.
        if let Some((left, right)) = s.split_once(" except ") {
            let left = left.trim().parse().map_err(|_| err())?;
            let right = right.trim().parse().map_err(|_| err())?;
            return Ok(Target::Except(Box::new(left), Box::new(right)));
        }
        if s.contains('+') {
            let parts: Result<Vec<Target>, _> =
                s.split('+').map(|p| p.trim().parse::<Target>()).collect();
            return parts.map(Target::Union).map_err(|_| err());
        }
        let keyed = |k: &str, f: fn(String) -> Target| {
            if is_key(k) {
                Ok(f(k.to_string()))
            } else {
                Err(err())
            }
        };
        match s {
            "one" => return Ok(Target::One),
            "minority" => return Ok(Target::Minority),
            "majority" => return Ok(Target::Majority),
            "all" => return Ok(Target::All),
            "controller" => return Ok(Target::Controller),
            _ => {}
        }
        if let Some(name) = s.strip_prefix('@') {
            return if is_binding_name(name) {
                Ok(Target::Bound(name.to_string()))
            } else {
                Err(err())
            };
        }
        if let Some((kind, key)) = s.split_once(':') {
            return match kind {
                "leader" => keyed(key, Target::Leader),
                "follower" => keyed(key, Target::Follower),
                "isr" => keyed(key, Target::Isr),
                "replicas" => keyed(key, Target::Replicas),
                _ => Err(err()),
            };
        }
        let nodes: Vec<String> = s.split(',').map(|n| n.trim().to_string()).collect();
        if nodes.iter().all(|n| is_node_name(n)) {
            Ok(Target::Nodes(nodes))
        } else {
            Err(err())
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Nodes(nodes) => f.write_str(&nodes.join(",")),
            Target::One => f.write_str("one"),
            Target::Minority => f.write_str("minority"),
            Target::Majority => f.write_str("majority"),
            Target::All => f.write_str("all"),
            Target::Controller => f.write_str("controller"),
            Target::Leader(k) => write!(f, "leader:{k}"),
            Target::Follower(k) => write!(f, "follower:{k}"),
            Target::Isr(k) => write!(f, "isr:{k}"),
            Target::Replicas(k) => write!(f, "replicas:{k}"),
            Target::Bound(name) => write!(f, "@{name}"),
            Target::Union(parts) => {
                let parts: Vec<String> = parts.iter().map(Target::to_string).collect();
                f.write_str(&parts.join("+"))
            }
            Target::Except(left, right) => write!(f, "{left} except {right}"),
        }
    }
}

impl Serialize for Target {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Target, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_round_trips_through_its_string() {
        for s in [
            "one",
            "minority",
            "majority",
            "all",
            "controller",
            "leader:t0/0",
            "follower:t0/12",
            "isr:orders/3",
            "replicas:t0/0",
            "@stale",
            "n1",
            "c1,n2,n10",
            "controller+follower:t0/0",
            "isr:t0/0 except @old",
            "controller+n1 except @x",
        ] {
            let t: Target = s.parse().unwrap();
            assert_eq!(t.to_string(), s);
        }
        assert_eq!(
            "n1, n2".parse::<Target>().unwrap(),
            Target::Nodes(vec!["n1".into(), "n2".into()])
        );
    }

    #[test]
    fn malformed_targets_are_refused_with_the_vocabulary() {
        for s in [
            "",
            "leader",
            "leader:t0",
            "leader:/0",
            "boss:t0/0",
            "x1",
            "n",
            "@",
            "@a b",
            "n1,",
            "controller+",
            "isr:t0/0 except ",
            "except @x",
        ] {
            let e = s.parse::<Target>().unwrap_err();
            assert!(e.to_string().contains("follower:KEY"), "{s}: {e}");
        }
    }
}
