//! Plans that win the race for the freed room, whatever order the victims terminate in.
//!
//! Victims go one at a time, and on each removal the kubelet retries every pending resize in its
//! queue order ([`crate::upstream::pending`]). A plan sized on the kubelet's accounting alone
//! (other pods at their allocation) can lose: part-way through, the preemptor still does not fit
//! but a lower-priority pod's pending growth does, the kubelet admits that one, and once every
//! victim is gone the preemptor is still short. upstream's alpha avoids this by counting *every*
//! pending growth on the node (KEP-5836) and over-preempts.
//!
//! A pending resize `t` can be admitted before the preemptor only if it fits in some state the
//! node passes through before the preemptor is admitted, with every other pod at no more than
//! its allocation:
//! - if the kubelet may retry `t` before the preemptor, in any state up to all victims gone — and
//!   since room only grows, exactly when it fits once they are all gone;
//! - otherwise only while some victim is still there (once all are gone the preemptor, retried
//!   first, fits) — exactly when it fits with one removal still to come.
//!
//! Those are the *racers* of a plan. A plan is sure to win when the preemptor fits once every
//! victim is gone with each racer at its pending size: whatever subset of racers the kubelet
//! admits on the way, it holds no more than that. [`Field::choose`] reaches such a plan by
//! reserving racers' growth until no new racer appears (each reservation can only add victims,
//! so this ends), tries preempting a racer itself where that takes fewer victims, and never
//! returns more victims than the same algorithm on the scheduler's accounting (every pending
//! growth reserved, which is always sure to win).

use crate::ledger::LedgerEntry;
use crate::resources::Resources;
use crate::upstream::victim_order::importance;
use crate::victims::Preemptor;

/// Up to this many candidates with pending growth, every subset of them is tried as forced
/// victims (2^6 = 64 small searches); beyond it, each one alone.
const MAX_GROWING_SUBSETS: usize = 6;

/// Why no plan exists, before the caller adds names and counts.
pub(super) enum Short {
    /// No candidates at all.
    NoCandidates,
    /// Even preempting every candidate leaves this much missing.
    NotEnough(Resources),
}

/// The victims chosen, as indices into the field's pods.
pub(super) struct Chosen {
    /// Victims, most important first.
    pub victims: Vec<usize>,
    /// Pending resizes the kubelet could admit before the preemptor while the victims go.
    pub racers: Vec<usize>,
    /// The plan leaves room for every racer's growth: it wins whatever the order.
    pub sure: bool,
}

/// One node as the planner sees it.
pub(super) struct Field<'a> {
    /// The resizing pod.
    pub preemptor: &'a Preemptor,
    /// The node's allocatable cpu and memory.
    pub allocatable: Resources,
    /// Every other pod on the node.
    pub others: Vec<&'a LedgerEntry>,
    /// Indices of the pods that may be preempted, most important first, each with "evicting
    /// it breaks a PodDisruptionBudget".
    pub candidates: Vec<(usize, bool)>,
}

