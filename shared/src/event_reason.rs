//! The reason of every Kubernetes Event the webhook and the controller record, as one enum:
//! each program decides an Event as a value (`resize_guard_runtime::events::EventIntent`) whose
//! reason is one of these, so no reason is spelled twice and a reader (`kubectl get events
//! --field-selector reason=…`, alerting rules, the plugin's `explain`) has one list to go by.
//! The cluster view's own Events about the policy ConfigMap (`NoPolicy`, `PolicyDeleted`,
//! `InvalidPolicy`, `cluster/src/view/policy_watch.rs`) are posted through kube's recorder
//! directly and are not listed here.

use std::fmt;

/// Why an Event was recorded (its `reason` field, a stable CamelCase word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventReason {
    /// The webhook denied a resize (Warning, on the pod).
    ResizeRejected,
    /// The webhook repaired a resize to keep the pod's QoS class (on the pod).
    ResizeRepaired,
    /// The controller is preempting victims for a Deferred resize (on the preemptor).
    PreemptingForResize,
    /// A victim was preempted (on the victim).
    Preempted,
    /// Audit mode: what would be preempted (on the preemptor).
    WouldPreempt,
    /// No plan can make room for the resize (Warning, on the preemptor).
    ResizePreemptionFailed,
    /// A plan waits past `preemption.stallAfterSeconds`, or its victims terminate long past
    /// their grace period (Warning, on the preemptor).
    PreemptionStalled,
    /// A recorded plan was not acted on and was removed (Warning, on the preemptor).
    PreemptionPlanRejected,
    /// A PodDisruptionBudget refused an eviction: the plan is chosen again (on the preemptor).
    PreemptionReplanned,
    /// A brake held a plan back (on the preemptor).
    PreemptionHeld,
    /// A plan opened a circuit breaker: preemption pauses in its scope (Warning, on the
    /// preemptor).
    PreemptionPaused,
    /// An Infeasible resize was patched back to the pod's actual resources (Warning, on the
    /// pod).
    ResizeReverted,
    /// The API server forbade one of the controller's writes (Warning, on the preemptor).
    WriteForbidden,
    /// The admission probe's dry-run resize was admitted without reaching the webhook
    /// (Warning, on the probed pod).
    AdmissionProbeBypassed,
}

impl EventReason {
    /// Every reason, in the order of the enum.
    pub const ALL: [EventReason; 14] = [
        EventReason::ResizeRejected,
        EventReason::ResizeRepaired,
        EventReason::PreemptingForResize,
        EventReason::Preempted,
        EventReason::WouldPreempt,
        EventReason::ResizePreemptionFailed,
        EventReason::PreemptionStalled,
        EventReason::PreemptionPlanRejected,
        EventReason::PreemptionReplanned,
        EventReason::PreemptionHeld,
        EventReason::PreemptionPaused,
        EventReason::ResizeReverted,
        EventReason::WriteForbidden,
        EventReason::AdmissionProbeBypassed,
    ];

    /// The Event's `reason` as written.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventReason::ResizeRejected => "ResizeRejected",
            EventReason::ResizeRepaired => "ResizeRepaired",
            EventReason::PreemptingForResize => "PreemptingForResize",
            EventReason::Preempted => "Preempted",
            EventReason::WouldPreempt => "WouldPreempt",
            EventReason::ResizePreemptionFailed => "ResizePreemptionFailed",
            EventReason::PreemptionStalled => "PreemptionStalled",
            EventReason::PreemptionPlanRejected => "PreemptionPlanRejected",
            EventReason::PreemptionReplanned => "PreemptionReplanned",
            EventReason::PreemptionHeld => "PreemptionHeld",
            EventReason::PreemptionPaused => "PreemptionPaused",
            EventReason::ResizeReverted => "ResizeReverted",
            EventReason::WriteForbidden => "WriteForbidden",
            EventReason::AdmissionProbeBypassed => "AdmissionProbeBypassed",
        }
    }
}

impl fmt::Display for EventReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_listed_once_and_spelled_as_its_name() {
        let mut seen = std::collections::HashSet::new();
        for r in EventReason::ALL {
            // Exhaustive: a new reason does not compile until it is matched here; add it to `ALL`
            // too.
            match r {
                EventReason::ResizeRejected
                | EventReason::ResizeRepaired
                | EventReason::PreemptingForResize
                | EventReason::Preempted
                | EventReason::WouldPreempt
                | EventReason::ResizePreemptionFailed
                | EventReason::PreemptionStalled
                | EventReason::PreemptionPlanRejected
                | EventReason::PreemptionReplanned
                | EventReason::PreemptionHeld
                | EventReason::PreemptionPaused
                | EventReason::ResizeReverted
                | EventReason::WriteForbidden
                | EventReason::AdmissionProbeBypassed => {}
            }
            assert!(seen.insert(r.as_str()), "{r:?} twice");
            assert_eq!(format!("{r:?}"), r.as_str());
            assert_eq!(r.to_string(), r.as_str());
        }
    }
}
