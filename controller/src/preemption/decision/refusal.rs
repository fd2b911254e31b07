//! What the Eviction API's refusal of a victim means, told by the answer
//! ([`Refusal`](crate::preemption::outcome::Refusal), which the actuator reports as the outcome of
//! a plan): a PodDisruptionBudget's refusal re-plans ([`budget_refused`]), throttling keeps the
//! plan for as long as the server asks ([`eviction_refused`]). The reconciler hands every
//! refused eviction here and carries out the [`Decision`] that comes back.

use resize_guard_policy::pod::PodKey;

use super::{Decision, MAX_THROTTLE_WAIT, REPLAN_WAIT, THROTTLE_WAIT};
use crate::preemption::outcome::Refusal;

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

/// What the refusal of `victim`'s eviction means:
/// - a budget's ([`Refusal::Budget`]: no disruption allowed, a status still being computed, or
///   more than one budget over the victim) → [`budget_refused`]: the next plan knows the
///   budget and leaves the pod alone;
/// - throttling ([`Refusal::Throttled`]) → [`Decision::Throttled`] for as long as the server
///   asks (`details.retryAfterSeconds`), at least [`THROTTLE_WAIT`], at most
///   [`MAX_THROTTLE_WAIT`].
pub fn eviction_refused(victim: &PodKey, refusal: &Refusal) -> Decision {
    match refusal {
        Refusal::Budget { detail } => budget_refused(victim, detail),
        Refusal::Throttled {
            code,
            message,
            retry_after,
        } => Decision::Throttled {
            why: format!(
                "the API server answered the eviction of {}/{} with HTTP {code} ({message}); going on with the same plan later",
                victim.namespace, victim.name
            ),
            after: (*retry_after).clamp(THROTTLE_WAIT, MAX_THROTTLE_WAIT),
        },
    }
}

#[cfg(test)]
mod tests;
