//! Victim selection for a Deferred resize on one node: upstream DefaultPreemption
//! (`SelectVictimsOnNode`, `pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go`) run on the kubelet's accounting.
//!
//! 1. Candidates are the other pods on the node with **strictly lower** priority that are not
//!    terminating, not system-critical or mirror pods, and not protected by policy.
//! 2. Remove them all; if the resize still does not fit, there is no plan.
//! 3. Sort by importance (`MoreImportantPod`: priority desc, then older `startTime` first), split
//!    off the PDB-violating ones, and reprieve — first the violating group, then the rest, each
//!    most important first — every pod whose return still leaves room.
//!
//! Fit is checked the way the kubelet checks it (other pods at `max(allocated, actual)`, not at
//! their desired size as the v1.37 scheduler does), so the plan does not preempt for growth that
//! cannot compete (KEP-5836 "Risk of Additional Preemption"). Only the pending growth that could
//! win the freed room while the victims terminate one by one is counted (`victims/race.rs`): the plan makes
//! the resize fit whatever order they go in, and is never larger than the scheduler-accounting
//! plan. Terminating pods count as space being freed, so no new victim is chosen while earlier
//! ones are still shutting down.
//!
//! With `preemption.pdb: respect` a pod whose eviction would break a budget, or that more than one
//! budget covers, is not a candidate at all (the Eviction API would refuse it); budgets are then consumed least-important-first so the
//! pods the API would let go are the ones upstream's order would sacrifice anyway.

use std::cmp::Ordering;
use std::fmt;

use crate::budget::{BudgetSubject, Budgets};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};

use crate::ledger::{LedgerEntry, NodeLedger};
use crate::pending::PendingResize;
use crate::pod::{Controller, PodKey};
use crate::policy::{PdbMode, Policy};
use crate::requests::{Accounting, spec_requests};
use crate::resources::Resources;

/// The pod whose resize needs room.
#[derive(Debug, Clone)]
pub struct Preemptor {
    /// Who.
    pub key: PodKey,
    /// `spec.priority`.
    pub priority: i32,
    /// Its request in the kubelet's view of a resizing pod: `max(desired, allocated, actual)`.
    pub request: Resources,
    /// What it holds until the kubelet admits the resize: `max(allocated, actual)`.
    pub held: Resources,
    /// Its place in the kubelet's queue of pending resizes.
    pub queue: PendingResize,
    /// `preemptionPolicy: Never`.
    pub never_preempts: bool,
    /// System-critical (the kubelet preempts for it itself).
    pub critical: bool,
}

impl Preemptor {
    /// `pod` resizing to `spec`; `status` is its stored status (the webhook pairs a new spec
    /// with the old status, the controller passes the pod's own).
    pub fn new(pod: &Pod, spec: &PodSpec, status: Option<&PodStatus>) -> Preemptor {
        let queue = PendingResize::queued(pod, spec, status);
        Preemptor {
            key: PodKey::of(pod),
            priority: queue.priority,
            request: queue.request,
            held: spec_requests(spec, status, Accounting::Admitted),
            never_preempts: spec.preemption_policy.as_deref() == Some("Never"),
            critical: crate::pod::is_critical(pod),
            queue,
        }
    }
}

/// One pod to preempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Victim {
    /// Who.
    pub key: PodKey,
    /// Its priority.
    pub priority: i32,
    /// What it frees.
    pub held: Resources,
    /// Evicting it breaks a PodDisruptionBudget (only with `pdb: bestEffort`).
    pub violates_pdb: bool,
}

impl fmt::Display for Victim {
    /// `ns/name (priority N)`, as messages and Events list victims.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (priority {})", self.key, self.priority)
    }
}

