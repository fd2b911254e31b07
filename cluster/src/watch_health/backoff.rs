//! The retry schedule of every watch of the view: short, jittered, and reset by success or a
//! quiet spell, so a lasting fault shows up as errors within a streak.

use std::time::{Duration, Instant};

/// The watches' retry schedule: 1 s doubling to at most 10 s, with up to 25 % jitter, back to 1 s
/// after a successful event or two minutes without an error. Kept short so that a lasting fault
/// produces an error well within [`super::STREAK_QUIET`] (10 s + 25 % + a 30 s connect timeout).
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: Duration,
    last: Option<Instant>,
}

/// First wait.
const BACKOFF_MIN: Duration = Duration::from_secs(1);
/// Longest wait (before jitter).
const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// A wait this long after the previous one starts over from [`BACKOFF_MIN`].
const BACKOFF_RESET: Duration = Duration::from_secs(120);

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff {
            next: BACKOFF_MIN,
            last: None,
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.saturating_duration_since(t) >= BACKOFF_RESET)
        {
            self.next = BACKOFF_MIN;
        }
        self.last = Some(now);
        let base = self.next;
        self.next = (base * 2).min(BACKOFF_MAX);
        // Up to a quarter of the base on top.
        Some(base + (base / 4).mul_f64(resize_guard_runtime::jitter::fraction()))
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = BACKOFF_MIN;
    }
}
