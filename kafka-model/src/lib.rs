//! Kafka's shared model: the pieces of Kafka's vocabulary that both the companion broker and
//! the workloads' clients must agree on, in one place. It depends on neither (nothing here
//! does I/O); both depend on it.
//!
//! # Layout
//!
//! - [`topic_partition`]: [`TopicPartition`], one partition of a topic.
//! - [`assignor`]: the range and round-robin assignors (Kafka's `RangeAssignor`,
//!   `RoundRobinAssignor`), pure functions of the subscriptions and partition counts.
//! - [`consumer_protocol`]: the bytes of Kafka's ConsumerProtocol Subscription (JoinGroup
//!   metadata) and Assignment (SyncGroup), encoded and decoded.
//! - [`errors`]: [`ErrorCode`], Kafka's error names and numeric codes, as the broker answers
//!   them and the clients classify them.

pub mod assignor;
pub mod consumer_protocol;
pub mod errors;
pub mod topic_partition;

pub use errors::ErrorCode;
pub use topic_partition::TopicPartition;
