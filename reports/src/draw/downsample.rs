//! Downsampling what is drawn (never what is checked): a plot of a million points is
//! unreadable and megabytes large, so each series keeps at most two points per x bucket:
//! the lowest and the highest. Extremes (latency spikes, watermark drops) therefore always
//! survive, which a uniform sample would lose.

/// Buckets per plot width; with two points per bucket a series draws at most 2,000 points.
pub const BUCKETS_DEFAULT: usize = 1000;

/// Keeps, per bucket of x over `[x_min, x_max]`, the points with the lowest and highest y,
/// in x order. Series with at most `2 * buckets` points are returned unchanged.
pub fn min_max_per_bucket(
    points: &[(f64, f64)],
    x_min: f64,
    x_max: f64,
    buckets: usize,
) -> Vec<(f64, f64)> {
    if points.len() <= 2 * buckets || buckets == 0 {
        return points.to_vec();
    }
    let width = (x_max - x_min).max(f64::MIN_POSITIVE) / buckets as f64;
    let mut lows: Vec<Option<(f64, f64)>> = vec![None; buckets];
    let mut highs: Vec<Option<(f64, f64)>> = vec![None; buckets];
    for &(x, y) in points {
        let b = (((x - x_min) / width) as usize).min(buckets - 1);
        if !matches!(lows[b], Some((_, low)) if low <= y) {
            lows[b] = Some((x, y));
        }
        if !matches!(highs[b], Some((_, high)) if high >= y) {
            highs[b] = Some((x, y));
        }
    }
    let mut out = Vec::with_capacity(2 * buckets);
    for (low, high) in lows.into_iter().zip(highs) {
        match (low, high) {
            (Some(l), Some(h)) if l == h => out.push(l),
            (Some(l), Some(h)) if l.0 <= h.0 => out.extend([l, h]),
            (Some(l), Some(h)) => out.extend([h, l]),
            _ => {}
        }
    }
    out
}

/// Events per second in `buckets` equal buckets over `[0, x_max_s]`: returns the bucket
/// width in seconds and one (bucket middle, rate) point per bucket.
pub fn rate_per_bucket(
    times_s: impl IntoIterator<Item = f64>,
    x_max_s: f64,
    buckets: usize,
) -> (f64, Vec<(f64, f64)>) {
    let buckets = buckets.max(1);
    let width = (x_max_s / buckets as f64).max(1e-9);
    let mut counts = vec![0u64; buckets];
    for t in times_s {
        let b = ((t / width) as usize).min(buckets - 1);
        counts[b] += 1;
    }
    let points = counts
        .iter()
        .enumerate()
        .map(|(i, &c)| ((i as f64 + 0.5) * width, c as f64 / width))
        .collect();
    (width, points)
}

/// A step line through `points` (sorted by x): each value holds until the next one.
pub fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, &p) in points.iter().enumerate() {
        if i > 0 {
            out.push((p.0, points[i - 1].1));
        }
        out.push(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_each_buckets_extremes_and_at_most_two_points_per_bucket() {
        // 10,000 points of a flat line at 5 with one spike of 900 and one dip of -3.
        let mut points: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, 5.0)).collect();
        points[4321].1 = 900.0;
        points[7000].1 = -3.0;
        let out = min_max_per_bucket(&points, 0.0, 10_000.0, 100);
        assert!(out.len() <= 200, "{}", out.len());
        assert!(out.contains(&(4321.0, 900.0)));
        assert!(out.contains(&(7000.0, -3.0)));
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0), "x order is kept");
    }

    #[test]
    fn small_series_are_unchanged() {
        let points = vec![(3.0, 1.0), (1.0, 2.0)];
        assert_eq!(min_max_per_bucket(&points, 0.0, 4.0, 10), points);
    }

    #[test]
    fn rates_are_events_per_second_per_bucket() {
        let (width, points) = rate_per_bucket([0.1, 0.2, 0.3, 1.5], 2.0, 2);
        assert_eq!(width, 1.0);
        assert_eq!(points, vec![(0.5, 3.0), (1.5, 1.0)]);
    }

    #[test]
    fn steps_hold_each_value_until_the_next() {
        assert_eq!(
            steps(&[(0.0, 3.0), (2.0, 2.0), (5.0, 3.0)]),
            vec![(0.0, 3.0), (2.0, 3.0), (2.0, 2.0), (5.0, 2.0), (5.0, 3.0)]
        );
    }
}
