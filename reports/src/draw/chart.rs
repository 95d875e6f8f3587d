//! Charts as inline SVG: axes, ticks and grid from plotters' SVG backend, the data as SVG
//! elements written here (lines with dash patterns, point marks, bars, fault bands, each with
//! a `<title>` tooltip), placed with the chart's own coordinate mapping.
//!
//! The workspace builds plotters without font support (no font-kit, no ttf): its SVG backend
//! writes text as `<text>` elements with a font family name and lets the browser pick the
//! font. Writing the data ourselves gives what plotters' series lack: dashes (so that series
//! differ by more than colour), gaps in lines, tooltips, and compact paths (one `<path>` per
//! series of marks), which keep a million-operation report small.
//!
//! Colours come from the Okabe-Ito palette, which people with any common colour vision
//! deficiency can tell apart; series beyond its colours also differ by dash pattern. Fault
//! windows are light bands behind the data, one colour per kind ([`BandColour::rgb`]).
//! Legends ([`legend`], [`legend_lines`], [`band_legend`]) are HTML next to the chart (see the
//! report's `figures`) so that they never hide data.

use crate::error::ReportError;
use crate::html::esc;
use crate::scan::fault_windows::{BandColour, Fault, Faults};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use std::fmt::Write;

/// A colour as (red, green, blue).
pub type Rgb = (u8, u8, u8);

/// Okabe-Ito blue.
pub const BLUE: Rgb = (0, 114, 178);
/// Okabe-Ito orange.
pub const ORANGE: Rgb = (230, 159, 0);
/// Okabe-Ito bluish green.
pub const GREEN: Rgb = (0, 158, 115);
/// Okabe-Ito vermillion: reserved for losses and regressions.
pub const VERMILLION: Rgb = (213, 94, 0);
/// Okabe-Ito reddish purple.
pub const PURPLE: Rgb = (204, 121, 167);
/// Okabe-Ito sky blue.
pub const SKY: Rgb = (86, 180, 233);
/// Black.
pub const BLACK: Rgb = (0, 0, 0);
/// A mid grey for reference lines and extents.
pub const GREY: Rgb = (150, 150, 150);

/// Colours of series that are told apart by colour (partitions, operations, nodes). Vermillion
/// is left out: it marks losses everywhere.
pub const SERIES_RGB: [Rgb; 6] = [BLUE, ORANGE, GREEN, PURPLE, SKY, BLACK];
/// Dash patterns (SVG `stroke-dasharray`), combined with [`SERIES_RGB`] so that 30 series
/// differ in colour or dash.
pub const DASHES: [&str; 5] = ["", "7 3", "2 2", "9 3 2 3", "1 4"];

/// Width of every chart, px (the page scales it down on narrow screens).
pub const PLOT_WIDTH_PX: u32 = 1000;
/// Height of a time chart, px.
pub const PLOT_HEIGHT_PX: u32 = 320;
/// Opacity of fault bands: light enough to read data drawn on top.
const BAND_OPACITY: f64 = 0.3;
/// Bands narrower than this are widened so that a short fault stays visible.
const BAND_WIDTH_MIN_PX: i32 = 3;
/// Width of the y label area, px.
const Y_LABEL_AREA_PX: u32 = 70;
/// Width of the row label area of row charts, px.
const ROW_LABEL_AREA_PX: u32 = 110;
/// Height of one row of a row chart, px.
pub const ROW_HEIGHT_PX: u32 = 22;

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

/// How a line is stroked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stroke {
    /// Its colour.
    pub rgb: Rgb,
    /// Its SVG dash pattern, `""` for solid.
    pub dash: &'static str,
    /// Its width, px.
    pub width_px: f64,
}

impl Stroke {
    /// A solid line.
    pub fn solid(rgb: Rgb, width_px: f64) -> Stroke {
        Stroke {
            rgb,
            dash: "",
            width_px,
        }
    }

    /// The style of series number `n` of many: colours first, then dashes.
    pub fn nth(n: usize) -> Stroke {
        Stroke {
            rgb: SERIES_RGB[n % SERIES_RGB.len()],
            dash: DASHES[(n / SERIES_RGB.len()) % DASHES.len()],
            width_px: 1.5,
        }
    }
}

