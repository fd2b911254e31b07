//! What a plan the brakes ([`crate::preemption::brakes`]) hold back becomes, decided on the
//! brakes' verdict (the reconciler asks the brakes between deciding and acting): a
//! [`Decision::Held`] that counts the brake (`resize_guard_preemptions_total{outcome}`), says
//! so in an Event while the plan waits (`PreemptionHeld` naming the brake, one series per brake;
//! `PreemptionPaused`, a Warning, from the plan that opened a circuit breaker), and then waits,
//! each brake with when to look again, or (past the per-resize cap) fails: no plan.

use resize_guard_runtime::events::EventReason;

use super::notice::{Notice, PREEMPT};
use super::{Decision, FAILED_RETRY, NODE_BUSY_WAIT, PAUSED_RECHECK, SHORT_WAIT};
use crate::preemption::brakes::{Held, Limits};

/// The decision for a plan on `node` held back as `held` under `limits`.
pub fn held_back(node: &str, held: &Held, limits: Limits) -> Decision {
    let then = instead(node, held, limits);
    let notice = match (held, &then) {
        (
            Held::Paused {
                opened_now: true, ..
            },
            Decision::Wait { why, .. },
        ) => Some(Notice {
            reason: EventReason::PreemptionPaused,
            action: PREEMPT,
            note: why.clone(),
        }),
        // Which brake holds it, in words that stay the same while it holds: one series per
        // brake (the action, the outcome, keeps another brake's Event apart).
        (_, Decision::Wait { .. }) => Some(Notice {
            reason: EventReason::PreemptionHeld,
            action: held.outcome(),
            note: format!(
                "resize-guard held this preemption plan: {}",
                held.brake(limits)
            ),
        }),
        _ => None,
    };
    Decision::Held {
        outcome: held.outcome(),
        notice,
        then: Box::new(then),
    }
}

/// What the held plan becomes: a wait, or no plan.
fn instead(node: &str, held: &Held, limits: Limits) -> Decision {
    match held {
        Held::Paused {
            reach,
            left,
            futile,
            ..
        } => Decision::Wait {
            why: format!(
                "resize-guard stopped preempting in {reach} for {}s: {futile} plans within {}s removed their victims and their resizes still needed more (preemption.circuitBreaker)",
                left.as_secs(),
                limits.breaker.window_seconds
            ),
            after: (*left).min(PAUSED_RECHECK),
        },
        Held::NodeBusy { holder } => Decision::Wait {
            why: format!(
                "one plan at a time on node {node}: the plan of {holder} is in flight (until it ends, or waits longer than preemption.stallAfterSeconds)"
            ),
            after: NODE_BUSY_WAIT,
        },
        Held::Spent { spent, more } => Decision::Failed {
            reason: "victims_per_resize",
            note: format!(
                "cannot make room on node {node}: this resize already cost {spent} victim(s) and needs {more} more, beyond preemption.maxVictimsPerResize ({}) for one resize",
                limits.per_resize
            ),
            after: FAILED_RETRY,
        },
        Held::Rate { wait } => Decision::Wait {
            why: format!(
                "the cluster-wide eviction rate (preemption.maxEvictionsPerMinute: {}) is used up for now",
                limits.per_minute
            ),
            after: (*wait).max(SHORT_WAIT),
        },
        Held::NamespaceRate { wait, .. } => Decision::Wait {
            why: held.brake(limits),
            after: (*wait).max(SHORT_WAIT),
        },
        Held::Unsaved { why } => Decision::Wait {
            why: format!("{}: {why}", held.brake(limits)),
            after: NODE_BUSY_WAIT,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use resize_guard_policy::policy::Policy;

    use super::*;

    #[test]
    fn a_held_plan_waits_as_long_as_its_brake_says() {
        let limits = Limits::of(&Policy::default());
        let paused = |left| Held::Paused {
            reach: crate::preemption::brakes::breaker::Reach::Cluster,
            left: Duration::from_secs(left),
            opened_now: false,
            futile: 3,
        };
        let after = |held: &Held| held_back("n1", held, limits).requeue();
        assert_eq!(after(&paused(300)), Some(PAUSED_RECHECK));
        assert_eq!(after(&paused(5)), Some(Duration::from_secs(5)));
        let busy = Held::NodeBusy {
            holder: "prod/other".into(),
        };
        assert_eq!(after(&busy), Some(NODE_BUSY_WAIT));
        let rate = |ms| Held::Rate {
            wait: Duration::from_millis(ms),
        };
        assert_eq!(after(&rate(10)), Some(SHORT_WAIT));
        assert_eq!(after(&rate(2_900)), Some(Duration::from_millis(2_900)));
        match held_back("n1", &Held::Spent { spent: 5, more: 1 }, limits) {
            Decision::Held {
                outcome,
                notice: None,
                then,
            } => match *then {
                Decision::Failed { reason, after, .. } => {
                    assert_eq!(outcome, "held_victims_per_resize");
                    assert_eq!((reason, after), ("victims_per_resize", FAILED_RETRY));
                }
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_held_plan_says_which_brake_and_the_plan_that_opened_a_breaker_warns() {
        let limits = Limits::of(&Policy::default());
        let busy = Held::NodeBusy {
            holder: "prod/other".into(),
        };
        let notices = held_back("n1", &busy, limits).notices();
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert_eq!(
            (
                notices[0].reason,
                notices[0].reason.is_warning(),
                notices[0].action
            ),
            (EventReason::PreemptionHeld, false, "held_node_busy")
        );
        assert!(
            notices[0]
                .note
                .starts_with("resize-guard held this preemption plan: ")
        );
        let opened = Held::Paused {
            reach: crate::preemption::brakes::breaker::Reach::Cluster,
            left: Duration::from_secs(300),
            opened_now: true,
            futile: 3,
        };
        let notices = held_back("n1", &opened, limits).notices();
        assert_eq!(
            (
                notices[0].reason,
                notices[0].reason.is_warning(),
                notices[0].action
            ),
            (EventReason::PreemptionPaused, true, PREEMPT)
        );
        // Past the per-resize cap: no held notice, the failure's own Event.
        let spent = held_back("n1", &Held::Spent { spent: 5, more: 1 }, limits).notices();
        assert_eq!(spent.len(), 1);
        assert_eq!(spent[0].reason, EventReason::ResizePreemptionFailed);
    }
}
