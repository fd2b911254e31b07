//! `explain` on a Deferred resize with a recorded plan, and its text form.

use super::*;
use resize_guard_policy::budget::Budgets;
use resize_guard_policy::fixture::{PodBuilder, container, context, node};
use resize_guard_policy::plan::PLAN_ANNOTATION;
use resize_guard_policy::policy::Policy;

/// The moment every test reads ages from (121 minutes after the plans' `time`).
fn now() -> Timestamp {
    Timestamp::from_second(1_796_126_500).unwrap()
}

/// A terminating pod on node `n` holding `cpu`, the room a Deferred resize waits for.
fn terminating(namespace: &str, name: &str, cpu: &str) -> Pod {
    PodBuilder::new(namespace, name)
        .owned_by("ReplicaSet")
        .node("n")
        .priority(100)
        .container(container("app").guaranteed(cpu, "256Mi"))
        .running(10)
        .terminating()
        .build()
}

/// `shop/app` on node `n`, its cpu resize 250m → 550m Deferred by the kubelet, carrying `plan`.
fn deferred(plan: &str) -> PodBuilder {
    PodBuilder::new("shop", "app")
        .node("n")
        .priority(1000)
        .container(container("app").guaranteed("250m", "256Mi"))
        .running(20)
        .resize("app", "cpu", "550m")
        .resize_pending("Deferred", "Node didn't have enough resource: cpu")
        .annotation(PLAN_ANNOTATION, plan)
}

/// Asserts that the rendered `text` holds each of `parts`.
fn shows(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} missing from\n{text}");
    }
}

/// `explain` of `app` on node `n` (1930m, 3Gi) holding `app` and `other`, default policy.
fn explain_on_node(app: &Pod, other: &Pod) -> Explanation {
    let ledger = NodeLedger::new(&node("n", "1930m", "3Gi"), [other, app]);
    let (policy, budgets) = (Policy::default(), Budgets::default());
    let ctx = context(Some(&ledger), &budgets, &policy);
    explain(
        app,
        Some(&ledger),
        &ctx,
        None,
        &[],
        &Evidence::NotFetched,
        now(),
    )
}

#[test]
fn a_deferred_resize_awaiting_its_victim_shows_the_recorded_plan() {
    let filler = terminating("batch", "filler", "1500m");
    // What the controller writes for a victim in another namespace: a count, no name.
    let plan = r#"{"v":2,"generation":2,"time":"2026-12-01T10:00:00Z","count":1,"nonce":"00","sealed":"00"}"#;
    let app = deferred(plan).qos_status("Guaranteed").build();
    let x = explain_on_node(&app, &filler);
    assert_eq!(x.decision.label, "deferred-awaiting-termination");
    let text = render_text(&x, false);
    shows(
        &text,
        &[
            "  recorded plan (121m ago, generation 2): 1 pod in another namespace\n",
            "  node n lacks cpu 120m; terminating pods batch/filler are freeing that room",
            "Priority:   1000\n",
            "Resize: Deferred (PodResizePending)\n",
        ],
    );
    assert!(text.ends_with("Events: <none>\n"), "{text}");
    assert!(
        !text.contains("VICTIM"),
        "no victims, no table header:\n{text}"
    );
    let json = serde_json::to_value(&x).unwrap();
    assert_eq!(json["recordedPlan"]["current"], true);
    assert_eq!(json["recordedPlan"]["others"], 1);
    assert_eq!(json["ledger"]["terminating"]["cpu"], "1500m");
    // The age the text shows, and the RFC 3339 time it counts from.
    assert_eq!(json["recordedPlan"]["age"], "121m");
    assert_eq!(json["recordedPlan"]["time"], "2026-12-01T10:00:00Z");
}

#[test]
fn a_recorded_plan_names_its_own_namespaces_victims_and_counts_the_others() {
    let helper = terminating("shop", "helper", "500m");
    let plan = r#"{"v":2,"generation":1,"time":"2026-12-01T10:00:00Z","count":3,"own":["helper","gone"],"nonce":"00","sealed":"00"}"#;
    let x = explain_on_node(&deferred(plan).build(), &helper);
    let text = render_text(&x, false);
    assert!(
        text.contains("  recorded plan (121m ago, generation 1, stale): shop/helper (terminating), shop/gone (gone) and 1 pod in another namespace\n"),
        "{text}"
    );
}

#[test]
fn a_format_1_plan_is_not_shown() {
    // Victims in clear: the controller drops such a record too.
    let old = r#"{"generation":2,"victims":[{"namespace":"batch","name":"f","uid":"u"}],"time":"2026-12-01T10:00:00Z"}"#;
    let x = explain_on_node(
        &deferred(old).build(),
        &terminating("shop", "helper", "500m"),
    );
    assert!(x.recorded_plan.is_none());
}

#[test]
fn a_memory_decrease_the_kubelet_refused_is_judged_against_usage() {
    let mut app = PodBuilder::new("shop", "app")
        .node("n")
        .container(container("app").guaranteed("250m", "256Mi"))
        .running(20)
        .resize("app", "memory", "100Mi")
        .build();
    app.status = Some(
        serde_json::from_value(serde_json::json!({
            "conditions": [{"type": "PodResizeInProgress", "status": "True", "reason": "Error",
                "message": "cannot decrease memory limits: attempting to set container \"app\" memory limit (104857600) below current usage (157286400)"}],
            "containerStatuses": [{"name": "app", "image": "i", "imageID": "", "ready": true,
                "restartCount": 0, "resources": {"limits": {"memory": "256Mi"}}}]
        }))
        .unwrap(),
    );
    let (policy, budgets) = (Policy::default(), Budgets::default());
    let ctx = context(None, &budgets, &policy);
    let now = now();
    let usage = Evidence::Measured(resize_guard_policy::usage::PodUsage {
        containers: [("app".to_owned(), 150 << 20)].into(),
        age: std::time::Duration::from_secs(8),
        window: "10s".into(),
    });
    let x = explain(&app, None, &ctx, None, &[], &usage, now);
    let text = render_text(&x, false);
    assert!(
        text.contains("  memory (below-usage): resize-guard: this resize lowers a memory limit below what is in use (working set from metrics.k8s.io, measured 8s ago): container \"app\" memory limit 256Mi → 100Mi, working set 150Mi"),
        "{text}"
    );
    let down = Evidence::Unavailable("metrics.k8s.io is unavailable".into());
    let x = explain(&app, None, &ctx, None, &[], &down, now);
    assert_eq!(x.memory.unwrap().verdict, "unjudged");
    let settled = PodBuilder::new("shop", "app")
        .container(container("app").guaranteed("250m", "256Mi"))
        .build();
    assert!(
        explain(&settled, None, &ctx, None, &[], &usage, now)
            .memory
            .is_none()
    );
}
