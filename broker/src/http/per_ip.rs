//! Connections per client address (`max.connections.per.ip` and its overrides), counted over
//! every front door of a process together, as Kafka's `ConnectionQuotas` counts them over its
//! listeners. A connection over its address's limit is closed as soon as it is accepted.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// The open connections of each client address, and how many each may have.
#[derive(Debug)]
pub struct ConnectionsPerIp {
    /// `max.connections.per.ip`: the limit of an address without an override.
    limit_default: u32,
    /// `max.connections.per.ip.overrides`.
    limit_overrides: BTreeMap<IpAddr, u32>,
    /// Open connections by address; an address leaves the map with its last connection, so
    /// the map is bounded by the open connections.
    open: Mutex<HashMap<IpAddr, u32>>,
}

impl ConnectionsPerIp {
    /// Counts with these limits, none open yet.
    pub fn new(limit_default: u32, limit_overrides: BTreeMap<IpAddr, u32>) -> Arc<Self> {
        Arc::new(ConnectionsPerIp {
            limit_default,
            limit_overrides,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// The limit of `ip`.
    pub fn limit(&self, ip: IpAddr) -> u32 {
        *self.limit_overrides.get(&ip).unwrap_or(&self.limit_default)
    }

    /// Counts a new connection from `ip` until the returned guard is dropped; `None` (count
    /// unchanged) when `ip` already has its limit open.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<IpConnection> {
        let limit = self.limit(ip);
        let mut open = self.open.lock().expect("per-ip lock");
        let count = open.entry(ip).or_insert(0);
        if *count >= limit {
            if *count == 0 {
                open.remove(&ip);
            }
            return None;
        }
        *count += 1;
        Some(IpConnection {
            counts: self.clone(),
            ip,
        })
    }

    /// Connections open from `ip` now.
    pub fn open(&self, ip: IpAddr) -> u32 {
        let open = self.open.lock().expect("per-ip lock");
        open.get(&ip).copied().unwrap_or(0)
    }
}

/// One admitted connection (see [`ConnectionsPerIp::admit`]).
#[derive(Debug)]
pub struct IpConnection {
    counts: Arc<ConnectionsPerIp>,
    ip: IpAddr,
}

impl Drop for IpConnection {
    fn drop(&mut self) {
        let mut open = self.counts.open.lock().expect("per-ip lock");
        let count = open
            .get_mut(&self.ip)
            .expect("an admitted address is counted until its last connection closes");
        assert!(*count > 0, "count of {} went below zero", self.ip);
        *count -= 1;
        if *count == 0 {
            open.remove(&self.ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_at_its_limit_is_refused_until_one_of_its_connections_closes() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let counts = ConnectionsPerIp::new(2, BTreeMap::from([(b, 0)]));
        let first = counts.admit(a).unwrap();
        let _second = counts.admit(a).unwrap();
        assert!(counts.admit(a).is_none());
        assert!(counts.admit(b).is_none(), "an override of 0 admits nothing");
        assert_eq!((counts.open(a), counts.open(b)), (2, 0));
        drop(first);
        assert_eq!(counts.open(a), 1);
        assert!(counts.admit(a).is_some());
        assert!(counts.open.lock().unwrap().len() == 1, "b left no entry");
    }
}
