//! Tidewater's workloads: the history model, the broker client, generators and checkers.
//!
//! # Layout
//! - `history`: [`history::Op`], one line of `history.jsonl`, and its micro-ops.
//! - `results`: [`results::CheckResults`], the content of `results.json`.
//! - `client`: [`client::BrokerClient`], the broker's HTTP client with fail/info error mapping.
//! - `queue`: the queue workload: generator, consumer state and op execution.

pub mod client;
pub mod history;
pub mod queue;
pub mod results;
