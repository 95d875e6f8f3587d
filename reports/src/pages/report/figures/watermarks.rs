//! `plot-hw`: the high watermark each ok operation observed, per partition, as steps (a
//! watermark holds until the next observation) with gaps where nothing was observed; the
//! leaders' sampled watermarks as dots; regressions gathered into episodes, each one mark.

use super::{drawn_keys, omitted_note, op_ref, BandNote};
use crate::draw::chart::{self, legend_lines, Line, Points, Shape, Stroke, TimeChart, VERMILLION};
use crate::draw::downsample::{min_max_per_bucket, steps, BUCKETS_DEFAULT};
use crate::error::ReportError;
use crate::html::esc;
use crate::pages::report::context::Ctx;
use crate::scan::history::HwRegression;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Regressions of one partition closer than this are one episode.
const EPISODE_GAP_NS: u64 = 1_000_000_000;
/// Episodes drawn at most; beyond, the gap that joins them doubles.
const EPISODES_MAX: usize = 300;
/// Episodes listed under the plot.
const EPISODES_LISTED: usize = 10;

/// Regressions of one partition close in time, drawn as one mark.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Episode {
    /// The partition.
    pub key: String,
    /// Its first and last regression, ns.
    pub start_ns: u64,
    /// The end, ns.
    pub end_ns: u64,
    /// Regressions in it.
    pub count: u64,
    /// The lowest watermark observed in it.
    pub lowest: u64,
    /// The highest watermark that had been observed before.
    pub prior: u64,
    /// Its first regression: (observing op, op that had seen more).
    pub ops: (u64, u64),
}

/// Gathers regressions into episodes per partition, at most [`EPISODES_MAX`].
pub(crate) fn episodes(regressions: &[HwRegression]) -> Vec<Episode> {
    let mut by_key: BTreeMap<&str, Vec<&HwRegression>> = BTreeMap::new();
    for r in regressions {
        by_key.entry(&r.key).or_default().push(r);
    }
    let mut gap = EPISODE_GAP_NS;
    loop {
        let mut out: Vec<Episode> = Vec::new();
        for (key, rs) in &by_key {
            let mut current: Option<Episode> = None;
            for r in rs {
                match &mut current {
                    Some(e) if r.time_ns <= e.end_ns + gap => {
                        e.end_ns = e.end_ns.max(r.time_ns);
                        e.count += 1;
                        e.lowest = e.lowest.min(r.hw);
                        e.prior = e.prior.max(r.prior_hw);
                    }
                    _ => {
                        out.extend(current.take());
                        current = Some(Episode {
                            key: key.to_string(),
                            start_ns: r.time_ns,
                            end_ns: r.time_ns,
                            count: 1,
                            lowest: r.hw,
                            prior: r.prior_hw,
                            ops: (r.index, r.prior_index),
                        });
                    }
                }
            }
            out.extend(current);
        }
        if out.len() <= EPISODES_MAX {
            out.sort_by_key(|e| (e.start_ns, e.key.clone()));
            return out;
        }
        gap *= 2;
    }
}

/// Splits a series (x in order) where consecutive points are more than `gap` apart.
fn split_at_gaps(points: &[(f64, f64)], gap: f64) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    for &p in points {
        match out.last_mut() {
            Some(seg) if seg.last().is_some_and(|l| p.0 - l.0 <= gap) => seg.push(p),
            _ => out.push(vec![p]),
        }
    }
    out
}

pub(super) fn figure(ctx: &Ctx, bands: &BandNote) -> Result<String, ReportError> {
    let (x_lo, x_hi) = ctx.x_range_s;
    // A line is broken where no operation observed the watermark for a second (or for two
    // slices of the downsampling grid, on long runs).
    let gap_s = (2.0 * (x_hi - x_lo) / BUCKETS_DEFAULT as f64).max(1.0);
    let sample_keys = ctx
        .replicas
        .by_key
        .iter()
        .filter(|(_, k)| k.points.iter().any(|p| p.high_watermark.is_some()))
        .map(|(key, _)| key);
    let (keys, total) = drawn_keys(ctx.scan.watermarks.keys().chain(sample_keys));
    let mut lines = Vec::new();
    let mut points = Vec::new();
    let mut entries = Vec::new();
    let mut y_max = 1f64;
    let mut gaps = 0;
    for (n, key) in keys.iter().enumerate() {
        let stroke = Stroke::nth(n);
        entries.push((key.clone(), stroke));
        if let Some(marks) = ctx.scan.watermarks.get(key) {
            let raw: Vec<(f64, f64)> = marks
                .points
                .iter()
                .map(|&(t, hw)| (t as f64 / 1e9, hw as f64))
                .collect();
            y_max = raw.iter().map(|p| p.1).fold(y_max, f64::max);
            let segments: Vec<Vec<(f64, f64)>> = split_at_gaps(&raw, gap_s)
                .into_iter()
                .map(|s| steps(&min_max_per_bucket(&s, x_lo, x_hi, BUCKETS_DEFAULT)))
                .collect();
            gaps += segments.len().saturating_sub(1);
            lines.push(Line {
                stroke,
                segments,
                title: format!("{key}: high watermark observed by ok operations"),
            });
        }
        let sampled: Vec<(f64, f64)> = ctx
            .replicas
            .by_key
            .get(key)
            .into_iter()
            .flat_map(|k| &k.points)
            .filter_map(|p| {
                p.high_watermark
                    .map(|hw| (p.time_ns as f64 / 1e9, hw as f64))
            })
            .collect();
        y_max = sampled.iter().map(|p| p.1).fold(y_max, f64::max);
        points.push(Points {
            rgb: stroke.rgb,
            shape: Shape::Circle,
            size_px: 1,
            points: min_max_per_bucket(&sampled, x_lo, x_hi, BUCKETS_DEFAULT),
            title: format!("{key}: the leader's high watermark (sampled)"),
        });
    }
    let episodes = episodes(&ctx.scan.hw_regressions);
    for e in &episodes {
        let t = e.start_ns as f64 / 1e9;
        lines.push(Line {
            stroke: Stroke::solid(VERMILLION, 2.0),
            segments: vec![vec![(t, e.lowest as f64), (t, e.prior as f64)]],
            title: episode_text(e),
        });
    }
    points.push(Points {
        rgb: VERMILLION,
        shape: Shape::Cross,
        size_px: 4,
        points: episodes
            .iter()
            .map(|e| (e.start_ns as f64 / 1e9, e.lowest as f64))
            .collect(),
        title: "high-watermark regression episode".into(),
    });
    let svg = chart::draw_time_chart(&TimeChart {
        id: "plot-hw",
        y_label: "high watermark (offset)",
        x_range_s: ctx.x_range_s,
        y_range: (0.0, y_max * 1.05),
        y_log: false,
        y_integer: false,
        bands: &ctx.bands,
        lines,
        points,
    })?;
    if !episodes.is_empty() {
        entries.push((
            "✕ regression episode".to_string(),
            Stroke::solid(VERMILLION, 2.0),
        ));
    }
    Ok(super::figure_with(
        "plot-hw",
        "High watermark over time per partition",
        &svg,
        &(legend_lines(&entries) + &bands.legend(Vec::new())),
        &format!(
            "Lines: the high watermark each ok operation observed (its completion's \
             high_watermarks), holding until the next observation; a line stops where nothing \
             was observed for {gap_s:.1} s ({gaps} such gaps). Dots: the leader's high watermark \
             sampled from the leader itself (the companion broker's status route; Apache \
             Kafka's ListOffsets and a fetch sent to the leader).{} {}{} {}",
            super::replicas::no_samples_note(ctx),
            regression_text(ctx, &episodes),
            omitted_note(keys.len(), total),
            bands.text
        ),
        &episodes_table(ctx, &episodes),
    ))
}

