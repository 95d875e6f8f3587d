//! `plot-lost-writes` (every gone acknowledged write by offset, one row per partition) and
//! `plot-unseen` (unseen writes and gone writes over time).

use super::{drawn_keys, omitted_note, BandNote};
use crate::draw::chart::{self, draw_row_chart, Line, RowBar, RowChart, Stroke, TimeChart};
use crate::draw::chart::{BLACK, BLUE, VERMILLION};
use crate::draw::downsample::{min_max_per_bucket, steps, BUCKETS_DEFAULT};
use crate::error::ReportError;
use crate::pages::report::context::Ctx;
use crate::scan::lost_writes::{KeyLosses, LossSource, Losses};
use serde_json::Value;
use tidewater_workloads::results::CheckResults;

/// Runs of lost offsets drawn per partition at most; closer runs are merged beyond that.
const RUNS_PER_ROW_MAX: usize = 2000;

/// Consecutive offsets as (first, last) runs; runs closer than `merge_gap` are merged.
fn runs(offsets: &[u64], merge_gap: u64) -> Vec<(u64, u64, u64)> {
    let mut out: Vec<(u64, u64, u64)> = Vec::new();
    for &o in offsets {
        match out.last_mut() {
            Some((_, last, n)) if o <= *last + 1 + merge_gap => {
                *last = (*last).max(o);
                *n += 1;
            }
            _ => out.push((o, o, 1)),
        }
    }
    out
}

/// How far the log of `key` reached: the final high watermark, the highest one observed,
/// and past the highest lost offset.
fn extent(ctx: &Ctx, key: &str, lost: &KeyLosses) -> (u64, Option<u64>) {
    let final_hw = ctx
        .scan
        .keys
        .iter()
        .position(|k| k == key)
        .and_then(|id| ctx.scan.final_keys.get(&(id as u32)))
        .and_then(|f| f.high_watermark);
    let observed = ctx
        .scan
        .watermarks
        .get(key)
        .and_then(|m| m.points.iter().map(|p| p.1).max());
    let lost_end = lost.offsets.last().map(|o| o + 1);
    let end = [final_hw, observed, lost_end]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(1);
    (end, final_hw)
}

/// The sentence under the lost-writes plot.
fn summary(losses: &Losses) -> String {
    let checker_total = losses.checker.as_ref().map(|c| c.0);
    if losses.source == LossSource::Examples {
        return format!(
            "The history has no ok final read, so the report cannot tell which acknowledged \
             writes are gone: only the checker's {} lost-write examples are drawn{}.",
            losses.total,
            checker_total
                .map(|n| format!(" (it counts {n} gone, stats.lost_acknowledged)"))
                .unwrap_or_default()
        );
    }
    let mut text = if losses.total == 0 {
        format!(
            "No acknowledged write is gone: the final reads returned all {} acknowledged writes.",
            losses.acked - losses.retention_excluded
        )
    } else {
        let per_key: Vec<String> = losses
            .by_key
            .iter()
            .filter(|(_, k)| k.count() > 0)
            .map(|(key, k)| format!("{key}: {} of {}", k.count(), k.acked))
            .collect();
        format!(
            "{} of {} acknowledged writes are gone ({}); every one with a known offset is drawn.",
            losses.total,
            losses.acked,
            per_key.join(", ")
        )
    };
    let without: u64 = losses.by_key.values().map(|k| k.without_offset).sum();
    if without > 0 {
        text.push_str(&format!(
            " {without} of them were acknowledged without an offset: counted, not drawn."
        ));
    }
    if losses.retention_excluded > 0 {
        text.push_str(&format!(
            " {} acknowledged writes lie below the final log start offset (retention may have \
             deleted them) and are not judged.",
            losses.retention_excluded
        ));
    }
    if !losses.final_completed {
        text.push_str(
            " The final reads did not complete: only offsets they covered count, so more may \
             be gone.",
        );
    }
    match (checker_total, losses.disagreements()) {
        (Some(n), d) if d.is_empty() => text.push_str(&format!(
            " The checker's count agrees (stats.lost_acknowledged: {n})."
        )),
        (Some(n), d) => {
            let list: Vec<String> = d
                .iter()
                .map(|(k, ours, theirs)| format!("{k}: {ours} here, {theirs} by the checker"))
                .collect();
            text.push_str(&format!(
                " The checker counts {n} (stats.lost_acknowledged), which differs: {}.",
                list.join("; ")
            ));
        }
        (None, _) => {}
    }
    text
}

