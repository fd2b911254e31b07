//! What the controller should do for one pod, as a value (ARCHITECTURE.md, "controller/": decisions
//! emit intents; the [`crate::preemption::actuator`] layer performs them). Pure: the pod, the
//! verdict from `resize_guard_policy::assess`, the recorded plan and the state of its victims in, a
//! [`Decision`] out — with when to look again — so every branch is unit-tested without a cluster.
//!
//! The loop of ARCHITECTURE.md, "controller/": only a Deferred resize of the current generation is
//! acted on; a fresh plan is recorded on the preemptor before any victim is touched when it has
//! several victims, and after the eviction when it has one ([`Record`]); a plan recorded for this
//! generation is resumed (its victims still running are preempted, terminating ones awaited) rather
//! than re-chosen (`decision/resume.rs`); once every planned victim is gone a still-Deferred resize
//! is planned afresh (the kubelet may have given the room to someone else: it retries every pending
//! resize when room appears); terminating pods on the node count as space being freed, so nothing
//! new is chosen while they cover the shortfall. A Deferred resize larger than the node's
//! allocatable is never preempted for (no victim can make it fit; a v1.37 kubelet keeps such a
//! resize Deferred for ever instead of marking it Infeasible: `decision/infeasible.rs`).
//!
//! Also decided here, on what the reconciler hands back: what a plan the brakes hold back
//! becomes ([`held`], on the brakes' verdict) and what a refused eviction means ([`refusal`], on
//! the outcome the actuator reports). What the controller remembers between reconciles — how
//! long a resize has waited, budget refusals — and the rules that read it (back-off, the stall
//! timer, the re-plan back-off) are [`waits`]. Every Event a decision leads to is the
//! decision's own ([`notice`]): the actuator records it as it is.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use resize_guard_policy::pod::{PodKey, is_deferred_now, resize_pending_for};
use resize_guard_policy::policy::{PdbMode, Policy};
use resize_guard_policy::upstream::pod::resize_pending;
use resize_guard_policy::verdict::Deferral;
use resize_guard_policy::victims::{NoPlan, name_list};
use resize_guard_policy::{Verdict, verdict::NAMES_IN_MESSAGES};

use crate::preemption::brakes::Limits;
use crate::preemption::seal::{PlanRecord, Untrusted};

pub mod held;
mod infeasible;
pub mod notes;
pub mod notice;
pub mod refusal;
mod resume;
pub mod victim_state;
pub mod waits;

pub use held::held_back;
pub use notice::Notice;
pub use refusal::{budget_refused, eviction_refused};
pub use victim_state::{VictimState, VictimStates, spare_the_unneeded, victim_state};
pub use waits::{Awaited, Waits};

