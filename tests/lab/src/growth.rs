//! Memory growth across the steps of a scale benchmark: MiB per 1,000 pods between consecutive
//! steps, a least-squares line over all of them, whether growth is linear, and extrapolations.
//!
//! Growth counts as linear when every step-to-step slope is within 25 % of the fitted slope and
//! the line explains at least 98 % of the variance; with two steps there is one slope and nothing
//! to judge. The extrapolation uses the last step-to-step slope (the per-pod cost at the largest
//! size measured), and the fitted line for comparison.

use serde_json::{Value, json};

/// Growth of one quantity (MiB) over pod counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Growth {
    /// (pods, MiB) as measured.
    pub points: Vec<(usize, f64)>,
    /// MiB per 1,000 pods between consecutive points.
    pub slopes: Vec<f64>,
    /// Least-squares line: MiB at zero pods.
    pub intercept: f64,
    /// Least-squares line: MiB per 1,000 pods.
    pub slope: f64,
    /// Coefficient of determination of the line.
    pub r2: f64,
}

impl Growth {
    /// Fits `points` (pods, MiB); `None` for fewer than two distinct pod counts.
    pub fn fit(points: &[(usize, f64)]) -> Option<Growth> {
        if points.len() < 2 {
            return None;
        }
        let slopes: Vec<f64> = points
            .windows(2)
            .map(|w| (w[1].1 - w[0].1) / ((w[1].0 as f64 - w[0].0 as f64) / 1000.0))
            .collect();
        let n = points.len() as f64;
        let xs: Vec<f64> = points.iter().map(|p| p.0 as f64 / 1000.0).collect();
        let mean_x = xs.iter().sum::<f64>() / n;
        let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = xs.iter().map(|x| (x - mean_x).powi(2)).sum();
        if sxx == 0.0 {
            return None;
        }
        let sxy: f64 = xs
            .iter()
            .zip(points)
            .map(|(x, p)| (x - mean_x) * (p.1 - mean_y))
            .sum();
        let slope = sxy / sxx;
        let intercept = mean_y - slope * mean_x;
        let ss_tot: f64 = points.iter().map(|p| (p.1 - mean_y).powi(2)).sum();
        let ss_res: f64 = xs
            .iter()
            .zip(points)
            .map(|(x, p)| (p.1 - (intercept + slope * x)).powi(2))
            .sum();
        let r2 = if ss_tot == 0.0 {
            1.0
        } else {
            1.0 - ss_res / ss_tot
        };
        Some(Growth {
            points: points.to_vec(),
            slopes,
            intercept,
            slope,
            r2,
        })
    }

    /// `Some(true)` when linear (see the module documentation), `None` with one slope only.
    pub fn linear(&self) -> Option<bool> {
        if self.slopes.len() < 2 {
            return None;
        }
        let close = self
            .slopes
            .iter()
            .all(|s| (s - self.slope).abs() <= 0.25 * self.slope.abs().max(0.1));
        Some(close && self.r2 >= 0.98)
    }

    /// MiB at `pods` by the last step-to-step slope.
    pub fn extrapolate_last_slope(&self, pods: usize) -> f64 {
        let (last_pods, last_mib) = self.points[self.points.len() - 1];
        let slope = self.slopes[self.slopes.len() - 1];
        last_mib + slope * (pods as f64 - last_pods as f64) / 1000.0
    }

    /// MiB at `pods` by the fitted line.
    pub fn extrapolate_fit(&self, pods: usize) -> f64 {
        self.intercept + self.slope * pods as f64 / 1000.0
    }

    /// One line: slopes, the fit, the verdict and the extrapolation to `target` pods.
    pub fn describe(&self, target: usize) -> String {
        let slopes: Vec<String> = self
            .points
            .windows(2)
            .zip(&self.slopes)
            .map(|(w, s)| format!("{:+.2} ({}→{})", s, w[0].0, w[1].0))
            .collect();
        let verdict = match self.linear() {
            Some(true) => "linear",
            Some(false) => "not linear",
            None => "one slope, linearity not judged",
        };
        format!(
            "{} MiB per 1,000 pods; fit {:.1} MiB + {:.2} MiB/1,000 pods (R² {:.3}): {verdict}; \
             at {target} pods ≈ {:.0} MiB by the last slope, {:.0} MiB by the fit",
            slopes.join(", "),
            self.intercept,
            self.slope,
            self.r2,
            self.extrapolate_last_slope(target),
            self.extrapolate_fit(target)
        )
    }

    /// The figures as JSON, with the extrapolation to `target` pods.
    pub fn to_json(&self, target: usize) -> Value {
        json!({
            "points": self.points.iter().map(|(p, m)| json!({"pods": p, "mib": m})).collect::<Vec<_>>(),
            "mib_per_1000_pods_between_steps": self.slopes,
            "fit": {"intercept_mib": self.intercept, "mib_per_1000_pods": self.slope, "r2": self.r2},
            "linear": self.linear(),
            "extrapolation": {
                "pods": target,
                "mib_by_last_slope": self.extrapolate_last_slope(target),
                "mib_by_fit": self.extrapolate_fit(target),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_straight_line_is_linear_and_extrapolates_exactly() {
        let g = Growth::fit(&[(3000, 40.0), (10000, 54.0), (30000, 94.0)]).unwrap();
        assert_eq!(g.slopes, vec![2.0, 2.0]);
        assert!((g.slope - 2.0).abs() < 1e-9 && (g.intercept - 34.0).abs() < 1e-9);
        assert_eq!(g.linear(), Some(true));
        assert!((g.extrapolate_last_slope(150_000) - 334.0).abs() < 1e-9);
        assert!((g.extrapolate_fit(150_000) - 334.0).abs() < 1e-9);
    }

    #[test]
    fn a_bend_is_not_linear_and_two_points_are_not_judged() {
        let g = Growth::fit(&[(3000, 40.0), (10000, 44.0), (30000, 140.0)]).unwrap();
        assert_eq!(g.linear(), Some(false));
        let two = Growth::fit(&[(3000, 40.0), (10000, 54.0)]).unwrap();
        assert_eq!(two.linear(), None);
        assert!(Growth::fit(&[(3000, 40.0)]).is_none());
    }
}
