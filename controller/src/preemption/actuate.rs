//! Carries out a [`Decision`], deciding nothing: records the plan on the preemptor when the
//! decision says, marks each victim `DisruptionTarget` (reason `PreemptionByResizeGuard`),
//! removes it through the API the decision names with the grace period it names, and records the
//! Events. Every write is fenced by [`Leadership`] (checked immediately before it, abandoned if
//! the fence passes while it is in flight) and carries the victim's UID as a precondition, so a
//! recreated pod of the same name is never touched. Every call is idempotent, so a retry or the
//! next leader can repeat it safely. The API answers that change the course — a
//! PodDisruptionBudget refusing an eviction, or the server throttling one — go back through
//! [`eviction_refused`](crate::preemption::decision::eviction_refused), which tells them apart by
//! the answer (the client does not retry evictions: `resize_guard_runtime::api_client`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions as K8sDeleteOptions, ObjectMeta, Preconditions as K8sPreconditions,
};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use resize_guard_policy::pod::{self, PodKey};
use resize_guard_runtime::Events;
use serde_json::json;

use crate::preemption::decision::{
    Decision, FAILED_RETRY, Record, Removal, SHORT_WAIT, Via, eviction_refused,
};

/// How often a plan held by the open circuit breaker looks again.
const PAUSED_RECHECK: Duration = Duration::from_secs(30);
/// How often a plan held by another plan on its node looks again.
const NODE_BUSY_WAIT: Duration = Duration::from_secs(2);
use crate::lease::fence::{Fenced, Leadership};
use crate::metrics::Metrics;
use crate::preemption::brakes::{Brakes, Held, Limits};
use crate::preemption::seal::{KeyError, PLAN_ANNOTATION, PlanRecord, PlanSeal, seal};