/// What to do, and when to look again: every variant that requeues carries its own `after`
/// ([`Decision::requeue`]); the actuator applies it and picks no duration itself.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Not a Deferred resize: nothing to do.
    Idle,
    /// The resize went through after a preemption: record time-to-unblock, clear the plan.
    Unblocked {
        /// Seconds from the plan to now.
        seconds: f64,
    },
    /// A stale plan (other generation, resize no longer pending) to clear.
    ClearPlan,
    /// Wait on something that should happen without resize-guard acting (`on`): planned
    /// victims terminating, terminating pods nobody planned, the kubelet admitting a resize
    /// that fits. [`Waits::pace`] turns it into a [`Decision::Wait`] with back-off, or a
    /// [`Decision::Overdue`] once `preemption.stallAfterSeconds` passed.
    Awaiting {
        /// What it waits on.
        on: Awaited,
        /// Why (for logs, and the stall Event).
        why: String,
    },
    /// A wait past `preemption.stallAfterSeconds`: a `PreemptionStalled` Warning Event (one
    /// series per kind of wait), the node's plan-in-flight claim released (a waiting plan holds
    /// it at most this long), and keep waiting.
    Overdue {
        /// What it waits on (the Event's action).
        on: Awaited,
        /// The Event note: what it waits on and for how long.
        note: String,
        /// When to look again.
        after: Duration,
    },
    /// Wait and look again.
    Wait {
        /// Why (for logs).
        why: String,
        /// When to look again.
        after: Duration,
    },
    /// Record the plan when `record` says, and preempt `victims` in order — once the brakes
    /// ([`crate::preemption::brakes`]) let it through.
    Preempt {
        /// When the plan is written to the preemptor.
        record: Record,
        /// Victims still to act on, each with how and how fast.
        victims: Vec<Removal>,
        /// Human summary for the `PreemptingForResize` Event.
        note: String,
        /// The policy's brakes on it.
        limits: Limits,
        /// Pending resizes on the node now, for the brakes' measure of progress (read by the
        /// reconciler from the node's ledger: [`Inputs::pending_on_node`]).
        pending_on_node: usize,
        /// When to look again once every victim was acted on.
        after: Duration,
    },
    /// The recorded plan may not be acted on (not written by resize-guard, or it names a pod a
    /// fresh plan under the current policy could not choose, or more victims than the cap):
    /// drop it, say why in a Warning Event, and choose afresh.
    DropPlan {
        /// Why, for the Event and the log.
        why: String,
        /// When to look again.
        after: Duration,
    },
    /// A PodDisruptionBudget refused an eviction: drop the recorded plan, say so in an Event,
    /// and choose again (the budget's state is in the next verdict).
    Replan {
        /// Why, for the Event and the log.
        why: String,
        /// The victim whose eviction the budget refused (a fresh plan naming it again waits out
        /// the re-plan back-off, [`Waits::refused`]).
        victim: PodKey,
        /// When to look again.
        after: Duration,
    },
    /// The API server is throttling (or briefly unavailable): keep the plan and go on with it
    /// once the server's wait has passed.
    Throttled {
        /// Why (for logs).
        why: String,
        /// When to look again.
        after: Duration,
    },
    /// Planned victims are terminating long past their grace period: say so (Warning Event),
    /// keep waiting (the node's claim is kept until the stall timer, [`Decision::Overdue`]).
    Stalled {
        /// The Event note.
        note: String,
        /// When to look again.
        after: Duration,
    },
    /// Audit mode: say what would be preempted.
    WouldPreempt {
        /// The Event note.
        note: String,
        /// When to look again.
        after: Duration,
    },
    /// `feasibility.revertInfeasible`: patch an Infeasible resize back to the pod's actual
    /// resources (through `pods/resize`), so spec and status stop drifting apart.
    Revert {
        /// The strategic-merge patch for `pods/resize`.
        patch: serde_json::Value,
        /// The Event note.
        note: String,
    },
    /// A plan the brakes held back ([`held_back`]): counted under `outcome`, said in `notice`
    /// (which brake, or that it opened a circuit breaker) while it waits, then `then` carried
    /// out (a wait, or no plan past the per-resize cap).
    Held {
        /// The `outcome` label of `resize_guard_preemptions_total`.
        outcome: &'static str,
        /// The Event it says, if any.
        notice: Option<Notice>,
        /// What the plan becomes.
        then: Box<Decision>,
    },
    /// No plan can make room: say why, retry later.
    Failed {
        /// Stable reason.
        reason: &'static str,
        /// The Event note.
        note: String,
        /// When to retry.
        after: Duration,
    },
}

/// When the plan is written to the preemptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// Before any victim is touched: a plan with several victims must be durable first, so a
    /// controller that dies half-way is resumed with the same victims (never re-chosen).
    Before(PlanRecord),
    /// After the eviction, off the critical path: a one-victim plan needs no record to be safe
    /// (once its victim terminates, the space counts as being freed and nobody is chosen
    /// again); only time-to-unblock reads it.
    After(PlanRecord),
    /// Resuming a plan already recorded.
    Recorded,
}

/// How one victim goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    /// Who (the UID is a precondition of every write: a recreated pod is not the victim).
    pub victim: PodKey,
    /// Its own `terminationGracePeriodSeconds`, capped by `preemption.maxGracePeriodSeconds`
    /// when that is set.
    pub grace_seconds: u32,
    /// Through the Eviction API (`pdb: respect`) or a plain delete (`bestEffort`, like
    /// kube-scheduler).
    pub via: Via,
}

