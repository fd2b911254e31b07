//! Jitter for retry schedules (watch backoff, leader election): a random fraction from std's
//! per-process random hasher keys, so no RNG dependency. Not for anything security-relevant.

use std::hash::{BuildHasher, Hasher};

/// A random fraction in `[0, 1)`.
pub fn fraction() -> f64 {
    // Each `RandomState` gets fresh keys (random per thread, then incremented), so hashing a
    // constant yields a new pseudo-random value per call.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_stay_in_range_and_vary() {
        let all: Vec<f64> = (0..200).map(|_| fraction()).collect();
        assert!(all.iter().all(|f| (0.0..1.0).contains(f)));
        let mut distinct = all.clone();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        assert!(distinct.len() > 150, "{} distinct", distinct.len());
    }
}
