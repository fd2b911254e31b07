//! Writes the actuator does not make: none from a replica that does not lead, none for a plan
//! the brakes hold back (which comes back as a wait that says why).

use super::*;

#[tokio::test]
async fn a_replica_that_does_not_lead_writes_nothing() {
    let (client, seen) = fake(Box::new(ok));
    let a = course(client, Leadership::new());
    let mut planned = preemptor();
    planned.metadata.annotations = Some([(PLAN_ANNOTATION.to_owned(), "read".to_owned())].into());
    let err = a.run(&planned, Decision::ClearPlan).await.unwrap_err();
    assert_eq!(err.reason(), "NotLeader");
    for decision in [
        Decision::Revert {
            patch: json!({"spec": {}}),
            note: "n".into(),
        },
        Decision::Preempt {
            record: Record::Before(plan(&[])),
            victims: vec![removal("v1", Via::Delete)],
            note: "n".into(),
            limits: Limits::of(&resize_guard_policy::policy::Policy::default()),
            pending_on_node: 1,
            after: SHORT_WAIT,
        },
    ] {
        let err = a.run(&preemptor(), decision).await.unwrap_err();
        assert_eq!(err.reason(), "NotLeader");
    }
    a.run(
        &preemptor(),
        Decision::Failed {
            reason: "NoVictims",
            note: "n".into(),
            after: crate::preemption::decision::FAILED_RETRY,
        },
    )
    .await
    .unwrap();
    settle().await;
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_plan_the_brakes_hold_back_writes_nothing_and_says_why() {
    let (a, seen) = leading(Box::new(ok));
    let mut limits = Limits::of(&resize_guard_policy::policy::Policy::default());
    limits.per_resize = 2; // the bucket holds one plan of 2
    let victims = vec![removal("v1", Via::Eviction), removal("v2", Via::Eviction)];
    let first = Decision::Preempt {
        record: Record::Before(plan(&victims)),
        victims,
        note: "n".into(),
        limits,
        pending_on_node: 1,
        after: SHORT_WAIT,
    };
    a.run(&preemptor(), first).await.unwrap();
    let made = writes(&seen).len();
    let on = |node: &str, uid: &str| {
        let mut p = preemptor();
        p.metadata.uid = Some(uid.into());
        p.metadata.name = Some(uid.into());
        p.spec.as_mut().unwrap().node_name = Some(node.into());
        p
    };
    let one = |name: &str| {
        let v = vec![removal(name, Via::Eviction)];
        Decision::Preempt {
            record: Record::After(plan(&v)),
            victims: v,
            note: "n".into(),
            limits,
            pending_on_node: 1,
            after: SHORT_WAIT,
        }
    };
    // Another resize on the same node waits for the plan in flight there; one elsewhere waits
    // for the eviction rate (20 a minute: one token back in 3 s).
    let busy = a.run(&on("n1", "u-b"), one("v3")).await.unwrap();
    assert_eq!(busy, Action::requeue(NODE_BUSY_WAIT));
    let rate = a.run(&on("n2", "u-c"), one("v4")).await.unwrap();
    let shown = format!("{rate:?}");
    assert!(shown.contains("Some(2.9"), "{shown}");
    assert_eq!(writes(&seen).len(), made, "{:?}", writes(&seen));
    let metrics = a.actuator.metrics.render();
    for outcome in ["held_node_busy", "held_eviction_rate"] {
        assert!(
            metrics.contains(&format!("outcome=\"{outcome}\"")),
            "{metrics}"
        );
    }
}

#[tokio::test]
async fn a_plan_held_by_its_namespaces_budget_writes_nothing_and_names_the_brake() {
    let (a, seen) = leading(Box::new(ok));
    let mut limits = Limits::of(&resize_guard_policy::policy::Policy::default());
    limits.per_resize = 2;
    limits.per_minute = 60_000; // the cluster's bucket is back within milliseconds
    limits.per_namespace_minute = 1; // the namespace's, in a minute
    let victims = vec![removal("v1", Via::Eviction), removal("v2", Via::Eviction)];
    let first = Decision::Preempt {
        record: Record::Before(plan(&victims)),
        victims,
        note: "n".into(),
        limits,
        pending_on_node: 1,
        after: SHORT_WAIT,
    };
    a.run(&preemptor(), first).await.unwrap();
    let made = writes(&seen).len();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut other = preemptor();
    other.metadata.uid = Some("u-other".into());
    other.metadata.name = Some("other".into());
    other.spec.as_mut().unwrap().node_name = Some("n2".into());
    let v = vec![removal("v3", Via::Eviction)];
    let held = Decision::Preempt {
        record: Record::After(plan(&v)),
        victims: v,
        note: "n".into(),
        limits,
        pending_on_node: 1,
        after: SHORT_WAIT,
    };
    let action = a.run(&other, held).await.unwrap();
    let shown = format!("{action:?}");
    assert!(
        shown.contains("Some(59.") || shown.contains("Some(60"),
        "{shown}"
    );
    assert_eq!(writes(&seen).len(), made, "{:?}", writes(&seen));
    assert!(
        a.actuator
            .metrics
            .render()
            .contains("outcome=\"held_namespace_rate\""),
        "{}",
        a.actuator.metrics.render()
    );
    settle().await;
    let notes: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.path.contains("/events") && s.body["reason"] == "PreemptionHeld")
        .map(|s| s.body["note"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        notes.iter().any(|n| n.contains(
            "namespace prod's eviction budget (preemption.maxEvictionsPerNamespacePerMinute: 1)"
        )),
        "{notes:?}"
    );
}
