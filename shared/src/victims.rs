//! Victim selection for a Deferred resize on one node: upstream DefaultPreemption
//! (`SelectVictimsOnNode`, upstream-resize.md §4.3) run on the kubelet's accounting.
//!
//! 1. Candidates are the other pods on the node with **strictly lower** priority that are not
//!    terminating, not system-critical or mirror pods, and not protected by policy.
//! 2. Remove them all; if the resize still does not fit, there is no plan.
//! 3. Sort by importance (`MoreImportantPod`: priority desc, then older `startTime` first), split
//!    off the PDB-violating ones, and reprieve — first the violating group, then the rest, each
//!    most important first — every pod whose return still leaves room.
//!
//! Because fit is checked the way the kubelet checks it (other pods at `max(allocated, actual)`,
//! not at their desired size as the v1.37 scheduler does), the plan never includes a victim the
//! kubelet did not need (KEP-5836 "Risk of Additional Preemption"), and every victim is necessary:
//! giving any one back makes the resize not fit. Terminating pods count as space being freed, so
//! no new victim is chosen while earlier ones are still shutting down.
//!
//! With `preemption.pdb: respect` a pod whose eviction would break a budget is not a candidate at
//! all (the Eviction API would refuse it); budgets are then consumed least-important-first so the
//! pods the API would let go are the ones upstream's order would sacrifice anyway.

use std::cmp::Ordering;
use std::fmt;

use crate::budget::{BudgetSubject, Budgets};
use crate::ledger::{LedgerEntry, NodeLedger};
use crate::pod::PodKey;
use crate::policy::{PdbMode, Policy};
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
    /// `preemptionPolicy: Never`.
    pub never_preempts: bool,
    /// System-critical (the kubelet preempts for it itself).
    pub critical: bool,
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

/// A way to make room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreemptionPlan {
    /// Pods to preempt, most important first (upstream order). Empty when terminating pods
    /// already cover the shortfall.
    pub victims: Vec<Victim>,
    /// Terminating pods whose space is counted as on its way back.
    pub awaiting: Vec<PodKey>,
    /// What the resize lacks right now, in the kubelet's view.
    pub shortfall: Resources,
}

impl PreemptionPlan {
    /// `ns/a, ns/b` — at most `limit` names, then `and N more`.
    pub fn victim_names(&self, limit: usize) -> String {
        name_list(self.victims.iter().map(|v| &v.key), limit)
    }
}

/// Formats pod keys as `ns/a, ns/b and 3 more`.
pub fn name_list<'a>(keys: impl Iterator<Item = &'a PodKey>, limit: usize) -> String {
    let keys: Vec<&PodKey> = keys.collect();
    let mut out = keys
        .iter()
        .take(limit)
        .map(|k| k.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if keys.len() > limit {
        out.push_str(&format!(" and {} more", keys.len() - limit));
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
}

impl fmt::Display for Exclusions {
    /// `2 protected by policy, 1 covered by a PodDisruptionBudget`; empty when nothing notable.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let protected = self.protected_namespace + self.protected_selector + self.critical;
        let mut parts = Vec::new();
        if protected > 0 {
            parts.push(format!(
                "{protected} lower-priority protected by policy or critical"
            ));
        }
        if self.pdb > 0 {
            parts.push(format!("{} held by a PodDisruptionBudget", self.pdb));
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

/// Chooses the victims that let `preemptor`'s resize fit on `ledger`'s node.
pub fn select_victims(
    preemptor: &Preemptor,
    ledger: &NodeLedger,
    budgets: &Budgets,
    policy: &Policy,
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
    let allocatable = ledger.allocatable;
    let fits = |used: Resources| (preemptor.request + used).fits_in(allocatable);
    let used = ledger.used_by_others(uid);
    let shortfall = (preemptor.request + used).excess_over(allocatable);
    let awaiting: Vec<PodKey> = ledger
        .others(uid)
        .filter(|e| e.terminating)
        .map(|e| e.key.clone())
        .collect();
    let settled = used - ledger.terminating_others(uid);
    if fits(settled) {
        return Ok(PreemptionPlan {
            victims: Vec::new(),
            awaiting: if shortfall.is_zero() {
                Vec::new()
            } else {
                awaiting
            },
            shortfall,
        });
    }

    let mut excluded = Exclusions::default();
    let mut candidates: Vec<&LedgerEntry> = ledger
        .others(uid)
        .filter(|e| eligible(e, preemptor.priority, policy, &mut excluded))
        .collect();
    candidates.sort_by(|a, b| importance(a, b));

    let violating = match rules.pdb {
        PdbMode::BestEffort => budgets.violations(&subjects(candidates.iter().copied())),
        PdbMode::Respect => {
            let mut flags = budgets.violations(&subjects(candidates.iter().rev().copied()));
            flags.reverse();
            let before = candidates.len();
            let mut keep = flags.iter().map(|v| !v);
            candidates.retain(|_| keep.next().unwrap_or(false));
            excluded.pdb = before - candidates.len();
            vec![false; candidates.len()]
        }
    };
    if candidates.is_empty() {
        return Err(NoPlan::NoCandidates {
            node: ledger.node.clone(),
            priority: preemptor.priority,
            excluded,
        });
    }

    let mut remaining = settled - candidates.iter().map(|e| e.held).sum();
    if !fits(remaining) {
        return Err(NoPlan::NotEnough {
            candidates: candidates.len(),
            missing: (preemptor.request + remaining).excess_over(allocatable),
            excluded,
        });
    }

    let mut victims = Vec::new();
    let groups = [true, false].map(|want| {
        candidates
            .iter()
            .zip(&violating)
            .filter(move |(_, v)| **v == want)
            .map(|(e, v)| (*e, *v))
    });
    for group in groups {
        for (entry, violates_pdb) in group {
            if fits(remaining + entry.held) {
                remaining += entry.held;
            } else {
                victims.push((entry, violates_pdb));
            }
        }
    }
    victims.sort_by(|a, b| importance(a.0, b.0));
    if victims.len() > rules.max_victims_per_resize as usize {
        return Err(NoPlan::TooManyVictims {
            needed: victims.len(),
            max: rules.max_victims_per_resize,
        });
    }
    Ok(PreemptionPlan {
        victims: victims
            .into_iter()
            .map(|(e, violates_pdb)| Victim {
                key: e.key.clone(),
                priority: e.priority,
                held: e.held,
                violates_pdb,
            })
            .collect(),
        awaiting,
        shortfall,
    })
}

fn eligible(e: &LedgerEntry, priority: i32, policy: &Policy, excluded: &mut Exclusions) -> bool {
    let rules = &policy.preemption;
    let counter = if e.priority >= priority {
        &mut excluded.not_lower_priority
    } else if e.terminating {
        &mut excluded.terminating
    } else if e.critical || e.mirror {
        &mut excluded.critical
    } else if rules.protected_namespaces.contains(&e.key.namespace) {
        &mut excluded.protected_namespace
    } else if !rules.protected_selector.0.is_empty()
        && rules.protected_selector.0.matches(e.labels.as_ref())
    {
        &mut excluded.protected_selector
    } else {
        return true;
    };
    *counter += 1;
    false
}

fn subjects<'a>(entries: impl Iterator<Item = &'a LedgerEntry>) -> Vec<BudgetSubject<'a>> {
    entries
        .map(|e| BudgetSubject {
            namespace: &e.key.namespace,
            name: &e.key.name,
            labels: e.labels.as_ref(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
