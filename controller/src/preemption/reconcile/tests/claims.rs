//! How long a plan holds its node, and how soon a refused plan is made again: a waiting plan
//! refreshes its node's claim until its wait is overdue (`preemption.stallAfterSeconds`), which
//! releases it with a `PreemptionStalled` Event; repeated budget refusals of one resize back its
//! re-plan off, their `PreemptionReplanned` Events one series.

use super::*;
use crate::preemption::decision::{Awaited, STALLED_RECHECK};

fn overdue() -> Decision {
    Decision::Overdue {
        on: Awaited::PlannedVictims,
        note: "the resize of prod/app has waited 600s on its planned victims terminating".into(),
        after: STALLED_RECHECK,
    }
}

#[tokio::test]
async fn a_waiting_plan_holds_its_node_until_its_wait_is_overdue() {
    let (a, seen) = leading(Box::new(ok));
    a.run(&preemptor(), one("v1", default_limits()))
        .await
        .unwrap();
    let wait = Decision::Wait {
        why: "planned victims are terminating".into(),
        after: SHORT_WAIT,
    };
    a.run(&preemptor(), wait).await.unwrap();
    let busy = a
        .run(&on("n1", "u-b"), one("v2", default_limits()))
        .await
        .unwrap();
    assert_eq!(busy, Action::requeue(NODE_BUSY_WAIT), "held while it waits");

    let action = a.run(&preemptor(), overdue()).await.unwrap();
    assert_eq!(action, Action::requeue(STALLED_RECHECK));
    // Repeated while it stays overdue: the node is not taken back.
    a.run(&preemptor(), overdue()).await.unwrap();
    let went = a
        .run(&on("n1", "u-b"), one("v2", default_limits()))
        .await
        .unwrap();
    assert_eq!(went, Action::requeue(SHORT_WAIT), "planned once released");
    assert!(
        writes(&seen).contains(&"POST /api/v1/namespaces/batch/pods/v2/eviction".to_owned()),
        "{:?}",
        writes(&seen)
    );
    // The overdue plan's later looks do not take the node from the plan now in flight there.
    a.run(&preemptor(), overdue()).await.unwrap();
    let third = a
        .run(&on("n1", "u-c"), one("v3", default_limits()))
        .await
        .unwrap();
    assert_eq!(third, Action::requeue(NODE_BUSY_WAIT));

    settle().await;
    let stalled = events_of(&seen, "PreemptionStalled");
    assert!(!stalled.is_empty());
    assert!(
        stalled
            .iter()
            .all(|e| e["action"] == "AwaitVictims" && e["type"] == "Warning"),
        "{stalled:?}"
    );
    assert!(
        a.actuator
            .metrics
            .render()
            .contains("outcome=\"stalled_node_released\"")
    );
}

#[tokio::test]
async fn repeated_budget_refusals_of_one_resize_back_off_its_replan_as_one_event_series() {
    let (a, seen) = leading(refusing("v1/eviction", budget_refusal()));
    let mut afters = Vec::new();
    for _ in 0..5 {
        afters.push(preempt_two(&a).await);
        settle().await;
    }
    assert_eq!(
        afters,
        [1, 2, 4, 8, 16].map(|s| Action::requeue(Duration::from_secs(s)))
    );
    let posts: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.path.contains("/events"))
        .map(Seen::line)
        .collect();
    assert_eq!(
        posts.iter().filter(|l| l.starts_with("POST")).count(),
        1,
        "one Event, then its series: {posts:?}"
    );
    assert_eq!(posts.len(), 5, "{posts:?}");
}
