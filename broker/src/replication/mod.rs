//! Kafka's replication protocol on the broker side: leaders, followers, the ISR, the high
//! watermark and leader epochs. Used when the broker runs in a cluster (`controller.address`
//! set); a standalone broker never touches it. Nothing here knows a front door: the
//! `/internal/v1/...` routes that serve `fetch_serving` live with the HTTP routes
//! ([`crate::http::routes::replication`]).
//!
//! # Layout
//! - `settings`: [`ReplicationConfig`], the replication settings from the broker's config.
//! - `manager`: the [`ReplicaManager`]: the replica table, start-up and shutdown. Its `impl`
//!   continues, one concern per file, in:
//!   - `controller_session`: registration, heartbeats, the metadata watch, topic admin calls;
//!   - `roles`: metadata-driven leader / follower / offline transitions;
//!   - `fetch_serving`: the leader's answers to follower fetches, OffsetsForLeaderEpoch and
//!     the diagnostic log read;
//!   - `isr`: ISR shrink and expansion through AlterPartition;
//!   - `produce`: replicated produce (acks, min.insync.replicas, delayed produce);
//!   - `leadership_checks`: may a client request be served here (leader, KIP-320; KIP-207 for the latest offset);
//!   - `delete_records`: DeleteRecords on the leader;
//!   - `hw_checkpoint`: the per-replica HW checkpoint file and its periodic write;
//!   - `status`: local replicas as status and metrics show them.
//! - `replica`: one hosted replica: role lock, fetch task, delayed produces.
//! - `leader`: pure leader-side state (follower LEOs, caught-up times, ISR shrink/expand, HW).
//! - `truncation`: pure OffsetsForLeaderEpoch truncation decision (KIP-101, KIP-279).
//! - `protocol`: the `/internal/v1/...` wire types.
//! - `fetcher`: the follower fetch task.
//!
//! The protocol as implemented is described in `docs/replication.md`.

pub mod controller_session;
pub mod delete_records;
pub mod fetch_serving;
pub mod fetcher;
pub mod hw_checkpoint;
pub mod isr;
pub mod leader;
pub mod leadership_checks;
pub mod manager;
pub mod produce;
pub mod protocol;
pub mod replica;
pub mod roles;
pub mod settings;
pub mod status;
pub mod truncation;

pub use manager::ReplicaManager;
pub use settings::ReplicationConfig;