/// How the points of a series are marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A filled circle.
    Circle,
    /// A filled triangle.
    Triangle,
    /// An x-shaped cross.
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
    /// Tooltip of the series.
    pub title: String,
}

/// A line series, drawn as separate pieces where `segments` says the data has gaps.
#[derive(Debug, Clone)]
pub struct Line {
    /// How it is stroked.
    pub stroke: Stroke,
    /// Pieces of (x, y) in data units, each in x order.
    pub segments: Vec<Vec<(f64, f64)>>,
    /// Tooltip.
    pub title: String,
}

/// A fault window as drawn: a band over the whole height of a time chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    /// Its kind (colour).
    pub kind: Fault,
    /// Start, s since the test started.
    pub start_s: f64,
    /// End, s.
    pub end_s: f64,
    /// Tooltip: kind, nodes, times.
    pub title: String,
}

/// The bands of every fault window.
pub fn bands(faults: &Faults) -> Vec<Band> {
    faults
        .windows
        .iter()
        .map(|w| Band {
            kind: w.kind.clone(),
            start_s: w.start_s,
            end_s: w.end_s,
            title: format!(
                "{} {} from {:.1} s to {:.1} s{}",
                w.kind,
                w.nodes.join(","),
                w.start_s,
                w.end_s,
                if w.open { " (never stopped)" } else { "" }
            ),
        })
        .collect()
}

/// A chart with time (seconds since the test started) on x and fault windows shaded.
#[derive(Debug, Clone)]
pub struct TimeChart<'a> {
    /// Id of the chart, used in errors.
    pub id: &'a str,
    /// Title of the y axis, with its unit.
    pub y_label: &'a str,
    /// The x axis, s since the test started: from the main phase's start to the end.
    pub x_range_s: (f64, f64),
    /// The y range; for a log axis both ends must be positive.
    pub y_range: (f64, f64),
    /// Logarithmic y axis (latency spans orders of magnitude).
    pub y_log: bool,
    /// Label only whole numbers on the y axis (counts such as ISR sizes).
    pub y_integer: bool,
    /// Fault windows to shade.
    pub bands: &'a [Band],
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

/// Finishes an SVG document for inlining in HTML: inline SVG needs no namespace (leaving it
/// out keeps the page free of any URL), and the data written here goes before the end tag.
fn finish_svg(svg: String, data: &str) -> String {
    let svg = svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1);
    match svg.rfind("</svg>") {
        Some(at) => format!("{}{data}{}", &svg[..at], &svg[at..]),
        None => svg,
    }
}

/// Writes SVG elements in pixel coordinates.
#[derive(Default)]
pub struct SvgData {
    out: String,
}

impl SvgData {
    fn title(title: &str) -> String {
        if title.is_empty() {
            String::new()
        } else {
            format!("<title>{}</title>", esc(title))
        }
    }

    /// A filled rectangle from (x0, y0) to (x1, y1).
    pub fn rect(
        &mut self,
        (x0, y0): (i32, i32),
        (x1, y1): (i32, i32),
        rgb: Rgb,
        opacity: f64,
        title: &str,
    ) {
        let (x, w) = (x0.min(x1), (x1 - x0).abs());
        let (y, h) = (y0.min(y1), (y1 - y0).abs());
        let _ = write!(
            self.out,
            "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" fill=\"{}\"{}>{}</rect>",
            svg_hex(rgb),
            if opacity < 1.0 {
                format!(" fill-opacity=\"{opacity}\"")
            } else {
                String::new()
            },
            Self::title(title)
        );
    }

    /// A polyline through pixel points.
    pub fn polyline(&mut self, points: &[(i32, i32)], stroke: Stroke, title: &str) {
        if points.is_empty() {
            return;
        }
        let mut coords = String::with_capacity(points.len() * 8);
        for (x, y) in points {
            let _ = write!(coords, "{x},{y} ");
        }
        let dash = if stroke.dash.is_empty() {
            String::new()
        } else {
            format!(" stroke-dasharray=\"{}\"", stroke.dash)
        };
        let _ = write!(
            self.out,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{dash} points=\"{}\">{}</polyline>",
            svg_hex(stroke.rgb),
            stroke.width_px,
            coords.trim_end(),
            Self::title(title)
        );
    }

