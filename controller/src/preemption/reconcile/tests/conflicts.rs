//! Plan-annotation writes the API server refuses because the annotation changed since the
//! decision read it: no fault, no victim touched, no Event on the stale decision; counted, and
//! the pod looked at again soon.

use super::*;

/// kube-apiserver's answer to a JSON Patch whose `test` failed, as it words it (upstream
/// `jsonPatcher.applyJSPatch`; `tests/e2e/preemption/resume.rs` shows it on the real server).
fn patch_did_not_apply() -> (StatusCode, Value) {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "the server rejected our request due to an error in our request",
               "reason": "Invalid", "details": {}, "code": 422}),
    )
}

/// The preemptor carrying `value` as its plan annotation.
fn preemptor_with_plan(value: &str) -> Pod {
    let mut p = preemptor();
    p.metadata.annotations = Some([(PLAN_ANNOTATION.to_owned(), value.to_owned())].into());
    p
}

fn conflicts(a: &Course) -> String {
    a.actuator
        .metrics
        .render()
        .lines()
        .find(|l| l.starts_with("resize_guard_plan_write_conflicts_total"))
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_plan_record_refused_as_changed_touches_no_victim_and_the_pod_is_read_again() {
    let (a, seen) = leading(refusing("pods/app", patch_did_not_apply()));
    let action = preempt_two(&a).await;
    assert_eq!(action, Action::requeue(SHORT_WAIT));
    assert_eq!(writes(&seen), ["PATCH /api/v1/namespaces/prod/pods/app"]);
    assert_eq!(conflicts(&a), "resize_guard_plan_write_conflicts_total 1");
    let metrics = a.actuator.metrics.render();
    assert!(!metrics.contains("outcome=\"started\""), "{metrics}");
    assert!(!metrics.contains("outcome=\"error\""), "{metrics}");
    settle().await;
    assert!(events(&seen).is_empty(), "{:?}", events(&seen));
}

#[tokio::test]
async fn a_clear_refused_as_changed_says_nothing_on_the_stale_decision() {
    let (a, seen) = leading(refusing("pods/app", patch_did_not_apply()));
    let pod = preemptor_with_plan("read");
    for decision in [
        Decision::DropPlan {
            why: "superseded".into(),
            after: SHORT_WAIT,
        },
        Decision::Replan {
            why: "refused".into(),
            victim: removal("v1", Via::Eviction).victim,
            after: REPLAN_WAIT,
        },
        Decision::Unblocked { seconds: 3.0 },
        Decision::ClearPlan,
    ] {
        let action = a.run(&pod, decision).await.unwrap();
        assert_eq!(action, Action::requeue(SHORT_WAIT));
    }
    assert_eq!(writes(&seen).len(), 4);
    assert_eq!(conflicts(&a), "resize_guard_plan_write_conflicts_total 4");
    // Each clear tested the value the decision read.
    for s in seen.lock().unwrap().iter() {
        assert_eq!(s.body[1]["value"], "read", "{}", s.body);
        assert_eq!(s.body[2]["op"], "remove", "{}", s.body);
    }
    let metrics = a.actuator.metrics.render();
    assert!(
        metrics.contains("resize_guard_time_to_unblock_seconds_count 0"),
        "an unblock is counted once its plan is cleared: {metrics}"
    );
    assert!(
        !metrics.contains("outcome=\"plan_rejected\""),
        "a rejection is counted once its record is removed: {metrics}"
    );
    settle().await;
    assert!(events(&seen).is_empty(), "{:?}", events(&seen));
}

/// A 422 naming its causes is an invalid object, not a changed one: a fault, as before.
#[tokio::test]
async fn an_invalid_plan_write_is_an_error_not_a_conflict() {
    let invalid = (
        StatusCode::UNPROCESSABLE_ENTITY,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 422,
               "reason": "Invalid", "message": "Pod \"app\" is invalid: metadata.annotations: Too long",
               "details": {"name": "app", "kind": "Pod", "causes": [
                   {"reason": "FieldValueTooLong", "field": "metadata.annotations"}]}}),
    );
    let (a, seen) = leading(refusing("pods/app", invalid));
    let err = a
        .run(&preemptor_with_plan("read"), Decision::ClearPlan)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "RecordPlan", "{}", err.chain());
    assert!(!err.plan_changed());
    assert_eq!(conflicts(&a), "resize_guard_plan_write_conflicts_total 0");
    assert_eq!(writes(&seen).len(), 1);
}

/// Clearing a plan the decision never read (none was on the pod) writes nothing: there is
/// nothing to clear, and an annotation written since is judged on the next read.
#[tokio::test]
async fn clearing_with_no_plan_read_writes_nothing() {
    let (a, seen) = leading(Box::new(ok));
    let action = a.run(&preemptor(), Decision::ClearPlan).await.unwrap();
    assert_eq!(action, Action::await_change());
    assert!(writes(&seen).is_empty());
}
