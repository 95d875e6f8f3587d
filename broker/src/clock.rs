//! The broker's one wall clock: milliseconds since the Unix epoch, for record timestamps,
//! retention, follower lag and caught-up times, and the controller's broker sessions.
//!
//! A clock set before 1970 reads as 0 rather than failing: every caller compares or stores
//! times, and none can do anything better with an error.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 when the system clock is set before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// [`now_ms`] as a record timestamp: Kafka's timestamps are signed milliseconds.
pub fn timestamp_ms() -> i64 {
    i64::try_from(now_ms()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_the_same_clock_as_now_ms() {
        let before = now_ms();
        let timestamp = timestamp_ms();
        let after = now_ms();
        assert!(before as i64 <= timestamp && timestamp <= after as i64);
        // Well after 2020-01-01: the clock is not read as 0 on a sane machine.
        assert!(before > 1_577_836_800_000, "{before}");
    }
}