/// The API a victim is removed through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `pods/eviction`: a PodDisruptionBudget may refuse (HTTP 429).
    Eviction,
    /// `DisruptionTarget` condition, then DELETE.
    Delete,
}

/// How long to wait after a PodDisruptionBudget refused an eviction, before [`Waits::refused`]
/// backs it off for repeated refusals of one resize.
pub const REPLAN_WAIT: Duration = Duration::from_secs(1);

/// The least wait after the API server throttled an eviction.
pub const THROTTLE_WAIT: Duration = Duration::from_secs(1);
/// The most: a longer `Retry-After` is not honoured beyond it.
pub const MAX_THROTTLE_WAIT: Duration = Duration::from_secs(60);

/// How far past its grace period a victim may still be terminating before the plan is stalled.
pub const STALL_SLACK: Duration = Duration::from_secs(60);
/// How often a stalled plan looks again (and repeats its Event, aggregated into a series).
pub const STALLED_RECHECK: Duration = Duration::from_secs(30);

/// How long to wait before carrying on with a plan (and the first look of a wait, before
/// [`Waits::pace`] backs it off).
pub const SHORT_WAIT: Duration = Duration::from_millis(500);
/// How long to wait before retrying when no plan exists.
pub const FAILED_RETRY: Duration = Duration::from_secs(30);
/// How often an audit-mode resize looks again (and says again what it would preempt).
pub const WOULD_PREEMPT_RECHECK: Duration = Duration::from_secs(300);
/// How often a plan held by the open circuit breaker looks again.
pub const PAUSED_RECHECK: Duration = Duration::from_secs(30);
/// How often a plan held by another plan on its node looks again.
pub const NODE_BUSY_WAIT: Duration = Duration::from_secs(2);

impl Decision {
    /// When to look at the pod again: `None` waits for a change to it (nothing left to do until
    /// then), `Some` is the duration this decision carries.
    pub fn requeue(&self) -> Option<Duration> {
        match self {
            Decision::Idle
            | Decision::Unblocked { .. }
            | Decision::ClearPlan
            | Decision::Revert { .. } => None,
            Decision::Awaiting { .. } => Some(SHORT_WAIT),
            Decision::Wait { after, .. }
            | Decision::Overdue { after, .. }
            | Decision::Preempt { after, .. }
            | Decision::DropPlan { after, .. }
            | Decision::Replan { after, .. }
            | Decision::Throttled { after, .. }
            | Decision::Stalled { after, .. }
            | Decision::WouldPreempt { after, .. }
            | Decision::Failed { after, .. } => Some(*after),
            Decision::Held { then, .. } => then.requeue(),
        }
    }
}

/// Everything [`decide`] reads besides the pod, as the reconciler read it.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    /// `assess(pod)` on the current view.
    pub verdict: &'a Verdict,
    /// The recorded plan, sealed by this controller and verified.
    pub plan: Option<&'a PlanRecord>,
    /// The state of each victim of the recorded plan, by the victim's key.
    pub victims: &'a VictimStates,
    /// The policy in force.
    pub policy: &'a Policy,
    /// resize-guard's own namespace.
    pub install_namespace: &'a str,
    /// Now, on the wall clock (plan records carry wall-clock times).
    pub now: Timestamp,
    /// A pod's own `terminationGracePeriodSeconds`, when known.
    pub grace: &'a dyn Fn(&PodKey) -> Option<i64>,
    /// How long this controller has seen the resize Deferred ([`Waits::deferred_for`],
    /// monotonic).
    pub seen_deferred: Duration,
    /// Pending resizes on the pod's node now (its ledger's), carried by a plan for the brakes'
    /// measure of progress ([`Decision::Preempt`]).
    pub pending_on_node: usize,
}

