//! The reason of every Kubernetes Event the webhook and the controller record, as one enum:
//! each program decides an Event as a value (`resize_guard_runtime::events::EventIntent`) whose
//! reason is one of these, so no reason is spelled twice and a reader (`kubectl get events
//! --field-selector reason=…`, alerting rules, the plugin's `explain`) has one list to go by.
//! The cluster view's own Events about the policy ConfigMap (`NoPolicy`, `PolicyDeleted`,
//! `InvalidPolicy`, `cluster/src/view/policy_watch.rs`), which both programs record, are listed
//! here too. Each reason also says its type, the object it is recorded on and what it means
//! ([`EventReason::is_warning`], [`EventReason::regarding`], [`EventReason::meaning`]): the
//! generated Events reference (`docs/src/reference/events.md`, written by `docs/tool`).

use std::fmt;

/// Declares [`EventReason`], its [`EventReason::ALL`] and its [`EventReason::as_str`] from one
/// list, so that neither misses a reason nor spells one differently.
macro_rules! event_reasons {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// Why an Event was recorded (its `reason` field, a stable CamelCase word).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EventReason {
            $($(#[doc = $doc])* $name,)*
        }

        impl EventReason {
            /// Every reason, in the order of the enum.
            pub const ALL: [EventReason; [$(stringify!($name)),*].len()] =
                [$(EventReason::$name),*];

            /// The Event's `reason` as written: the variant's name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(EventReason::$name => stringify!($name),)*
                }
            }
        }
    };
}

event_reasons! {
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
    /// No policy is in force once the view settled (Warning, on the policy ConfigMap).
    NoPolicy,
    /// The policy ConfigMap was deleted (Warning, on the ConfigMap).
    PolicyDeleted,
    /// The policy ConfigMap holds a policy that does not parse (Warning, on the ConfigMap).
    InvalidPolicy,
}

/// Which program records an Event reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Recorder {
    /// `resize-guard-webhook`.
    Webhook,
    /// `resize-guard-controller`.
    Controller,
    /// Both, through their cluster view (`cluster/`).
    Both,
}

impl Recorder {
    /// In words, for the reference.
    pub const fn as_str(self) -> &'static str {
        match self {
            Recorder::Webhook => "webhook",
            Recorder::Controller => "controller",
            Recorder::Both => "webhook and controller",
        }
    }
}

impl EventReason {
    /// True for a `Warning` Event, false for `Normal`.
    pub const fn is_warning(self) -> bool {
        match self {
            EventReason::ResizeRepaired
            | EventReason::PreemptingForResize
            | EventReason::Preempted
            | EventReason::WouldPreempt
            | EventReason::PreemptionReplanned
            | EventReason::PreemptionHeld => false,
            EventReason::ResizeRejected
            | EventReason::ResizePreemptionFailed
            | EventReason::PreemptionStalled
            | EventReason::PreemptionPlanRejected
            | EventReason::PreemptionPaused
            | EventReason::ResizeReverted
            | EventReason::WriteForbidden
            | EventReason::AdmissionProbeBypassed
            | EventReason::NoPolicy
            | EventReason::PolicyDeleted
            | EventReason::InvalidPolicy => true,
        }
    }

    /// The Event's type as Kubernetes spells it.
    pub const fn type_str(self) -> &'static str {
        if self.is_warning() {
            "Warning"
        } else {
            "Normal"
        }
    }

    /// The program that records it.
    pub const fn recorder(self) -> Recorder {
        match self {
            EventReason::ResizeRejected | EventReason::ResizeRepaired => Recorder::Webhook,
            EventReason::NoPolicy | EventReason::PolicyDeleted | EventReason::InvalidPolicy => {
                Recorder::Both
            }
            _ => Recorder::Controller,
        }
    }

    /// The object the Event is recorded on (its `regarding`).
    pub const fn regarding(self) -> &'static str {
        match self {
            EventReason::ResizeRejected
            | EventReason::ResizeRepaired
            | EventReason::ResizeReverted => "the resized pod",
            EventReason::Preempted => "the victim (the preemptor as related object)",
            EventReason::AdmissionProbeBypassed => "the probed pod",
            EventReason::NoPolicy | EventReason::PolicyDeleted | EventReason::InvalidPolicy => {
                "the policy ConfigMap"
            }
            _ => "the preemptor (the pod whose resize is Deferred)",
        }
    }

    /// What it means, in Markdown, for the reference.
    pub const fn meaning(self) -> &'static str {
        match self {
            EventReason::ResizeRejected => {
                "The webhook denied a resize; the note says why and the fix."
            }
            EventReason::ResizeRepaired => {
                "The webhook changed the resize's requests minimally so the pod keeps its QoS \
                 class (`qos.onChange: repair`)."
            }
            EventReason::PreemptingForResize => {
                "The controller is removing victims so the Deferred resize fits its node."
            }
            EventReason::Preempted => {
                "This pod was preempted to make room for another pod's resize."
            }
            EventReason::WouldPreempt => {
                "Audit mode: the victims the controller would have preempted."
            }
            EventReason::ResizePreemptionFailed => {
                "No plan can make room for the resize (no victims, or more than the caps allow)."
            }
            EventReason::PreemptionStalled => {
                "A plan waits past `preemption.stallAfterSeconds`, or its victims terminate long \
                 past their grace period; the node's plan-in-flight claim is released."
            }
            EventReason::PreemptionPlanRejected => {
                "A recorded plan was not acted on and was removed; a fresh plan is chosen instead."
            }
            EventReason::PreemptionReplanned => {
                "A PodDisruptionBudget refused an eviction: the plan is chosen again."
            }
            EventReason::PreemptionHeld => {
                "A brake (a rate, a cap, a busy node) held a plan back; the action names the brake."
            }
            EventReason::PreemptionPaused => {
                "A futile plan opened a circuit breaker: preemption pauses in its scope \
                 (`preemption.circuitBreaker`)."
            }
            EventReason::ResizeReverted => {
                "An Infeasible resize was patched back to the pod's actual resources \
                 (`feasibility.revertInfeasible`)."
            }
            EventReason::WriteForbidden => {
                "The API server forbade one of the controller's writes (a missing grant or an \
                 admission policy); nothing more is written for this plan."
            }
            EventReason::AdmissionProbeBypassed => {
                "The admission probe's dry-run resize was admitted without reaching the webhook: \
                 resizes fail open."
            }
            EventReason::NoPolicy => {
                "No policy is in force: nothing is denied, repaired or preempted until the \
                 ConfigMap's `policy.yaml` parses."
            }
            EventReason::PolicyDeleted => {
                "The policy ConfigMap was deleted; the last good policy stays in force until it is \
                 recreated."
            }
            EventReason::InvalidPolicy => {
                "The policy ConfigMap's `policy.yaml` does not parse; the last good policy stays \
                 in force."
            }
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
            assert!(seen.insert(r.as_str()), "{r:?} twice");
            assert_eq!(format!("{r:?}"), r.as_str());
            assert_eq!(r.to_string(), r.as_str());
        }
    }
}
