//! Who may never be a victim, and why: [`exclusion`] holds every rule (priority not below the
//! preemptor's, terminating, system-critical or mirror, protected or excluded namespace, protected
//! selector, DaemonSet and bare pods unless allowed), so fresh plans and resumed plans apply the
//! same ones; [`Exclusions`] counts the pods each rule left out, for the reason a plan gives.

use std::fmt;

use crate::ledger::LedgerEntry;
use crate::pod::Controller;
use crate::policy::Policy;

/// Pods that were not candidates, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exclusions {
    /// Priority equal to or above the preemptor's.
    pub not_lower_priority: usize,
    /// Already terminating (counted as freed space instead).
    pub terminating: usize,
    /// System-critical or mirror pods.
    pub critical: usize,
    /// In a protected namespace.
    pub protected_namespace: usize,
    /// In a namespace the policy leaves alone (`namespaces.exclude`).
    pub excluded_namespace: usize,
    /// Matching the protected selector.
    pub protected_selector: usize,
    /// Evicting them would break a PodDisruptionBudget (`pdb: respect`).
    pub pdb: usize,
    /// Owned by a DaemonSet (`preemption.allowDaemonSetVictims: false`).
    pub daemon_set: usize,
    /// No controlling owner (`preemption.allowBarePodVictims: false`).
    pub bare: usize,
}

impl fmt::Display for Exclusions {
    /// Who among the lower-priority pods was left out and by which rule, e.g. `1 protected by
    /// policy (preemption.protectedSelector), 1 held by a PodDisruptionBudget`; empty when
    /// nothing notable.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for (n, why) in [
            (
                self.protected_namespace,
                "protected by policy (preemption.protectedNamespaces)",
            ),
            (
                self.excluded_namespace,
                "in a namespace resize-guard leaves alone (namespaces.exclude)",
            ),
            (
                self.protected_selector,
                "protected by policy (preemption.protectedSelector)",
            ),
            (self.critical, "system-critical or mirror"),
            (self.pdb, "held by a PodDisruptionBudget"),
            (
                self.daemon_set,
                "owned by a DaemonSet (preemption.allowDaemonSetVictims)",
            ),
            (
                self.bare,
                "without a controlling owner (preemption.allowBarePodVictims)",
            ),
        ] {
            if n > 0 {
                parts.push(format!("{n} {why}"));
            }
        }
        f.write_str(&parts.join(", "))
    }
}

/// Why one pod is not a candidate victim: the rules of [`select_victims`], which a recorded
/// plan's victims must also pass every time the plan is resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exclusion {
    /// Priority equal to or above the preemptor's.
    NotLowerPriority,
    /// Already terminating.
    Terminating,
    /// System-critical or a mirror pod.
    Critical,
    /// In `kube-system`, the install namespace or `preemption.protectedNamespaces`.
    ProtectedNamespace,
    /// In a namespace of `namespaces.exclude`: resize-guard leaves its pods alone, as resizing
    /// pods and as victims ([`Policy::excludes_namespace`]).
    ExcludedNamespace,
    /// Matches `preemption.protectedSelector`.
    ProtectedSelector,
    /// Owned by a DaemonSet, and the policy does not allow those.
    DaemonSet,
    /// No controlling owner, and the policy does not allow those.
    Bare,
}

impl fmt::Display for Exclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Exclusion::NotLowerPriority => "its priority is not below the resizing pod's",
            Exclusion::Terminating => "it is already terminating",
            Exclusion::Critical => "it is system-critical or a mirror pod",
            Exclusion::ProtectedNamespace => {
                "its namespace is protected (kube-system, the install namespace or preemption.protectedNamespaces)"
            }
            Exclusion::ExcludedNamespace => {
                "its namespace is excluded (namespaces.exclude): resize-guard leaves its pods alone"
            }
            Exclusion::ProtectedSelector => {
                "it matches preemption.protectedSelector"
            }
            Exclusion::DaemonSet => {
                "it is owned by a DaemonSet (preemption.allowDaemonSetVictims: false)"
            }
            Exclusion::Bare => {
                "it has no controlling owner (preemption.allowBarePodVictims: false)"
            }
        })
    }
}

/// Why `e` may not be a victim of a resize at `priority` under `policy`, if it may not. The
/// order of the checks decides which reason is counted when several apply.
pub fn exclusion(
    e: &LedgerEntry,
    priority: i32,
    policy: &Policy,
    install_namespace: &str,
) -> Option<Exclusion> {
    let rules = &policy.preemption;
    if e.priority >= priority {
        Some(Exclusion::NotLowerPriority)
    } else if e.terminating {
        Some(Exclusion::Terminating)
    } else if e.critical || e.mirror {
        Some(Exclusion::Critical)
    } else if policy.protects_namespace(&e.key.namespace, install_namespace) {
        Some(Exclusion::ProtectedNamespace)
    } else if policy.excludes_namespace(&e.key.namespace, install_namespace) {
        Some(Exclusion::ExcludedNamespace)
    } else if !rules.protected_selector.0.is_empty()
        && rules.protected_selector.0.matches(e.labels.as_deref())
    {
        Some(Exclusion::ProtectedSelector)
    } else if e.controller == Controller::DaemonSet && !rules.allow_daemon_set_victims {
        Some(Exclusion::DaemonSet)
    } else if e.controller == Controller::None && !rules.allow_bare_pod_victims {
        Some(Exclusion::Bare)
    } else {
        None
    }
}

pub(super) fn eligible(
    e: &LedgerEntry,
    priority: i32,
    policy: &Policy,
    install_namespace: &str,
    excluded: &mut Exclusions,
) -> bool {
    let Some(why) = exclusion(e, priority, policy, install_namespace) else {
        return true;
    };
    *match why {
        Exclusion::NotLowerPriority => &mut excluded.not_lower_priority,
        Exclusion::Terminating => &mut excluded.terminating,
        Exclusion::Critical => &mut excluded.critical,
        Exclusion::ProtectedNamespace => &mut excluded.protected_namespace,
        Exclusion::ExcludedNamespace => &mut excluded.excluded_namespace,
        Exclusion::ProtectedSelector => &mut excluded.protected_selector,
        Exclusion::DaemonSet => &mut excluded.daemon_set,
        Exclusion::Bare => &mut excluded.bare,
    } += 1;
    false
}
