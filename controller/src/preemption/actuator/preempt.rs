//! Carrying out a [`Decision::Preempt`](crate::preemption::decision::Decision::Preempt) the
//! brakes admitted: the plan-sealing key first (a plan that could not be recorded is not
//! started), the plan recorded when the decision says (only over the annotation the decision
//! read: a plan whose record the API server refuses because the pod's author changed the
//! annotation since evicts nothing), each victim removed in order and counted on the admission.
//! An eviction the API server refuses ends the plan there and goes back as
//! [`Outcome::Refused`], for the reconciler to decide on.

use k8s_openapi::api::core::v1::Pod;
use resize_guard_policy::pod::PodKey;

use super::{ActuateError, Actuator};
use crate::preemption::brakes::Admission;
use crate::preemption::decision::{Record, Removal, Via};
use crate::preemption::outcome::{Outcome, Refusal};

impl Actuator {
    /// Preempts `victims` for `pod` under `admission`.
    pub(super) async fn preempt(
        &self,
        pod: &Pod,
        record: Record,
        victims: &[Removal],
        admission: &mut Admission<'_>,
    ) -> Result<Outcome, ActuateError> {
        let key = PodKey::of(pod).to_string();
        let fresh = !matches!(record, Record::Recorded);
        if fresh {
            // A plan that could not be recorded is not started: the key first.
            self.plan_key().await?;
        }
        // Recorded only over what the decision read (`Actuator::record`): when the pod's
        // author changed the annotation since, this fails and no victim is touched.
        let mut written = None;
        if let Record::Before(rec) = &record {
            written = Some(Box::new(self.record(pod, Some(rec)).await?));
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
                    if let Some(refusal) = e
                        .answer()
                        .filter(|_| v.via == Via::Eviction)
                        .and_then(Refusal::of) =>
                {
                    return Ok(Outcome::Refused {
                        victim: v.victim.clone(),
                        refusal,
                        written,
                    });
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
        Ok(Outcome::Done)
    }
}
