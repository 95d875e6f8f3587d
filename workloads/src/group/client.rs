//! The coordinator calls a group member makes, as a trait with one implementation per
//! protocol ([`super::HttpGroupClient`], [`crate::kafka_group::KafkaGroupClient`]), and how their
//! failures classify for the history: membership calls certainly change nothing the history
//! records; a commit is `info` unless the coordinator refused it before storing.

use std::collections::BTreeMap;
use std::future::Future;

use tidewater_kafka_model::ErrorCode;

use super::GroupSettings;
use crate::client::{ClientError, ErrorCause, Outcome};
use crate::history::Key;

/// A completed join, as the workload needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The generation.
    pub generation: u64,
    /// This member's id.
    pub member_id: String,
    /// Whether this member leads (and so computes the assignment).
    pub leader: bool,
    /// Member id -> subscribed topics (leader only).
    pub members: BTreeMap<String, Vec<String>>,
    /// Partition counts of the subscribed topics (leader only).
    pub partition_counts: BTreeMap<String, u32>,
    /// The node that answered.
    pub node: String,
}

/// The coordinator calls of a group member. Failures come back classified: `Fail` when the
/// call certainly changed nothing, `Info` when it may have (only commits can be `Info`).
pub trait GroupClient: Send + Sync + 'static {
    /// Join (long poll until the round completes).
    fn join(
        &self,
        group: &str,
        member_id: Option<&str>,
        topics: &[String],
        settings: &GroupSettings,
    ) -> impl Future<Output = Outcome<Joined>> + Send;
    /// Sync; the leader passes the assignment. Returns this member's keys.
    fn sync(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        assignment: Option<&BTreeMap<String, Vec<Key>>>,
    ) -> impl Future<Output = Outcome<Vec<Key>>> + Send;
    /// Heartbeat.
    fn heartbeat(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        polled: bool,
    ) -> impl Future<Output = Outcome<()>> + Send;
    /// Leave.
    fn leave(&self, group: &str, member_id: &str) -> impl Future<Output = Outcome<()>> + Send;
    /// Commit `offsets` (key -> next offset to read).
    fn commit(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        offsets: &BTreeMap<Key, u64>,
    ) -> impl Future<Output = Outcome<String>> + Send;
    /// The group's committed offsets.
    fn fetch_offsets(
        &self,
        group: &str,
    ) -> impl Future<Output = Outcome<BTreeMap<Key, u64>>> + Send;
}

/// Broker errors after which a commit certainly stored nothing.
const COMMIT_CERTAIN_ERRORS: &[ErrorCode] = &[
    ErrorCode::UnknownMemberId,
    ErrorCode::IllegalGeneration,
    ErrorCode::RebalanceInProgress,
    ErrorCode::NotCoordinator,
    ErrorCode::CoordinatorNotAvailable,
    ErrorCode::CoordinatorLoadInProgress,
    ErrorCode::NotEnoughReplicas,
    ErrorCode::InvalidRequest,
    ErrorCode::InvalidGroupId,
    ErrorCode::OffsetMetadataTooLarge,
    ErrorCode::OffsetOutOfRange,
    ErrorCode::InvalidTopicException,
];

/// A commit's outcome: ok with the coordinator's node, `fail` when the coordinator certainly
/// stored nothing (it refused, or could not be reached), `info` otherwise.
pub(crate) fn commit_outcome(result: Result<String, ClientError>) -> Outcome<String> {
    match result {
        Ok(node) => Outcome::Ok(node),
        Err(e) => {
            let certain = match &e.cause {
                ErrorCause::Connect | ErrorCause::NoLeader => true,
                ErrorCause::Broker { name, .. } => ErrorCode::named_in(name, COMMIT_CERTAIN_ERRORS),
                ErrorCause::Timeout | ErrorCause::Transport => false,
            };
            if certain {
                Outcome::Fail(e)
            } else {
                Outcome::Info(e)
            }
        }
    }
}

/// Membership calls change nothing that the history records, so their failures are `fail`.
pub(crate) fn certain<T>(result: Result<T, ClientError>) -> Outcome<T> {
    match result {
        Ok(v) => Outcome::Ok(v),
        Err(e) => Outcome::Fail(e),
    }
}