    /// Marks at pixel points, as one path.
    pub fn marks(
        &mut self,
        points: &[(i32, i32)],
        shape: Shape,
        size_px: u32,
        rgb: Rgb,
        title: &str,
    ) {
        if points.is_empty() {
            return;
        }
        let s = size_px.max(1) as i32;
        let mut d = String::with_capacity(points.len() * 12);
        for (x, y) in points {
            let _ = match shape {
                Shape::Circle => write!(d, "M{x} {y}h0"),
                Shape::Triangle => write!(d, "M{x} {}l{s} {}h{}z", y - s, 2 * s, -2 * s),
                Shape::Cross => write!(
                    d,
                    "M{} {}l{} {}m0 {}l{} {}",
                    x - s,
                    y - s,
                    2 * s,
                    2 * s,
                    -2 * s,
                    -2 * s,
                    2 * s
                ),
            };
        }
        let hex = svg_hex(rgb);
        let style = match shape {
            Shape::Circle => format!(
                "fill=\"none\" stroke=\"{hex}\" stroke-opacity=\"0.75\" stroke-width=\"{}\" stroke-linecap=\"round\"",
                2 * s
            ),
            Shape::Triangle => format!("fill=\"{hex}\" fill-opacity=\"0.75\""),
            Shape::Cross => format!("fill=\"none\" stroke=\"{hex}\" stroke-width=\"2\""),
        };
        let _ = write!(
            self.out,
            "<path {style} d=\"{d}\">{}</path>",
            Self::title(title)
        );
    }

    /// Text anchored at its right end.
    pub fn label_right(&mut self, (x, y): (i32, i32), text: &str) {
        let _ = write!(
            self.out,
            "<text x=\"{x}\" y=\"{y}\" text-anchor=\"end\" dominant-baseline=\"middle\" \
             font-family=\"sans-serif\" font-size=\"12\">{}</text>",
            esc(text)
        );
    }
}

/// Draws a time chart as an SVG document.
pub fn draw_time_chart(chart: &TimeChart) -> Result<String, ReportError> {
    let mut svg = String::new();
    let data;
    {
        let root =
            SVGBackend::with_string(&mut svg, (PLOT_WIDTH_PX, PLOT_HEIGHT_PX)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_error(chart.id, e))?;
        let (lo, hi) = chart.y_range;
        data = if chart.y_log {
            draw_time_chart_on(&root, chart, (lo..hi).log_scale())
        } else {
            draw_time_chart_on(&root, chart, lo..hi)
        }
        .map_err(|e| plot_error(chart.id, e))?;
        root.present().map_err(|e| plot_error(chart.id, e))?;
    }
    Ok(finish_svg(svg, &data))
}

/// The x range of a time axis, never empty.
fn x_range(chart_range: (f64, f64)) -> (f64, f64) {
    let (lo, hi) = chart_range;
    (lo, hi.max(lo + 1e-3))
}

fn draw_time_chart_on<Y>(
    root: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    chart: &TimeChart,
    y_spec: Y,
) -> Result<String, String>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let (x_lo, x_hi) = x_range(chart.x_range_s);
    let ctx = ChartBuilder::on(root)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(Y_LABEL_AREA_PX)
        .build_cartesian_2d(x_lo..x_hi, y_spec)
        .map_err(|e| e.to_string())?;
    let mut ctx = ctx;
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
    let px = |(x, y): (f64, f64)| ctx.backend_coord(&(x.clamp(x_lo, x_hi), y.clamp(y_lo, y_hi)));
    let mut data = SvgData::default();
    draw_bands(
        &mut data,
        chart.bands,
        (x_lo, x_hi),
        px((x_lo, y_hi)).1,
        px((x_lo, y_lo)).1,
        &px,
    );
    for line in &chart.lines {
        for segment in &line.segments {
            let points: Vec<(i32, i32)> = dedup_px(segment.iter().map(|&p| px(p)));
            data.polyline(&points, line.stroke, &line.title);
        }
    }
    for series in &chart.points {
        let points: Vec<(i32, i32)> = dedup_px(series.points.iter().map(|&p| px(p)));
        data.marks(
            &points,
            series.shape,
            series.size_px,
            series.rgb,
            &series.title,
        );
    }
    Ok(data.out)
}

