//! How long a connection to the admission port lives once it has served a request: its
//! requests in flight and last activity ([`Activity`], counted by
//! [`super::Tracked`]), and the idle and age timers that shut it down gracefully, then outright
//! after a grace ([`timers`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// How long a connection may stay.
#[derive(Debug, Clone, Copy)]
pub struct Timers {
    /// With no request in flight (`--connection-idle-timeout`).
    pub idle: Duration,
    /// In all (`--max-connection-age`).
    pub max_age: Duration,
    /// After a graceful shutdown, how long its streams may take to finish before the
    /// connection is closed outright (`--shutdown-grace`): a peer that stops reading (an HTTP/2
    /// flow-control window left at 0) would otherwise keep an answered stream, and its slot,
    /// for ever.
    pub grace: Duration,
}

/// How to close a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// After the requests in flight (GOAWAY on HTTP/2).
    Graceful,
    /// At once.
    Abort,
}

/// Why the webhook closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// No request in flight for the idle timeout.
    Idle,
    /// Open for the maximum age.
    MaxAge,
}

impl Closed {
    /// The metric's `reason` label.
    pub fn reason(self) -> &'static str {
        match self {
            Closed::Idle => "idle",
            Closed::MaxAge => "max-age",
        }
    }
}

/// What the idle and age timers know of one connection: its requests in flight and when the
/// last one began or ended, and how to shut it down gracefully (learnt from its first request).
pub struct Activity {
    opened: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds after `opened` of the last request's start or end.
    last: AtomicU64,
    closer: OnceLock<Box<dyn Fn(Close) + Send + Sync>>,
}

impl std::fmt::Debug for Activity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Activity")
            .field("opened", &self.opened)
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

impl Activity {
    /// A connection opened now.
    pub fn new() -> Activity {
        Activity {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last: AtomicU64::new(0),
            closer: OnceLock::new(),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }

    /// A request began; it ends when the guard is dropped.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.touch();
        InFlight(self.clone())
    }

    /// How to close this connection (the first one given is kept).
    pub fn set_closer(&self, close: impl Fn(Close) + Send + Sync + 'static) {
        let _ = self.closer.set(Box::new(close));
    }

    /// When the idle timer fires, if nothing happens before.
    fn idle_deadline(&self, idle: Duration) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        Some(self.opened + Duration::from_millis(self.last.load(Ordering::Relaxed)) + idle)
    }
}

impl Default for Activity {
    fn default() -> Self {
        Activity::new()
    }
}

/// A request in flight on a connection.
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How the timers ended a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// Which timer fired.
    pub why: Closed,
    /// The graceful shutdown did not finish within [`Timers::grace`]: closed outright.
    pub forced: bool,
}

/// Runs a connection's idle and age timers until the connection is gone (`gone` closed) or
/// one of them fires; then shuts it down gracefully, closes it outright if it is still open
/// [`Timers::grace`] later, and says why. A timer that fires before the first request (no way
/// to close it gracefully yet) waits: the listener's first-request deadline closes such a
/// connection.
pub async fn timers(
    activity: Arc<Activity>,
    timers: Timers,
    mut gone: watch::Receiver<()>,
) -> Option<Ended> {
    let aged = activity.opened + timers.max_age;
    loop {
        let now = Instant::now();
        let closing = if now >= aged {
            Some(Closed::MaxAge)
        } else if activity
            .idle_deadline(timers.idle)
            .is_some_and(|d| now >= d)
        {
            Some(Closed::Idle)
        } else {
            None
        };
        let next = match (closing, activity.closer.get()) {
            (Some(why), Some(close)) => {
                close(Close::Graceful);
                let forced = tokio::select! {
                    _ = tokio::time::sleep(timers.grace) => true,
                    _ = gone.changed() => false,
                };
                if forced {
                    close(Close::Abort);
                }
                return Some(Ended { why, forced });
            }
            // Not served a request yet: the first-request deadline ends it.
            (Some(_), None) => now + Duration::from_secs(1),
            (None, _) => next_look(&activity, timers, aged, now),
        };
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            // The connection ended (its stream was dropped).
            _ = gone.changed() => return None,
        }
    }
}

/// When the timers look again: at the idle deadline when nothing is in flight; with a request
/// in flight its end moves the deadline, so after a full idle period; never after the age.
fn next_look(activity: &Activity, timers: Timers, aged: Instant, now: Instant) -> Instant {
    let next = match activity.idle_deadline(timers.idle) {
        Some(idle) if idle > now => idle,
        _ => now + timers.idle,
    };
    next.min(aged).max(now + Duration::from_millis(1))
}
