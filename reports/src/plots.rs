//! Charts as inline SVG, drawn with plotters' SVG backend.
//!
//! The workspace builds plotters without font support (no font-kit, no ttf): the SVG backend
//! then writes text as SVG `<text>` elements with a font family name and lets the browser
//! pick the font, and only estimates text widths for layout. That is all an SVG in a web page
//! needs, so labels stay readable without any font file on the machine that renders.
//!
//! Every time chart shades the fault windows behind its data, one colour per fault kind
//! ([`FaultKind::rgb`]); legends are written in HTML next to the chart (see `report.rs`) so
//! that they never hide data.

use crate::error::ReportError;
use crate::faults::{FaultKind, FaultWindow};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

/// A colour as (red, green, blue).
pub type Rgb = (u8, u8, u8);

/// Width of every chart, px (the page scales it down on narrow screens).
pub const PLOT_WIDTH_PX: u32 = 1000;
/// Height of a time chart, px.
pub const PLOT_HEIGHT_PX: u32 = 320;
/// Opacity of fault bands: light enough to read data drawn on top.
const BAND_OPACITY: f64 = 0.22;
/// Bands narrower than this are widened so that a short fault stays visible.
const BAND_WIDTH_MIN_PX: f64 = 3.0;
/// Width of the y label area, px.
const Y_LABEL_AREA_PX: u32 = 70;

/// The colour as SVG writes it (`#RRGGBB`, upper case as plotters does).
pub fn svg_hex(rgb: Rgb) -> String {
    format!("#{:02X}{:02X}{:02X}", rgb.0, rgb.1, rgb.2)
}

/// An axis label: whole numbers without decimals, others with at most three.
pub fn fmt_num(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// How the points of a series are marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A filled circle.
    Circle,
    /// A filled triangle.
    Triangle,
    /// An x-shaped cross (also used for marks such as regressions).
    Cross,
}

/// A scatter series.
#[derive(Debug, Clone)]
pub struct Points {
    /// Colour of the marks.
    pub rgb: Rgb,
    /// Shape of the marks.
    pub shape: Shape,
    /// Size of the marks, px.
    pub size_px: u32,
    /// (x, y) in data units.
    pub points: Vec<(f64, f64)>,
}

/// A line series.
#[derive(Debug, Clone)]
pub struct Line {
    /// Colour of the line.
    pub rgb: Rgb,
    /// (x, y) in data units, in x order.
    pub points: Vec<(f64, f64)>,
    /// Width, px: 1 for data, more for reference lines that must stand out from the grid.
    pub stroke_px: u32,
}

/// A chart with time (seconds since the test started) on x and fault windows shaded.
#[derive(Debug, Clone)]
pub struct TimeChart<'a> {
    /// Id of the chart, used in errors.
    pub id: &'a str,
    /// Title of the y axis, with its unit.
    pub y_label: &'a str,
    /// The end of the x axis, s.
    pub x_max_s: f64,
    /// The y range; for a log axis both ends must be positive.
    pub y_range: (f64, f64),
    /// Logarithmic y axis (latency spans orders of magnitude).
    pub y_log: bool,
    /// Label only whole numbers on the y axis (counts such as ISR sizes).
    pub y_integer: bool,
    /// Fault windows to shade.
    pub bands: &'a [FaultWindow],
    /// Lines, drawn over the bands.
    pub lines: Vec<Line>,
    /// Points, drawn over the lines.
    pub points: Vec<Points>,
}

fn plot_error(id: &str, e: impl std::fmt::Display) -> ReportError {
    ReportError::Plot {
        plot: id.to_string(),
        message: e.to_string(),
    }
}

/// Finishes an SVG document for inlining in HTML: inline SVG needs no namespace, and leaving
/// it out keeps the page free of any URL.
fn inline_svg(svg: String) -> String {
    svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1)
}

/// Draws a time chart as an SVG document.
pub fn draw_time_chart(chart: &TimeChart) -> Result<String, ReportError> {
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (PLOT_WIDTH_PX, PLOT_HEIGHT_PX)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_error(chart.id, e))?;
        let (lo, hi) = chart.y_range;
        if chart.y_log {
            draw_time_chart_on(&root, chart, (lo..hi).log_scale())
        } else {
            draw_time_chart_on(&root, chart, lo..hi)
        }
        .map_err(|e| plot_error(chart.id, e))?;
        root.present().map_err(|e| plot_error(chart.id, e))?;
    }
    Ok(inline_svg(svg))
}

