//! What every benchmark shares: a seeded generator for scenarios, percentiles of sorted samples,
//! milliseconds for tables, and the JSON summary written to `target/bench/<name>.json` in the repository. The controller's and
//! webhook's benchmarks use it as `resize_guard_harness::bench`; the policy crate's benchmarks,
//! which must not depend on the harness, include this file with `#[path]` (it needs only `std`
//! and `serde_json`).

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
}
