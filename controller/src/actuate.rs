//! Performs a [`Decision`]: records the plan on the preemptor, marks each victim
//! `DisruptionTarget` (reason `PreemptionByResizeGuard`), evicts it through the Eviction API
//! (`pdb: respect`) or deletes it (`bestEffort`, like kube-scheduler) with its grace period
//! capped by policy, and records the Events. Every call is idempotent, so a retry or a restarted
//! controller can repeat it safely.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use resize_guard_policy::policy::{PdbMode, Policy};
use serde_json::json;

use crate::decision::{Decision, FAILED_RETRY, SHORT_WAIT};
use crate::metrics::Metrics;
use crate::plan::{PLAN_ANNOTATION, PlannedVictim};

/// Errors talking to the API server.
#[derive(Debug, thiserror::Error)]
pub enum ActuateError {
    /// Writing the plan annotation failed.
    #[error("recording the plan on {pod}: {source}")]
    RecordPlan {
        /// The preemptor.
        pod: String,
        /// Why.
        source: kube::Error,
    },
    /// Reverting an Infeasible resize failed.
    #[error("reverting the Infeasible resize of {pod}: {source}")]
    Revert {
        /// The pod.
        pod: String,
        /// Why.
        source: kube::Error,
    },
    /// Preempting a victim failed.
    #[error("preempting {victim}: {source}")]
    Preempt {
        /// The victim.
        victim: String,
        /// Why.
        source: kube::Error,
    },
}

impl ActuateError {
    /// Stable reason for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            ActuateError::RecordPlan { .. } => "RecordPlan",
            ActuateError::Preempt { .. } => "Preempt",
            ActuateError::Revert { .. } => "Revert",
        }
    }
}

/// What actuation needs.
#[derive(Clone)]
pub struct Actuator {
    /// API client.
    pub client: kube::Client,
    /// Event recorder.
    pub recorder: Recorder,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// The controller's pod cache, to read victims without a round trip (falls back to a GET).
    pub pods: Option<kube::runtime::reflector::Store<Pod>>,
}

fn reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        uid: pod.metadata.uid.clone(),
        ..Default::default()
    }
}