/// Decides for `pod` on `inputs`.
pub fn decide(pod: &Pod, inputs: &Inputs<'_>) -> Decision {
    let Inputs {
        verdict,
        plan,
        victims,
        policy,
        install_namespace,
        now,
        grace,
        seen_deferred,
        pending_on_node,
    } = *inputs;
    let generation = pod.metadata.generation.unwrap_or(0);
    if let Some(revert) = infeasible::revert_infeasible(pod, policy, install_namespace, generation)
    {
        return revert;
    }
    if !is_deferred_now(pod) {
        return match plan {
            Some(p) if resize_pending(pod).is_none() => Decision::Unblocked {
                seconds: now.duration_since(p.time).as_secs_f64().max(0.0),
            },
            Some(_) => Decision::ClearPlan,
            None => Decision::Idle,
        };
    }
    let deferral = match verdict {
        Verdict::Deferred(d) => d,
        Verdict::Fits(fit) => {
            // Room is there already (victims gone); the kubelet's retry should admit it. If it
            // keeps the resize Deferred, the two count differently: say both.
            let kubelet = resize_pending(pod)
                .and_then(|c| c.message.as_deref())
                .unwrap_or("(no message)");
            return Decision::Awaiting {
                on: Awaited::Kubelet,
                why: format!(
                    "resize-guard counts the resize as fitting on node {} (the pod would request {}, other pods hold {}, allocatable {}); the kubelet keeps it Deferred: \"{kubelet}\"",
                    fit.node, fit.request, fit.used, fit.allocatable
                ),
            };
        }
        Verdict::Skipped(_) => return Decision::Idle,
        Verdict::Infeasible(i) => return infeasible::never_fits(pod, i),
        other => {
            return Decision::Wait {
                why: format!("not preemptible now: {}", other.label()),
                after: FAILED_RETRY,
            };
        }
    };
    if let Some(p) = plan.filter(|p| p.generation == generation) {
        // Every planned victim gone and the resize still Deferred: `None`, plan again below.
        match resume::resume(p, victims, deferral, policy, now, grace, pending_on_node) {
            // Every wait of a resumed plan is on its own victims terminating.
            Some(Decision::Wait { why, .. }) => {
                return Decision::Awaiting {
                    on: Awaited::PlannedVictims,
                    why: format!("{why} ({})", awaited_victims(p, victims, policy, grace)),
                };
            }
            Some(d) => return d,
            None => {}
        }
    }
    let min = Duration::from_secs(u64::from(policy.preemption.min_deferred_seconds));
    let waited = deferred_age(pod, now, seen_deferred);
    if waited < min {
        return Decision::Wait {
            why: format!("Deferred for {waited:?}, waiting minDeferredSeconds"),
            after: min - waited,
        };
    }
    plan_fresh(
        pod,
        deferral,
        policy,
        generation,
        now,
        grace,
        pending_on_node,
    )
}

