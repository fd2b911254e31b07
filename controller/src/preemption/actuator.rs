//! Carries out a [`Decision`], deciding nothing: records the plan on the preemptor when the
//! decision says, marks each victim `DisruptionTarget` (reason `PreemptionByResizeGuard`),
//! removes it through the API the decision names with the grace period it names, and records the
//! Events the decision carries ([`Decision::events`],
//! [`Removal::event`](crate::preemption::decision::Removal::event)). Every write is fenced
//! by [`Leadership`] (checked immediately before it, abandoned if the fence passes while it is in
//! flight) and carries the victim's UID as a precondition, so a recreated pod of the same name is
//! never touched. Every write of the plan annotation (record, replace, clear) is a JSON Patch
//! conditional on the annotation still holding what the decision read ([`plan_patch()`]): a
//! write by the pod's author that lands in between is never erased or overwritten unjudged. The
//! API server refuses such a write whole; that is no fault: it is counted
//! (`resize_guard_plan_write_conflicts_total`), nothing more is done on the stale decision (no
//! eviction, no Event) and [`Outcome::PlanChanged`] goes back. Every call is idempotent, so a
//! retry or the next leader can repeat it safely.
//!
//! What changes the course goes back as the [`Outcome`], for the reconciler to decide on: an
//! eviction the API server refused (a PodDisruptionBudget, throttling), told apart by the answer
//! alone ([`Refusal::of`](crate::preemption::outcome::Refusal::of); the client does not retry
//! evictions: `resize_guard_runtime::api_client`). The actuator never calls into the decider,
//! never asks the brakes (a plan reaches it with its [`Admission`] already granted) and picks
//! no duration.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use resize_guard_policy::pod::PodKey;
use resize_guard_runtime::Events;
use resize_guard_runtime::events::{EventIntent, EventReason};

use crate::lease::fence::Leadership;
use crate::metrics::Metrics;
use crate::preemption::brakes::Admission;
use crate::preemption::decision::Decision;
use crate::preemption::decision::notes;
use crate::preemption::outcome::Outcome;
use crate::preemption::seal::{PLAN_ANNOTATION, PlanKey, PlanRecord, PlanSeal};

mod error;
pub mod plan_patch;
mod preempt;
mod removal;

pub use error::{ActuateError, WriteError};
use plan_patch::plan_patch;

/// What actuation needs.
#[derive(Clone)]
pub struct Actuator {
    /// API client.
    pub client: kube::Client,
    /// The program's Event publisher.
    pub events: Events,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Every write is fenced by it.
    pub leadership: Leadership,
    /// The key that seals the plan records this controller writes.
    pub seal: Arc<PlanSeal>,
}

fn reference(pod: &Pod) -> ObjectReference {
    pod.object_ref(&())
}

impl Actuator {
    /// Runs one API write if (and only while) this replica leads.
    async fn write<T>(
        &self,
        request: impl std::future::Future<Output = kube::Result<T>>,
    ) -> Result<T, WriteError> {
        match self.leadership.fenced(request).await {
            Ok(r) => r.map_err(WriteError::Api),
            Err(fenced) => {
                self.metrics.fenced_write();
                tracing::info!(reason = %fenced, "write not made: fenced");
                Err(WriteError::Fenced(fenced))
            }
        }
    }

    /// Queues `intent` on the program's publisher, off the critical path (victims are evicted
    /// first, reported after); Events are writes too, so the post is fenced when it is made and a
    /// replica that no longer leads publishes none. The note is the one rule applied here: it is
    /// read by the regarding object's namespace, so other namespaces' pods are counted in it,
    /// named only in this log line ([`notes::for_namespace`]). A rejected plan record is quoted
    /// as written on the pod itself, where the same readers see it
    /// ([`notes::QUOTES_THE_RECORD`]).
    fn record_event(&self, mut intent: EventIntent) {
        let regarding = &intent.regarding;
        if let Some(ns) = regarding.namespace.as_deref()
            && intent.reason != notes::QUOTES_THE_RECORD
        {
            let shown = notes::for_namespace(&intent.note, ns);
            if shown != intent.note {
                tracing::info!(reason = intent.reason.as_str(), regarding = ?regarding.name,
                    namespace = ns, note = intent.note.as_str(),
                    "Event note with other namespaces' pods counted, not named");
                intent.note = shown;
            }
        }
        let this = self.clone();
        self.events
            .record_through(intent, move |post| async move { this.write(post).await });
    }

    /// The plan-sealing key (read, or created by this leader on first need, fenced).
    pub async fn plan_key(&self) -> Result<&PlanKey, ActuateError> {
        self.seal
            .key(&self.client, |api, secret| async move {
                let post = PostParams::default();
                self.write(api.create(&post, &secret)).await.map(|_| ())
            })
            .await
            .map_err(ActuateError::PlanKey)
    }

    /// Writes `rec`, sealed for `pod`, as the plan annotation (or removes it for `None`), on
    /// the condition that the annotation still holds what `pod` (the decision's read) shows;
    /// `pod` as the write left it. [`ActuateError::plan_changed`] when it no longer did.
    async fn record(&self, pod: &Pod, rec: Option<&PlanRecord>) -> Result<Pod, ActuateError> {
        let key = PodKey::of(pod).to_string();
        let value = match rec {
            Some(rec) => {
                let key = self.plan_key().await?;
                let sealed = self
                    .seal
                    .seal(key, rec, pod)
                    .map_err(ActuateError::PlanKey)?;
                Some(sealed.to_annotation())
            }
            None => None,
        };
        self.set_plan(pod, value.as_deref())
            .await
            .map_err(|source| ActuateError::RecordPlan { pod: key, source })
    }