/// Pixel points without consecutive repeats (many data points land on one pixel).
fn dedup_px(points: impl Iterator<Item = (i32, i32)>) -> Vec<(i32, i32)> {
    let mut out: Vec<(i32, i32)> = Vec::new();
    for p in points {
        if out.last() != Some(&p) {
            out.push(p);
        }
    }
    out
}

/// Fault bands over the plotting area's height, from `top` to `bottom` (pixels).
fn draw_bands(
    data: &mut SvgData,
    bands: &[Band],
    (x_lo, x_hi): (f64, f64),
    top: i32,
    bottom: i32,
    px: &dyn Fn((f64, f64)) -> (i32, i32),
) {
    for b in bands
        .iter()
        .filter(|b| b.end_s >= x_lo && b.start_s <= x_hi)
    {
        let x0 = px((b.start_s, 0.0)).0;
        let x1 = px((b.end_s, 0.0)).0.max(x0 + BAND_WIDTH_MIN_PX);
        data.rect(
            (x0, top),
            (x1, bottom),
            b.kind.rgb(),
            BAND_OPACITY,
            &b.title,
        );
    }
}

/// A bar of a row chart: from `x0` to `x1` in row `row`.
#[derive(Debug, Clone)]
pub struct RowBar {
    /// Row number (0 at the top).
    pub row: usize,
    /// Start, data units.
    pub x0: f64,
    /// End, data units.
    pub x1: f64,
    /// Fill colour.
    pub rgb: Rgb,
    /// Height as a share of the row (1.0: the whole row).
    pub height: f64,
    /// Tooltip.
    pub title: String,
}

/// A chart of rows (partitions, nodes, worker lanes) along x (time or offset), each row
/// holding bars.
#[derive(Debug, Clone)]
pub struct RowChart<'a> {
    /// Id of the chart, used in errors.
    pub id: &'a str,
    /// Title of the x axis.
    pub x_label: &'a str,
    /// The x range, data units.
    pub x_range: (f64, f64),
    /// Row labels, top to bottom.
    pub rows: Vec<String>,
    /// Fault windows to shade (time charts only).
    pub bands: &'a [Band],
    /// The bars, drawn in order (later ones on top).
    pub bars: Vec<RowBar>,
}

/// Draws a row chart as an SVG document; a row is [`ROW_HEIGHT_PX`] high.
pub fn draw_row_chart(chart: &RowChart) -> Result<String, ReportError> {
    let rows = chart.rows.len().max(1);
    let height = 70 + ROW_HEIGHT_PX * rows as u32;
    let mut svg = String::new();
    let data;
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH_PX, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_error(chart.id, e))?;
        data = draw_rows_on(&root, chart, rows).map_err(|e| plot_error(chart.id, e))?;
        root.present().map_err(|e| plot_error(chart.id, e))?;
    }
    Ok(finish_svg(svg, &data))
}

fn draw_rows_on(
    root: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    chart: &RowChart,
    rows: usize,
) -> Result<String, String> {
    let (x_lo, x_hi) = x_range(chart.x_range);
    let y_hi = rows as f64;
    let mut ctx = ChartBuilder::on(root)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(ROW_LABEL_AREA_PX)
        .build_cartesian_2d(x_lo..x_hi, 0f64..y_hi)
        .map_err(|e| e.to_string())?;
    ctx.configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc(chart.x_label)
        .x_label_formatter(&|v| fmt_num(*v))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(|e| e.to_string())?;
    // Row 0 at the top: y counts rows from the bottom.
    let px = |(x, y): (f64, f64)| ctx.backend_coord(&(x.clamp(x_lo, x_hi), y.clamp(0.0, y_hi)));
    let mut data = SvgData::default();
    let left = px((x_lo, 0.0)).0;
    // Stripes first, so that the fault bands over them stay visible on every row.
    for (row, label) in chart.rows.iter().enumerate() {
        let mid = y_hi - row as f64 - 0.5;
        data.label_right((left - 6, px((x_lo, mid)).1), label);
        if row % 2 == 1 {
            let (a, b) = (px((x_lo, mid - 0.5)), px((x_hi, mid + 0.5)));
            data.rect(a, b, (244, 244, 244), 1.0, "");
        }
    }
    draw_bands(
        &mut data,
        chart.bands,
        (x_lo, x_hi),
        px((x_lo, y_hi)).1,
        px((x_lo, 0.0)).1,
        &px,
    );
    for bar in &chart.bars {
        let mid = y_hi - bar.row as f64 - 0.5;
        let half = bar.height.clamp(0.05, 1.0) / 2.0;
        let (mut a, b) = (px((bar.x0, mid - half)), px((bar.x1, mid + half)));
        if (b.0 - a.0).abs() < 1 {
            a.0 = b.0 - 1;
        }
        data.rect(a, b, bar.rgb, 1.0, &bar.title);
    }
    Ok(data.out)
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
    Ok(finish_svg(svg, ""))
}

