//! Carrying out a [`Decision::Preempt`]: past the brakes, the plan-sealing key first (a plan that
//! could not be recorded is not started), the plan recorded when the decision says (only over the
//! annotation the decision read: a plan whose record the API server refuses because the pod's
//! author changed the annotation since evicts nothing), each victim removed in order, the
//! `PreemptingForResize` Event. A plan the brakes hold back (a
//! `PreemptionHeld` Event naming the brake, or `PreemptionPaused` when it opened a breaker), or
//! an eviction the API server refuses, comes back as the decision to carry out instead.

use k8s_openapi::api::core::v1::Pod;
use resize_guard_policy::pod::{self, PodKey};

use resize_guard_runtime::events::EventIntent;

use super::{ActuateError, Actuator, Instead, held_back, reference};
use crate::preemption::brakes::{Held, Limits};
use crate::preemption::decision::{Decision, Record, Removal, Via, eviction_refused};

impl Actuator {
    /// Preempts `victims` for `pod`; `Some` when the brakes or an eviction's answer turned the
    /// plan into another decision.
    pub(super) async fn preempt(
        &self,
        pod: &Pod,
        record: Record,
        victims: &[Removal],
        note: String,
        limits: Limits,
        pending_on_node: usize,
    ) -> Result<Option<Instead>, ActuateError> {
        let key = PodKey::of(pod).to_string();
        let fresh = !matches!(record, Record::Recorded);
        let node = pod::node_name(pod).unwrap_or_default();
        let count = u32::try_from(victims.len()).unwrap_or(u32::MAX);
        let mut admission = match self.brakes.admit(
            pod,
            node,
            count,
            fresh,
            pending_on_node,
            limits,
            std::time::Instant::now(),
        ) {
            Ok(admission) => admission,
            Err(held) => return Ok(Some(self.held(pod, node, &held, limits).into())),
        };
        // A saved write of the brakes covers the plan (counting it, or by its reserve) before
        // its first write (its tokens go back when `admission` drops).
        if let Err(held) = admission.saved().await {
            return Ok(Some(self.held(pod, node, &held, limits).into()));
        }
        if fresh {
            // A plan that could not be recorded is not started: the key first.
            self.plan_key().await?;
        }
        // Recorded only over what the decision read (`Actuator::record`): when the pod's
        // author changed the annotation since, this fails and no victim is touched.
        let mut written = None;
        if let Record::Before(rec) = &record {
            written = Some(self.record(pod, Some(rec)).await?);
        }
        self.metrics
            .preemption(if fresh { "started" } else { "resumed" });
        tracing::info!(pod = %key, victims = victims.len(), fresh, "preempting");
        for v in victims {
            match self.remove(pod, v).await {
                Ok(true) => {
                    admission.removed();
                    self.metrics.victims(1);
                }
                Ok(false) => {}
                Err(e)
                    if let Some(then) = e
                        .answer()
                        .filter(|_| v.via == Via::Eviction)
                        .and_then(|answer| eviction_refused(&v.victim, answer)) =>
                {
                    return Ok(Some(Instead {
                        decision: then,
                        written,
                    }));
                }
                Err(source) => {
                    if source.forbidden().is_none() {
                        self.metrics.preemption("error");
                    }
                    return Err(ActuateError::Preempt {
                        victim: v.victim.to_string(),
                        source,
                    });
                }
            }
        }
        if let Record::After(rec) = &record {
            self.record(pod, Some(rec)).await?;
        }
        self.event(&reference(pod), None, false, "PreemptingForResize", note);
        Ok(None)
    }

    /// A plan held back by the brakes: counted, and the plan that opens the circuit breaker says
    /// so in a Warning Event; what it becomes is decided by [`held_back`].
    fn held(&self, pod: &Pod, node: &str, held: &Held, limits: Limits) -> Decision {
        self.metrics.preemption(held.outcome());
        let then = held_back(node, held, limits);
        if let (
            Held::Paused {
                opened_now: true, ..
            },
            Decision::Wait { why, .. },
        ) = (held, &then)
        {
            tracing::warn!(pod = %PodKey::of(pod), why, "circuit breaker opened");
            self.event(&reference(pod), None, true, "PreemptionPaused", why.clone());
        } else if let Decision::Wait { .. } = &then {
            // Which brake holds it, in words that stay the same while it holds: one series per
            // brake (the action, the outcome, keeps another brake's Event apart).
            let intent = EventIntent {
                regarding: reference(pod),
                related: None,
                warning: false,
                reason: "PreemptionHeld",
                action: held.outcome().into(),
                note: format!(
                    "resize-guard held this preemption plan: {}",
                    held.brake(limits)
                ),
            };
            let this = self.clone();
            self.events
                .record_through(intent, move |post| async move { this.write(post).await });
        }
        then
    }
}
