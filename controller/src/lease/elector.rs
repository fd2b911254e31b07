//! Leader election on a `coordination.k8s.io/v1` Lease with client-go's semantics
//! (`k8s.io/client-go/tools/leaderelection/leaderelection.go`, `tryAcquireOrRenew`, `renew`,
//! `acquire`):
//! - **Expiry is judged from when this replica observed the record change**, never from the
//!   holder's `renewTime` against the local wall clock: a follower remembers the record it last
//!   saw and the monotonic instant it first saw it ([`Observation`]); the Lease is free once that
//!   record has stood unchanged for `leaseDurationSeconds`. Clock skew between replicas cannot
//!   shift a takeover.
//! - **Every update carries the `resourceVersion` it read**, so two replicas never both win.
//! - **The leader renews with a deadline shorter than the lease**: after each renewal it waits the
//!   retry period, then retries until a renewal succeeds or the renew deadline passes, and steps
//!   down then — before any follower may take over. Each renewal extends the [`Leadership`] fence
//!   to the moment it was sent plus the renew deadline.
//! - **Followers retry with jitter** (retry period × [1, 2.2), client-go's `JitterFactor` 1.2).
//!
//! kube-lease-manager (the maintained crate for kube 5) was considered and not used: it judges
//! expiry as `renewTime + leaseDuration` against the local wall clock (`LeaseState::sync`), the
//! skew-sensitive rule this module exists to avoid.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use crate::lease::fence::Leadership;

/// client-go's `JitterFactor` for followers' retries.
pub const JITTER_FACTOR: f64 = 1.2;

/// The three durations of leader election (client-go's `LeaderElectionConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a follower waits, after it last saw the record change, before taking over.
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a failed renewal before it steps down.
    pub renew_deadline: Duration,
    /// The wait between renewals (and, jittered, between a follower's attempts).
    pub retry_period: Duration,
}

impl Timing {
    /// Checks client-go's constraints (`NewLeaderElector`): lease duration > renew deadline >
    /// retry period × jitter factor.
    pub fn new(
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Timing, String> {
        if lease_duration <= renew_deadline {
            return Err(format!(
                "the lease duration ({lease_duration:?}) must be longer than the renew deadline ({renew_deadline:?})"
            ));
        }
        if renew_deadline.as_secs_f64() <= retry_period.as_secs_f64() * JITTER_FACTOR {
            return Err(format!(
                "the renew deadline ({renew_deadline:?}) must be longer than the retry period ({retry_period:?}) × {JITTER_FACTOR}"
            ));
        }
        if retry_period.is_zero() || lease_duration.as_secs() < 1 {
            return Err("the retry period must be positive and the lease at least 1s".into());
        }
        Ok(Timing {
            lease_duration,
            renew_deadline,
            retry_period,
        })
    }

    /// The follower's wait before its next attempt: the retry period × [1, 1 + jitter).
    pub fn jittered_retry(&self) -> Duration {
        self.retry_period
            .mul_f64(1.0 + JITTER_FACTOR * resize_guard_runtime::jitter::fraction())
    }
}

/// The Lease record as this replica last saw it, and since when (client-go's `observedRecord`,
/// `observedRawRecord` and `observedTime`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observation {
    record: Option<LeaseSpec>,
    since: Option<Instant>,
}

/// What a replica may do with the Lease it just read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// This replica holds it: renew.
    Renew,
    /// Free, or held by a holder this replica has seen stand still for a whole lease: take it.
    Take,
    /// Someone else holds it and may still be acting.
    HeldBy(String),
}

impl Observation {
    /// Records `record` as read at `now`; the clock restarts only when the record changed.
    pub fn observe(&mut self, record: &LeaseSpec, now: Instant) {
        if self.record.as_ref() != Some(record) {
            self.record = Some(record.clone());
            self.since = Some(now);
        }
    }

    /// Judges the last observed record for `identity` at `now` (`tryAcquireOrRenew` step 2).
    pub fn judge(&self, identity: &str, now: Instant) -> Judgement {
        let Some(record) = &self.record else {
            return Judgement::Take;
        };
        let holder = record.holder_identity.clone().unwrap_or_default();
        if holder == identity {
            return Judgement::Renew;
        }
        if holder.is_empty() {
            return Judgement::Take;
        }
        let lease = Duration::from_secs(record.lease_duration_seconds.unwrap_or(15).max(1) as u64);
        let valid = self.since.is_some_and(|since| since + lease > now);
        if valid {
            Judgement::HeldBy(holder)
        } else {
            Judgement::Take
        }
    }
}