/// A legend: coloured swatches with labels.
pub fn legend(entries: &[(String, Rgb)]) -> String {
    let mut out = String::from("<div class=\"legend\">");
    for (label, rgb) in entries {
        let _ = write!(
            out,
            "<span class=\"item\"><span class=\"swatch\" style=\"background:{}\"></span>{}</span>",
            svg_hex(*rgb),
            esc(label)
        );
    }
    out.push_str("</div>");
    out
}

/// A legend of line samples (colour and dash) with labels.
pub fn legend_lines(entries: &[(String, Stroke)]) -> String {
    let mut out = String::from("<div class=\"legend\">");
    for (label, stroke) in entries {
        let dash = if stroke.dash.is_empty() {
            String::new()
        } else {
            format!(" stroke-dasharray=\"{}\"", stroke.dash)
        };
        let _ = write!(
            out,
            "<span class=\"item\"><svg class=\"key\" width=\"30\" height=\"10\"><line x1=\"0\" \
             y1=\"5\" x2=\"30\" y2=\"5\" stroke=\"{}\" stroke-width=\"{}\"{dash}/></svg>{}</span>",
            svg_hex(stroke.rgb),
            stroke.width_px.min(4.0),
            esc(label)
        );
    }
    out.push_str("</div>");
    out
}

/// The band colour of each fault kind present, for HTML legends.
pub fn band_legend(kinds: &[Fault]) -> Vec<(String, Rgb)> {
    kinds
        .iter()
        .map(|k| (format!("{} (fault)", k.name()), k.rgb()))
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
    fn thirty_series_differ_in_colour_or_dash() {
        let styles: Vec<(Rgb, &str)> = (0..30)
            .map(|n| (Stroke::nth(n).rgb, Stroke::nth(n).dash))
            .collect();
        let mut distinct = styles.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 30);
        assert!(
            styles.iter().all(|s| s.0 != VERMILLION),
            "vermillion is for losses"
        );
    }

    #[test]
    fn a_time_chart_draws_bands_lines_and_marks_in_the_plotting_area() {
        let bands = [Band {
            kind: Fault::Kill,
            start_s: 12.0,
            end_s: 33.0,
            title: "kill n1,n2".into(),
        }];
        let svg = draw_time_chart(&TimeChart {
            id: "t",
            y_label: "y",
            x_range_s: (10.0, 50.0),
            y_range: (0.0, 10.0),
            y_log: false,
            y_integer: false,
            bands: &bands,
            lines: vec![Line {
                stroke: Stroke::nth(7),
                segments: vec![
                    vec![(10.0, 1.0), (20.0, 2.0)],
                    vec![(30.0, 3.0), (40.0, 4.0)],
                ],
                title: "t0/1".into(),
            }],
            points: vec![Points {
                rgb: VERMILLION,
                shape: Shape::Cross,
                size_px: 3,
                points: vec![(25.0, 5.0)],
                title: "regression".into(),
            }],
        })
        .unwrap();
        assert!(!svg.contains("xmlns"));
        assert_eq!(svg.matches("<polyline fill=\"none\" stroke=\"#E69F00\" stroke-width=\"1.5\" stroke-dasharray=\"7 3\"").count(), 2);
        assert!(svg.contains("<title>kill n1,n2</title>"));
        assert!(svg.contains(&format!(
            "fill=\"{}\" fill-opacity=\"0.3\"",
            svg_hex(Fault::Kill.rgb())
        )));
        assert!(svg.contains("<title>regression</title>"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
