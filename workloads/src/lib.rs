//! Tidewater's workloads: the history model, the broker client, generators and checkers.
//!
//! # Layout
//! - `history`: [`history::Op`], one line of `history.jsonl`, and its micro-ops.
//! - `results`: [`results::CheckResults`], the content of `results.json`.

pub mod history;
pub mod results;
