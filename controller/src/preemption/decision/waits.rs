//! What the controller remembers about a resize between reconciles, and the rules that read it:
//! how fast a wait looks again, when it is stalled, when a Deferred resize is old enough to
//! preempt for, and how soon a plan a PodDisruptionBudget refused is made again.
//!
//! - **Waits back off.** A resize waiting on something that should happen without resize-guard
//!   acting ([`Awaited`]) looks again after [`FIRST_LOOK`], doubling to [`LAST_LOOK`], and from
//!   [`FIRST_LOOK`] again whenever the pod changes (its `resourceVersion`). The pod watch
//!   re-triggers a pod only when the pod itself changes (`cluster/src/view/pods.rs` announces
//!   the pods the controller keeps, never a victim's disappearance): the kubelet's retry that
//!   admits the resize changes it, a victim's exit does not. So a wait keeps looking, at most
//!   [`LAST_LOOK`] apart, instead of every 500 ms for ever.
//! - **A stall timer independent of grace** (`preemption.stallAfterSeconds`): the first look of
//!   a wait of one kind starts it (monotonic, in this process); once it passes, the wait becomes
//!   [`Decision::Overdue`]: a `PreemptionStalled` Warning Event naming what it waits on and for
//!   how long, repeated every [`STALLED_RECHECK`] as one series, and the node's
//!   one-plan-at-a-time claim released (a waiting plan holds it at most this long; the actuator
//!   no longer refreshes it). The victims' own grace periods stay honoured, as kube-scheduler's
//!   DefaultPreemption honours them (see [`super::removals`]): the timer reports and frees the
//!   node for other plans, it does not shorten anyone's termination.
//! - **`minDeferredSeconds` on this controller's clock**: a Deferred condition's
//!   `lastTransitionTime` is the kubelet's wall clock; [`Waits::deferred_for`] measures from
//!   when this controller first saw the condition (monotonic), and `decide` takes the smaller
//!   of the two, so a kubelet clock ahead of the controller's cannot skip the wait.
//! - **A plan a PodDisruptionBudget refused is not made again at once** while the view's cached
//!   budget still allows the same victim (the next fresh plan names it again): the resize waits
//!   1 s after the first refusal, doubling to [`REPLAN_MAX`] ([`Waits::refused`],
//!   [`Waits::pace`]), so the `PreemptionReplanned` Event stays one series and the Eviction API is
//!   not asked every second.
//!
//! The memory is per preemptor UID and `metadata.generation` (a new generation starts afresh),
//! lives in this process (a new leader starts afresh: stall timers restart, which only delays a
//! report), and is forgotten once the resize is no longer pending, or [`FORGET_AFTER`] after it was
//! last looked at.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use resize_guard_policy::pod::{PodKey, is_deferred_now, node_name};
use resize_guard_policy::policy::Policy;

use super::{Decision, Record, STALLED_RECHECK};

/// The first look again of a wait (and after every change of the pod).
pub const FIRST_LOOK: Duration = Duration::from_millis(500);
/// The longest a wait goes without looking again.
pub const LAST_LOOK: Duration = Duration::from_secs(30);
/// The wait before re-planning after the first PodDisruptionBudget refusal; doubles per refusal.
pub const REPLAN_FIRST: Duration = Duration::from_secs(1);
/// The longest wait before re-planning after refusals.
pub const REPLAN_MAX: Duration = Duration::from_secs(60);
/// A resize nobody looked at for this long is forgotten (its pod deleted, say).
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// What a waiting resize waits on: something that should happen without resize-guard acting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaited {
    /// Its plan's own victims terminating.
    PlannedVictims,
    /// Terminating pods no plan of this resize named, whose room covers its shortfall.
    Unplanned,
    /// The kubelet: resize-guard counts the resize as fitting, the kubelet keeps it Deferred.
    Kubelet,
}

impl Awaited {
    /// The Event's `action`: keeps the stall Events of one pod apart, one series per kind.
    pub fn action(self) -> &'static str {
        match self {
            Awaited::PlannedVictims => "AwaitVictims",
            Awaited::Unplanned => "AwaitTerminating",
            Awaited::Kubelet => "AwaitKubelet",
        }
    }
}

