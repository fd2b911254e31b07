//! Carries out a [`Decision`], deciding nothing: records the plan on the preemptor when the
//! decision says, marks each victim `DisruptionTarget` (reason `PreemptionByResizeGuard`),
//! removes it through the API the decision names with the grace period it names, and records the
//! Events. Every write is fenced by [`Leadership`] (checked immediately before it, abandoned if
//! the fence passes while it is in flight) and carries the victim's UID as a precondition, so a
//! recreated pod of the same name is never touched. Every write of the plan annotation (record,
//! replace, clear) is a JSON Patch conditional on the annotation still holding what the decision
//! read ([`plan_patch()`]): a write by the pod's author that lands in between is never erased or
//! overwritten unjudged. The API server refuses such a write whole; that is no fault: it is
//! counted (`resize_guard_plan_write_conflicts_total`), nothing more is done on the stale
//! decision (no eviction, no Event) and the pod is read and judged again. Every call is
//! idempotent, so a retry or the next leader can repeat it safely. The API answers that change the course — a
//! PodDisruptionBudget refusing an eviction, or the server throttling one — go back through
//! [`eviction_refused`](crate::preemption::decision::eviction_refused), which tells them apart by
//! the answer (the client does not retry evictions: `resize_guard_runtime::api_client`), as do
//! plans the brakes hold back ([`held_back`]). When to look again is the decision's own
//! ([`Decision::requeue`]); the actuator picks no duration (a budget refusal's back-off is
//! [`Waits::refused`]'s). A waiting plan refreshes its node's claim until its wait is
//! [`Decision::Overdue`] (`preemption.stallAfterSeconds`); from then on the claim is no longer held for it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use resize_guard_policy::pod::{self, PodKey};
use resize_guard_runtime::Events;
use resize_guard_runtime::events::EventIntent;

use crate::lease::fence::Leadership;
use crate::metrics::Metrics;
use crate::preemption::brakes::Brakes;
use crate::preemption::decision::{Decision, SHORT_WAIT, Waits, held_back};
use crate::preemption::seal::{PLAN_ANNOTATION, PlanKey, PlanRecord, PlanSeal};

mod error;
mod notes;
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
    /// What holds plans back: rate, node, per-resize cap, circuit breaker.
    pub brakes: Arc<Brakes>,
    /// What is remembered of waiting resizes: back-off, stall timers, budget refusals.
    pub waits: Arc<Waits>,
}

/// A decision to carry out instead of the one carried out (the brakes held it back, an eviction
/// was refused), with the pod as this actuator's own plan write left it, when it wrote one.
struct Instead {
    decision: Decision,
    written: Option<Pod>,
}

impl From<Decision> for Instead {
    fn from(decision: Decision) -> Self {
        Instead {
            decision,
            written: None,
        }
    }
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

    /// Queues an Event on the program's publisher, off the critical path (victims are evicted
    /// first, reported after); Events are writes too, so the post is fenced when it is made and a
    /// replica that no longer leads publishes none.
    fn event(
        &self,
        regarding: &ObjectReference,
        related: Option<&ObjectReference>,
        warning: bool,
        reason: &'static str,
        note: String,
    ) {
        self.event_as("Preempt", regarding, related, warning, reason, note);
    }

