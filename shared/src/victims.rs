//! Victim selection for a Deferred resize on one node: upstream DefaultPreemption
//! (`SelectVictimsOnNode`,
//! `pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go`) run on the kubelet's
//! accounting.
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
//! win the freed room while the victims terminate one by one is counted (`victims/race.rs`): the
//! plan makes the resize fit whatever order they go in, and is never larger than the
//! scheduler-accounting plan. Terminating pods count as space being freed, so no new victim is
//! chosen while earlier ones are still shutting down.
//!
//! With `preemption.pdb: respect` a pod whose eviction would break a budget, or that more than one
//! budget covers, is not a candidate at all (the Eviction API would refuse it); budgets are then
//! consumed least-important-first so the pods the API would let go are the ones upstream's order
//! would sacrifice anyway.

mod exclusion;
mod no_plan;
mod race;
#[cfg(test)]
mod tests;

use std::fmt;

use crate::audience::Audience;
use crate::budget::Budgets;
use crate::upstream::pdb::BudgetSubject;
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};

use crate::ledger::{LedgerEntry, NodeLedger};
use crate::pod::PodKey;
use crate::policy::{PdbMode, Policy, PreemptionPolicy};
use crate::resources::Resources;
use crate::upstream::pending::PendingResize;
use crate::upstream::requests::{Accounting, spec_requests};
/// Kept at its old path: the order is upstream's ([`crate::upstream::victim_order`]).
pub use crate::upstream::victim_order::importance;
use exclusion::eligible;
pub use exclusion::{Exclusion, Exclusions, exclusion};
pub use no_plan::NoPlan;

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
            critical: crate::upstream::pod::is_critical(pod),
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
        self.race_note_for(Audience::Cluster, limit)
    }

    /// [`race_note`](Self::race_note) naming only the pods `audience` may see by name.
    pub fn race_note_for(&self, audience: Audience<'_>, limit: usize) -> String {
        if !self.room_for.is_empty() {
            format!(
                "; it also leaves room for the pending resize of {}, which the kubelet may admit first",
                audience.list(self.room_for.iter(), limit)
            )
        } else if !self.racing.is_empty() {
            format!(
                "; the pending resize of {} may take the room first (no plan can hold both), so another round may follow",
                audience.list(self.racing.iter(), limit)
            )
        } else {
            String::new()
        }
    }

    /// [`victim_names`](Self::victim_names) naming only the pods `audience` may see by name.
    pub fn victim_names_for(&self, audience: Audience<'_>, limit: usize) -> String {
        audience.list(self.victims.iter().map(|v| &v.key), limit)
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

/// Which of the node's other pods a selection may choose its victims among.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Candidates<'a> {
    /// Every pod the rules allow: a fresh plan.
    All,
    /// Only these, the victims of a recorded plan being resumed: the same selection (every
    /// rule, the reprieve, the race, the cap) over them alone. A resumed plan never removes a
    /// victim a fresh reprieve would let live — room that appeared since the plan was made (a
    /// Job that finished, a victim that went on its own) spares the rest — and never a pod the
    /// record does not name; when they alone can no longer make room there is no plan, and the
    /// resize needs a fresh one.
    Recorded(&'a [PodKey]),
}

impl Candidates<'_> {
    /// Whether the selection may consider `entry`.
    fn include(self, entry: &LedgerEntry) -> bool {
        match self {
            Candidates::All => true,
            Candidates::Recorded(keys) => keys.iter().any(|k| k.uid == entry.key.uid),
        }
    }
}

/// Chooses, among `candidates`, the victims that let `preemptor`'s resize fit on `ledger`'s
/// node, and keep it fitting whatever order they terminate in (see `victims/race.rs`).
/// `install_namespace` is resize-guard's own, whose pods are never victims.
pub fn select_victims(
    preemptor: &Preemptor,
    ledger: &NodeLedger,
    budgets: &Budgets,
    policy: &Policy,
    install_namespace: &str,
    candidates: Candidates<'_>,
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
            candidates.include(others[i])
                && eligible(
                    others[i],
                    preemptor.priority,
                    policy,
                    install_namespace,
                    &mut excluded,
                )
        })
        .collect();
    candidates.sort_by(|&a, &b| importance(others[a], others[b]));
    let violating = budget_flags(&mut candidates, &others, budgets, rules.pdb, &mut excluded);
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
    victim_cap(chosen.victims.len(), rules).map_err(|over| NoPlan::TooManyVictims {
        needed: over.victims,
        max: over.max,
    })?;
    Ok(plan(&field, &chosen, shortfall))
}

/// A plan with more victims than `preemption.maxVictimsPerResize` allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverCap {
    /// The plan's victims.
    pub victims: usize,
    /// `preemption.maxVictimsPerResize`.
    pub max: u32,
}

/// The one cap on a plan's victims, `preemption.maxVictimsPerResize`: a fresh plan beyond it is
/// no plan ([`NoPlan::TooManyVictims`], from [`select_victims`]), and a recorded plan beyond it is
/// not resumed but dropped (`controller/src/preemption/decision/resume.rs`), so a cap lowered
/// since a plan was recorded binds that plan too. The victims one resize costs over several
/// plans are capped by the controller's brakes (`controller/src/preemption/brakes.rs`).
pub fn victim_cap(victims: usize, rules: &PreemptionPolicy) -> Result<(), OverCap> {
    if victims > rules.max_victims_per_resize as usize {
        return Err(OverCap {
            victims,
            max: rules.max_victims_per_resize,
        });
    }
    Ok(())
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

/// "Evicting it breaks a PodDisruptionBudget" for each candidate (most important first), under
/// `mode`: with `bestEffort` a flag that orders the reprieve; with `respect` such pods (and pods
/// more than one budget covers) stop being candidates, counted in `excluded.pdb`.
fn budget_flags(
    candidates: &mut Vec<usize>,
    others: &[&LedgerEntry],
    budgets: &Budgets,
    mode: PdbMode,
    excluded: &mut Exclusions,
) -> Vec<bool> {
    match mode {
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
    }
}

/// The plan `chosen` makes on `field`, in the pods' own names.
fn plan(field: &race::Field<'_>, chosen: &race::Chosen, shortfall: Resources) -> PreemptionPlan {
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
    PreemptionPlan {
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
    }
}
