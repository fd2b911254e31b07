//! Policy-driven behaviour end to end, in one sequence because the policy ConfigMap is shared:
//! QoS repair keeps the pod Guaranteed and the resize completes in place, audit mode never
//! denies, a bad policy edit keeps the last good policy with an `InvalidPolicy` Event, and an
//! edit that drops `mode` is such a bad edit, never enforcement by omission.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::events_saying;
use crate::scenario::webhook as support;

use std::time::Duration;

use resize_guard_harness::admission::Webhooks;
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::install::{policy_has, wait_policy};
use resize_guard_harness::objects::*;
use resize_guard_harness::text::assert_contains_all;

const T: Duration = Duration::from_secs(30);

#[tokio::test]
async fn policy_modes_and_live_reload() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let hook = support::start(env, Webhooks::Mutating).await;
    let k = env.kubectl();

    // 1. qos.onChange: repair — a requests-only resize of a Guaranteed pod is repaired.
    // The policy reload is asynchronous: each edit is followed by a bounded wait until the
    // webhook logs the new effective policy, and then by one attempt.
    support::set_policy(env, "mode: enforce\nqos:\n  onChange: repair\n").await;
    wait_policy(&hook.process, |p| policy_has(p, "onChange: repair")).await;
    let (ns, _, pods) = support::field_test(env, "repair").await;
    pods.delete("filler", &Default::default()).await.unwrap();
    wait_gone(&pods, "filler", T).await.unwrap();
    let patch =
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"400m"}}}]}}"#;
    let out = k.resize(&ns, "app", patch).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    assert!(
        out.stderr.contains("Warning: resize-guard repaired this resize to keep QoS class Guaranteed: container app: limits.cpu 250m → 400m"),
        "{}",
        out.stderr
    );
    let p = wait_pod(&pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("400m")
    })
    .await
    .unwrap();
    assert_eq!(
        p.status.as_ref().unwrap().qos_class.as_deref(),
        Some("Guaranteed")
    );
    assert_eq!(spec_cpu(&p).1.as_deref(), Some("400m"), "app's cpu limit");
    assert_eq!(restart_count(&p), 0);
    // resize-guard's Event, then the real kubelet's (pkg/kubelet/kubelet.go,
    // events.ResizeCompleted).
    events_saying(env, &ns, "app", &["ResizeRepaired", "ResizeCompleted"]).await;

    // 2. A bad edit keeps the last good policy (still repair) and is reported on the ConfigMap.
    support::set_policy(
        env,
        "qos:\n  onChange: repair\npreemption:\n  maxVictims: 3\n",
    )
    .await;
    let cm_events = wait_configmap_event(&k, "InvalidPolicy").await;
    assert!(cm_events.contains("maxVictims"), "{cm_events}");
    assert!(
        cm_events.contains("line 4"),
        "the error names the line: {cm_events}"
    );
    assert_repaired(&k, &ns, "450m", "last good policy kept").await;

    // 2b. The ConfigMap deleted: the last good policy (repair) stays in force and a
    // `PolicyDeleted` Event says so; recreated garbled: `InvalidPolicy`, still repair; fixed: the
    // new policy takes effect.
    k.run(["delete", "configmap", "resize-guard", "-n", "resize-guard"])
        .await
        .unwrap();
    let cm_events = wait_configmap_event(&k, "PolicyDeleted").await;
    assert!(
        cm_events.contains("keeping the last good policy"),
        "{cm_events}"
    );
    assert_repaired(&k, &ns, "500m", "last good policy kept after the delete").await;
    let invalid_before = cm_events.matches("InvalidPolicy").count();
    support::set_policy(env, "qos: [garbled\n").await;
    let cm_events = wait_another_invalid_policy(&k, invalid_before).await;
    assert!(
        cm_events.matches("InvalidPolicy").count() > invalid_before,
        "the garbled policy is reported: {cm_events}"
    );
    assert_repaired(
        &k,
        &ns,
        "550m",
        "last good policy kept after a garbled recreate",
    )
    .await;
    // Fixed: reject (the default) again — a requests-only change is refused with the explanation.
    support::set_policy(env, "mode: enforce\nqos:\n  onChange: reject\n").await;
    wait_policy(&hook.process, |p| policy_has(p, "onChange: reject")).await;
    let patch =
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"600m"}}}]}}"#;
    let out = k.resize(&ns, "app", patch).await.unwrap();
    assert!(
        !out.success && out.stderr.contains("resize-guard"),
        "the fixed policy (reject) refuses with resize-guard's explanation: {}",
        out.stderr
    );

    // 3. mode: audit — nothing denied by resize-guard, would-… recorded.
    support::set_policy(env, "mode: audit\n").await;
    wait_policy(&hook.process, |p| policy_has(p, "mode: audit")).await;
    let (ns2, _, _) = support::field_test(env, "audit").await;
    let qos = r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"300m"}}}]}}"#;
    let out = k.resize(&ns2, "app", qos).await.unwrap();
    // resize-guard only warns; the API server's own validation still refuses the QoS change.
    assert_contains_all(
        &out.stderr,
        &[
            "Warning: resize-guard (audit mode) would deny this resize",
            "Pod QOS Class may not change as a result of resizing",
        ],
    );
    assert!(!out.stderr.contains("denied the request"), "{}", out.stderr);
    // The audit log is flushed asynchronously: wait (bounded) for the resize's entry.
    let would_deny = |audit: &[serde_json::Value]| {
        audit
            .iter()
            .any(|e| e["annotations"]["mutate.resize-guard.io/decision"] == "would-deny:qos-change")
    };
    let mut audit = Vec::new();
    for _ in 0..100 {
        audit = support::resize_audit(env, &ns2, "app");
        if would_deny(&audit) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(would_deny(&audit), "{audit:?}");

    // 4. An edit that drops `mode: audit` is refused, not enforcement by omission: an
    // `InvalidPolicy` Event names the missing key and the webhook stays in audit mode.
    let invalid_before = configmap_events(&k).await.matches("InvalidPolicy").count();
    support::set_policy(env, "qos:\n  onChange: reject\n").await;
    let cm_events = wait_another_invalid_policy(&k, invalid_before).await;
    assert!(
        cm_events.contains("`mode` is not stated"),
        "the unstated mode is reported: {cm_events}"
    );
    let out = k.resize(&ns2, "app", qos).await.unwrap();
    assert!(
        out.stderr
            .contains("Warning: resize-guard (audit mode) would deny this resize")
            && !out.stderr.contains("denied the request"),
        "still audit mode: {}",
        out.stderr
    );
    drop(hook);
}

