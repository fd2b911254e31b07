//! What the controller should do for one pod, as a value (ARCHITECTURE.md §5: decisions emit intents; the
//! [`crate::preemption::actuate`] layer performs them). Pure: the pod, the verdict from
//! `resize_guard_policy::assess`, the recorded plan and the state of its victims in, a
//! [`Decision`] out — so every branch is unit-tested without a cluster.
//!
//! The loop of ARCHITECTURE.md §5: only a Deferred resize of the current generation is acted on; a fresh
//! plan is recorded on the preemptor before any victim is touched when it has several victims,
//! and after the eviction when it has one ([`Record`]); a plan recorded for this generation is
//! resumed (its victims still running are preempted, terminating ones awaited) rather than
//! re-chosen; once every planned victim is gone a still-Deferred resize is planned afresh (the kubelet may have given the
//! room to someone else: it retries every pending resize when room appears); terminating pods on the node count as space being freed, so nothing new is chosen
//! while they cover the shortfall. A Deferred resize larger than the node's allocatable is never
//! preempted for (no victim can make it fit; a v1.37 kubelet keeps such a resize Deferred for
//! ever instead of marking it Infeasible).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use resize_guard_policy::ledger::{LedgerEntry, NodeLedger};
use resize_guard_policy::pod::{
    PodKey, REASON_INFEASIBLE, is_deferred_now, node_name, priority, resize_pending,
};
use resize_guard_policy::policy::{PdbMode, Policy};
use resize_guard_policy::verdict::{Deferral, Infeasibility};
use resize_guard_policy::victims::{Exclusion, NoPlan, exclusion, name_list};
use resize_guard_policy::{Verdict, verdict::NAMES_IN_MESSAGES};

use crate::preemption::brakes::Limits;
use crate::preemption::seal::{PlanRecord, Untrusted};

/// Where a planned victim is now, re-checked against the rules a fresh plan obeys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VictimState {
    /// Running on the preemptor's node, and a fresh plan could still choose it.
    Present,
    /// Deletion started.
    Terminating,
    /// No longer exists (or is a different pod now).
    Gone,
    /// Still there, but no fresh plan under the current policy could choose it (another node,
    /// not lower priority, protected, critical …): the sentence says why.
    Ineligible(String),
}