impl fmt::Display for Awaited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Awaited::PlannedVictims => "its planned victims terminating",
            Awaited::Unplanned => "terminating pods no plan of it named",
            Awaited::Kubelet => "the kubelet admitting a resize resize-guard counts as fitting",
        })
    }
}

/// One wait of one kind: when it started and how long its next look is.
#[derive(Debug, Clone)]
struct Episode {
    on: Awaited,
    since: Instant,
    next: Duration,
    version: Option<String>,
}

/// Budget refusals of one resize's plans.
#[derive(Debug, Clone, Default)]
struct Refusals {
    victims: BTreeSet<PodKey>,
    count: u32,
    until: Option<Instant>,
}

/// What is remembered about one resize.
#[derive(Debug, Clone)]
struct Memory {
    generation: i64,
    deferred_since: Option<Instant>,
    wait: Option<Episode>,
    refusals: Refusals,
    touched: Instant,
}

impl Memory {
    fn new(generation: i64, now: Instant) -> Memory {
        Memory {
            generation,
            deferred_since: None,
            wait: None,
            refusals: Refusals::default(),
            touched: now,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    pods: HashMap<String, Memory>,
    swept: Option<Instant>,
}

/// The controller's memory of its waiting resizes (shared by every reconcile).
#[derive(Debug, Default)]
pub struct Waits {
    state: Mutex<State>,
}

impl Waits {
    /// Nothing remembered.
    pub fn new() -> Waits {
        Waits::default()
    }

    /// The state; a poisoned lock is taken over (every update leaves it consistent).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The memory of `pod` at `now`, started afresh for a new generation; forgets resizes
    /// nobody looked at for [`FORGET_AFTER`] (at most once a minute).
    fn memory<'a>(state: &'a mut State, pod: &Pod, now: Instant) -> &'a mut Memory {
        if state
            .swept
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(60))
        {
            state
                .pods
                .retain(|_, m| now.duration_since(m.touched) < FORGET_AFTER);
            state.swept = Some(now);
        }
        let generation = pod.metadata.generation.unwrap_or(0);
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let m = state
            .pods
            .entry(uid)
            .or_insert_with(|| Memory::new(generation, now));
        if m.generation != generation {
            *m = Memory::new(generation, now);
        }
        m.touched = now;
        m
    }

    /// How long this controller has seen `pod`'s resize Deferred (since its first look at this
    /// generation's Deferred condition, on the monotonic clock); zero when it is not Deferred now.
    pub fn deferred_for(&self, pod: &Pod, now: Instant) -> Duration {
        let mut s = self.lock();
        let m = Self::memory(&mut s, pod, now);
        if !is_deferred_now(pod) {
            m.deferred_since = None;
            return Duration::ZERO;
        }
        now.duration_since(*m.deferred_since.get_or_insert(now))
    }

    /// A PodDisruptionBudget refused to evict `victim` for `pod`'s plan (the decision
    /// [`super::budget_refused`] returns, `replan`): remembered, and the re-plan waits 1 s after
    /// the first refusal of this resize, doubling to [`REPLAN_MAX`]. Any other decision is
    /// returned as it is.
    pub fn refused(&self, pod: &Pod, replan: Decision, now: Instant) -> Decision {
        let Decision::Replan {
            why,
            victim,
            after: _,
        } = replan
        else {
            return replan;
        };
        let mut s = self.lock();
        let r = &mut Self::memory(&mut s, pod, now).refusals;
        r.count = r.count.saturating_add(1);
        r.victims.insert(victim.clone());
        let after = replan_wait(r.count);
        r.until = Some(now + after);
        Decision::Replan { why, victim, after }
    }

    /// Paces `decision` for `pod` at `now` under `policy`:
    /// - a wait on something resize-guard does not act on ([`Decision::Awaiting`], and the
    ///   planned victims' [`Decision::Stalled`]) looks again with back-off, and becomes
    ///   [`Decision::Overdue`] once `preemption.stallAfterSeconds` passed since the wait of that
    ///   kind began;
    /// - a fresh plan naming a victim a PodDisruptionBudget refused for this resize waits until
    ///   the refusal's back-off passed (the view's budget still allows it: the API said no);
    /// - anything else ends the wait and is returned as it is (a resize no longer pending is
    ///   forgotten).
    pub fn pace(&self, pod: &Pod, decision: Decision, policy: &Policy, now: Instant) -> Decision {
        let mut s = self.lock();
        if matches!(decision, Decision::Idle | Decision::Unblocked { .. }) {
            s.pods
                .remove(pod.metadata.uid.as_deref().unwrap_or_default());
            return decision;
        }
        let m = Self::memory(&mut s, pod, now);
        let on = match &decision {
            Decision::Awaiting { on, .. } => *on,
            Decision::Stalled { .. } => Awaited::PlannedVictims,
            Decision::Preempt {
                record: Record::Before(rec) | Record::After(rec),
                ..
            } => {
                m.wait = None;
                return match replan_held(&m.refusals, &rec.victims, now) {
                    Some(wait) => wait,
                    None => decision,
                };
            }
            _ => {
                m.wait = None;
                return decision;
            }
        };
        let version = pod.metadata.resource_version.clone();
        let ep = match &mut m.wait {
            Some(ep) if ep.on == on => ep,
            slot => slot.insert(Episode {
                on,
                since: now,
                next: FIRST_LOOK,
                version: version.clone(),
            }),
        };
        let waited = now.duration_since(ep.since);
        let stall_after = Duration::from_secs(u64::from(policy.preemption.stall_after_seconds));
        let Some(left) = stall_after.checked_sub(waited).filter(|l| !l.is_zero()) else {
            return overdue(pod, on, &decision, waited, policy);
        };
        match decision {
            Decision::Awaiting { why, .. } => {
                if ep.version != version {
                    ep.next = FIRST_LOOK;
                    ep.version = version;
                }
                let after = ep.next.min(left);
                ep.next = (ep.next * 2).min(LAST_LOOK);
                Decision::Wait { why, after }
            }
            Decision::Stalled { note, after } => Decision::Stalled {
                note,
                after: after.min(left),
            },
            other => other,
        }
    }
}