/// A way to make room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreemptionPlan {
    /// Pods to preempt, most important first (upstream order). Empty when terminating pods
    /// already cover the shortfall.
    pub victims: Vec<Victim>,
    /// Terminating pods whose space is counted as on its way back.
    pub awaiting: Vec<PodKey>,
    /// Pods whose pending resize the kubelet could admit before this one while the victims go;
    /// the plan leaves room for their growth too, so it wins whatever order the victims
    /// terminate in.
    pub room_for: Vec<PodKey>,
    /// Pods whose pending resize may take the freed room first, so the plan may need a second
    /// round: empty unless no plan wins whatever order the victims go in (their growth cannot
    /// fit beside this resize even with every candidate gone).
    pub racing: Vec<PodKey>,
    /// What the resize lacks right now, in the kubelet's view.
    pub shortfall: Resources,
}

impl PreemptionPlan {
    /// `ns/a, ns/b` — at most `limit` names, then `and N more`.
    pub fn victim_names(&self, limit: usize) -> String {
        name_list(self.victims.iter().map(|v| &v.key), limit)
    }

    /// What the plan says about other pending resizes, for Event notes and messages: empty, or
    /// `; it also leaves room for the pending resize of ns/a, which the kubelet may admit first`.
    pub fn race_note(&self, limit: usize) -> String {
        if !self.room_for.is_empty() {
            format!(
                "; it also leaves room for the pending resize of {}, which the kubelet may admit first",
                name_list(self.room_for.iter(), limit)
            )
        } else if !self.racing.is_empty() {
            format!(
                "; the pending resize of {} may take the room first (no plan can hold both), so another round may follow",
                name_list(self.racing.iter(), limit)
            )
        } else {
            String::new()
        }
    }
}

/// Lists pods (their [`PodKey`]s, or [`Victim`]s with their priority) as `ns/a, ns/b and 3 more`:
/// at most `limit` of them, then how many were left out.
pub fn name_list<T: fmt::Display>(items: impl Iterator<Item = T>, limit: usize) -> String {
    let items: Vec<T> = items.collect();
    let mut out = items
        .iter()
        .take(limit)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > limit {
        out.push_str(&format!(" and {} more", items.len() - limit));
    }
    out
}

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
    /// Matching the protected selector.
    pub protected_selector: usize,
    /// Evicting them would break a PodDisruptionBudget (`pdb: respect`).
    pub pdb: usize,
    /// Owned by a DaemonSet (`preemption.allowDaemonSetVictims: false`).
    pub daemon_set: usize,
    /// No controlling owner (`preemption.allowBarePodVictims: false`).
    pub bare: usize,
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

/// Upstream `MoreImportantPod` as an ordering: most important first. Ties (same priority and
/// start time) fall back to namespace/name so plans are deterministic.
pub fn importance(a: &LedgerEntry, b: &LedgerEntry) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| match (a.start_time, b.start_time) {
            (Some(x), Some(y)) => x.cmp(&y),
            // A pod that has not started counts as starting now: the least senior.
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
        .then_with(|| a.key.cmp(&b.key))
}

