//! Tidewater's reports: what users read after a run.
//!
//! # Layout
//!
//! - `report`: `report.html` of one run (verdict, settings, anomalies with examples, plots
//!   with fault windows, summary of operations). Entry point [`render_run`].
//! - `figures`: the six plots of a run report, each with legend and caption.
//! - `index`: `store/index.html` listing every run, with a verdict trend per matrix cell.
//!   Entry point [`render_index`].
//! - `matrix`: the comparison page of a settings matrix and its JUnit XML. Entry points
//!   [`summarize_matrix`], [`render_matrix`], [`junit_xml`].
//! - `run_dir`: reading config.json, results.json and samples.jsonl of a run directory.
//! - `history_scan`: one streaming pass over history.jsonl (millions of ops) gathering what
//!   the plots and tables need.
//! - `faults`: fault windows (kill, pause, partition, ...) from the nemesis ops.
//! - `downsample`: keeping plots small: at most two points per time slice, extremes kept.
//! - `plots`: charts as inline SVG with plotters' SVG backend.
//! - `examples`: anomaly examples as HTML, with links to the ops they name.
//! - `html`: escaping, page shell and stylesheet.
//!
//! Every page is self-contained: inline CSS and SVG, no script, no URL to the network.

pub mod downsample;
pub mod error;
pub mod examples;
pub mod faults;
mod figures;
pub mod history_scan;
pub mod html;
pub mod index;
pub mod matrix;
pub mod plots;
pub mod report;
pub mod run_dir;
pub mod timeline;

pub use error::ReportError;
pub use index::render_index;
pub use matrix::{junit_xml, render_matrix, summarize_matrix};
pub use report::render_run;
