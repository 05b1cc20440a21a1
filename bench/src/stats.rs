//! Summary statistics of a sample of durations: median and spread (p10,
//! p90, median absolute deviation), robust on a noisy shared machine.

use std::time::Duration;

/// A summary of one measurement, in a fixed unit.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    /// Median absolute deviation from the median.
    pub mad: f64,
}

impl Summary {
    /// Summarises `values` (any unit). Panics on an empty sample: every
    /// benchmark takes at least one.
    pub fn of(values: &[f64]) -> Summary {
        assert!(!values.is_empty(), "a summary needs at least one value");
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let median = quantile(&v, 0.5);
        let mut dev: Vec<f64> = v.iter().map(|x| (x - median).abs()).collect();
        dev.sort_by(f64::total_cmp);
        Summary { n: v.len(), median, p10: quantile(&v, 0.1), p90: quantile(&v, 0.9), mad: quantile(&dev, 0.5) }
    }

    /// Summarises durations in microseconds.
    pub fn micros(samples: &[Duration]) -> Summary {
        Self::of(&samples.iter().map(|d| d.as_secs_f64() * 1e6).collect::<Vec<_>>())
    }

    /// Summarises durations in milliseconds.
    pub fn millis(samples: &[Duration]) -> Summary {
        Self::of(&samples.iter().map(|d| d.as_secs_f64() * 1e3).collect::<Vec<_>>())
    }
}

/// Linear interpolation between closest ranks of a sorted sample.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread_of_a_known_sample() {
        let s = Summary::of(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.mad, 1.0);
        assert!((s.p10 - 1.4).abs() < 1e-9);
        assert!((s.p90 - 4.6).abs() < 1e-9);
    }

    #[test]
    fn one_value_is_its_own_summary() {
        let s = Summary::of(&[7.0]);
        assert_eq!((s.median, s.p10, s.p90, s.mad), (7.0, 7.0, 7.0, 0.0));
    }
}