/// What to do.
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
        /// Pending resizes on the node now, for the brakes' measure of progress (filled in by
        /// the reconciler from the node's ledger, which `decide` does not read).
        pending_on_node: usize,
    },
    /// The recorded plan may not be acted on (not written by resize-guard, or it names a pod a
    /// fresh plan under the current policy could not choose, or more victims than the cap):
    /// drop it, say why in a Warning Event, and choose afresh.
    DropPlan {
        /// Why, for the Event and the log.
        why: String,
    },
    /// A PodDisruptionBudget refused an eviction: drop the recorded plan, say so in an Event,
    /// and choose again (the budget's state is in the next verdict).
    Replan {
        /// Why, for the Event and the log.
        why: String,
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
    /// keep waiting.
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
    },
    /// `feasibility.revertInfeasible`: patch an Infeasible resize back to the pod's actual
    /// resources (through `pods/resize`), so spec and status stop drifting apart.
    Revert {
        /// The strategic-merge patch for `pods/resize`.
        patch: serde_json::Value,
        /// The Event note.
        note: String,
    },
    /// No plan can make room: say why, retry later.
    Failed {
        /// Stable reason.
        reason: &'static str,
        /// The Event note.
        note: String,
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

/// How long to wait after a PodDisruptionBudget refused an eviction.
pub const REPLAN_WAIT: Duration = Duration::from_secs(1);

/// The least wait after the API server throttled an eviction.
pub const THROTTLE_WAIT: Duration = Duration::from_secs(1);
/// The most: a longer `Retry-After` is not honoured beyond it.
pub const MAX_THROTTLE_WAIT: Duration = Duration::from_secs(60);

/// How far past its grace period a victim may still be terminating before the plan is stalled.
pub const STALL_SLACK: Duration = Duration::from_secs(60);
/// How often a stalled plan looks again (and repeats its Event, aggregated into a series).
pub const STALLED_RECHECK: Duration = Duration::from_secs(30);

/// How long to wait between checks while victims terminate or room is pending.
pub const SHORT_WAIT: Duration = Duration::from_millis(500);
/// How long to wait before retrying when no plan exists.
pub const FAILED_RETRY: Duration = Duration::from_secs(30);

/// Decides for `pod`. `verdict` is `assess(pod)` on the current view; `victims` gives the state
/// of each victim of the recorded plan (same order); `grace` a pod's own
/// `terminationGracePeriodSeconds` when known.
pub fn decide(
    pod: &Pod,
    verdict: &Verdict,
    plan: Option<&PlanRecord>,
    victims: &[VictimState],
    policy: &Policy,
    now: Timestamp,
    grace: &dyn Fn(&PodKey) -> Option<i64>,
) -> Decision {
    let generation = pod.metadata.generation.unwrap_or(0);
    if let Some(revert) = revert_infeasible(pod, policy, generation) {
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
        Verdict::Fits(_) => {
            // Room is there already (victims gone); the kubelet's retry will admit it.
            return Decision::Wait {
                why: "the resize fits now; waiting for the kubelet to admit it".into(),
                after: SHORT_WAIT,
            };
        }
        Verdict::Skipped(_) => return Decision::Idle,
        Verdict::Infeasible(i) => return never_fits(pod, i),
        other => {
            return Decision::Wait {
                why: format!("not preemptible now: {}", other.label()),
                after: FAILED_RETRY,
            };
        }
    };
    if let Some(p) = plan.filter(|p| p.generation == generation) {
        if let Some(why) = unfit_to_resume(p, victims, deferral, policy) {
            return Decision::DropPlan { why };
        }
        let pending: Vec<PodKey> = p
            .victims
            .iter()
            .zip(victims)
            .filter(|(_, s)| **s == VictimState::Present)
            .map(|(v, _)| v.clone())
            .collect();
        let fresh_needs_victims = matches!(&deferral.plan, Ok(f) if !f.victims.is_empty());
        if !pending.is_empty() && fresh_needs_victims {
            return Decision::Preempt {
                record: Record::Recorded,
                note: format!("resuming the recorded plan: {}", join(&pending)),
                victims: removals(pending, policy, grace),
                limits: Limits::of(policy),
                pending_on_node: 0,
            };
        }
        if let Some(note) = stalled(p, victims, policy, now, grace) {
            return Decision::Stalled {
                note,
                after: STALLED_RECHECK,
            };
        }
        if victims.contains(&VictimState::Terminating) || !pending.is_empty() {
            return Decision::Wait {
                why: "planned victims are terminating; the room they free covers the resize".into(),
                after: SHORT_WAIT,
            };
        }
        // Every planned victim is gone and the resize is still Deferred: plan again below.
    }
    if let Some(since) = resize_pending(pod).and_then(|c| c.last_transition_time.as_ref()) {
        let min = Duration::from_secs(u64::from(policy.preemption.min_deferred_seconds));
        let waited = now.duration_since(since.0).unsigned_abs();
        if waited < min {
            return Decision::Wait {
                why: format!("Deferred for {waited:?}, waiting minDeferredSeconds"),
                after: min - waited,
            };
        }
    }
    plan_fresh(pod, deferral, policy, generation, now, grace)
}

/// Why a recorded plan (of the current generation) may not be resumed, if it may not: a
/// resumed plan obeys every rule a fresh one does — the victim cap, each victim still eligible
/// on the preemptor's node ([`VictimState::Ineligible`]), preemption allowed at all for this
/// resize now (enforce mode, and a fresh plan exists: preemption enabled, the node not opted
/// out, the preemptor allowed to preempt, enough candidates within the cap).
fn unfit_to_resume(
    plan: &PlanRecord,
    victims: &[VictimState],
    deferral: &Deferral,
    policy: &Policy,
) -> Option<String> {
    let max = policy.preemption.max_victims_per_resize;
    if plan.victims.len() > max as usize {
        return Some(format!(
            "it names {} victims, more than preemption.maxVictimsPerResize ({max})",
            plan.victims.len()
        ));
    }
    let ineligible: Vec<String> = plan
        .victims
        .iter()
        .zip(victims)
        .filter_map(|(v, s)| match s {
            VictimState::Ineligible(why) => Some(format!("{v}: {why}")),
            _ => None,
        })
        .collect();
    if !ineligible.is_empty() {
        return Some(format!(
            "a fresh plan could not choose {}",
            ineligible.join("; ")
        ));
    }
    if policy.is_audit() {
        return Some("the policy is in audit mode, which never preempts".into());
    }
    match &deferral.plan {
        Err(why) => Some(format!("no fresh plan can make room now: {why}")),
        Ok(_) => None,
    }
}

/// Where the victim `key` of a recorded plan is now, judged by the rules of a fresh plan:
/// `entry` is its line in the view's pod index (`None` when gone or terminal), `ledger` the
/// resizing pod's node ledger. A victim that is another pod now (same UID, other name), the
/// preemptor itself, on another node, or excluded by [`exclusion`] (priority, critical,
/// protected, owner) is [`VictimState::Ineligible`]; a terminating one is awaited.
pub fn victim_state(
    key: &PodKey,
    entry: Option<&LedgerEntry>,
    preemptor: &Pod,
    ledger: Option<&NodeLedger>,
    policy: &Policy,
    install_namespace: &str,
) -> VictimState {
    let Some(e) = entry.filter(|e| e.key.name == key.name && e.key.namespace == key.namespace)
    else {
        return VictimState::Gone;
    };
    if preemptor.metadata.uid.as_deref() == Some(key.uid.as_str()) {
        return VictimState::Ineligible("it is the resizing pod itself".into());
    }
    let Some(ledger) = ledger.filter(|l| l.entry(&key.uid).is_some()) else {
        return VictimState::Ineligible(format!(
            "it is not on the resizing pod's node {}",
            node_name(preemptor).unwrap_or("(none)")
        ));
    };
    match exclusion(e, priority(preemptor), policy, install_namespace) {
        None => VictimState::Present,
        Some(Exclusion::Terminating) => VictimState::Terminating,
        Some(why) => VictimState::Ineligible(format!("{why} (node {})", ledger.node)),
    }
}

/// What a plan annotation this controller did not seal (or cannot read) means: it is never
/// acted on; it is removed and the resize planned afresh.
pub fn plan_untrusted(why: &Untrusted) -> Decision {
    Decision::DropPlan {
        why: format!("{why}; it is ignored and removed"),
    }
}

/// The plan's victims still terminating [`STALL_SLACK`] past their grace period since the plan
/// was made (a finalizer nobody removes, a node that stopped reporting), as the Event's note.
/// The room they will free still counts, so no other victim is chosen meanwhile; the Event is
/// what tells an operator the resize waits on them.
fn stalled(
    plan: &PlanRecord,
    victims: &[VictimState],
    policy: &Policy,
    now: Timestamp,
    grace: &dyn Fn(&PodKey) -> Option<i64>,
) -> Option<String> {
    let age = now.duration_since(plan.time).as_secs_f64().max(0.0);
    let stuck: Vec<String> = plan
        .victims
        .iter()
        .zip(victims)
        .filter(|(_, s)| **s == VictimState::Terminating)
        .filter_map(|(v, _)| {
            let allowed = u64::from(policy.victim_grace_seconds(grace(v))) + STALL_SLACK.as_secs();
            (age > allowed as f64).then(|| {
                format!(
                    "{}/{} (grace period {}s)",
                    v.namespace,
                    v.name,
                    policy.victim_grace_seconds(grace(v))
                )
            })
        })
        .collect();
    (!stuck.is_empty()).then(|| {
        format!(
            "the resize waits on {} still terminating {:.0}s after the plan: a finalizer or a node that stopped reporting may hold it; the room it frees is already counted, so resize-guard chooses no other victim",
            stuck.join(", "),
            age
        )
    })
}

/// What a PodDisruptionBudget's refusal to evict `victim` means: the plan no longer holds.
/// `detail` is the API server's own account (the budget and its numbers), when it gave one.
pub fn budget_refused(victim: &PodKey, detail: &str) -> Decision {
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!(" ({detail})")
    };
    Decision::Replan {
        why: format!(
            "a PodDisruptionBudget refused the eviction of {}/{}{detail}; choosing again",
            victim.namespace, victim.name
        ),
        after: REPLAN_WAIT,
    }
}