fn draw_time_chart_on<Y>(
    root: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    chart: &TimeChart,
    y_spec: Y,
) -> Result<(), String>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let x_max = chart.x_max_s.max(1e-3);
    let mut ctx = ChartBuilder::on(root)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(Y_LABEL_AREA_PX)
        .build_cartesian_2d(0f64..x_max, y_spec)
        .map_err(|e| e.to_string())?;
    let y_integer = chart.y_integer;
    let y_format = move |v: &f64| {
        if y_integer && (v - v.round()).abs() > 1e-9 {
            String::new()
        } else {
            fmt_num(*v)
        }
    };
    ctx.configure_mesh()
        .x_desc("time since the test started (s)")
        .y_desc(chart.y_label)
        .x_label_formatter(&|v| fmt_num(*v))
        .y_label_formatter(&y_format)
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(|e| e.to_string())?;
    let (y_lo, y_hi) = chart.y_range;
    let band_min_s = x_max * BAND_WIDTH_MIN_PX / f64::from(PLOT_WIDTH_PX - Y_LABEL_AREA_PX);
    let bands = chart.bands.iter().map(|w| {
        let start = (w.start_ns as f64 / 1e9).min(x_max);
        let end = (w.end_ns as f64 / 1e9).clamp(start + band_min_s, x_max.max(start + band_min_s));
        let (r, g, b) = w.kind.rgb();
        Rectangle::new(
            [(start, y_lo), (end, y_hi)],
            RGBColor(r, g, b).mix(BAND_OPACITY).filled(),
        )
    });
    ctx.draw_series(bands).map_err(|e| e.to_string())?;
    let clamp = |(x, y): (f64, f64)| (x.clamp(0.0, x_max), y.clamp(y_lo, y_hi));
    for line in &chart.lines {
        let (r, g, b) = line.rgb;
        let style = RGBColor(r, g, b).stroke_width(line.stroke_px.max(1));
        ctx.draw_series(LineSeries::new(
            line.points.iter().copied().map(clamp),
            style,
        ))
        .map_err(|e| e.to_string())?;
    }
    for series in &chart.points {
        draw_points(&mut ctx, series, clamp)?;
    }
    Ok(())
}

fn draw_points<X, Y>(
    ctx: &mut ChartContext<SVGBackend, Cartesian2d<X, Y>>,
    series: &Points,
    clamp: impl Fn((f64, f64)) -> (f64, f64),
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let (r, g, b) = series.rgb;
    let color = RGBColor(r, g, b);
    let size = series.size_px;
    let points = series.points.iter().copied().map(clamp);
    let drawn = match series.shape {
        Shape::Circle => ctx
            .draw_series(points.map(|p| Circle::new(p, size, color.mix(0.7).filled())))
            .map(|_| ()),
        Shape::Triangle => ctx
            .draw_series(points.map(|p| TriangleMarker::new(p, size + 1, color.mix(0.7).filled())))
            .map(|_| ()),
        Shape::Cross => ctx
            .draw_series(points.map(|p| Cross::new(p, size + 1, color.stroke_width(2))))
            .map(|_| ()),
    };
    drawn.map_err(|e| e.to_string())
}

/// One row of the lost-writes chart: a partition, how far its log reached, and the offsets
/// of its lost writes.
#[derive(Debug, Clone)]
pub struct LostRow {
    /// topic/partition.
    pub key: String,
    /// Highest offset known for the partition (from observed high watermarks), drawn as a
    /// grey bar so that the lost offsets can be placed in the log.
    pub offset_max: Option<u64>,
    /// Offsets of lost acknowledged writes.
    pub lost_offsets: Vec<u64>,
}