impl Field<'_> {
    /// The plan: sure to win where one exists, with as few victims as this search finds.
    pub fn choose(&self) -> Result<Chosen, Short> {
        let none = vec![false; self.others.len()];
        let Ok(mut best) = self.fixpoint(&none) else {
            // Either no plan at all (the kubelet-accounting reprieve fails the same way, and
            // says why), or the growth of pods we may not preempt can take the room in some
            // order: the kubelet's plan is the best there is, and it may need a second round.
            let base = self.reprieve(&none, &none)?;
            return Ok(Chosen {
                racers: self.racers(&base),
                victims: base,
                sure: false,
            });
        };
        // Preempting a pod with pending growth frees its growth too: try that for each subset
        // of such candidates (each on its own when there are many), keeping the fewest victims.
        let growing: Vec<usize> = self
            .candidates
            .iter()
            .rev()
            .map(|&(i, _)| i)
            .filter(|&i| self.others[i].pending.is_some())
            .collect();
        let subsets: Vec<Vec<usize>> = if growing.len() <= MAX_GROWING_SUBSETS {
            (1..1usize << growing.len())
                .map(|mask| {
                    (0..growing.len())
                        .filter(|b| mask & (1 << b) != 0)
                        .map(|b| growing[b])
                        .collect()
                })
                .collect()
        } else {
            growing.iter().map(|&i| vec![i]).collect()
        };
        for subset in subsets {
            let mut forced = none.clone();
            for &i in &subset {
                forced[i] = true;
            }
            if let Ok(v) = self.fixpoint(&forced)
                && v.len() < best.len()
            {
                best = v;
            }
        }
        let everything: Vec<bool> = self.others.iter().map(|e| e.pending.is_some()).collect();
        if let Ok(v) = self.reprieve(&everything, &none)
            && v.len() < best.len()
        {
            best = v;
        }
        Ok(Chosen {
            racers: self.racers(&best),
            victims: best,
            sure: true,
        })
    }

    /// Reserves racers' growth until the plan has no new racer.
    fn fixpoint(&self, forced: &[bool]) -> Result<Vec<usize>, Short> {
        let mut reserved = vec![false; self.others.len()];
        loop {
            let victims = self.reprieve(&reserved, forced)?;
            let fresh: Vec<usize> = self
                .racers(&victims)
                .into_iter()
                .filter(|&i| !reserved[i])
                .collect();
            if fresh.is_empty() {
                return Ok(victims);
            }
            for i in fresh {
                reserved[i] = true;
            }
        }
    }

    /// What pod `i` counts for: its allocation, or its pending size when reserved.
    fn hold(&self, i: usize, reserved: &[bool]) -> Resources {
        let e = self.others[i];
        match &e.pending {
            Some(p) if reserved[i] => e.held.max(p.request),
            _ => e.held,
        }
    }

    fn fits(&self, used: Resources) -> bool {
        (self.preemptor.request + used).fits_in(self.allocatable)
    }

    /// Upstream's `SelectVictimsOnNode` on the accounting `reserved` gives, with the `forced`
    /// candidates preempted whatever happens: remove every candidate, then give back — pods
    /// that would break a budget first, then the rest, each most important first — every pod
    /// whose return still leaves room. Terminating pods count as gone.
    fn reprieve(&self, reserved: &[bool], forced: &[bool]) -> Result<Vec<usize>, Short> {
        let settled: Resources = (0..self.others.len())
            .filter(|&i| !self.others[i].terminating)
            .map(|i| self.hold(i, reserved))
            .sum();
        if self.fits(settled) {
            return Ok(Vec::new());
        }
        if self.candidates.is_empty() {
            return Err(Short::NoCandidates);
        }
        let mut remaining = settled
            - self
                .candidates
                .iter()
                .map(|&(i, _)| self.hold(i, reserved))
                .sum();
        if !self.fits(remaining) {
            let missing = (self.preemptor.request + remaining).excess_over(self.allocatable);
            return Err(Short::NotEnough(missing));
        }
        let mut victims: Vec<usize> = self
            .candidates
            .iter()
            .filter(|&&(i, _)| forced[i])
            .map(|&(i, _)| i)
            .collect();
        for breaks_budget in [true, false] {
            for &(i, _) in self
                .candidates
                .iter()
                .filter(|&&(i, v)| v == breaks_budget && !forced[i])
            {
                let back = self.hold(i, reserved);
                if self.fits(remaining + back) {
                    remaining += back;
                } else {
                    victims.push(i);
                }
            }
        }
        victims.sort_by(|&a, &b| importance(self.others[a], self.others[b]));
        Ok(victims)
    }

    /// The pending resizes that could be admitted before the preemptor while `victims` (and the
    /// pods already terminating) go, in some order.
    pub fn racers(&self, victims: &[usize]) -> Vec<usize> {
        let removed = |i: usize| self.others[i].terminating || victims.contains(&i);
        let removals: Vec<Resources> = (0..self.others.len())
            .filter(|&i| removed(i))
            .map(|i| self.others[i].held)
            .collect();
        // Everyone still there at their allocation, the preemptor at its own.
        let staying: Resources = (0..self.others.len())
            .filter(|&i| !removed(i))
            .map(|i| self.others[i].held)
            .sum::<Resources>()
            + self.preemptor.held;
        let room = |used: Resources| used.fits_in(self.allocatable);
        (0..self.others.len())
            .filter(|&i| !removed(i))
            .filter(|&i| {
                let e = self.others[i];
                let Some(p) = &e.pending else {
                    return false;
                };
                let load = staying - e.held + p.request;
                // Unless the kubelet surely retries the preemptor first (equal keys, e.g. two
                // resizes without a PodResizePending time, go in whatever order the queue had).
                if !self.preemptor.queue.retried_before(p) {
                    room(load)
                } else {
                    removals.iter().any(|&r| room(load + r))
                }
            })
            .collect()
    }
}
