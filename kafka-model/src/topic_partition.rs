//! One partition of a topic, the unit every assignor hands out and every offset belongs to.

use serde::{Deserialize, Serialize};

/// One partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: u32,
}

impl TopicPartition {
    /// `topic`/`partition`.
    pub fn new(topic: impl Into<String>, partition: u32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

/// `topic/partition`, the form of a key in Tidewater's histories.
impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.topic, self.partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_as_a_history_key() {
        assert_eq!(TopicPartition::new("t0", 7).to_string(), "t0/7");
    }
}