/// Draws lost writes by offset, one row per partition.
pub fn draw_lost_writes(id: &str, rows: &[LostRow], lost_rgb: Rgb) -> Result<String, ReportError> {
    let height = (90 + 34 * rows.len().max(1)) as u32;
    let x_max = rows
        .iter()
        .flat_map(|r| r.lost_offsets.iter().copied().chain(r.offset_max))
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1.02;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH_PX, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_error(id, e))?;
        let n = rows.len() as i32;
        let mut ctx = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(110)
            .build_cartesian_2d(0f64..x_max, -1i32..n.max(1))
            .map_err(|e| plot_error(id, e))?;
        let label = |v: &i32| match rows.get(*v as usize) {
            Some(row) if *v >= 0 => row.key.clone(),
            _ => String::new(),
        };
        ctx.configure_mesh()
            .x_desc("offset")
            .x_label_formatter(&|v| fmt_num(*v))
            .y_desc("partition")
            .y_labels(rows.len() + 2)
            .y_label_formatter(&label)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .light_line_style(RGBColor(238, 238, 238))
            .draw()
            .map_err(|e| plot_error(id, e))?;
        let grey = RGBColor(190, 190, 190);
        for (i, row) in rows.iter().enumerate() {
            if let Some(max) = row.offset_max {
                ctx.draw_series(LineSeries::new(
                    [(0.0, i as i32), (max as f64, i as i32)],
                    grey.stroke_width(6),
                ))
                .map_err(|e| plot_error(id, e))?;
            }
        }
        let (r, g, b) = lost_rgb;
        let marks = rows.iter().enumerate().flat_map(|(i, row)| {
            row.lost_offsets.iter().map(move |&o| {
                Cross::new((o as f64, i as i32), 6, RGBColor(r, g, b).stroke_width(2))
            })
        });
        ctx.draw_series(marks).map_err(|e| plot_error(id, e))?;
        root.present().map_err(|e| plot_error(id, e))?;
    }
    Ok(inline_svg(svg))
}

/// One bar of a bar chart.
#[derive(Debug, Clone)]
pub struct Bar {
    /// Short label under the bar.
    pub label: String,
    /// Height in data units.
    pub value: f64,
    /// Fill colour.
    pub rgb: Rgb,
}

/// Draws one bar per category (the matrix page compares cells this way).
pub fn draw_bars(id: &str, y_label: &str, bars: &[Bar]) -> Result<String, ReportError> {
    let y_max = bars.iter().map(|b| b.value).fold(0.0, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH_PX / 2, 300)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_error(id, e))?;
        let n = bars.len().max(1) as i32;
        let mut ctx = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(35)
            .y_label_area_size(Y_LABEL_AREA_PX)
            // A segmented range `0..m` has m + 1 segments (its end is included); `0..0` has
            // no width at all, so a single bar gets `0..1` and an empty slot beside it.
            .build_cartesian_2d((0..(n - 1).max(1)).into_segmented(), 0f64..y_max)
            .map_err(|e| plot_error(id, e))?;
        let label = |v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(i) => bars
                .get(*i as usize)
                .map(|b| b.label.clone())
                .unwrap_or_default(),
            _ => String::new(),
        };
        ctx.configure_mesh()
            .disable_x_mesh()
            .y_desc(y_label)
            .y_label_formatter(&|v| fmt_num(*v))
            .x_labels(bars.len() + 1)
            .x_label_formatter(&label)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .light_line_style(RGBColor(238, 238, 238))
            .draw()
            .map_err(|e| plot_error(id, e))?;
        let rects = bars.iter().enumerate().map(|(i, bar)| {
            let (r, g, b) = bar.rgb;
            let i = i as i32;
            let mut rect = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), bar.value),
                ],
                RGBColor(r, g, b).filled(),
            );
            rect.set_margin(0, 0, 12, 12);
            rect
        });
        ctx.draw_series(rects).map_err(|e| plot_error(id, e))?;
        root.present().map_err(|e| plot_error(id, e))?;
    }
    Ok(inline_svg(svg))
}

/// `rgb` darkened by `step` tenths towards black (2 steps: 20 % darker), to tell apart
/// series that share a meaning colour.
pub fn shade(rgb: Rgb, step: usize) -> Rgb {
    let keep = 1.0 - 0.2 * (step % 4) as f64;
    let f = |c: u8| (f64::from(c) * keep) as u8;
    (f(rgb.0), f(rgb.1), f(rgb.2))
}

/// The band colour of each fault kind present, for HTML legends.
pub fn band_legend(kinds: &[FaultKind]) -> Vec<(String, Rgb)> {
    kinds
        .iter()
        .map(|k| (format!("{} (fault)", k.label()), k.rgb()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_numbers_drop_needless_decimals() {
        assert_eq!(fmt_num(450000.0), "450000");
        assert_eq!(fmt_num(0.1), "0.1");
        assert_eq!(fmt_num(2.5), "2.5");
        assert_eq!(fmt_num(1.0 / 3.0), "0.333");
    }

    #[test]
    fn shades_darken_and_cycle() {
        assert_eq!(shade((200, 100, 50), 0), (200, 100, 50));
        assert_eq!(shade((200, 100, 50), 1), (160, 80, 40));
        assert_eq!(shade((200, 100, 50), 4), (200, 100, 50));
    }
}
