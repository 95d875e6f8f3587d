//! The workloads over Apache Kafka's own Java client (kafka-clients), the client Kafka's users
//! run: a driver process the harness compiles (`harness/java/TidewaterDriver.java`) serves
//! many logical clients over JSON lines on its standard input and output.
//!
//! # Layout
//! - `settings`: [`JavaClientSettings`], the producer and consumer configs in Kafka's names,
//!   which the run records so the checker knows them.
//! - `driver`: [`JavaDriver`], the driver process and its request/answer protocol.
//! - `queue`: [`JavaQueueClient`], the queue workload's sends and fetches through the driver,
//!   and the [`crate::txn::TxnClient`] of the transactional workload.

pub mod driver;
pub mod queue;
pub mod settings;

pub use driver::{Answer, JavaDriver};
pub use queue::JavaQueueClient;
pub use settings::{ClientConfigs, JavaClientSettings};
