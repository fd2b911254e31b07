//! Helpers shared by the webhook benchmarks: percentiles and the JSON summary file.
#![allow(dead_code)]

use std::time::Duration;

/// The value at quantile `q` of sorted samples.
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// Milliseconds with three decimals.
pub fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// Writes `target/bench/<name>.json`.
pub fn write_summary(name: &str, value: &serde_json::Value) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(
            dir.join(format!("{name}.json")),
            serde_json::to_string_pretty(value).unwrap_or_default(),
        );
        println!("summary written to target/bench/{name}.json");
    }
}
