//! Consumer groups (Kafka's group coordinator): membership, rebalances and committed offsets.
//!
//! # Layout
//!
//! - [`state`]: one group's state machine (Empty, PreparingRebalance, CompletingRebalance,
//!   Stable, Dead), pure, driven by `now_ms` arguments.
//! - [`assignor`]: the range and round-robin assignors, pure functions for clients, from the
//!   shared model (`tidewater-kafka-model`).
//! - [`offsets`]: records of the `__consumer_offsets` topic and the group -> partition hash.
//! - [`coordinator`]: the service: routing to offsets partitions, loading, storing, waiting.
//! - [`error`]: the group errors with Kafka's names.
//!
//! The protocol as implemented is described in `docs/groups.md`; the routes in `docs/api.md`.

pub mod assignor;
pub mod coordinator;
pub mod error;
pub mod offsets;
pub mod state;

#[cfg(test)]
mod tests;

pub use coordinator::{CoordinatorConfig, GroupCoordinator};
pub use error::{GroupError, GroupErrorKind};
