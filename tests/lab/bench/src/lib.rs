//! What every benchmark shares: a seeded generator for scenarios, percentiles of sorted samples,
//! milliseconds for tables, the goals a benchmark states beside its figures, and the JSON summary
//! written to `target/bench/<name>.json` in the repository, from which `make bench-report` builds
//! the tables. A crate of its own beside the lab, depending on `serde_json` only, so the policy
//! crate's and the webhook's in-process benchmarks use it without the harness, kube or tokio.

use std::path::PathBuf;
use std::time::Duration;

/// The value at quantile `q` (0.0–1.0, nearest rank) of `sorted` samples; zero when empty.
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let last = sorted.len() - 1;
    let rank = ((last as f64) * q.clamp(0.0, 1.0)).round() as usize;
    sorted[rank.min(last)]
}

/// A small deterministic generator (a 64-bit LCG, Knuth's MMIX constants), so a seed names the
/// same generated scenarios on every machine.
#[derive(Debug, Clone)]
pub struct Lcg(pub u64);

impl Lcg {
    /// The next value in `0..n` (`n` > 0).
    pub fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }

    /// The next value in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next(hi - lo + 1)
    }
}

/// Milliseconds with three decimals.
pub fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// Microseconds with three decimals.
pub fn us(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e9).round() / 1e3
}

/// `target/bench` at the repository root (the directory holding `Cargo.lock` above the
/// benchmark's crate), whatever `CARGO_TARGET_DIR` says: the summaries are a report, not a build
/// product.
pub fn summary_dir() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = manifest
        .ancestors()
        .find(|d| d.join("Cargo.lock").is_file())
        .map_or_else(|| manifest.clone(), PathBuf::from);
    root.join("target").join("bench")
}

/// Writes `value` as `target/bench/<name>.json` (see [`summary_dir`]) and says so; a benchmark
/// that cannot write its summary still printed its table, so a failure is only reported.
pub fn write_summary(name: &str, value: &serde_json::Value) {
    let dir = summary_dir();
    let path = dir.join(format!("{name}.json"));
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        let text = serde_json::to_string_pretty(value).unwrap_or_default();
        std::fs::write(&path, text + "\n")
    });
    match written {
        Ok(()) => println!("summary written to {}", path.display()),
        Err(e) => eprintln!("summary not written to {}: {e}", path.display()),
    }
}

/// A goal a benchmark states, beside the figure this run measured: printed as one line and kept
/// in the summary's `goals` array, from which `make bench-report` builds the README's goals table.
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    /// What is measured, in words (`review p99, 150,000 pods in process`).
    pub what: String,
    /// The figure must be at most this (at least, with `at_least`).
    pub target: f64,
    /// What this run measured.
    pub figure: f64,
    /// The unit of both (`µs`, `MiB`, `s`, `×`).
    pub unit: String,
    /// A throughput: the figure must be at least the target.
    pub at_least: bool,
    /// Anything the figure needs beside it (an interval, the size it was measured at).
    pub detail: String,
}

impl Goal {
    /// A goal the figure meets by being at most `target`.
    pub fn at_most(what: &str, figure: f64, target: f64, unit: &str) -> Goal {
        Goal {
            what: what.to_owned(),
            target,
            figure,
            unit: unit.to_owned(),
            at_least: false,
            detail: String::new(),
        }
    }

    /// The same goal with `detail` beside its figure.
    pub fn with_detail(mut self, detail: &str) -> Goal {
        self.detail = detail.to_owned();
        self
    }

    /// Whether the figure meets the target (a NaN figure never does).
    pub fn met(&self) -> bool {
        if self.at_least {
            self.figure >= self.target
        } else {
            self.figure <= self.target
        }
    }

    /// `goal: … ≤ target | figure: … | met` as printed.
    pub fn line(&self) -> String {
        let op = if self.at_least { "≥" } else { "≤" };
        let detail = if self.detail.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.detail)
        };
        format!(
            "goal: {} {op} {} {} | figure: {} {}{detail} | {}",
            self.what,
            self.target,
            self.unit,
            round3(self.figure),
            self.unit,
            if self.met() { "met" } else { "NOT met" }
        )
    }

    /// The goal as the summary keeps it.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "what": self.what, "target": self.target, "figure": round3(self.figure),
            "unit": self.unit, "at_least": self.at_least, "detail": self.detail, "met": self.met(),
        })
    }
}

/// Prints each goal's line and returns them as the summary's `goals` array.
pub fn report_goals(goals: &[Goal]) -> serde_json::Value {
    for g in goals {
        println!("{}", g.line());
    }
    serde_json::Value::Array(goals.iter().map(Goal::json).collect())
}

/// One row of the README's Benchmarks table, written by the benchmark that measured it: what
/// ran, the command that reproduces it, and the figures of this run. Kept in the summary's
/// `rows` array, from which `make bench-report` builds the table.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Row {
    /// What was measured, in words.
    pub what: String,
    /// The command that reproduces it.
    pub command: String,
    /// The median, with its unit; empty when the row has none.
    pub p50: String,
    /// The 99th percentile, with its unit; empty when the row has none.
    pub p99: String,
    /// Everything else this run measured.
    pub other: String,
}

impl Row {
    /// A row of `what`, reproduced by `command`.
    pub fn new(what: &str, command: &str) -> Row {
        Row {
            what: what.to_owned(),
            command: command.to_owned(),
            ..Row::default()
        }
    }

    /// The same row with its median and 99th percentile.
    pub fn percentiles(mut self, p50: &str, p99: &str) -> Row {
        self.p50 = p50.to_owned();
        self.p99 = p99.to_owned();
        self
    }

    /// The same row with `other`.
    pub fn other(mut self, other: &str) -> Row {
        self.other = other.to_owned();
        self
    }

    /// The row as the summary keeps it.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "what": self.what, "command": self.command, "p50": self.p50, "p99": self.p99,
            "other": self.other,
        })
    }
}

/// The summary's `rows` array.
pub fn rows_json(rows: &[Row]) -> serde_json::Value {
    serde_json::Value::Array(rows.iter().map(Row::json).collect())
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{ms, percentile};

    #[test]
    fn percentiles_pick_the_nearest_rank_of_sorted_samples() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&samples, 0.5), Duration::from_millis(51));
        assert_eq!(percentile(&samples, 0.99), Duration::from_millis(99));
        assert_eq!(percentile(&samples, 1.0), Duration::from_millis(100));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
        assert_eq!(ms(Duration::from_micros(1234)), 1.234);
    }

    #[test]
    fn a_goal_is_met_on_its_side_of_the_target_and_never_by_nan() {
        let g = super::Goal::at_most("review p99", 412.4, 1000.0, "µs");
        assert!(g.met());
        assert_eq!(
            g.line(),
            "goal: review p99 ≤ 1000 µs | figure: 412.4 µs | met"
        );
        let over = super::Goal::at_most("ready", 10.1, 10.0, "s").with_detail("30,000 pods");
        assert!(!over.met());
        assert!(
            over.line()
                .ends_with("figure: 10.1 s (30,000 pods) | NOT met")
        );
        assert!(!super::Goal::at_most("x", f64::NAN, 1.0, "s").met());
        let rate = super::Goal {
            at_least: true,
            ..super::Goal::at_most("saturation", 14_900.0, 10_000.0, "reviews/s")
        };
        assert!(rate.met() && rate.line().contains("≥ 10000"));
        assert_eq!(g.json()["met"], serde_json::json!(true));
    }
}