/// Chooses the victims that let `preemptor`'s resize fit on `ledger`'s node, and keep it
/// fitting whatever order they terminate in (see `victims/race.rs`). `install_namespace` is
/// resize-guard's own, whose pods are never victims.
pub fn select_victims(
    preemptor: &Preemptor,
    ledger: &NodeLedger,
    budgets: &Budgets,
    policy: &Policy,
    install_namespace: &str,
) -> Result<PreemptionPlan, NoPlan> {
    let rules = &policy.preemption;
    if !rules.enabled {
        return Err(NoPlan::Disabled);
    }
    if let Some(why) = &ledger.opt_out {
        return Err(NoPlan::NodeOptedOut(why.clone()));
    }
    if preemptor.never_preempts {
        return Err(NoPlan::PreemptorNeverPreempts);
    }
    if preemptor.critical {
        return Err(NoPlan::CriticalPreemptor);
    }
    let uid = preemptor.key.uid.as_str();
    let others: Vec<&LedgerEntry> = ledger.others(uid).collect();
    let used: Resources = others.iter().map(|e| e.held).sum();
    let shortfall = (preemptor.request + used).excess_over(ledger.allocatable);

    let mut excluded = Exclusions::default();
    let mut candidates: Vec<usize> = (0..others.len())
        .filter(|&i| {
            eligible(
                others[i],
                preemptor.priority,
                policy,
                install_namespace,
                &mut excluded,
            )
        })
        .collect();
    candidates.sort_by(|&a, &b| importance(others[a], others[b]));
    let violating = match rules.pdb {
        PdbMode::BestEffort => budgets.violations(&subjects(candidates.iter().map(|&i| others[i]))),
        PdbMode::Respect => {
            let mut flags =
                budgets.violations(&subjects(candidates.iter().rev().map(|&i| others[i])));
            flags.reverse();
            // The Eviction API refuses (500) a pod that more than one budget covers, whatever
            // they allow (upstream `EvictionREST.Create`, `pkg/registry/core/pod/storage/
            // eviction.go`): such a pod can never be evicted.
            for (flag, s) in flags
                .iter_mut()
                .zip(subjects(candidates.iter().map(|&i| others[i])))
            {
                *flag |= budgets.covering(s).len() > 1;
            }
            let before = candidates.len();
            let mut keep = flags.iter().map(|v| !v);
            candidates.retain(|_| keep.next().unwrap_or(false));
            excluded.pdb = before - candidates.len();
            vec![false; candidates.len()]
        }
    };
    let field = race::Field {
        preemptor,
        allocatable: ledger.allocatable,
        candidates: candidates.into_iter().zip(violating).collect(),
        others,
    };
    let chosen = field.choose().map_err(|short| match short {
        race::Short::NoCandidates => NoPlan::NoCandidates {
            node: ledger.node.clone(),
            priority: preemptor.priority,
            excluded,
        },
        race::Short::NotEnough(missing) => NoPlan::NotEnough {
            candidates: field.candidates.len(),
            missing,
            excluded,
        },
    })?;
    if chosen.victims.len() > rules.max_victims_per_resize as usize {
        return Err(NoPlan::TooManyVictims {
            needed: chosen.victims.len(),
            max: rules.max_victims_per_resize,
        });
    }
    let others = &field.others;
    let keys = |ix: &[usize]| {
        ix.iter()
            .map(|&i| others[i].key.clone())
            .collect::<Vec<_>>()
    };
    let awaiting = if shortfall.is_zero() {
        Vec::new()
    } else {
        others
            .iter()
            .filter(|e| e.terminating)
            .map(|e| e.key.clone())
            .collect()
    };
    Ok(PreemptionPlan {
        victims: chosen
            .victims
            .iter()
            .map(|&i| Victim {
                key: others[i].key.clone(),
                priority: others[i].priority,
                held: others[i].held,
                violates_pdb: field.candidates.iter().any(|&(c, v)| c == i && v),
            })
            .collect(),
        awaiting,
        room_for: if chosen.sure {
            keys(&chosen.racers)
        } else {
            Vec::new()
        },
        racing: if chosen.sure {
            Vec::new()
        } else {
            keys(&chosen.racers)
        },
        shortfall,
    })
}

fn eligible(
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
        Exclusion::ProtectedSelector => &mut excluded.protected_selector,
        Exclusion::DaemonSet => &mut excluded.daemon_set,
        Exclusion::Bare => &mut excluded.bare,
    } += 1;
    false
}

fn subjects<'a>(entries: impl Iterator<Item = &'a LedgerEntry>) -> Vec<BudgetSubject<'a>> {
    entries
        .map(|e| BudgetSubject {
            namespace: &e.key.namespace,
            name: &e.key.name,
            labels: e.labels.as_deref(),
        })
        .collect()
}

mod race;

#[cfg(test)]
mod tests;
