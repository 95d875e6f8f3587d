//! Jepsen EDN import/export (in progress).
