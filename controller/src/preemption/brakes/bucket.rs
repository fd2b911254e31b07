//! A token bucket of the eviction rate: one for the cluster (`preemption.maxEvictionsPerMinute`)
//! and one per preemptor namespace (`preemption.maxEvictionsPerNamespacePerMinute`). Each holds
//! one whole plan (`Limits::bucket_size`, `maxVictimsPerResize` tokens: why, there) and refills
//! at its rate.

use std::time::{Duration, Instant};

/// Tokens, and when they were last counted.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Bucket {
    /// Tokens held at `refilled` (never negative, never above the size).
    pub(super) tokens: f64,
    /// When `tokens` were counted; `None`: never, so the bucket is full.
    pub(super) refilled: Option<Instant>,
}

/// A bucket's size and rate under the policy in force.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shape {
    /// Tokens it holds at most (one whole plan).
    pub(super) size: u32,
    /// Tokens it gains per minute.
    pub(super) per_minute: u32,
}

impl Shape {
    fn per_second(self) -> f64 {
        f64::from(self.per_minute.max(1)) / 60.0
    }
}

impl Bucket {
    /// A bucket that is full until it is first drawn from.
    pub(super) fn full() -> Bucket {
        Bucket {
            tokens: 0.0,
            refilled: None,
        }
    }

    /// A bucket emptied at `at` (it refills from then on).
    pub(super) fn empty_at(at: Instant) -> Bucket {
        Bucket {
            tokens: 0.0,
            refilled: Some(at),
        }
    }

    /// Counts what it gained since it was last counted.
    pub(super) fn refill(&mut self, shape: Shape, now: Instant) {
        let elapsed = self.refilled.map_or(f64::INFINITY, |t| {
            now.saturating_duration_since(t).as_secs_f64()
        });
        let tokens = if self.tokens.is_finite() {
            self.tokens.max(0.0)
        } else {
            0.0
        };
        self.tokens = (tokens + elapsed * shape.per_second()).min(f64::from(shape.size));
        self.refilled = Some(now);
    }

    /// How long until it holds `need` tokens (after [`Bucket::refill`]); `None`: it holds them.
    pub(super) fn short_by(&self, need: u32, shape: Shape) -> Option<Duration> {
        let need = f64::from(need);
        (self.tokens < need)
            .then(|| Duration::from_secs_f64((need - self.tokens) / shape.per_second()))
    }

    /// Would be full at `now`: it says nothing a fresh bucket would not, and can be forgotten.
    pub(super) fn is_full(&self, shape: Shape, now: Instant) -> bool {
        let mut b = self.clone();
        b.refill(shape, now);
        b.tokens >= f64::from(shape.size)
    }
}
