//! What the Eviction API's answers mean: each told apart by the answer
//! (`crate::preemption::outcome::Refusal::of`), then decided on ([`eviction_refused`]).

use super::*;
use std::time::Duration;

use crate::preemption::outcome::Refusal;

/// What `answer` to the eviction of `victim` decides, when it is a refusal.
fn refused(victim: &PodKey, answer: &kube::core::Status) -> Option<Decision> {
    Refusal::of(answer).map(|r| eviction_refused(victim, &r))
}

/// An Eviction API answer as kube-apiserver sends it (`code`, causes of `reason`, Retry-After).
fn answer(code: u16, causes: &[(&str, &str)], retry_after: u32) -> kube::core::Status {
    serde_json::from_value(serde_json::json!({
        "status": "Failure", "code": code, "reason": "TooManyRequests",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "details": {
            "retryAfterSeconds": retry_after,
            "causes": causes.iter().map(|(reason, message)| serde_json::json!({"reason": reason, "message": message})).collect::<Vec<_>>(),
        }
    }))
    .unwrap()
}

#[test]
fn a_budget_refusal_drops_the_plan_and_chooses_again_soon_saying_which_budget() {
    let victim = PodKey {
        namespace: "batch".into(),
        name: "guarded".into(),
        uid: "u".into(),
    };
    // Both of upstream's budget answers: no disruption allowed, and a status not yet computed.
    for (message, retry) in [
        (
            "The disruption budget web needs 2 healthy pods and has 2 currently",
            0,
        ),
        (
            "The disruption budget web is still being processed by the server.",
            10,
        ),
    ] {
        let refusal = answer(429, &[("DisruptionBudget", message)], retry);
        match refused(&victim, &refusal) {
            Some(Decision::Replan { why, after, .. }) => {
                assert!(why.contains("batch/guarded"), "{why}");
                assert!(why.contains(message), "{why}");
                assert_eq!(after, REPLAN_WAIT);
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn throttling_keeps_the_plan_for_as_long_as_the_server_asks_within_bounds() {
    let victim = PodKey {
        namespace: "batch".into(),
        name: "v".into(),
        uid: "u".into(),
    };
    for (code, retry, wait) in [
        (429, 0, THROTTLE_WAIT),
        (429, 5, Duration::from_secs(5)),
        (503, 0, THROTTLE_WAIT),
        (504, 3600, MAX_THROTTLE_WAIT),
    ] {
        match refused(&victim, &answer(code, &[], retry)) {
            Some(Decision::Throttled { why, after }) => {
                assert_eq!(after, wait, "{code} {retry}");
                assert!(why.contains(&format!("HTTP {code}")), "{why}");
            }
            other => panic!("{code}: {other:?}"),
        }
    }
    // Two budgets over the victim: upstream's 500 re-plans (the next plan leaves it alone).
    let mut two = answer(500, &[], 0);
    two.message = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into();
    assert!(matches!(
        refused(&victim, &two),
        Some(Decision::Replan { why, .. }) if why.contains("more than one PodDisruptionBudget")
    ));
    // A 429 whose cause is not a budget is throttling too; another 500 or a 403 is not a
    // refusal this decides on.
    assert!(matches!(
        refused(&victim, &answer(429, &[("FieldValueInvalid", "x")], 0)),
        Some(Decision::Throttled { .. })
    ));
    for code in [500, 403, 404] {
        assert!(refused(&victim, &answer(code, &[], 0)).is_none());
    }
}