/// What the Eviction API's refusal of `victim` means, told by the answer itself:
/// - a `DisruptionBudget` cause (upstream `createTooManyRequestsError` and `checkAndDecrement`,
///   `pkg/registry/core/pod/storage/eviction.go`: a budget allows no disruption, or its status
///   is still being computed) → [`budget_refused`];
/// - any other 429, or a 503/504 (API Priority and Fairness, an overloaded or restarting
///   server; the eviction was not carried out) → [`Decision::Throttled`] for as long as the
///   server asks (`details.retryAfterSeconds`), at least [`THROTTLE_WAIT`], at most
///   [`MAX_THROTTLE_WAIT`];
/// - a 500 saying more than one budget covers the victim → [`budget_refused`] too;
/// - anything else is not a refusal this module understands: `None` (an error, retried with
///   back-off).
pub fn eviction_refused(victim: &PodKey, answer: &kube::core::Status) -> Option<Decision> {
    const DISRUPTION_BUDGET: &str = "DisruptionBudget";
    let details = answer.details.as_ref();
    let causes = details.map(|d| d.causes.as_slice()).unwrap_or_default();
    if answer.code == 429 && causes.iter().any(|c| c.reason == DISRUPTION_BUDGET) {
        let detail = causes
            .iter()
            .filter(|c| c.reason == DISRUPTION_BUDGET && !c.message.is_empty())
            .map(|c| c.message.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        return Some(budget_refused(victim, &detail));
    }
    // Two budgets cover the victim: upstream answers 500 with this message and no cause
    // (`EvictionREST.Create`); the next plan knows both budgets and leaves the pod alone.
    if answer.code == 500 && answer.message.contains("more than one PodDisruptionBudget") {
        return Some(budget_refused(victim, &answer.message));
    }
    if !matches!(answer.code, 429 | 503 | 504) {
        return None;
    }
    let asked = details
        .map(|d| Duration::from_secs(u64::from(d.retry_after_seconds)))
        .unwrap_or_default();
    Some(Decision::Throttled {
        why: format!(
            "the API server answered the eviction of {}/{} with HTTP {} ({}); going on with the same plan later",
            victim.namespace, victim.name, answer.code, answer.message
        ),
        after: asked.clamp(THROTTLE_WAIT, MAX_THROTTLE_WAIT),
    })
}

/// Each victim with its grace period (its own, 30 s when unknown as the API defaults it,
/// capped only when `preemption.maxGracePeriodSeconds` is set) and the API it goes through.
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

fn plan_fresh(
    pod: &Pod,
    d: &Deferral,
    policy: &Policy,
    generation: i64,
    now: Timestamp,
    grace: &dyn Fn(&PodKey) -> Option<i64>,
) -> Decision {
    let me = PodKey::of(pod);
    let plan = match &d.plan {
        Ok(p) => p,
        Err(why) => return failed(why, d),
    };
    if plan.victims.is_empty() {
        return Decision::Wait {
            why: format!(
                "terminating pods {} will free the room",
                name_list(plan.awaiting.iter(), NAMES_IN_MESSAGES)
            ),
            after: SHORT_WAIT,
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
        };
    }
    let victims: Vec<PodKey> = plan.victims.iter().map(|v| v.key.clone()).collect();
    let rec = PlanRecord {
        generation,
        victims: victims.clone(),
        time: now,
        mac: String::new(),
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
        pending_on_node: 0,
    }
}

/// The revert decision for a pod the kubelet marked Infeasible for its current generation, when
/// the policy asks for it and the actual resources of every container are known.
///
/// Which kubelets mark Infeasible: v1.33–v1.35 for a resize larger than allocatable
/// ("Node didn't have enough capacity: …"); v1.36+ no longer do (see [`never_fits`]), and a
/// v1.37 kubelet marks Infeasible only in `podResizesAdmitHandler.Admit`
/// (`pkg/kubelet/allocation/handlers.go`): the locked-on `InPlacePodVerticalScaling` gate off,
/// swap-enabled containers, pod-level resources with its kubelet gate off, memory-backed
/// `emptyDir` size limits, or a Guaranteed pod's cpu/memory under the static CPU/Memory Manager.
fn revert_infeasible(pod: &Pod, policy: &Policy, generation: i64) -> Option<Decision> {
    if !policy.feasibility.revert_infeasible || policy.is_audit() {
        return None;
    }
    let cond = resize_pending(pod)?;
    let current = cond.observed_generation.is_none_or(|g| g == generation);
    if cond.reason.as_deref() != Some(REASON_INFEASIBLE) || cond.status != "True" || !current {
        return None;
    }
    let spec = pod.spec.as_ref()?;
    let status = pod.status.as_ref()?;
    let actual =
        |name: &str, statuses: Option<&Vec<k8s_openapi::api::core::v1::ContainerStatus>>| {
            statuses?
                .iter()
                .find(|s| s.name == name)
                .and_then(|s| s.resources.clone())
        };
    let mut containers = Vec::new();
    for c in &spec.containers {
        let r = actual(&c.name, status.container_statuses.as_ref())?;
        containers.push(serde_json::json!({"name": c.name, "resources": r}));
    }
    let mut inits = Vec::new();
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| resize_guard_policy::pod::is_sidecar(c))
    {
        if let Some(r) = actual(&c.name, status.init_container_statuses.as_ref()) {
            inits.push(serde_json::json!({"name": c.name, "resources": r}));
        }
    }
    let mut patch = serde_json::json!({"spec": {"containers": containers}});
    if !inits.is_empty() {
        patch["spec"]["initContainers"] = serde_json::Value::Array(inits);
    }
    Some(Decision::Revert {
        patch,
        note: format!(
            "resize-guard reverted an Infeasible resize to the pod's actual resources (feasibility.revertInfeasible); the kubelet said: {}",
            cond.message.as_deref().unwrap_or("Infeasible")
        ),
    })
}

