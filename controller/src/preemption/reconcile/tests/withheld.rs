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
        preemption(
            Record::Before(plan(&[])),
            vec![removal("v1", Via::Delete)],
            default_limits(),
        ),
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

/// Carries out a fresh plan evicting v1 and v2 under `limits`; returns the writes made so far.
async fn first_of_two(a: &Course, seen: &Log, limits: Limits) -> usize {
    let victims = vec![removal("v1", Via::Eviction), removal("v2", Via::Eviction)];
    let first = preemption(Record::Before(plan(&victims)), victims, limits);
    a.run(&preemptor(), first).await.unwrap();
    writes(seen).len()
}

#[tokio::test]
async fn a_plan_the_brakes_hold_back_writes_nothing_and_says_why() {
    let (a, seen) = leading(Box::new(ok));
    let mut limits = default_limits();
    limits.per_resize = 2; // the bucket holds one plan of 2
    let made = first_of_two(&a, &seen, limits).await;
    // Another resize on the same node waits for the plan in flight there; one elsewhere waits
    // for the eviction rate (20 a minute: one token back in 3 s).
    let busy = a.run(&on("n1", "u-b"), one("v3", limits)).await.unwrap();
    assert_eq!(busy, Action::requeue(NODE_BUSY_WAIT));
    let rate = a.run(&on("n2", "u-c"), one("v4", limits)).await.unwrap();
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
    let mut limits = default_limits();
    limits.per_resize = 2;
    limits.per_minute = 60_000; // the cluster's bucket is back within milliseconds
    limits.per_namespace_minute = 1; // the namespace's, in a minute
    let made = first_of_two(&a, &seen, limits).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let action = a.run(&on("n2", "other"), one("v3", limits)).await.unwrap();
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
    let notes: Vec<String> = events_of(&seen, "PreemptionHeld")
        .iter()
        .map(|e| e["note"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        notes.iter().any(|n| n.contains(
            "namespace prod's eviction budget (preemption.maxEvictionsPerNamespacePerMinute: 1)"
        )),
        "{notes:?}"
    );
}
