//! What the Eviction API's refusal of a victim means, told by the answer itself: a
//! PodDisruptionBudget's refusal re-plans ([`budget_refused`]), throttling keeps the plan for as
//! long as the server asks ([`eviction_refused`]). The actuator hands every refused eviction
//! here and carries out the [`Decision`] that comes back.

use std::time::Duration;

use resize_guard_policy::pod::PodKey;

use super::{Decision, MAX_THROTTLE_WAIT, REPLAN_WAIT, THROTTLE_WAIT};

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
        victim: victim.clone(),
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

#[cfg(test)]
mod tests;
