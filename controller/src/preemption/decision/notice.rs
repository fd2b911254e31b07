//! The Events each decision carries: what carrying it out says, on which object, in which words
//! ([`Decision::events`], [`Removal::event`]), every reason one of `EventReason`
//! (`shared/src/event_reason.rs`, the webhook's list too). The actuator records them as they
//! are, once the decision was carried out whole (a write that failed, or an eviction refused,
//! says nothing of a plan that did not happen); only who may read a note is its rule
//! ([`super::notes::for_namespace`], applied where Events are queued).

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use resize_guard_policy::pod::PodKey;
use resize_guard_policy::upstream::pod;
use resize_guard_runtime::events::{EventIntent, EventReason};

use super::{Decision, Removal, notes};

/// The action of the controller's Events on a plan (repeats of one action on one object are
/// one series), but for a wait past the stall timer (what it waits on) and a plan a brake holds
/// (which brake).
pub const PREEMPT: &str = "Preempt";

/// An Event a decision says about the pod it was made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// Why (and so the Event's type, [`EventReason::is_warning`]).
    pub reason: EventReason,
    /// What was done or judged (keeps series apart).
    pub action: &'static str,
    /// The note, whole (the actuator counts other namespaces' pods in it for the pod's readers).
    pub note: String,
}

impl Notice {
    fn new(reason: EventReason, note: String) -> Notice {
        Notice {
            reason,
            action: PREEMPT,
            note,
        }
    }

    /// The Event on `pod`.
    pub fn on(self, pod: &Pod) -> EventIntent {
        EventIntent {
            regarding: pod.object_ref(&()),
            related: None,
            reason: self.reason,
            action: self.action.to_owned(),
            note: self.note,
        }
    }
}

impl Decision {
    /// What carrying this decision out says about its pod, in order, once it was carried out
    /// whole. Waits, clears and throttling say nothing (logs and metrics do).
    pub fn notices(&self) -> Vec<Notice> {
        let one = |reason, note: &str| vec![Notice::new(reason, note.to_owned())];
        match self {
            Decision::Idle
            | Decision::Unblocked { .. }
            | Decision::ClearPlan
            | Decision::Awaiting { .. }
            | Decision::Wait { .. }
            | Decision::Throttled { .. } => Vec::new(),
            Decision::DropPlan { why, .. } => one(
                EventReason::PreemptionPlanRejected,
                &format!(
                    "resize-guard did not act on the recorded preemption plan: {why}; a fresh plan is chosen instead"
                ),
            ),
            Decision::Replan { why, .. } => one(
                EventReason::PreemptionReplanned,
                &format!("resize-guard: {why}"),
            ),
            // One series per kind of wait.
            Decision::Overdue { on, note, .. } => vec![Notice {
                reason: EventReason::PreemptionStalled,
                action: on.action(),
                note: note.clone(),
            }],
            Decision::Stalled { note, .. } => one(EventReason::PreemptionStalled, note),
            Decision::WouldPreempt { note, .. } => one(EventReason::WouldPreempt, note),
            Decision::Revert { note, .. } => one(EventReason::ResizeReverted, note),
            Decision::Failed { note, .. } => one(EventReason::ResizePreemptionFailed, note),
            Decision::Preempt { note, .. } => one(EventReason::PreemptingForResize, note),
            Decision::Held { notice, then, .. } => {
                notice.iter().cloned().chain(then.notices()).collect()
            }
        }
    }

    /// [`Decision::notices`] as Events on `pod`.
    pub fn events(&self, pod: &Pod) -> Vec<EventIntent> {
        self.notices().into_iter().map(|n| n.on(pod)).collect()
    }
}

impl Removal {
    /// The `Preempted` Event on this victim once it is removed for `preemptor`: its note, and the
    /// preemptor as related object only when both are in one namespace
    /// ([`notes::preempted`]).
    pub fn event(&self, preemptor: &Pod) -> EventIntent {
        let key = PodKey::of(preemptor);
        let priority = pod::priority(preemptor);
        let node = resize_guard_policy::pod::node_name(preemptor).unwrap_or_default();
        let (note, relate) = notes::preempted(&self.victim.namespace, &key, priority, node);
        EventIntent {
            regarding: self.reference(),
            related: relate.then(|| preemptor.object_ref(&())),
            reason: EventReason::Preempted,
            action: PREEMPT.to_owned(),
            note,
        }
    }

    /// The message of the `DisruptionTarget` condition (reason `PreemptionByResizeGuard`) this
    /// victim gets before it goes, for `preemptor` ([`notes::disruption_message`]).
    pub fn condition_message(&self, preemptor: &Pod) -> String {
        notes::disruption_message(&self.victim.namespace, &PodKey::of(preemptor))
    }

    /// The victim as an Event names it: only its key is at hand, not the pod.
    fn reference(&self) -> ObjectReference {
        Pod {
            metadata: ObjectMeta {
                name: Some(self.victim.name.clone()),
                namespace: Some(self.victim.namespace.clone()),
                uid: Some(self.victim.uid.clone()),
                ..Default::default()
            },
            ..Default::default()
        }
        .object_ref(&())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::preemption::decision::Awaited;

    /// Each decision's Events, as (reason, warning, action, note): the words the actuator
    /// records (`crate::preemption::reconcile`'s tests see them posted).
    #[test]
    fn each_decision_says_what_it_always_said() {
        let after = Duration::from_secs(1);
        let said = |d: Decision| -> Vec<(&'static str, bool, &'static str, String)> {
            d.notices()
                .into_iter()
                .map(|n| (n.reason.as_str(), n.reason.is_warning(), n.action, n.note))
                .collect()
        };
        let why = || "w".to_owned();
        let note = || "n".to_owned();
        assert_eq!(
            said(Decision::DropPlan { why: why(), after }),
            [(
                "PreemptionPlanRejected",
                true,
                PREEMPT,
                "resize-guard did not act on the recorded preemption plan: w; a fresh plan is chosen instead".to_owned()
            )]
        );
        let victim = PodKey {
            namespace: "batch".into(),
            name: "v".into(),
            uid: "u".into(),
        };
        assert_eq!(
            said(Decision::Replan {
                why: why(),
                victim,
                after
            }),
            [(
                "PreemptionReplanned",
                false,
                PREEMPT,
                "resize-guard: w".to_owned()
            )]
        );
        assert_eq!(
            said(Decision::Overdue {
                on: Awaited::Kubelet,
                note: note(),
                after
            }),
            [("PreemptionStalled", true, Awaited::Kubelet.action(), note())]
        );
        for (d, reason, warning) in [
            (
                Decision::Stalled {
                    note: note(),
                    after,
                },
                "PreemptionStalled",
                true,
            ),
            (
                Decision::WouldPreempt {
                    note: note(),
                    after,
                },
                "WouldPreempt",
                false,
            ),
            (
                Decision::Revert {
                    patch: serde_json::json!({}),
                    note: note(),
                },
                "ResizeReverted",
                true,
            ),
            (
                Decision::Failed {
                    reason: "NoVictims",
                    note: note(),
                    after,
                },
                "ResizePreemptionFailed",
                true,
            ),
        ] {
            assert_eq!(said(d), [(reason, warning, PREEMPT, note())]);
        }
        for quiet in [
            Decision::Idle,
            Decision::ClearPlan,
            Decision::Unblocked { seconds: 1.0 },
            Decision::Wait { why: why(), after },
            Decision::Throttled { why: why(), after },
        ] {
            assert!(said(quiet.clone()).is_empty(), "{quiet:?}");
        }
    }
}
