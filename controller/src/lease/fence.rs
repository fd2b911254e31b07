//! The fence every write of the controller passes: [`Leadership`] says whether this replica may
//! act *now*, and until when. It is extended by each successful Lease renewal (to the moment the
//! renewal was *sent* plus the renew deadline, which is shorter than the lease duration a
//! follower waits) and revoked the moment the renewal fails, the Lease is lost or the process
//! shuts down. Time is the monotonic clock of this process, which keeps running while a process
//! is stopped (SIGSTOP, a paused VM): a leader that wakes after its fence passed finds itself
//! fenced before its next write, whatever its wall clock or the Lease's timestamps say.
//!
//! Why this is safe: a follower takes over only after it has *observed* the same Lease record
//! unchanged for a whole lease duration (see [`crate::lease::elector`]); it observes a renewal no
//! earlier than the renewal was sent, so its takeover comes at least `lease_duration -
//! renew_deadline` after this replica's fence passed. A write is started only before the fence and
//! runs at most until it ([`Leadership::fenced`]), so it cannot outlive leadership. A renewal that
//! succeeds while a slow write is in flight moves the fence, and the write may run on to the new
//! one: it is abandoned ([`Fenced::Lapsed`]) only when the fence it was given passed unrenewed.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Why a write was not attempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Fenced {
    /// This replica does not hold the Lease (or its last renewal is too old to trust).
    #[error("not the leader: the Lease is not held or its last renewal is too old to act on")]
    NotLeader,
    /// The write was still in flight when the fence passed; it was abandoned.
    #[error("leadership lapsed while the write was in flight; abandoned")]
    Lapsed,
}

/// This replica's right to act, shared by the elector (which extends and revokes it) and every
/// writer (which checks it before each write).
#[derive(Debug, Clone)]
pub struct Leadership {
    until: watch::Sender<Option<Instant>>,
}

impl Default for Leadership {
    fn default() -> Self {
        Leadership::new()
    }
}

impl Leadership {
    /// Not leading.
    pub fn new() -> Leadership {
        Leadership {
            until: watch::Sender::new(None),
        }
    }

    /// A leadership that holds for a very long time, for tests and tools that act alone.
    #[cfg(any(test, feature = "testing"))]
    pub fn forever() -> Leadership {
        let l = Leadership::new();
        l.extend(Instant::now() + Duration::from_secs(10 * 365 * 86_400));
        l
    }

    /// May act until `until` (a renewal sent at `t` extends to `t + renew_deadline`).
    pub fn extend(&self, until: Instant) {
        self.until.send_replace(Some(until));
    }

    /// Stops acting at once.
    pub fn revoke(&self) {
        self.until.send_replace(None);
    }

    /// How long this replica may still act, or why it may not.
    pub fn check(&self) -> Result<Duration, Fenced> {
        self.remaining(Instant::now())
    }

    fn remaining(&self, now: Instant) -> Result<Duration, Fenced> {
        match *self.until.borrow() {
            Some(until) if until > now => Ok(until - now),
            _ => Err(Fenced::NotLeader),
        }
    }

    /// True while this replica may act.
    pub fn is_leading(&self) -> bool {
        self.check().is_ok()
    }

    /// Runs `write` if this replica may act now, abandoning it if the fence passes first (a
    /// renewal meanwhile moves the fence on, and the write with it).
    pub async fn fenced<T>(&self, write: impl Future<Output = T>) -> Result<T, Fenced> {
        let mut left = self.check()?;
        let mut write = std::pin::pin!(write);
        loop {
            match tokio::time::timeout(left, write.as_mut()).await {
                Ok(done) => return Ok(done),
                Err(_) => left = self.check().map_err(|_| Fenced::Lapsed)?,
            }
        }
    }

    /// Completes once leadership is revoked or its fence passes without an extension.
    pub async fn lost(&self) {
        let mut rx = self.until.subscribe();
        loop {
            let until = *rx.borrow_and_update();
            match until {
                None => return,
                Some(t) if t <= Instant::now() => return,
                Some(t) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(t) => {}
                        changed = rx.changed() => if changed.is_err() { return },
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_replica_acts_only_before_its_fence() {
        let l = Leadership::new();
        assert_eq!(l.check(), Err(Fenced::NotLeader));
        l.extend(Instant::now() + Duration::from_secs(10));
        assert_eq!(l.check(), Ok(Duration::from_secs(10)));
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(l.is_leading());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(l.check(), Err(Fenced::NotLeader));
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_still_running_at_the_fence_is_abandoned() {
        let l = Leadership::new();
        l.extend(Instant::now() + Duration::from_secs(2));
        let slow = l.fenced(tokio::time::sleep(Duration::from_secs(5))).await;
        assert_eq!(slow, Err(Fenced::Lapsed));
        l.extend(Instant::now() + Duration::from_secs(2));
        assert_eq!(l.fenced(async { 7 }).await, Ok(7));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_write_runs_on_while_renewals_move_the_fence() {
        let l = Leadership::new();
        l.extend(Instant::now() + Duration::from_secs(2));
        let renewer = {
            let l = l.clone();
            tokio::spawn(async move {
                for _ in 0..3 {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    l.extend(Instant::now() + Duration::from_secs(2));
                }
            })
        };
        // 5 s of work, fence at 2 s, renewed at 1, 2 and 3 s to 5 s: it ends on the last fence
        // (the timeout wakes at 5 s, finds it passed); 4 s of work ends inside it.
        let slow = l.fenced(tokio::time::sleep(Duration::from_secs(4))).await;
        assert_eq!(slow, Ok(()));
        renewer.await.unwrap();
        let too_slow = l.fenced(tokio::time::sleep(Duration::from_secs(5))).await;
        assert_eq!(too_slow, Err(Fenced::Lapsed));
    }

    #[tokio::test(start_paused = true)]
    async fn no_write_starts_after_revocation() {
        let l = Leadership::forever();
        l.revoke();
        let mut ran = false;
        let r = l.fenced(async { ran = true }).await;
        assert_eq!(r, Err(Fenced::NotLeader));
        assert!(!ran);
    }

    #[tokio::test(start_paused = true)]
    async fn lost_completes_on_revocation_or_when_the_fence_passes_unrenewed() {
        let l = Leadership::new();
        l.extend(Instant::now() + Duration::from_secs(3));
        let started = Instant::now();
        let extender = {
            let l = l.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(2)).await;
                l.extend(Instant::now() + Duration::from_secs(3));
            })
        };
        l.lost().await;
        extender.await.unwrap();
        // Extended at 2 s to 5 s, then not again: lost at 5 s.
        assert_eq!(started.elapsed(), Duration::from_secs(5));

        l.extend(Instant::now() + Duration::from_secs(60));
        let revoker = {
            let l = l.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                l.revoke();
            })
        };
        let at = Instant::now();
        l.lost().await;
        revoker.await.unwrap();
        assert_eq!(at.elapsed(), Duration::from_secs(1));
    }
}
