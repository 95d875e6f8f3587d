//! What a run shows, read from its directory: its files, the one streaming pass over its
//! history, and what is derived from them for the report (fault windows, lost writes,
//! partition states, worker lanes).

pub mod fault_windows;
pub mod history;
pub mod lost_writes;
pub mod outcome;
pub mod replica_states;
pub mod run_files;
pub mod worker_lanes;
