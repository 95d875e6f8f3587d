//! Drawing: charts as inline SVG, dependency cycles as SVG drawings, and the downsampling
//! that keeps what they draw small.

pub mod chart;
pub mod cycle;
pub mod downsample;