    /// The conditional write of [`plan_patch`] (none when there is nothing to write).
    async fn set_plan(&self, pod: &Pod, value: Option<&str>) -> Result<Pod, WriteError> {
        let Some(patch) = plan_patch(pod, PLAN_ANNOTATION, value) else {
            return Ok(pod.clone());
        };
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        self.write(api.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch)))
            .await?;
        Ok(plan_patch::written(pod, PLAN_ANNOTATION, value))
    }

    /// Carries out `decision` for `pod`, a plan under the brakes' `admission` (a
    /// [`Decision::Preempt`] is carried out only with one), and records its Events once it was
    /// carried out whole. A plan annotation that changed since `pod` was read stops it before
    /// anything more is written (no victim is touched on the stale decision): counted,
    /// [`Outcome::PlanChanged`]. A write the API server forbids says so in a `WriteForbidden`
    /// Event on the pod.
    pub async fn apply(
        &self,
        pod: &Pod,
        decision: Decision,
        admission: Option<&mut Admission<'_>>,
    ) -> Result<Outcome, ActuateError> {
        let events = decision.events(pod);
        let outcome = match self.carry_out(pod, decision, admission).await {
            Err(e) if e.plan_changed() => {
                // Not a fault: the pod's watch brings the new version, judged afresh.
                self.metrics.plan_write_conflict();
                tracing::info!(pod = %PodKey::of(pod), "plan annotation changed since it was read; nothing written, looking again");
                return Ok(Outcome::PlanChanged);
            }
            outcome => outcome,
        };
        let outcome = outcome.inspect_err(|e| {
            // Refused (403): a grant the policy needs is missing or a policy of
            // deploy/base/controller-writes.yaml refused; nothing more is written, and the pod
            // says why (reconcile's error_policy logs it with reason Forbidden).
            if let Some(note) = e.forbidden_note() {
                self.metrics.preemption("forbidden");
                self.record_event(EventIntent {
                    regarding: reference(pod),
                    related: None,
                    reason: EventReason::WriteForbidden,
                    action: crate::preemption::decision::notice::PREEMPT.to_owned(),
                    note,
                });
            }
        })?;
        if outcome == Outcome::Done {
            for event in events {
                self.record_event(event);
            }
        }
        Ok(outcome)
    }

    /// The writes, metrics and logs of `decision`.
    async fn carry_out(
        &self,
        pod: &Pod,
        decision: Decision,
        admission: Option<&mut Admission<'_>>,
    ) -> Result<Outcome, ActuateError> {
        let key = PodKey::of(pod).to_string();
        match decision {
            Decision::Idle => {}
            Decision::Unblocked { seconds } => {
                // Counted once the plan is cleared: a clear refused because the annotation
                // changed is judged again, and would count twice.
                self.record(pod, None).await?;
                self.metrics.unblocked(seconds);
                tracing::info!(pod = %key, seconds, "resize admitted after preemption");
            }
            Decision::ClearPlan => {
                self.record(pod, None).await?;
            }
            Decision::DropPlan { why, .. } => {
                self.record(pod, None).await?;
                // Counted once removed: a record changed since it was judged is judged again.
                self.metrics.preemption("plan_rejected");
                tracing::warn!(pod = %key, why, "recorded plan rejected");
            }
            Decision::Replan { why, .. } => {
                self.metrics.preemption("pdb_blocked");
                tracing::info!(pod = %key, why, "re-planning");
                self.record(pod, None).await?;
            }
            Decision::Throttled { why, .. } => {
                self.metrics.preemption("throttled");
                tracing::info!(pod = %key, why, "the API server is throttling evictions");
            }
            Decision::Wait { why, .. } | Decision::Awaiting { why, .. } => {
                tracing::debug!(pod = %key, why, "waiting");
            }
            Decision::Overdue { note, .. } => {
                self.metrics.preemption("stalled_node_released");
                tracing::warn!(pod = %key, note, "wait stalled; node claim released");
            }
            Decision::Stalled { note, .. } => {
                self.metrics.preemption("stalled");
                tracing::warn!(pod = %key, note, "plan stalled");
            }
            Decision::WouldPreempt { .. } => {
                self.metrics.preemption("would_preempt");
            }
            Decision::Revert { patch, .. } => self.revert(pod, &patch).await?,
            Decision::Failed { reason, .. } => {
                self.metrics.preemption("no_plan");
                tracing::info!(pod = %key, reason, "no preemption plan");
            }
            Decision::Held {
                outcome,
                notice,
                then,
            } => {
                self.metrics.preemption(outcome);
                if let Some(n) = notice.filter(|n| n.reason == EventReason::PreemptionPaused) {
                    tracing::warn!(pod = %key, why = n.note, "circuit breaker opened");
                }
                return Box::pin(self.carry_out(pod, *then, None)).await;
            }
            Decision::Preempt {
                record, victims, ..
            } => {
                // A plan goes only past the brakes: without their admission nothing is touched.
                let Some(admission) = admission else {
                    return Err(ActuateError::Unadmitted { pod: key });
                };
                return self.preempt(pod, record, &victims, admission).await;
            }
        }
        Ok(Outcome::Done)
    }

    /// Patches an Infeasible resize back to the pod's actual resources through `pods/resize`.
    async fn revert(&self, pod: &Pod, patch: &serde_json::Value) -> Result<(), ActuateError> {
        let key = PodKey::of(pod).to_string();
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let params = PatchParams::default();
        self.write(api.patch_subresource("resize", name, &params, &Patch::Strategic(patch)))
            .await
            .map_err(|source| ActuateError::Revert {
                pod: key.clone(),
                source,
            })?;
        self.metrics.preemption("reverted_infeasible");
        tracing::info!(pod = %key, "reverted an Infeasible resize");
        Ok(())
    }
}
