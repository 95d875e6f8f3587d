//! Counters of the broker and their Prometheus text rendering (`GET /metrics`).
//!
//! Request counts are kept by (method, route template, error name) and filled in by the
//! HTTP routes' middleware ([`crate::http::routes::request_metrics`]); partition gauges are read from the catalog at scrape time, so
//! they are never stale. Names follow Kafka's JMX metrics (`UnderReplicatedPartitions`, ...)
//! in Prometheus' snake case with a `tidewater_` prefix; `docs/api.md` lists them.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::topics::TopicCatalog;

/// Label set of one request counter.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct RequestKey {
    method: String,
    route: String,
    error: &'static str,
}

/// The broker's counters. Everything here only grows.
#[derive(Default)]
pub struct Metrics {
    /// Requests served, by method, route template and error name (`NONE` on success).
    /// A mutex is enough: it is held for one map update per request.
    requests: Mutex<BTreeMap<RequestKey, u64>>,
    /// Key and value bytes of records appended by produce requests (Kafka's BytesInPerSec).
    pub bytes_in: AtomicU64,
    /// Key and value bytes of records returned by fetches (Kafka's BytesOutPerSec).
    pub bytes_out: AtomicU64,
    /// Records appended by produce requests (Kafka's MessagesInPerSec).
    pub messages_in: AtomicU64,
    /// ISR shrinks (Kafka's IsrShrinksPerSec); only replication changes ISRs.
    pub isr_shrinks: AtomicU64,
    /// ISR expansions (Kafka's IsrExpandsPerSec); only replication changes ISRs.
    pub isr_expands: AtomicU64,
}

impl Metrics {
    /// Counts one request.
    pub fn count_request(&self, method: &str, route: &str, error: &'static str) {
        let key = RequestKey {
            method: method.to_string(),
            route: route.to_string(),
            error,
        };
        *self
            .requests
            .lock()
            .expect("metrics lock")
            .entry(key)
            .or_insert(0) += 1;
    }

    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self, catalog: &TopicCatalog) -> String {
        self.render_with(catalog, None)
    }

    /// [`Metrics::render`] with the (leaders, under-replicated) counts of a replicated broker,
    /// which only its replication state knows; `None` for a standalone broker (it leads all).
    pub fn render_with(
        &self,
        catalog: &TopicCatalog,
        leader_counts: Option<(usize, usize)>,
    ) -> String {
        let mut out = String::new();
        self.render_requests(&mut out);
        let counters = [
            (
                "bytes_in_total",
                "Key and value bytes appended by produce requests.",
                &self.bytes_in,
            ),
            (
                "bytes_out_total",
                "Key and value bytes returned by fetch requests.",
                &self.bytes_out,
            ),
            (
                "messages_in_total",
                "Records appended by produce requests.",
                &self.messages_in,
            ),
            (
                "isr_shrinks_total",
                "ISR shrinks of partitions led here.",
                &self.isr_shrinks,
            ),
            (
                "isr_expands_total",
                "ISR expansions of partitions led here.",
                &self.isr_expands,
            ),
        ];
        for (name, help, counter) in counters {
            metric_header(&mut out, name, help, "counter");
            let _ = writeln!(out, "tidewater_{name} {}", counter.load(Ordering::Relaxed));
        }
        render_partitions(&mut out, catalog, leader_counts);
        out
    }

    fn render_requests(&self, out: &mut String) {
        metric_header(
            out,
            "requests_total",
            "HTTP requests by route and error name.",
            "counter",
        );
        for (key, count) in self.requests.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                out,
                "tidewater_requests_total{{method=\"{}\",route=\"{}\",error=\"{}\"}} {count}",
                escape(&key.method),
                escape(&key.route),
                key.error
            );
        }
    }
}

fn metric_header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP tidewater_{name} {help}");
    let _ = writeln!(out, "# TYPE tidewater_{name} {kind}");
}

/// Escapes a label value (backslash, quote, newline) as the text format requires.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Picks one offset out of a partition's offsets, for the per-partition gauges.
type OffsetField = fn(&crate::partition::PartitionOffsets) -> u64;

fn render_partitions(
    out: &mut String,
    catalog: &TopicCatalog,
    leader_counts: Option<(usize, usize)>,
) {
    let topics = catalog.list();
    let partitions: Vec<_> = topics.iter().flat_map(|t| t.partitions.iter()).collect();
    let mut leaders = 0;
    let mut under_replicated = 0;
    for partition in &partitions {
        let (replicas, isr) = partition.replicas_and_isr();
        leaders += 1;
        if isr.len() < replicas.len() {
            under_replicated += 1;
        }
    }
    if let Some((led, under)) = leader_counts {
        leaders = led;
        under_replicated = under;
    }
    let gauges = [
        (
            "partition_count",
            "Partitions hosted by this broker.",
            partitions.len(),
        ),
        ("leader_count", "Partitions this broker leads.", leaders),
        (
            "under_replicated_partitions",
            "Led partitions whose ISR is smaller than the replica set.",
            under_replicated,
        ),
    ];
    for (name, help, value) in gauges {
        metric_header(out, name, help, "gauge");
        let _ = writeln!(out, "tidewater_{name} {value}");
    }
    let offsets: [(&str, &str, OffsetField); 3] = [
        (
            "log_end_offset",
            "Next offset to be written, per partition.",
            |o| o.log_end_offset,
        ),
        ("high_watermark", "High watermark, per partition.", |o| {
            o.high_watermark
        }),
        (
            "log_start_offset",
            "First offset in the log, per partition.",
            |o| o.log_start_offset,
        ),
    ];
    for (name, help, field) in offsets {
        metric_header(out, name, help, "gauge");
        for partition in &partitions {
            let _ = writeln!(
                out,
                "tidewater_{name}{{topic=\"{}\",partition=\"{}\"}} {}",
                partition.topic,
                partition.partition,
                field(&partition.offsets())
            );
        }
    }
}
