//! Why a Deferred resize gets no preemption plan ([`NoPlan`]): preemption disabled, the node or
//! the pod opted out, no candidates, not enough even with all of them, or more victims than
//! `preemption.maxVictimsPerResize` allows — with a stable reason for metrics and annotations.

use std::fmt;

use super::Exclusions;
use crate::resources::Resources;

/// Why no plan exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoPlan {
    /// `preemption.enabled: false`.
    Disabled,
    /// The node opted out; the reason names how.
    NodeOptedOut(String),
    /// The resizing pod has `preemptionPolicy: Never`.
    PreemptorNeverPreempts,
    /// The resizing pod is system-critical; the kubelet preempts for it.
    CriticalPreemptor,
    /// No pod qualifies as a victim.
    NoCandidates {
        /// Node name.
        node: String,
        /// The preemptor's priority.
        priority: i32,
        /// Who was left out and why.
        excluded: Exclusions,
    },
    /// Even preempting every candidate leaves the resize short.
    NotEnough {
        /// How many candidates there were.
        candidates: usize,
        /// What would still be missing.
        missing: Resources,
        /// Who was left out and why.
        excluded: Exclusions,
    },
    /// The plan needs more victims than policy allows.
    TooManyVictims {
        /// Victims needed.
        needed: usize,
        /// `preemption.maxVictimsPerResize`.
        max: u32,
    },
}

impl NoPlan {
    /// A stable, machine-friendly reason (metrics labels, annotations).
    pub fn reason(&self) -> &'static str {
        match self {
            NoPlan::Disabled => "PreemptionDisabled",
            NoPlan::NodeOptedOut(_) => "NodeOptedOut",
            NoPlan::PreemptorNeverPreempts => "PreemptionPolicyNever",
            NoPlan::CriticalPreemptor => "CriticalPod",
            NoPlan::NoCandidates { .. } => "NoLowerPriorityPods",
            NoPlan::NotEnough { .. } => "InsufficientEvenWithAllVictims",
            NoPlan::TooManyVictims { .. } => "TooManyVictims",
        }
    }

    /// A few words for a 256-character admission warning: the reason, or for the cap the
    /// count a plan would take.
    pub fn brief(&self) -> String {
        match self {
            NoPlan::TooManyVictims { needed, max } => {
                format!("preemption needs {needed} victims, maxVictimsPerResize is {max}")
            }
            other => other.reason().to_owned(),
        }
    }
}

impl fmt::Display for NoPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let suffix = |e: &Exclusions| {
            let s = e.to_string();
            if s.is_empty() { s } else { format!(" ({s})") }
        };
        match self {
            NoPlan::Disabled => {
                f.write_str("preemption is disabled by policy (preemption.enabled: false)")
            }
            NoPlan::NodeOptedOut(why) => f.write_str(why),
            NoPlan::PreemptorNeverPreempts => {
                f.write_str("the pod has preemptionPolicy: Never, so it may not preempt others")
            }
            NoPlan::CriticalPreemptor => f.write_str(
                "the pod is system-critical; the kubelet evicts other pods for it by itself",
            ),
            NoPlan::NoCandidates {
                node,
                priority,
                excluded,
            } => write!(
                f,
                "no pod on node {node} with priority below {priority} can be preempted{}",
                suffix(excluded)
            ),
            NoPlan::NotEnough {
                candidates,
                missing,
                excluded,
            } => write!(
                f,
                "preempting all {candidates} lower-priority pods would still leave the resize short by {missing}{}",
                suffix(excluded)
            ),
            NoPlan::TooManyVictims { needed, max } => write!(
                f,
                "making room takes {needed} victims, more than preemption.maxVictimsPerResize ({max})"
            ),
        }
    }
}
