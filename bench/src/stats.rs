//! Summaries of repeated measurements. Percentiles use the nearest-rank method: with five
//! trials, p95 is the largest value, which is the honest answer for so few samples.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub median: f64,
    pub p95: f64,
    pub max: f64,
}

/// `None` for no samples; NaN samples are ignored because they stand for "not measured".
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(Summary {
        n: v.len(),
        min: v[0],
        median: median_sorted(&v),
        p95: nearest_rank(&v, 95.0),
        max: v[v.len() - 1],
    })
}

/// The median of already sorted values; the mean of the two middle ones for an even count.
fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn median(samples: &[f64]) -> Option<f64> {
    summarize(samples).map(|s| s.median)
}

/// The smallest value with at least `pct` percent of the values at or below it.
fn nearest_rank(sorted: &[f64], pct: f64) -> f64 {
    let rank = ((pct / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_trials() {
        let s = summarize(&[3.0, 1.0, 5.0, 2.0, 4.0]).unwrap();
        assert_eq!(
            s,
            Summary {
                n: 5,
                min: 1.0,
                median: 3.0,
                p95: 5.0,
                max: 5.0
            }
        );
    }

    #[test]
    fn even_count_median_and_p95_of_twenty() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        let s = summarize(&v).unwrap();
        assert_eq!(s.median, 10.5);
        assert_eq!(s.p95, 19.0);
    }

    #[test]
    fn missing_samples_are_skipped() {
        assert_eq!(summarize(&[]), None);
        assert_eq!(summarize(&[f64::NAN]), None);
        let s = summarize(&[f64::NAN, 2.0]).unwrap();
        assert_eq!((s.n, s.min, s.max), (1, 2.0, 2.0));
        assert_eq!(median(&[7.0]), Some(7.0));
    }
}
