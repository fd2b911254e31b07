//! The kube-runtime reconciler, which owns the controller's one-way loop: for each pod, read the
//! view, judge with `resize_guard_policy::assess`, [`decide`] on everything read (the node's
//! pending resizes included), pace the decision with what the controller remembers of the
//! resize ([`Waits::pace`]: back-off, the stall timer, the re-plan back-off), then send it on its
//! [`Course`]: the brakes' verdict, the actuator, and the outcome handed to the next decision.
//! Nothing below calls back up: the decider reads values, the actuator reports outcomes.
//! Canonical shape: `reconcile(Arc<Pod>, Arc<Ctx>)` plus `error_policy`, explicit requeues.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use resize_guard_cluster::{Cluster, ClusterView};
use resize_guard_policy::ledger::NodeLedger;
use resize_guard_policy::pod::{PodKey, is_deferred_now, node_name};
use resize_guard_policy::policy::Policy;
use resize_guard_policy::upstream::pod::{is_resize_infeasible, resize_pending};
use resize_guard_policy::{Context, assess};

use crate::preemption::actuator::ActuateError;
use crate::preemption::decision::{
    Inputs, VictimStates, Waits, decide, plan_untrusted, spare_the_unneeded, victim_state,
};
use crate::preemption::seal::{PLAN_ANNOTATION, PlanRecord};
use resize_guard_policy::budget::Budgets;

mod course;

pub use course::Course;

/// How long a reconcile waits for the pod and node watches to deliver again after an error.
const STALE_CACHE_WAIT: Duration = Duration::from_secs(1);
/// The back-off after an API failure met while carrying out a decision ([`error_policy`]): the
/// one requeue no decision carries, because no decision foresaw the failure.
const ERROR_BACKOFF: Duration = Duration::from_secs(2);

/// Everything a reconcile reads.
pub struct Ctx {
    /// The cluster view (ledgers, PDBs, policy).
    pub view: Arc<ClusterView>,
    /// Takes decisions through the brakes and the actuator.
    pub course: Course,
}

/// The pods the controller keeps whole and reconciles: a pending resize (Deferred or
/// Infeasible) or a recorded plan. Every other pod is only a ledger entry in the view's index.
pub fn concerns_controller(pod: &Pod) -> bool {
    resize_pending(pod).is_some()
        || pod
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(PLAN_ANNOTATION))
}

/// Reconciles one pod.
pub async fn reconcile(pod: Arc<Pod>, ctx: Arc<Ctx>) -> Result<Action, ActuateError> {
    let annotated = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(PLAN_ANNOTATION));
    // Fail safe: with no policy read and parsed nothing is preempted, reverted or cleared; a
    // policy taking effect reconciles every pod again.
    let Some(policy) = ctx.view.policy() else {
        return Ok(Action::await_change());
    };
    let revert = policy.feasibility.revert_infeasible
        && is_resize_infeasible(&pod)
        && policy.may_revert_in(
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            ctx.view.install_namespace(),
        );
    if !annotated && !is_deferred_now(&pod) && !revert {
        return Ok(Action::await_change());
    }
    // Never act on a pod cache that may be stale: after a watch error (the API server
    // restarting, a network fault) wait for the watch to deliver again. Otherwise a victim
    // evicted just before the fault still looks present and is evicted again and again.
    if let Some(why) = ctx.view.stale_for_acting() {
        tracing::debug!(
            pod = pod.metadata.name.as_deref().unwrap_or_default(),
            why,
            "waiting"
        );
        return Ok(Action::requeue(STALE_CACHE_WAIT));
    }
    let started = Instant::now();
    // A plan is acted on only if this controller sealed it for this pod: the annotation is on
    // a pod its author may edit.
    let plan = if annotated {
        let key = ctx.course.actuator.plan_key().await?;
        match ctx.course.actuator.seal.verify(key, &pod) {
            Some(Ok(rec)) => Some(rec),
            Some(Err(why)) => return ctx.course.run(&pod, plan_untrusted(&why)).await,
            None => None,
        }
    } else {
        None
    };
    let budgets = ctx.view.budgets();
    let ledger = node_name(&pod).and_then(|n| ctx.view.ledger(n));
    let install_namespace = ctx.view.install_namespace();
    let verdict = assess(
        &pod,
        &Context {
            ledger: ledger.as_deref(),
            budgets: &budgets,
            policy: &policy,
            install_namespace,
            minor: ctx.view.kubernetes_minor(),
        },
    );
    let states = victim_states(
        &ctx.view,
        &pod,
        plan.as_ref(),
        ledger.as_deref(),
        &budgets,
        &policy,
    );
    let grace = |v: &PodKey| ctx.view.pod_entry(&v.uid)?.grace_seconds;
    let waits: &Waits = &ctx.course.waits;
    let decision = decide(
        &pod,
        &Inputs {
            verdict: &verdict,
            plan: plan.as_ref(),
            victims: &states,
            policy: &policy,
            install_namespace,
            now: Timestamp::now(),
            grace: &grace,
            seen_deferred: waits.deferred_for(&pod, Instant::now()),
            pending_on_node: ledger
                .as_deref()
                .map_or(0, |l| l.pods.iter().filter(|e| e.pending.is_some()).count()),
        },
    );
    let decision = waits.pace(&pod, decision, &policy, Instant::now());
    let action = ctx.course.run(&pod, decision).await;
    ctx.course
        .actuator
        .metrics
        .reconciled(started.elapsed().as_secs_f64());
    action
}

/// The state of each victim of `plan`, by key. Victims are looked up in the view's index (every
/// bound, non-terminal pod), not in the pod store, which keeps only pods with a pending resize
/// or a plan, and each is re-checked against the rules a fresh plan obeys; then the present ones
/// a fresh reprieve over them no longer needs are spared ([`spare_the_unneeded`]).
fn victim_states(
    view: &ClusterView,
    pod: &Pod,
    plan: Option<&PlanRecord>,
    ledger: Option<&NodeLedger>,
    budgets: &Budgets,
    policy: &Policy,
) -> VictimStates {
    let install_namespace = view.install_namespace();
    let mut states: VictimStates = plan
        .iter()
        .flat_map(|p| p.victims.iter())
        .map(|v| {
            let entry = view.pod_entry(&v.uid);
            let state = victim_state(v, entry.as_ref(), pod, ledger, policy, install_namespace);
            (v.clone(), state)
        })
        .collect();
    spare_the_unneeded(&mut states, pod, ledger, budgets, policy, install_namespace);
    states
}

/// Backs off after an API error. A fenced write is no error when this replica really stopped
/// leading (its work is being stopped, and a new term reconciles every pod again); when the
/// fence still holds (the write was fenced, yet a renewal since extended the lease), the pod is
/// looked at again like after any error, never parked until it changes.
pub fn error_policy(pod: Arc<Pod>, error: &ActuateError, ctx: Arc<Ctx>) -> Action {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let leading = ctx.course.actuator.leadership.is_leading();
    let action = after_error(error, leading);
    if action == Action::await_change() {
        tracing::info!(pod = name, error = %error.chain(), "not leading; nothing written");
    } else {
        tracing::warn!(
            pod = name,
            reason = error.reason(),
            leading,
            error = %error.chain(),
            "reconcile failed; retrying"
        );
    }
    action
}

/// What [`error_policy`] does after `error` while this replica is `leading` (or not).
fn after_error(error: &ActuateError, leading: bool) -> Action {
    if error.reason() == "NotLeader" && !leading {
        Action::await_change()
    } else {
        Action::requeue(ERROR_BACKOFF)
    }
}

#[cfg(test)]
mod tests;