    /// [`Actuator::event`] with its own `action`: repeats of one action are one series.
    fn event_as(
        &self,
        action: &'static str,
        regarding: &ObjectReference,
        related: Option<&ObjectReference>,
        warning: bool,
        reason: &'static str,
        note: String,
    ) {
        // Read by the regarding object's namespace: other namespaces' pods are counted there,
        // named only in this log line (`actuate/notes.rs`). A rejected plan record is quoted as
        // written on the pod itself, where the same readers see it (`notes::QUOTES_THE_RECORD`).
        let note = match regarding.namespace.as_deref() {
            Some(_) if reason == notes::QUOTES_THE_RECORD => note,
            Some(ns) => {
                let shown = notes::for_namespace(&note, ns);
                if shown != note {
                    tracing::info!(reason, regarding = ?regarding.name, namespace = ns, note,
                        "Event note with other namespaces' pods counted, not named");
                }
                shown
            }
            None => note,
        };
        let intent = EventIntent {
            regarding: regarding.clone(),
            related: related.cloned(),
            warning,
            reason,
            action: action.into(),
            note,
        };
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

    /// Keeps the brakes' node claims in step with how `pod`'s plan goes: a wait refreshes its
    /// claim until it is overdue (`preemption.stallAfterSeconds`), which releases it.
    fn track(&self, pod: &Pod, decision: &Decision) {
        let node = pod::node_name(pod);
        match decision {
            Decision::Idle | Decision::Unblocked { .. } => self.brakes.release(pod, node, true),
            Decision::ClearPlan
            | Decision::DropPlan { .. }
            | Decision::Replan { .. }
            | Decision::Failed { .. }
            | Decision::Revert { .. }
            | Decision::WouldPreempt { .. }
            | Decision::Overdue { .. } => self.brakes.release(pod, node, false),
            Decision::Awaiting { .. }
            | Decision::Wait { .. }
            | Decision::Throttled { .. }
            | Decision::Stalled { .. } => {
                self.brakes.touch(pod, node, std::time::Instant::now());
            }
            Decision::Preempt { .. } => {}
        }
    }

    /// Carries out `decision` for `pod`, then looks again when the decision says (or when the
    /// decision that replaced it on the way says: a plan held back, an eviction refused). A plan
    /// annotation that changed since `pod` was read stops it before anything more is written
    /// (no victim is touched on the stale decision): counted, and the pod read again soon.
    pub async fn apply(&self, pod: &Pod, decision: Decision) -> Result<Action, ActuateError> {
        self.track(pod, &decision);
        let requeue = decision.requeue();
        let then = match self.carry_out(pod, decision).await {
            Err(e) if e.plan_changed() => {
                // Not a fault: the pod's watch brings the new version, judged afresh; the
                // requeue covers a watch that lags.
                self.metrics.plan_write_conflict();
                tracing::info!(pod = %PodKey::of(pod), "plan annotation changed since it was read; nothing written, looking again");
                return Ok(Action::requeue(SHORT_WAIT));
            }
            then => then,
        };
        let then = then.inspect_err(|e| {
            // Refused (403): a grant the policy needs is missing or a policy of
            // deploy/base/controller-writes.yaml refused; nothing more is written, and the pod
            // says why (reconcile's error_policy logs it with reason Forbidden).
            if let Some(note) = e.forbidden_note() {
                self.metrics.preemption("forbidden");
                self.event(&reference(pod), None, true, "WriteForbidden", note);
            }
        })?;
        if let Some(Instead { decision, written }) = then {
            // Carried out on the pod as this actuator's own plan write left it, if it made one:
            // what a clear of that plan tests for.
            let pod = written.as_ref().unwrap_or(pod);
            let then = self.waits.refused(pod, decision, std::time::Instant::now());
            return Box::pin(self.apply(pod, then)).await;
        }
        Ok(requeue.map_or_else(Action::await_change, Action::requeue))
    }

    /// The writes, metrics and Events of `decision`; `Some` when the API's answer or the brakes
    /// turned it into another decision, to be carried out instead.
    async fn carry_out(
        &self,
        pod: &Pod,
        decision: Decision,
    ) -> Result<Option<Instead>, ActuateError> {
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
                let note = format!(
                    "resize-guard did not act on the recorded preemption plan: {why}; a fresh plan is chosen instead"
                );
                self.forget_plan(pod, true, "PreemptionPlanRejected", note)
                    .await?;
                // Counted once removed: a record changed since it was judged is judged again.
                self.metrics.preemption("plan_rejected");
                tracing::warn!(pod = %key, why, "recorded plan rejected");
            }
            Decision::Replan { why, .. } => {
                self.metrics.preemption("pdb_blocked");
                tracing::info!(pod = %key, why, "re-planning");
                let note = format!("resize-guard: {why}");
                self.forget_plan(pod, false, "PreemptionReplanned", note)
                    .await?;
            }
            Decision::Throttled { why, .. } => {
                self.metrics.preemption("throttled");
                tracing::info!(pod = %key, why, "the API server is throttling evictions");
            }
            Decision::Wait { why, .. } | Decision::Awaiting { why, .. } => {
                tracing::debug!(pod = %key, why, "waiting");
            }
            Decision::Overdue { on, note, .. } => {
                self.metrics.preemption("stalled_node_released");
                tracing::warn!(pod = %key, note, "wait stalled; node claim released");
                self.event_as(
                    on.action(),
                    &reference(pod),
                    None,
                    true,
                    "PreemptionStalled",
                    note,
                );
            }
            Decision::Stalled { note, .. } => {
                self.metrics.preemption("stalled");
                tracing::warn!(pod = %key, note, "plan stalled");
                self.event(&reference(pod), None, true, "PreemptionStalled", note);
            }
            Decision::WouldPreempt { note, .. } => {
                self.metrics.preemption("would_preempt");
                self.event(&reference(pod), None, false, "WouldPreempt", note);
            }
            Decision::Revert { patch, note } => self.revert(pod, &patch, note).await?,
            Decision::Failed { reason, note, .. } => {
                self.metrics.preemption("no_plan");
                tracing::info!(pod = %key, reason, "no preemption plan");
                self.event(&reference(pod), None, true, "ResizePreemptionFailed", note);
            }
            Decision::Preempt {
                record,
                victims,
                note,
                limits,
                pending_on_node,
                after: _,
            } => {
                return self
                    .preempt(pod, record, &victims, note, limits, pending_on_node)
                    .await;
            }
        }
        Ok(None)
    }

    /// Removes the plan annotation and says why in an Event on the pod (a fresh plan follows).
    async fn forget_plan(
        &self,
        pod: &Pod,
        warning: bool,
        reason: &'static str,
        note: String,
    ) -> Result<(), ActuateError> {
        self.record(pod, None).await?;
        self.event(&reference(pod), None, warning, reason, note);
        Ok(())
    }

    /// Patches an Infeasible resize back to the pod's actual resources through `pods/resize`.
    async fn revert(
        &self,
        pod: &Pod,
        patch: &serde_json::Value,
        note: String,
    ) -> Result<(), ActuateError> {
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
        self.event(&reference(pod), None, true, "ResizeReverted", note);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