/// `kubectl events` for the policy ConfigMap.
async fn configmap_events(k: &resize_guard_harness::kubectl::Kubectl) -> String {
    k.events_of("resize-guard", "configmap/resize-guard")
        .await
        .unwrap()
        .stdout
}

/// Waits (bounded, 10 s) until the policy ConfigMap has more `InvalidPolicy` Event lines than
/// `before`; returns all its Events either way, for the caller's assertion.
async fn wait_another_invalid_policy(
    k: &resize_guard_harness::kubectl::Kubectl,
    before: usize,
) -> String {
    let mut events = String::new();
    for _ in 0..100 {
        events = configmap_events(k).await;
        if events.matches("InvalidPolicy").count() > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    events
}

/// Waits for an Event with `reason` on the policy ConfigMap; returns all its Events.
async fn wait_configmap_event(k: &resize_guard_harness::kubectl::Kubectl, reason: &str) -> String {
    let mut events = String::new();
    for _ in 0..100 {
        events = configmap_events(k).await;
        if events.contains(reason) {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no {reason} Event on the policy ConfigMap: {events}");
}

/// A requests-only resize of `app` to `cpu` is repaired (the repair policy is in force).
async fn assert_repaired(
    k: &resize_guard_harness::kubectl::Kubectl,
    ns: &str,
    cpu: &str,
    why: &str,
) {
    let patch = format!(
        r#"{{"spec":{{"containers":[{{"name":"app","resources":{{"requests":{{"cpu":"{cpu}"}}}}}}]}}}}"#
    );
    let out = k.resize(ns, "app", &patch).await.unwrap();
    assert!(
        out.success && out.stderr.contains("repaired"),
        "{why}: {}",
        out.stderr
    );
}