pub(super) fn lost_writes_figure(ctx: &Ctx) -> Result<String, ReportError> {
    let losses = ctx.losses;
    let (keys, total) = drawn_keys(losses.by_key.keys());
    let mut rows = Vec::new();
    let mut bars = Vec::new();
    let mut x_max = 1u64;
    for (row, key) in keys.iter().enumerate() {
        let lost = &losses.by_key[key];
        let (end, final_hw) = extent(ctx, key, lost);
        x_max = x_max.max(end);
        rows.push(match lost.count() {
            0 if losses.source == LossSource::History => format!("{key}: none lost"),
            0 => key.clone(),
            n => format!("{key}: {n} lost"),
        });
        bars.push(RowBar {
            row,
            x0: 0.0,
            x1: end as f64,
            rgb: (200, 200, 200),
            height: 0.3,
            title: format!("{key}: offsets 0 to {end}"),
        });
        let merge_gap = if lost.offsets.len() > RUNS_PER_ROW_MAX {
            end / RUNS_PER_ROW_MAX as u64
        } else {
            0
        };
        for (first, last, n) in runs(&lost.offsets, merge_gap) {
            let title = if first == last {
                format!("{key}: the acknowledged write at offset {first} is gone")
            } else {
                format!("{key}: {n} acknowledged writes gone at offsets {first} to {last}")
            };
            bars.push(RowBar {
                row,
                x0: first as f64,
                x1: last as f64 + 1.0,
                rgb: VERMILLION,
                height: 0.8,
                title,
            });
        }
        if let Some(hw) = final_hw {
            bars.push(RowBar {
                row,
                x0: hw as f64,
                x1: hw as f64,
                rgb: BLACK,
                height: 1.0,
                title: format!("{key}: final high watermark {hw}"),
            });
        }
    }
    let svg = draw_row_chart(&RowChart {
        id: "plot-lost-writes",
        x_label: "offset",
        x_range: (0.0, x_max as f64 * 1.02),
        rows,
        bands: &[],
        bars,
    })?;
    Ok(super::figure(
        "plot-lost-writes",
        "Lost acknowledged writes by offset per partition",
        &svg,
        &chart::legend(&[
            ("acknowledged write gone".to_string(), VERMILLION),
            (
                "log extent (highest high watermark)".to_string(),
                (200, 200, 200),
            ),
            ("final high watermark".to_string(), BLACK),
        ]),
        &format!(
            "One row per partition that acknowledged writes; a red mark at the offset of every \
             acknowledged write the final reads no longer hold (hover for the offsets). Marks \
             left of the black line are holes in the log (another record now holds the offset); \
             marks right of it were cut off the log's end. {}{}",
            summary(losses),
            omitted_note(keys.len(), total)
        ),
    ))
}

/// `stats.unseen_series` as (s, count).
pub(crate) fn unseen_series(results: Option<&CheckResults>) -> Vec<(f64, f64)> {
    let series = results
        .and_then(|r| r.stats.get("unseen_series"))
        .and_then(Value::as_array);
    series
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let t = p.get(0)?.as_f64()?;
            let n = p.get(1)?.as_f64()?;
            Some((t / 1e9, n))
        })
        .collect()
}

/// The gone writes as a step line from 0 at the axis start to the total at its end.
fn gone_line(losses: &Losses, (x_lo, x_hi): (f64, f64)) -> Vec<(f64, f64)> {
    let mut points = vec![(x_lo, 0.0)];
    points.extend(
        losses
            .gone_by_ack
            .iter()
            .map(|&(t, n)| (t as f64 / 1e9, n as f64)),
    );
    let mut drawn = steps(&min_max_per_bucket(&points, x_lo, x_hi, BUCKETS_DEFAULT));
    drawn.push((x_hi, losses.total as f64));
    drawn
}

pub(super) fn unseen_figure(ctx: &Ctx, bands: &BandNote) -> Result<String, ReportError> {
    let (x_lo, x_hi) = ctx.x_range_s;
    let series = unseen_series(ctx.files.results.as_ref());
    let mut lines = Vec::new();
    let mut y_max = series.iter().map(|p| p.1).fold(1.0, f64::max);
    if !series.is_empty() {
        let mut unseen = steps(&min_max_per_bucket(&series, x_lo, x_hi, BUCKETS_DEFAULT));
        if let Some(&(t, n)) = unseen.last() {
            if t < x_hi {
                unseen.push((x_hi, n));
            }
        }
        lines.push(Line {
            stroke: Stroke::solid(BLUE, 1.5),
            segments: vec![unseen],
            title: "unseen: acknowledged, not read yet".into(),
        });
    }
    let with_gone = ctx.losses.source == LossSource::History;
    if with_gone {
        y_max = y_max.max(ctx.losses.total as f64);
        lines.push(Line {
            stroke: Stroke::solid(VERMILLION, 2.5),
            segments: vec![gone_line(ctx.losses, ctx.x_range_s)],
            title: format!(
                "gone: {} acknowledged writes the final reads no longer hold, by acknowledgement time",
                ctx.losses.total
            ),
        });
    }
    let svg = chart::draw_time_chart(&TimeChart {
        id: "plot-unseen",
        y_label: "acknowledged writes",
        x_range_s: ctx.x_range_s,
        y_range: (0.0, y_max * 1.05),
        y_log: false,
        y_integer: false,
        bands: &ctx.bands,
        lines,
        points: Vec::new(),
    })?;
    let mut entries = vec![("unseen (not read yet)".to_string(), BLUE)];
    if with_gone {
        entries.push(("gone (by acknowledgement time)".to_string(), VERMILLION));
    }
    let unseen_end = series.last().map_or(0.0, |p| p.1);
    let gone_text = if with_gone {
        format!(
            " Red: acknowledged writes that turned out to be gone (the final reads no longer \
             hold them), counted at the time they were acknowledged; it ends at the total, {}. \
             A write that some consumer read before it was lost is not unseen, so the blue line \
             can fall to {unseen_end:.0} while writes are lost: the red line is the one that \
             says what was lost.",
            ctx.losses.total
        )
    } else {
        " Without final reads in the history the report cannot tell which writes are gone; \
         see the lost-write anomaly."
            .to_string()
    };
    let note = if series.is_empty() {
        " The results hold no unseen series."
    } else {
        ""
    };
    Ok(super::figure(
        "plot-unseen",
        "Unseen and lost acknowledged writes over time",
        &svg,
        &bands.legend(entries),
        &format!(
            "Blue: acknowledged writes that no read had returned yet (stats.unseen_series). It \
             rises while consumers lag or a partition is unavailable, and falls as they catch \
             up.{gone_text}{note} {}",
            bands.text
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_offsets_form_runs() {
        assert_eq!(
            runs(&[1, 2, 3, 7, 9, 10], 0),
            vec![(1, 3, 3), (7, 7, 1), (9, 10, 2)]
        );
        assert_eq!(runs(&[1, 2, 3, 7, 9, 10], 3), vec![(1, 10, 6)]);
    }
}