impl Actuator {
    /// Publishes an Event off the critical path (victims are evicted first, reported after).
    fn event(
        &self,
        regarding: &ObjectReference,
        related: Option<&ObjectReference>,
        warning: bool,
        reason: &str,
        note: String,
    ) {
        let recorder = self.recorder.clone();
        let (regarding, reason) = (regarding.clone(), reason.to_owned());
        let ev = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.clone(),
            note: Some(resize_guard_policy::verdict::clip(&note, 1024)),
            action: "Preempt".into(),
            secondary: related.cloned(),
        };
        tokio::spawn(async move {
            if let Err(e) = recorder.publish(&ev, &regarding).await {
                tracing::warn!(error = %e, reason, "could not record event");
            }
        });
    }

    async fn set_plan(&self, pod: &Pod, value: Option<String>) -> kube::Result<()> {
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let patch = json!({"metadata": {"annotations": {PLAN_ANNOTATION: value}}});
        api.patch(
            pod.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map(|_| ())
    }

    /// Carries out `decision` for `pod`.
    pub async fn apply(
        &self,
        pod: &Pod,
        decision: Decision,
        policy: &Policy,
    ) -> Result<Action, ActuateError> {
        let key = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        );
        match decision {
            Decision::Idle => Ok(Action::await_change()),
            Decision::Unblocked { seconds } => {
                self.metrics.unblocked(seconds);
                tracing::info!(pod = %key, seconds, "resize admitted after preemption");
                self.set_plan(pod, None)
                    .await
                    .map_err(|source| ActuateError::RecordPlan { pod: key, source })?;
                Ok(Action::await_change())
            }
            Decision::ClearPlan => {
                self.set_plan(pod, None)
                    .await
                    .map_err(|source| ActuateError::RecordPlan { pod: key, source })?;
                Ok(Action::await_change())
            }
            Decision::Wait { why, after } => {
                tracing::debug!(pod = %key, why, "waiting");
                Ok(Action::requeue(after))
            }
            Decision::WouldPreempt { note } => {
                self.metrics.preemption("would_preempt");
                self.event(&reference(pod), None, false, "WouldPreempt", note);
                Ok(Action::requeue(Duration::from_secs(300)))
            }
            Decision::Revert { patch, note } => {
                let api: Api<Pod> = Api::namespaced(
                    self.client.clone(),
                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                );
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                api.patch_subresource(
                    "resize",
                    name,
                    &PatchParams::default(),
                    &Patch::Strategic(&patch),
                )
                .await
                .map_err(|source| ActuateError::Revert {
                    pod: key.clone(),
                    source,
                })?;
                self.metrics.preemption("reverted_infeasible");
                tracing::info!(pod = %key, "reverted an Infeasible resize");
                self.event(&reference(pod), None, true, "ResizeReverted", note);
                Ok(Action::await_change())
            }
            Decision::Failed { reason, note } => {
                self.metrics.preemption("no_plan");
                tracing::info!(pod = %key, reason, "no preemption plan");
                self.event(&reference(pod), None, true, "ResizePreemptionFailed", note);
                Ok(Action::requeue(FAILED_RETRY))
            }
            Decision::Preempt {
                record,
                victims,
                note,
            } => {
                let fresh = record.is_some();
                // A plan with several victims is durable before any of them is touched, so a
                // controller that dies half-way is resumed with the same victims. A one-victim
                // plan needs no such record to be safe — once its victim terminates, the space
                // counts as being freed and nobody is chosen again — so it is recorded after the
                // eviction, off the critical path (only time-to-unblock reads it).
                let (before, after) = match record {
                    Some(rec) if victims.len() > 1 => (Some(rec), None),
                    Some(rec) => (None, Some(rec)),
                    None => (None, None),
                };
                if let Some(rec) = before {
                    self.set_plan(pod, Some(rec.to_annotation()))
                        .await
                        .map_err(|source| ActuateError::RecordPlan {
                            pod: key.clone(),
                            source,
                        })?;
                }
                self.metrics
                    .preemption(if fresh { "started" } else { "resumed" });
                tracing::info!(pod = %key, victims = victims.len(), fresh, "preempting");
                for v in &victims {
                    match self.preempt(pod, v, policy).await {
                        Ok(true) => self.metrics.victims(1),
                        Ok(false) => {}
                        Err(kube::Error::Api(e)) if e.code == 429 => {
                            // A PodDisruptionBudget refused: drop the plan, choose again.
                            self.metrics.preemption("pdb_blocked");
                            tracing::info!(pod = %key, victim = %v.name, "eviction refused by a PodDisruptionBudget; re-planning");
                            self.set_plan(pod, None).await.map_err(|source| {
                                ActuateError::RecordPlan {
                                    pod: key.clone(),
                                    source,
                                }
                            })?;
                            return Ok(Action::requeue(Duration::from_secs(1)));
                        }
                        Err(source) => {
                            self.metrics.preemption("error");
                            return Err(ActuateError::Preempt {
                                victim: format!("{}/{}", v.namespace, v.name),
                                source,
                            });
                        }
                    }
                }
                if let Some(rec) = after {
                    self.set_plan(pod, Some(rec.to_annotation()))
                        .await
                        .map_err(|source| ActuateError::RecordPlan {
                            pod: key.clone(),
                            source,
                        })?;
                }
                self.event(&reference(pod), None, false, "PreemptingForResize", note);
                Ok(Action::requeue(SHORT_WAIT))
            }
        }
    }

    /// Preempts one victim; `Ok(false)` if it is already gone, replaced or terminating.
    async fn preempt(
        &self,
        preemptor: &Pod,
        v: &PlannedVictim,
        policy: &Policy,
    ) -> kube::Result<bool> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &v.namespace);
        let cached = self.pods.as_ref().and_then(|s| {
            s.get(&kube::runtime::reflector::ObjectRef::new(&v.name).within(&v.namespace))
        });
        let victim = match cached {
            Some(p) => (*p).clone(),
            None => match api.get_opt(&v.name).await? {
                Some(p) => p,
                None => return Ok(false),
            },
        };
        if victim.metadata.uid.as_deref() != Some(v.uid.as_str())
            || victim.metadata.deletion_timestamp.is_some()
        {
            return Ok(false);
        }
        let preemptor_key = format!(
            "{}/{}",
            preemptor.metadata.namespace.as_deref().unwrap_or_default(),
            preemptor.metadata.name.as_deref().unwrap_or_default()
        );
        let node = preemptor
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let condition = json!({"status": {"conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByResizeGuard",
            "message": format!("resize-guard: preempting to make room for the in-place resize of {preemptor_key}"),
            "lastTransitionTime": Timestamp::now().to_string(),
        }]}});
        let own = victim
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30);
        let grace = own
            .min(i64::from(policy.preemption.max_grace_period_seconds))
            .max(0);
        let delete = DeleteParams {
            grace_period_seconds: Some(grace as u32),
            preconditions: Some(Preconditions {
                uid: Some(v.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match policy.preemption.pdb {
            PdbMode::Respect => {
                // The Eviction API writes its own DisruptionTarget (EvictionByEvictionAPI), so
                // ours goes on after it, naming the real cause.
                api.evict(
                    &v.name,
                    &EvictParams {
                        delete_options: Some(delete),
                        ..Default::default()
                    },
                )
                .await?;
                match api
                    .patch_status(
                        &v.name,
                        &PatchParams::default(),
                        &Patch::Strategic(condition),
                    )
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            PdbMode::BestEffort => {
                // Like kube-scheduler: mark, then delete.
                api.patch_status(
                    &v.name,
                    &PatchParams::default(),
                    &Patch::Strategic(condition),
                )
                .await?;
                api.delete(&v.name, &delete).await?;
            }
        }
        let priority = preemptor
            .spec
            .as_ref()
            .and_then(|s| s.priority)
            .unwrap_or(0);
        self.event(
            &reference(&victim),
            Some(&reference(preemptor)),
            false,
            "Preempted",
            format!("Preempted by resize-guard to make room for the in-place resize of {preemptor_key} (priority {priority}) on node {node}"),
        );
        Ok(true)
    }
}
