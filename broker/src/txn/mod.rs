//! Transactions (KIP-98): the transaction coordinator of the transactional ids whose
//! `__transaction_state` partition this broker leads. The partition side (transactional and
//! control batches, the last stable offset, aborted transactions, `read_committed` reads) is
//! in the storage and the operations ([`crate::ops::txn_markers`] writes the markers).
//!
//! # Layout
//!
//! - [`state`]: one transactional id's metadata and its transitions (Empty, Ongoing,
//!   PrepareCommit/PrepareAbort, CompleteCommit/CompleteAbort), pure.
//! - [`log`]: records of `__transaction_state` and the id -> partition hash.
//! - [`coordinator`]: the service: routing, loading, storing, markers, timeouts.
//!
//! The protocol as implemented is described in `docs/kafka-protocol.md` ("Transactions").

pub mod coordinator;
pub mod log;
pub mod state;

pub use coordinator::{TransactionCoordinator, TxnCoordinatorConfig};
