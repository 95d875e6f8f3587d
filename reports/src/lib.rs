//! Tidewater's reports: what users read after a run.
//!
//! # Layout
//!
//! Three groups, by what each part does, and two files every group uses:
//!
//! - `scan/`: what a run shows, read from its directory.
//!   - `run_files`: config.json, results.json and samples.jsonl of a run directory.
//!   - `history`: one streaming pass over history.jsonl (millions of ops) gathering what the
//!     plots and tables need.
//!   - `outcome`: how a client operation completed (ok, fail, info).
//!   - `worker_lanes`: the main phase's operations per worker lane, bounded.
//!   - `fault_windows`: fault windows (results.json's `stats.fault_windows`, or derived with
//!     the checker's own tracker), their kind the history's `Fault`, and each fault's band
//!     colour.
//!   - `lost_writes`: every acknowledged write that is gone (acknowledged sends against the
//!     final reads), for the lost-writes plot.
//!   - `replica_states`: leader, ISR and offline periods of each partition, from the samples.
//! - `draw/`: drawing.
//!   - `chart`: charts as inline SVG with plotters' SVG backend, and their legends.
//!   - `cycle`: a dependency cycle (G0, G1c, G-single, G2) as plain SVG: its ops as nodes,
//!     its ww / wr / rw edges as arrows labelled with key, values and offsets.
//!   - `downsample`: keeping plots small: at most two points per time slice, extremes kept.
//! - `pages/`: the HTML pages.
//!   - `report/`: `report.html` of one run (headline, verdict and promise, settings,
//!     anomalies with a sentence per example, plots with fault windows, availability per
//!     partition, operations, statistics, faults). Entry point [`render_run`]. Its parts:
//!     `context` (what every part of a report reads, derived once), `figures/` (the plots,
//!     each with legend and caption), `words` (plain words per anomaly and a sentence per
//!     example), `examples` (anomaly examples as HTML, linked to the ops they name),
//!     `cycles` (each dependency cycle drawn, with its steps and ops), `transactions` (the
//!     Transactions section: committed, aborted, unknown; the graph; the cycles),
//!     `stats_tables` (the checkers' statistics as tables).
//!   - `index`: `store/index.html` listing every run, with a verdict trend per matrix cell.
//!     Entry point [`render_index`].
//!   - `matrix`: the comparison page of a settings matrix and its JUnit XML. Entry points
//!     [`summarize_matrix`], [`render_matrix`], [`junit_xml`].
//!   - `night`: a nightly matrix's night: `summary.json` and `summary.html`, the changes since
//!     the previous night (regressions first), and the index's list of nights.
//! - `html`: escaping (text and links), page shell and stylesheet, standing badges.
//! - `error`: the crate's one error type.
//!
//! Every page is self-contained: inline CSS and SVG, no script, no URL to the network.

pub mod draw;
pub mod error;
pub mod html;
pub mod pages;
pub mod scan;

pub use error::ReportError;
pub use pages::index::render_index;
pub use pages::matrix::{junit_xml, render_matrix, summarize_matrix};
pub use pages::report::render_run;
