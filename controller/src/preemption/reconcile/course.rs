//! The course a decision takes once it is made, one way: the brakes' verdict on a plan (a plan
//! they hold back is decided again on it, [`held_back`]), the actuator carrying the decision
//! out, and its [`Outcome`] handed to the next decision (an eviction refused:
//! [`eviction_refused`], paced by [`Waits::refused`]) until an outcome asks for none. The brakes'
//! node claims follow each decision carried out ([`track`]). The actuator reports and decides
//! nothing; nothing here writes.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use resize_guard_policy::pod;

use crate::preemption::actuator::{ActuateError, Actuator};
use crate::preemption::brakes::{Admission, Brakes};
use crate::preemption::decision::{
    Decision, Record, SHORT_WAIT, Waits, eviction_refused, held_back,
};
use crate::preemption::outcome::Outcome;

/// Who carries decisions out, what holds plans back and what is remembered of waiting resizes:
/// one of each per controller process, shared by every reconcile.
#[derive(Clone)]
pub struct Course {
    /// Carries decisions out.
    pub actuator: Actuator,
    /// What holds plans back: rate, node, per-resize cap, circuit breaker.
    pub brakes: Arc<Brakes>,
    /// What is remembered of waiting resizes: back-off, stall timers, budget refusals.
    pub waits: Arc<Waits>,
}

impl Course {
    /// Takes `decision` for `pod` through the brakes and the actuator, and every decision its
    /// outcome leads to; then looks again when the last one carried out says (a plan annotation
    /// changed since it was read: soon, to judge the pod afresh).
    pub async fn run(&self, pod: &Pod, decision: Decision) -> Result<Action, ActuateError> {
        let mut decision = decision;
        // The pod as the plan's own record left it, once a plan recorded itself: what a clear
        // of that record tests for.
        let mut written: Option<Pod> = None;
        loop {
            let at = written.as_ref().unwrap_or(pod);
            let (current, mut admission) = self.brake(at, decision).await;
            track(&self.brakes, at, &current);
            let requeue = current.requeue();
            let outcome = self.actuator.apply(at, current, admission.as_mut()).await;
            // The tokens of victims not removed go back before anything more is decided.
            drop(admission);
            match outcome? {
                Outcome::Done => {
                    return Ok(requeue.map_or_else(Action::await_change, Action::requeue));
                }
                // Not a fault: the pod's watch brings the new version, judged afresh; the
                // requeue covers a watch that lags.
                Outcome::PlanChanged => return Ok(Action::requeue(SHORT_WAIT)),
                Outcome::Refused {
                    victim,
                    refusal,
                    written: by_plan,
                } => {
                    if let Some(by_plan) = by_plan {
                        written = Some(*by_plan);
                    }
                    let at = written.as_ref().unwrap_or(pod);
                    let then = eviction_refused(&victim, &refusal);
                    decision = self.waits.refused(at, then, Instant::now());
                }
            }
        }
    }

    /// The brakes' verdict on `decision` when it is a plan: admitted (the admission goes with it
    /// to the actuator, which counts each victim removed on it) or held back, and then decided
    /// again on the verdict ([`held_back`]). Any other decision passes as it is.
    async fn brake<'b>(
        &'b self,
        pod: &Pod,
        decision: Decision,
    ) -> (Decision, Option<Admission<'b>>) {
        let Decision::Preempt {
            record,
            victims,
            limits,
            pending_on_node,
            ..
        } = &decision
        else {
            return (decision, None);
        };
        let node = pod::node_name(pod).unwrap_or_default();
        let count = u32::try_from(victims.len()).unwrap_or(u32::MAX);
        let fresh = !matches!(record, Record::Recorded);
        let (limits, pending_on_node) = (*limits, *pending_on_node);
        let held = match self.brakes.admit(
            pod,
            node,
            count,
            fresh,
            pending_on_node,
            limits,
            Instant::now(),
        ) {
            // A saved write of the brakes covers the plan (counting it, or by its reserve)
            // before its first write (its tokens go back when `admission` drops).
            Ok(admission) => match admission.saved().await {
                Ok(()) => return (decision, Some(admission)),
                Err(held) => held,
            },
            Err(held) => held,
        };
        (held_back(node, &held, limits), None)
    }
}

/// Keeps the brakes' node claims in step with how `pod`'s plan goes: a wait refreshes its
/// claim until it is overdue (`preemption.stallAfterSeconds`), which releases it; a plan's own
/// claim is taken by its admission.
fn track(brakes: &Brakes, pod: &Pod, decision: &Decision) {
    let node = pod::node_name(pod);
    match decision {
        Decision::Idle | Decision::Unblocked { .. } => brakes.release(pod, node, true),
        Decision::ClearPlan
        | Decision::DropPlan { .. }
        | Decision::Replan { .. }
        | Decision::Failed { .. }
        | Decision::Revert { .. }
        | Decision::WouldPreempt { .. }
        | Decision::Overdue { .. } => brakes.release(pod, node, false),
        Decision::Awaiting { .. }
        | Decision::Wait { .. }
        | Decision::Throttled { .. }
        | Decision::Stalled { .. } => brakes.touch(pod, node, Instant::now()),
        Decision::Preempt { .. } => {}
        Decision::Held { then, .. } => track(brakes, pod, then),
    }
}