/// A write that was not made or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// Not made: this replica does not lead (or stopped leading while it was in flight).
    #[error(transparent)]
    Fenced(#[from] Fenced),
    /// The API server refused or could not be reached.
    #[error("the API request failed")]
    Api(#[source] kube::Error),
}

impl WriteError {
    /// The API server's HTTP status, when it answered.
    pub fn status(&self) -> Option<u16> {
        self.answer().map(|s| s.code)
    }

    /// The API server's answer, when it gave one.
    pub fn answer(&self) -> Option<&kube::core::Status> {
        match self {
            WriteError::Api(kube::Error::Api(e)) => Some(e),
            _ => None,
        }
    }
}

/// Errors carrying out a decision.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ActuateError {
    /// Writing (or clearing) the plan annotation failed.
    #[error("recording the plan on {pod}")]
    RecordPlan {
        /// The preemptor.
        pod: String,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// Reverting an Infeasible resize failed.
    #[error("reverting the Infeasible resize of {pod}")]
    Revert {
        /// The pod.
        pod: String,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// The key that seals plan records could not be had (nothing is resumed or recorded
    /// without it).
    #[error("loading the plan-sealing key")]
    PlanKey(#[source] KeyError),
    /// Preempting a victim failed.
    #[error("preempting {victim}")]
    Preempt {
        /// The victim.
        victim: String,
        /// Why.
        #[source]
        source: WriteError,
    },
}

impl ActuateError {
    /// Stable reason for metrics.
    pub fn reason(&self) -> &'static str {
        let (source, reason) = match self {
            ActuateError::RecordPlan { source, .. } => (Some(source), "RecordPlan"),
            ActuateError::Revert { source, .. } => (Some(source), "Revert"),
            ActuateError::Preempt { source, .. } => (Some(source), "Preempt"),
            ActuateError::PlanKey(KeyError::Create { source, .. }) => (Some(source), "PlanKey"),
            ActuateError::PlanKey(_) => (None, "PlanKey"),
        };
        if matches!(source, Some(WriteError::Fenced(_))) {
            "NotLeader"
        } else {
            reason
        }
    }

    /// The error and its causes, each once, for logs.
    pub fn chain(&self) -> String {
        resize_guard_runtime::error_chain(self)
    }
}

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
}

fn reference(pod: &Pod) -> ObjectReference {
    pod.object_ref(&())
}

/// The victim as an Event names it: only its key is at hand, not the pod.
fn victim_reference(r: &Removal) -> ObjectReference {
    Pod {
        metadata: ObjectMeta {
            name: Some(r.victim.name.clone()),
            namespace: Some(r.victim.namespace.clone()),
            uid: Some(r.victim.uid.clone()),
            ..Default::default()
        },
        ..Default::default()
    }
    .object_ref(&())
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
        reason: &str,
        note: String,
    ) {
        let ev = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_owned(),
            note: Some(resize_guard_policy::verdict::clip(&note, 1024)),
            action: "Preempt".into(),
            secondary: related.cloned(),
        };
        let this = self.clone();
        self.events
            .publish_through(ev, regarding.clone(), move |post| async move {
                this.write(post).await
            });
    }

    /// The plan-sealing key (read, or created by this leader on first need, fenced).
    pub async fn plan_key(&self) -> Result<&ring::hmac::Key, ActuateError> {
        self.seal
            .key(&self.client, |api, secret| async move {
                let post = PostParams::default();
                self.write(api.create(&post, &secret)).await.map(|_| ())
            })
            .await
            .map_err(ActuateError::PlanKey)
    }

    /// Writes `rec`, sealed for `pod`, as the plan annotation (or removes it for `None`).
    async fn record(&self, pod: &Pod, rec: Option<&PlanRecord>) -> Result<(), ActuateError> {
        let key = PodKey::of(pod).to_string();
        let value = match rec {
            Some(rec) => {
                let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                Some(seal(self.plan_key().await?, rec.clone(), uid).to_annotation())
            }
            None => None,
        };
        self.set_plan(pod, value)
            .await
            .map_err(|source| ActuateError::RecordPlan { pod: key, source })
    }

    async fn set_plan(&self, pod: &Pod, value: Option<String>) -> Result<(), WriteError> {
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or_default(),
        );
        // The UID makes the patch fail on a recreated pod of the same name.
        let patch =
            json!({"metadata": {"uid": pod.metadata.uid, "annotations": {PLAN_ANNOTATION: value}}});
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        self.write(api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)))
            .await
            .map(|_| ())
    }

    /// Keeps the brakes' node claims in step with how `pod`'s plan goes.
    fn track(&self, pod: &Pod, decision: &Decision) {
        let node = pod::node_name(pod);
        match decision {
            Decision::Idle | Decision::Unblocked { .. } => self.brakes.release(pod, node, true),
            Decision::ClearPlan
            | Decision::DropPlan { .. }
            | Decision::Replan { .. }
            | Decision::Failed { .. }
            | Decision::Revert { .. }
            | Decision::WouldPreempt { .. } => self.brakes.release(pod, node, false),
            Decision::Wait { .. } | Decision::Throttled { .. } | Decision::Stalled { .. } => {
                self.brakes.touch(pod, node, std::time::Instant::now());
            }
            Decision::Preempt { .. } => {}
        }
    }

    /// What a plan held back by the brakes becomes: a wait, or (past the per-resize cap) no
    /// plan; the plan that opens the circuit breaker says so in a Warning Event.
    fn held(&self, pod: &Pod, held: Held, limits: Limits) -> Decision {
        self.metrics.preemption(held.outcome());
        let node = pod::node_name(pod).unwrap_or_default();
        match held {
            Held::Paused {
                left,
                opened_now,
                futile,
            } => {
                let why = format!(
                    "resize-guard stopped preempting for {}s: {futile} plans within {}s removed their victims and their resizes still needed more (preemption.circuitBreaker)",
                    left.as_secs(),
                    limits.breaker.window_seconds
                );
                if opened_now {
                    tracing::warn!(pod = %PodKey::of(pod), why, "circuit breaker opened");
                    self.event(&reference(pod), None, true, "PreemptionPaused", why.clone());
                }
                Decision::Wait {
                    why,
                    after: left.min(PAUSED_RECHECK),
                }
            }
            Held::NodeBusy { holder } => Decision::Wait {
                why: format!("one plan at a time on node {node}: {holder}'s is in flight"),
                after: NODE_BUSY_WAIT,
            },
            Held::Spent { spent, more } => Decision::Failed {
                reason: "victims_per_resize",
                note: format!(
                    "cannot make room on node {node}: this resize already cost {spent} victim(s) and needs {more} more, beyond preemption.maxVictimsPerResize ({}) for one resize",
                    limits.per_resize
                ),
            },
            Held::Rate { wait } => Decision::Wait {
                why: format!(
                    "the cluster-wide eviction rate (preemption.maxEvictionsPerMinute: {}) is used up for now",
                    limits.per_minute
                ),
                after: wait.max(SHORT_WAIT),
            },
        }
    }

    /// Carries out `decision` for `pod`.
    pub async fn apply(&self, pod: &Pod, decision: Decision) -> Result<Action, ActuateError> {
        let key = PodKey::of(pod).to_string();
        self.track(pod, &decision);
        match decision {
            Decision::Idle => Ok(Action::await_change()),
            Decision::Unblocked { seconds } => {
                self.metrics.unblocked(seconds);
                tracing::info!(pod = %key, seconds, "resize admitted after preemption");
                self.record(pod, None).await?;
                Ok(Action::await_change())
            }
            Decision::ClearPlan => {
                self.record(pod, None).await?;
                Ok(Action::await_change())
            }
            Decision::DropPlan { why } => {
                self.metrics.preemption("plan_rejected");
                tracing::warn!(pod = %key, why, "recorded plan rejected");
                self.record(pod, None).await?;
                self.event(
                    &reference(pod),
                    None,
                    true,
                    "PreemptionPlanRejected",
                    format!("resize-guard did not act on the recorded preemption plan: {why}; a fresh plan is chosen instead"),
                );
                Ok(Action::requeue(SHORT_WAIT))
            }
            Decision::Replan { why, after } => {
                self.metrics.preemption("pdb_blocked");
                tracing::info!(pod = %key, why, "re-planning");
                self.record(pod, None).await?;
                self.event(
                    &reference(pod),
                    None,
                    false,
                    "PreemptionReplanned",
                    format!("resize-guard: {why}"),
                );
                Ok(Action::requeue(after))
            }
            Decision::Throttled { why, after } => {
                self.metrics.preemption("throttled");
                tracing::info!(pod = %key, why, "the API server is throttling evictions");
                Ok(Action::requeue(after))
            }
            Decision::Wait { why, after } => {
                tracing::debug!(pod = %key, why, "waiting");
                Ok(Action::requeue(after))
            }
            Decision::Stalled { note, after } => {
                self.metrics.preemption("stalled");
                tracing::warn!(pod = %key, note, "plan stalled");
                self.event(&reference(pod), None, true, "PreemptionStalled", note);
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
                let params = PatchParams::default();
                self.write(api.patch_subresource(
                    "resize",
                    name,
                    &params,
                    &Patch::Strategic(&patch),
                ))
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
                limits,
                pending_on_node,
            } => {
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
                    Err(held) => {
                        let then = self.held(pod, held, limits);
                        return Box::pin(self.apply(pod, then)).await;
                    }
                };
                if fresh {
                    // A plan that could not be recorded is not started: the key first.
                    self.plan_key().await?;
                }
                if let Record::Before(rec) = &record {
                    self.record(pod, Some(rec)).await?;
                }
                self.metrics
                    .preemption(if fresh { "started" } else { "resumed" });
                tracing::info!(pod = %key, victims = victims.len(), fresh, "preempting");
                for v in &victims {
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
                            return Box::pin(self.apply(pod, then)).await;
                        }
                        Err(source) => {
                            self.metrics.preemption("error");
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
                Ok(Action::requeue(SHORT_WAIT))
            }
        }
    }

    /// Removes one victim; `Ok(false)` if it is already gone or is another pod now (the UID
    /// precondition failed).
    async fn remove(&self, preemptor: &Pod, r: &Removal) -> Result<bool, WriteError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &r.victim.namespace);
        let preemptor_key = PodKey::of(preemptor);
        let condition = json!({
            "metadata": {"uid": r.victim.uid},
            "status": {"conditions": [{
                "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByResizeGuard",
                "message": format!("resize-guard: preempting to make room for the in-place resize of {preemptor_key}"),
                "lastTransitionTime": Timestamp::now().to_string(),
            }]}
        });
        let delete = DeleteParams {
            grace_period_seconds: Some(r.grace_seconds),
            preconditions: Some(Preconditions {
                uid: Some(r.victim.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        // 404: gone; 409: the UID precondition failed (a new pod of that name); 422: the UID in
        // a patch did not match (metadata.uid is immutable).
        let gone = |e: &WriteError| matches!(e.status(), Some(404 | 409 | 422));
        let params = PatchParams::default();
        let condition = Patch::Strategic(&condition);
        let mark = || api.patch_status(&r.victim.name, &params, &condition);
        match r.via {
            Via::Eviction => {
                // The Eviction API writes its own DisruptionTarget (EvictionByEvictionAPI), so
                // ours goes on after it, naming the real cause. The body is spelled here: kube 5's
                // `Api::evict` sends `delete_options`, a key the API server ignores, which would
                // drop both the grace period and the UID precondition.
                let eviction = Eviction {
                    metadata: ObjectMeta {
                        name: Some(r.victim.name.clone()),
                        namespace: Some(r.victim.namespace.clone()),
                        ..Default::default()
                    },
                    delete_options: Some(K8sDeleteOptions {
                        grace_period_seconds: Some(i64::from(r.grace_seconds)),
                        preconditions: Some(K8sPreconditions {
                            uid: Some(r.victim.uid.clone()),
                            resource_version: None,
                        }),
                        ..Default::default()
                    }),
                };
                let post = PostParams::default();
                let evict = api.create_subresource::<_, serde_json::Value>(
                    "eviction",
                    &r.victim.name,
                    &post,
                    &eviction,
                );
                match self.write(evict).await {
                    Err(e) if gone(&e) => return Ok(false),
                    other => other?,
                };
                match self.write(mark()).await {
                    Err(e) if gone(&e) => {}
                    other => {
                        other?;
                    }
                }
            }
            Via::Delete => {
                // Like kube-scheduler: mark, then delete.
                match self.write(mark()).await {
                    Err(e) if gone(&e) => return Ok(false),
                    other => {
                        other?;
                    }
                }
                match self.write(api.delete(&r.victim.name, &delete)).await {
                    Err(e) if gone(&e) => return Ok(false),
                    other => {
                        other?;
                    }
                }
            }
        }
        let priority = pod::priority(preemptor);
        let node = pod::node_name(preemptor).unwrap_or_default();
        self.event(
            &victim_reference(r),
            Some(&reference(preemptor)),
            false,
            "Preempted",
            format!("Preempted by resize-guard to make room for the in-place resize of {preemptor_key} (priority {priority}) on node {node}"),
        );
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