/// The recorded plan's victims not yet gone, each with its state and grace period, for the
/// wait's log line and stall Event.
fn awaited_victims(
    plan: &PlanRecord,
    victims: &VictimStates,
    policy: &Policy,
    grace: &dyn Fn(&PodKey) -> Option<i64>,
) -> String {
    plan.victims
        .iter()
        .filter_map(|v| {
            let state = match victims.of(v) {
                VictimState::Terminating => "terminating",
                VictimState::Present => "running",
                VictimState::Gone | VictimState::Spare | VictimState::Ineligible(_) => return None,
            };
            Some(format!(
                "{}/{} {state}, grace period {}s",
                v.namespace,
                v.name,
                policy.victim_grace_seconds(grace(v))
            ))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// How long the resize has been Deferred, for `minDeferredSeconds`: the smaller of the age of the
/// condition's `lastTransitionTime` (the kubelet's wall clock; a time in the future is no age at
/// all) and how long this controller has seen it Deferred (`seen`, its own monotonic clock), so
/// neither a kubelet clock ahead of the controller's nor a restarted controller can make a
/// fresh deferral look old.
fn deferred_age(pod: &Pod, now: Timestamp, seen: Duration) -> Duration {
    resize_pending_for(pod, now).min(seen)
}

/// What a plan annotation this controller did not seal (or cannot read) means: it is never
/// acted on; it is removed and the resize planned afresh.
pub fn plan_untrusted(why: &Untrusted) -> Decision {
    Decision::DropPlan {
        why: format!("{why}; it is ignored and removed"),
        after: SHORT_WAIT,
    }
}

/// Each victim with its grace period (its own, 30 s when unknown as the API defaults it,
/// capped only when `preemption.maxGracePeriodSeconds` is set) and the API it goes through.
///
/// **Grace is honoured uncapped, and short-grace victims are not preferred**, as kube-scheduler's
/// DefaultPreemption does: its victims are chosen by priority and start time alone
/// (`SelectVictimsOnNode`,
/// `pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go`), its candidate nodes
/// are ordered without looking at grace (`pickOneNodeForPreemption`,
/// `pkg/scheduler/framework/preemption/preemption.go`: fewest PDB violations, lowest victim
/// priorities, fewest victims, latest start), and each victim is deleted with its own grace period
/// (`prepareCandidate` → `PreemptPod`, same file, → `DeletePod`, `pkg/scheduler/util/utils.go`,
/// with default `DeleteOptions`). A victim that takes long to exit holds the resize, not the node:
/// `preemption.stallAfterSeconds` reports it and releases the node's claim ([`Waits`]).
fn removals(
    victims: Vec<PodKey>,
    policy: &Policy,
    grace: &dyn Fn(&PodKey) -> Option<i64>,
) -> Vec<Removal> {
    let via = match policy.preemption.pdb {
        PdbMode::Respect => Via::Eviction,
        PdbMode::BestEffort => Via::Delete,
    };
    victims
        .into_iter()
        .map(|victim| Removal {
            grace_seconds: policy.victim_grace_seconds(grace(&victim)),
            via,
            victim,
        })
        .collect()
}

/// A fresh plan for the deferral `d`, or why none.
fn plan_fresh(
    pod: &Pod,
    d: &Deferral,
    policy: &Policy,
    generation: i64,
    now: Timestamp,
    grace: &dyn Fn(&PodKey) -> Option<i64>,
    pending_on_node: usize,
) -> Decision {
    let me = PodKey::of(pod);
    let plan = match &d.plan {
        Ok(p) => p,
        Err(why) => return failed(why, d),
    };
    if plan.victims.is_empty() {
        return Decision::Awaiting {
            on: Awaited::Unplanned,
            why: format!(
                "terminating pods {} will free the room",
                name_list(plan.awaiting.iter(), NAMES_IN_MESSAGES)
            ),
        };
    }
    let names = name_list(plan.victims.iter(), usize::MAX);
    let shortfall = d.shortfall_text();
    if policy.is_audit() {
        return Decision::WouldPreempt {
            note: format!(
                "audit mode: would preempt {names} on node {} to free {shortfall} for the resize of {me}{}",
                d.node,
                plan.race_note(NAMES_IN_MESSAGES)
            ),
            after: WOULD_PREEMPT_RECHECK,
        };
    }
    let victims: Vec<PodKey> = plan.victims.iter().map(|v| v.key.clone()).collect();
    let rec = PlanRecord {
        generation,
        victims: victims.clone(),
        time: now,
    };
    Decision::Preempt {
        record: if victims.len() > 1 {
            Record::Before(rec)
        } else {
            Record::After(rec)
        },
        note: format!(
            "preempting {names} on node {} to free {shortfall} for this resize{}",
            d.node,
            plan.race_note(NAMES_IN_MESSAGES)
        ),
        victims: removals(victims, policy, grace),
        limits: Limits::of(policy),
        pending_on_node,
        after: SHORT_WAIT,
    }
}

fn failed(why: &NoPlan, d: &Deferral) -> Decision {
    Decision::Failed {
        reason: why.reason(),
        note: format!(
            "cannot make room on node {} ({}): {why}",
            d.node,
            d.kubelet_message()
        ),
        after: FAILED_RETRY,
    }
}

fn join(v: &[PodKey]) -> String {
    name_list(v.iter(), usize::MAX)
}

#[cfg(test)]
mod tests;