/// The wait before re-planning after `count` budget refusals: 1 s, doubling, at most
/// [`REPLAN_MAX`].
fn replan_wait(count: u32) -> Duration {
    let doublings = count.saturating_sub(1).min(16);
    (REPLAN_FIRST * 2u32.pow(doublings)).min(REPLAN_MAX)
}

/// The wait of a fresh plan naming `victims` when one was refused within the back-off: the rest
/// of it. `None` lets the plan go.
fn replan_held(r: &Refusals, victims: &[PodKey], now: Instant) -> Option<Decision> {
    let left = r
        .until
        .and_then(|until| until.checked_duration_since(now))
        .filter(|l| !l.is_zero())?;
    let again: Vec<&PodKey> = victims.iter().filter(|v| r.victims.contains(v)).collect();
    if again.is_empty() {
        return None;
    }
    let names = again
        .iter()
        .map(|v| format!("{}/{}", v.namespace, v.name))
        .collect::<Vec<_>>()
        .join(", ");
    Some(Decision::Wait {
        why: format!(
            "a PodDisruptionBudget refused the eviction of {names} ({} refusal(s) for this resize) while the budget resize-guard reads still allows it; planning again in {}s",
            r.count,
            left.as_secs_f64().ceil()
        ),
        after: left,
    })
}

/// The stalled wait's decision: the Event's note says what it waits on, for how long, and that
/// the node's claim is no longer held for it.
fn overdue(
    pod: &Pod,
    on: Awaited,
    decision: &Decision,
    waited: Duration,
    policy: &Policy,
) -> Decision {
    let why = match decision {
        Decision::Awaiting { why, .. } => why.as_str(),
        Decision::Stalled { note, .. } => note.as_str(),
        _ => "",
    };
    let still = match on {
        Awaited::Kubelet => {
            "resize-guard keeps waiting and chooses no victim while it counts the resize as fitting"
        }
        Awaited::PlannedVictims | Awaited::Unplanned => {
            "resize-guard keeps waiting and chooses no other victim while their room is counted"
        }
    };
    Decision::Overdue {
        on,
        note: format!(
            "the resize of {} has waited {}s on {on}, past preemption.stallAfterSeconds ({}s): {why}. {still}; node {}'s one-plan-at-a-time claim is no longer held for it, so other resizes on the node may plan",
            PodKey::of(pod),
            waited.as_secs(),
            policy.preemption.stall_after_seconds,
            node_name(pod).unwrap_or("(none)"),
        ),
        after: STALLED_RECHECK,
    }
}
