//! Tidewater's reports: what users read after a run.
//!
//! # Layout
//!
//! - `report`: `report.html` of one run (headline, verdict and promise, settings, anomalies
//!   with a sentence per example, plots with fault windows, availability per partition,
//!   operations, statistics, faults). Entry point [`render_run`].
//! - `context`: what every part of a report reads (the run's files and what is derived from
//!   them once).
//! - `figures`: the plots of a run report, each with legend and caption.
//! - `words`: a sentence per anomaly example. `stats_tables`: the checkers' statistics as
//!   tables.
//! - `index`: `store/index.html` listing every run, with a verdict trend per matrix cell.
//!   Entry point [`render_index`].
//! - `matrix`: the comparison page of a settings matrix and its JUnit XML. Entry points
//!   [`summarize_matrix`], [`render_matrix`], [`junit_xml`].
//! - `night`: a nightly matrix's night: `summary.json` and `summary.html`, the changes since
//!   the previous night (regressions first), and the index's list of nights.
//! - `run_dir`: reading config.json, results.json and samples.jsonl of a run directory.
//! - `history_scan`: one streaming pass over history.jsonl (millions of ops) gathering what
//!   the plots and tables need.
//! - `faults`: fault windows (results.json's `stats.fault_windows`, or derived with the
//!   checker's own tracker).
//! - `losses`: every acknowledged write that is gone (acknowledged sends against the final
//!   reads), for the lost-writes plot.
//! - `replicas`: leader, ISR and offline periods of each partition, from the samples.
//! - `timeline`: the main phase's operations per worker lane, bounded.
//! - `downsample`: keeping plots small: at most two points per time slice, extremes kept.
//! - `plots`: charts as inline SVG with plotters' SVG backend.
//! - `examples`: anomaly examples as HTML, with links to the ops they name.
//! - `html`: escaping, page shell and stylesheet.
//!
//! Every page is self-contained: inline CSS and SVG, no script, no URL to the network.

mod context;
pub mod downsample;
pub mod error;
pub mod examples;
pub mod faults;
mod figures;
pub mod history_scan;
pub mod html;
pub mod index;
pub mod losses;
pub mod matrix;
pub mod night;
pub mod plots;
pub mod replicas;
pub mod report;
pub mod run_dir;
pub mod stats_tables;
pub mod timeline;
pub mod words;

pub use error::ReportError;
pub use index::render_index;
pub use matrix::{junit_xml, render_matrix, summarize_matrix};
pub use report::render_run;