/// One replica's elector.
#[derive(Debug)]
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timing: Timing,
    observed: tokio::sync::Mutex<Observation>,
}

impl Elector {
    /// An elector for Lease `namespace/name` acting as `identity`.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        timing: Timing,
    ) -> Elector {
        Elector {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            identity: identity.to_owned(),
            timing,
            observed: Default::default(),
        }
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The durations in force.
    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// One attempt to take or renew the Lease; `Ok(true)` when this replica holds it now. On
    /// success `leadership` is extended to the attempt's start plus the renew deadline.
    pub async fn try_acquire_or_renew(&self, leadership: &Leadership) -> kube::Result<bool> {
        let sent = Instant::now();
        let now = Timestamp::now();
        let mut observed = self.observed.lock().await;
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let spec = self.spec(now, now, 0);
            let lease = Lease {
                metadata: kube::api::ObjectMeta {
                    name: Some(self.name.clone()),
                    ..Default::default()
                },
                spec: Some(spec.clone()),
            };
            let written = self.api.create(&PostParams::default(), &lease).await;
            return self.wrote(written, &spec, &mut observed, leadership, sent);
        };
        let spec = lease.spec.clone().unwrap_or_default();
        observed.observe(&spec, Instant::now());
        let new_spec = match observed.judge(&self.identity, Instant::now()) {
            Judgement::HeldBy(_) => return Ok(false),
            Judgement::Renew => {
                let acquired = spec.acquire_time.map_or(now, |t| t.0);
                self.spec(acquired, now, spec.lease_transitions.unwrap_or(0))
            }
            Judgement::Take => self.spec(now, now, spec.lease_transitions.unwrap_or(0) + 1),
        };
        lease.spec = Some(new_spec.clone());
        let written = (self.api)
            .replace(&self.name, &PostParams::default(), &lease)
            .await;
        self.wrote(written, &new_spec, &mut observed, leadership, sent)
    }

    /// The answer to writing `spec` (a create or a replace sent at `sent`): leading until `sent`
    /// plus the renew deadline once it is stored; not leading on a conflict (someone else
    /// created or updated it first: they won this round).
    fn wrote(
        &self,
        written: kube::Result<Lease>,
        spec: &LeaseSpec,
        observed: &mut Observation,
        leadership: &Leadership,
        sent: Instant,
    ) -> kube::Result<bool> {
        match written {
            Ok(_) => {
                observed.observe(spec, Instant::now());
                leadership.extend(sent + self.timing.renew_deadline);
                Ok(true)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Follower: tries every jittered retry period until this replica leads.
    pub async fn acquire(&self, leadership: &Leadership) {
        loop {
            match self.try_acquire_or_renew(leadership).await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, lease = %self.name, "could not read or take the lease")
                }
            }
            tokio::time::sleep(self.timing.jittered_retry()).await;
        }
    }

    /// Leader: renews every retry period; returns (after revoking `leadership`) once a renewal
    /// has not succeeded within the renew deadline or the Lease went to someone else.
    pub async fn keep(&self, leadership: &Leadership) {
        loop {
            tokio::time::sleep(self.timing.retry_period).await;
            let deadline = Instant::now() + self.timing.renew_deadline;
            let renewed = loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break false;
                }
                match tokio::time::timeout(left, self.try_acquire_or_renew(leadership)).await {
                    Ok(Ok(true)) => break true,
                    Ok(Ok(false)) => {
                        tracing::warn!(lease = %self.name, "the lease went to another replica");
                        leadership.revoke();
                        return;
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, lease = %self.name, "could not renew the lease; retrying until the renew deadline")
                    }
                    Err(_) => break false,
                }
                tokio::time::sleep(self.timing.retry_period.min(left)).await;
            };
            if !renewed {
                tracing::warn!(lease = %self.name, deadline = ?self.timing.renew_deadline,
                    "no renewal within the renew deadline; stepping down");
                leadership.revoke();
                return;
            }
        }
    }

    /// Gives the Lease up if held (on shutdown), so a follower takes over at once.
    pub async fn release(&self) -> kube::Result<()> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.renew_time = None;
        spec.acquire_time = None;
        lease.spec = Some(spec);
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }

    fn spec(&self, acquired: Timestamp, renewed: Timestamp, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.timing.lease_duration.as_secs().max(1) as i32),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(renewed)),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests;