/// A Deferred resize larger than the node's allocatable: no victim can make room, so nothing is
/// preempted. v1.36+ API servers refuse such a resize (`NodeCapacity`), but one stored before the
/// node's allocatable shrank (a kubelet restarted with a larger reservation or on a smaller
/// machine) reaches a v1.37 kubelet, which keeps it Deferred for ever: its resize admission
/// (`pkg/kubelet/allocation/handlers.go`, `podResizesAdmitHandler.Admit`) has no capacity check,
/// so the predicate's `OutOfcpu`/`OutOfmemory` becomes Deferred like any full node.
fn never_fits(pod: &Pod, i: &Infeasibility) -> Decision {
    let kubelet = resize_pending(pod)
        .and_then(|c| c.message.clone())
        .unwrap_or_else(|| "Deferred".to_owned());
    Decision::Failed {
        reason: "NeverFits",
        note: format!(
            "cannot make room on node {node} ({kubelet}): the pod would request {res} {req} but the \
             node's allocatable {res} is {cap}, so no preemption can make this resize fit; \
             resize-guard preempts nothing. Resize to at most {cap} {res}, or move the workload to a \
             larger node.",
            node = i.node,
            res = i.resource,
            req = i.resource.format(i.requested),
            cap = i.resource.format(i.allocatable),
        ),
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
    }
}

fn join(v: &[PodKey]) -> String {
    name_list(v.iter(), usize::MAX)
}

#[cfg(test)]
mod tests;
