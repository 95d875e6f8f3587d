//! A group's coordinator, as both group clients find and refind it: each remembers where the
//! coordinator of a group was last found ([`Coordinators`]) and sends every call through
//! [`retry_when_moved`], which looks the coordinator up again, a bounded number of times, when
//! it could not be reached or answered that it no longer coordinates the group.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use tidewater_kafka_model::ErrorCode;

use crate::client::{ClientError, ErrorCause};

/// Errors after which asking for the coordinator again may help.
const COORDINATOR_MOVED: &[ErrorCode] = &[
    ErrorCode::NotCoordinator,
    ErrorCode::CoordinatorNotAvailable,
    ErrorCode::CoordinatorLoadInProgress,
];

/// Whether a failed call to a group's coordinator is retried at a coordinator looked up anew:
/// when it could not be reached or answered that it no longer coordinates the group. After a
/// timeout or a broken connection the call may have taken effect, so it is not retried, but
/// the coordinator is forgotten (`forget`) and the next call looks it up again.
pub(crate) fn coordinator_moved(cause: &ErrorCause, forget: impl FnOnce()) -> bool {
    match cause {
        ErrorCause::Connect | ErrorCause::NoLeader => true,
        ErrorCause::Broker { name, .. } => ErrorCode::named_in(name, COORDINATOR_MOVED),
        ErrorCause::Timeout | ErrorCause::Transport => {
            forget();
            false
        }
    }
}

/// Group -> its coordinator as last found (`T`: whatever the client needs to reach it).
pub(crate) struct Coordinators<T> {
    /// Found coordinators; an entry is dropped when the coordinator may have moved.
    found: Mutex<HashMap<String, T>>,
}

impl<T: Clone> Coordinators<T> {
    /// None known yet.
    pub(crate) fn new() -> Coordinators<T> {
        Coordinators {
            found: Mutex::new(HashMap::new()),
        }
    }

    /// The coordinator of `group`, if known.
    pub(crate) fn get(&self, group: &str) -> Option<T> {
        self.found.lock().expect("lock").get(group).cloned()
    }

    /// Remembers `coordinator` for `group`.
    pub(crate) fn remember(&self, group: &str, coordinator: T) {
        self.found
            .lock()
            .expect("lock")
            .insert(group.to_string(), coordinator);
    }

    /// Forgets `group`'s coordinator, so the next call looks it up again.
    pub(crate) fn forget(&self, group: &str) {
        self.found.lock().expect("lock").remove(group);
    }
}

/// Runs `attempt` (look the coordinator up if unknown, then call it) until it succeeds, fails
/// for a reason other than the coordinator having moved ([`coordinator_moved`]), or `retries`
/// retries are spent. Before each retry the coordinator is forgotten and the call pauses
/// `backoff`.
pub(crate) async fn retry_when_moved<T, R, F, Fut>(
    coordinators: &Coordinators<T>,
    group: &str,
    retries: u32,
    backoff: Duration,
    mut attempt: F,
) -> Result<R, ClientError>
where
    T: Clone,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<R, ClientError>>,
{
    let mut tries = 0;
    loop {
        let result = attempt().await;
        let moved = result
            .as_ref()
            .err()
            .is_some_and(|e| coordinator_moved(&e.cause, || coordinators.forget(group)));
        if !moved || tries >= retries {
            return result;
        }
        tries += 1;
        coordinators.forget(group);
        tokio::time::sleep(backoff).await;
    }
}
