//! Policy-driven behaviour end to end, in one sequence because the policy ConfigMap is shared:
//! QoS repair keeps the pod Guaranteed and the resize completes in place, audit mode never
//! denies, and a bad policy edit keeps the last good policy with an `InvalidPolicy` Event.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Duration;

use resize_guard_harness::admission::Webhooks;
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::objects::*;

const T: Duration = Duration::from_secs(30);

#[tokio::test]
async fn policy_modes_and_live_reload() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let hook = support::start(env, Webhooks::Both).await;
    let k = env.kubectl();

    // 1. qos.onChange: repair — a requests-only resize of a Guaranteed pod is repaired.
    support::set_policy(env, "qos:\n  onChange: repair\n").await;
    let (ns, _, pods) = support::field_test(env, "repair").await;
    pods.delete("filler", &Default::default()).await.unwrap();
    wait_gone(&pods, "filler", T).await.unwrap();
    let patch =
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"400m"}}}]}}"#;
    let mut out = k.resize(&ns, "app", patch).await.unwrap();
    for _ in 0..50 {
        if out.success {
            break;
        }
        // The policy reload is asynchronous: retry until the webhook has the new policy.
        tokio::time::sleep(Duration::from_millis(100)).await;
        out = k.resize(&ns, "app", patch).await.unwrap();
    }
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
    let limits = p.spec.as_ref().unwrap().containers[0]
        .resources
        .as_ref()
        .unwrap()
        .limits
        .clone()
        .unwrap();
    assert_eq!(limits["cpu"].0, "400m");
    assert_eq!(restart_count(&p), 0);
    let mut events = String::new();
    for _ in 0..100 {
        events = k.events_for(&ns, "app").await.unwrap().stdout;
        if events.contains("ResizeRepaired") && events.contains("ResizeCompleted") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // resize-guard's Event, then the real kubelet's (pkg/kubelet/kubelet.go, events.ResizeCompleted).
    assert!(
        events.contains("ResizeRepaired") && events.contains("ResizeCompleted"),
        "{events}"
    );

    // 2. A bad edit keeps the last good policy (still repair) and is reported on the ConfigMap.
    support::set_policy(
        env,
        "qos:\n  onChange: repair\npreemption:\n  maxVictims: 3\n",
    )
    .await;
    let mut cm_events = String::new();
    for _ in 0..100 {
        cm_events = k
            .run([
                "events",
                "-n",
                "resize-guard",
                "--for",
                "configmap/resize-guard",
            ])
            .await
            .unwrap()
            .stdout;
        if cm_events.contains("InvalidPolicy") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        cm_events.contains("InvalidPolicy") && cm_events.contains("maxVictims"),
        "{cm_events}"
    );
    assert!(
        cm_events.contains("line 4"),
        "the error names the line: {cm_events}"
    );
    let patch =
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"450m"}}}]}}"#;
    let out = k.resize(&ns, "app", patch).await.unwrap();
    assert!(
        out.success && out.stderr.contains("repaired"),
        "last good policy kept: {}",
        out.stderr
    );

    // 3. mode: audit — nothing denied by resize-guard, would-… recorded.
    support::set_policy(env, "mode: audit\n").await;
    let (ns2, _, _) = support::field_test(env, "audit").await;
    let qos = r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"300m"}}}]}}"#;
    let mut out = k.resize(&ns2, "app", qos).await.unwrap();
    for _ in 0..50 {
        if out.stderr.contains("audit mode") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        out = k.resize(&ns2, "app", qos).await.unwrap();
    }
    // resize-guard only warns; the API server's own validation still refuses the QoS change.
    assert!(
        out.stderr
            .contains("Warning: resize-guard (audit mode) would deny this resize"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("Pod QOS Class may not change as a result of resizing"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("denied the request"), "{}", out.stderr);
    let audit = support::resize_audit(env, &ns2, "app");
    assert!(
        audit.iter().any(|e| e["annotations"]["mutate.resize-guard.io/decision"] == "would-deny:qos-change"),
        "{audit:?}"
    );
    drop(hook);
}
