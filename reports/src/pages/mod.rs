//! The HTML pages: a run's `report.html`, the store's `index.html`, a matrix's comparison
//! page and a night's summary.

pub mod index;
pub mod matrix;
pub mod night;
pub mod report;