fn episode_text(e: &Episode) -> String {
    format!(
        "{}: {} observation(s) went back between {:.1} s and {:.1} s, as low as {} after {} had been seen",
        e.key,
        e.count,
        e.start_ns as f64 / 1e9,
        e.end_ns as f64 / 1e9,
        e.lowest,
        e.prior
    )
}

fn regression_text(ctx: &Ctx, episodes: &[Episode]) -> String {
    let count = ctx.scan.hw_regressions_count;
    if count == 0 {
        return "No client saw the high watermark go back.".to_string();
    }
    let mut out = format!(
        "A regression is an ok operation that observed a lower watermark than one that had \
         completed before it began (hw-regression in docs/checkers.md, recomputed here for \
         drawing; the checker's classes are in the Anomalies section). {count} regressions, \
         gathered into {} episodes (regressions of a partition less than a second apart), \
         each drawn as one red bar from the lowest watermark seen to the highest seen before, \
         so the lines stay visible.",
        episodes.len()
    );
    if episodes.len() > EPISODES_LISTED {
        let _ = write!(
            out,
            " The first {EPISODES_LISTED} are listed below, all are drawn."
        );
    }
    out
}

/// The first episodes as a table, with links to their ops.
fn episodes_table(ctx: &Ctx, episodes: &[Episode]) -> String {
    if episodes.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<table class=\"examples\"><tr><th>partition</th><th class=\"num\">from s</th>\
         <th class=\"num\">to s</th><th class=\"num\">regressions</th><th>went back</th>\
         <th>first</th></tr>",
    );
    for e in episodes.iter().take(EPISODES_LISTED) {
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"num\">{:.1}</td><td class=\"num\">{:.1}</td>\
             <td class=\"num\">{}</td><td>from {} to {}</td><td>op {} saw less than op {}</td></tr>",
            esc(&e.key),
            e.start_ns as f64 / 1e9,
            e.end_ns as f64 / 1e9,
            e.count,
            e.prior,
            e.lowest,
            op_ref(ctx, e.ops.0),
            op_ref(ctx, e.ops.1)
        );
    }
    out.push_str("</table>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(key: &str, t_ms: u64, hw: u64, prior: u64) -> HwRegression {
        HwRegression {
            key: key.into(),
            index: t_ms,
            time_ns: t_ms * 1_000_000,
            hw,
            prior_hw: prior,
            prior_index: 0,
        }
    }

    #[test]
    fn close_regressions_of_a_partition_are_one_episode() {
        let rs = [
            r("a", 1000, 5, 9),
            r("a", 1500, 3, 9),
            r("b", 1600, 1, 2),
            r("a", 2400, 4, 10),
            r("a", 9000, 7, 8),
        ];
        let e = episodes(&rs);
        let got: Vec<(&str, u64, u64, u64, u64)> = e
            .iter()
            .map(|e| {
                (
                    e.key.as_str(),
                    e.start_ns / 1_000_000,
                    e.count,
                    e.lowest,
                    e.prior,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("a", 1000, 3, 3, 10),
                ("b", 1600, 1, 1, 2),
                ("a", 9000, 1, 7, 8)
            ]
        );
    }

    #[test]
    fn lines_break_where_nothing_was_observed() {
        let s = split_at_gaps(&[(0.0, 1.0), (0.5, 2.0), (9.0, 3.0), (9.2, 4.0)], 1.0);
        assert_eq!(
            s,
            vec![vec![(0.0, 1.0), (0.5, 2.0)], vec![(9.0, 3.0), (9.2, 4.0)]]
        );
    }
}
