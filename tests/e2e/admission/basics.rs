//! The webhook end to end on a real kube-apiserver v1.37.2 (default policy, the default install:
//! the mutating webhook alone, one call per resize):
//! what `kubectl` users see, what the audit log records, and the Events.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::events_saying;
use crate::scenario::webhook as support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use resize_guard_harness::admission::Webhooks;
use resize_guard_harness::env::{Env, EnvOptions, LogGuard, shared};
use resize_guard_harness::objects::*;
use tokio::sync::OnceCell;

static HOOK: OnceCell<support::Webhook> = OnceCell::const_new();

/// [`setup`] and a fresh field test `prefix-…` ([`support::field_test`]): its namespace, node
/// and pods.
async fn field_test(prefix: &str) -> (&'static Env, LogGuard<'static>, (String, String, Api<Pod>)) {
    let (env, guard) = setup().await;
    (env, guard, support::field_test(env, prefix).await)
}

/// The suite's environment with its webhook, and the guard that prints its logs on failure.
async fn setup() -> (&'static Env, LogGuard<'static>) {
    let env = shared(EnvOptions::default());
    HOOK.get_or_init(|| support::start(env, Webhooks::Mutating))
        .await;
    (env, env.guard())
}

#[tokio::test]
async fn qos_change_gets_resize_guards_message_in_kubectl() {
    let (env, _g, (ns, _, _)) = field_test("qos").await;
    // VPA RequestsOnly: the request moves, the limit does not.
    let patch =
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"500m"}}}]}}"#;
    let out = env.kubectl().resize(&ns, "app", patch).await.unwrap();
    support::assert_qos_invalid(
        &out,
        "app",
        &["container app: cpu request 500m ≠ limit 250m"],
    );
    events_saying(env, &ns, "app", &["ResizeRejected", "Warning"]).await;
}

#[tokio::test]
async fn infeasible_resize_gets_resize_guards_message_with_the_nodes_numbers() {
    let (env, _g, (ns, node, pods)) = field_test("infeasible").await;
    let out = env.try_resize_cpu(&ns, "app", "2430m").await;
    assert!(!out.success);
    // `PodResizeValidator`'s refusal word for word, then resize-guard's numbers and advice.
    assert!(
        out.stderr.contains(&format!(r#"Error from server (Forbidden): admission webhook "mutate.resize-guard.io" denied the request: pods "app" is forbidden: node didn't have enough allocatable resources: cpu, requested: 2430, allocatable: 1930. resize-guard: this resize can never fit on node {node}: the pod would request cpu 2430m but the node's allocatable cpu is 1930m"#)),
        "{}",
        out.stderr
    );
    // On v1.37 the API server refuses it itself and no kubelet marks it Infeasible (it would
    // stay Deferred; pkg/kubelet/allocation/handlers.go returns Infeasible only for
    // static-pod/swap/pod-level/memory-backed-volume/static-manager cases): the denial says
    // so, and nothing about v1.33–v1.35 kubelets.
    assert!(
        out.stderr.contains("Kubernetes v1.37 refuses it itself (PodResizeValidator), and no kubelet would ever apply it")
            && !out.stderr.contains("Deferred")
            && !out.stderr.contains("Node didn't have enough capacity"),
        "{}",
        out.stderr
    );
    assert_eq!(
        pods.get("app").await.unwrap().metadata.generation,
        Some(1),
        "nothing stored"
    );
    events_saying(env, &ns, "app", &["ResizeRejected", "can never fit"]).await;
}

#[tokio::test]
async fn deferred_resize_is_allowed_with_a_warning_and_audit_annotations() {
    let (env, _g, (ns, node, pods)) = field_test("deferred").await;
    let out = env.resize_cpu(&ns, "app", "550m").await;
    let expected = format!(
        "Warning: resize-guard: node {node} lacks cpu 120m; the resize will be Deferred; resize-guard will preempt {ns}/filler"
    );
    assert_eq!(
        out.stderr.matches(&expected).count(),
        1,
        "said once, by the one webhook: {}",
        out.stderr
    );
    // The real kubelet agrees, with the same numbers (550 + 1500 − 1930 = the 120m shortfall).
    crate::scenario::wait_field_test_deferred(&pods).await;
    // And says so in its own Event (pkg/kubelet/allocation/allocation_manager.go
    // handlePodResourcesResize, events.PodResizePendingMsg).
    events_saying(
        env,
        &ns,
        "app",
        &["ResizeDeferred", "Pod resize OutOfcpu: {"],
    )
    .await;

    let mut audit = Vec::new();
    for _ in 0..50 {
        audit = support::resize_audit(env, &ns, "app");
        if !audit.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let annotations = &audit.last().expect("audit event for the resize")["annotations"];
    assert_eq!(
        annotations["mutate.resize-guard.io/decision"], "deferred-preemptible",
        "{annotations}"
    );
    assert_eq!(
        annotations["mutate.resize-guard.io/victims"],
        format!("{ns}/filler")
    );
    assert_eq!(
        annotations["mutate.resize-guard.io/shortfall"],
        "cpu 120m, memory 0"
    );
    assert!(
        annotations
            .as_object()
            .unwrap()
            .keys()
            .all(|k| !k.starts_with("validate.resize-guard.io/")),
        "no validating webhook is called: {annotations}"
    );
}

#[tokio::test]
async fn annotation_changes_sent_to_pods_resize_are_dropped_by_the_api_server() {
    let (_env, _g, (_, _, pods)) = field_test("annotations").await;
    let patch = serde_json::json!({
        "metadata": {"annotations": {"resize-guard.io/probe": "kept?"}, "labels": {"probe": "kept"}},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "300m"}, "limits": {"cpu": "300m"}}}]},
    });
    patch_resize(&pods, "app", &patch).await.unwrap();
    let p = pods.get("app").await.unwrap();
    let cpu = &p.spec.as_ref().unwrap().containers[0]
        .resources
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap()["cpu"];
    assert_eq!(cpu.0, "300m", "the resize itself was stored");
    assert!(
        !p.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("resize-guard.io/probe"),
        "annotations on pods/resize are reset by the resize strategy"
    );
    assert!(!p.metadata.labels.unwrap_or_default().contains_key("probe"));
}

#[tokio::test]
async fn dry_run_denials_record_no_event() {
    let (env, _g, (ns, _, _)) = field_test("dryrun").await;
    let k = env.kubectl();
    let out = k
        .resize_dry_run(&ns, "app", &cpu_resize("2430m"))
        .await
        .unwrap();
    assert!(
        out.stderr.contains("would request cpu 2430m"),
        "{}",
        out.stderr
    );
    // The same denial for real, with other numbers, is recorded: once its Event is there, one
    // for the earlier dry run would be too.
    let out = k.resize(&ns, "app", &cpu_resize("2440m")).await.unwrap();
    assert!(
        out.stderr.contains("would request cpu 2440m"),
        "{}",
        out.stderr
    );
    let events = events_saying(env, &ns, "app", &["ResizeRejected", "2440m"]).await;
    assert!(!events.contains("2430m"), "{events}");
}

#[tokio::test]
async fn health_and_metrics_endpoints_work_on_the_real_process() {
    let (_env, _g) = setup().await;
    let hook = HOOK.get().unwrap();
    assert_eq!(hook.health("/livez").await.unwrap().trim(), "ok");
    assert_eq!(hook.health("/readyz").await.unwrap().trim(), "ok");
    let metrics = hook.health("/metrics").await.unwrap();
    assert!(
        metrics.contains("resize_guard_admission_reviews_total"),
        "{metrics}"
    );
    assert!(
        metrics.contains("resize_guard_admission_duration_seconds_bucket"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_rotated_certificate_is_served_without_restart() {
    let (env, _g) = setup().await;
    let hook = HOOK.get().unwrap();
    // Renew the leaf from the same CA, as a Secret update would.
    let renewed = resize_guard_certs::renew_leaf(
        &hook.bundle.ca_cert_pem,
        &hook.bundle.ca_key_pem,
        &resize_guard_certs::CertSpec::for_loopback(),
    )
    .unwrap();
    resize_guard_certs::write_dir(&renewed, hook.cert_dir.path()).unwrap();
    let mut reloaded = false;
    for _ in 0..50 {
        if hook
            .health("/metrics")
            .await
            .unwrap()
            .contains("resize_guard_certificate_reloads_total{result=\"ok\"} 1")
        {
            reloaded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(reloaded, "{}", hook.process.log_tail(3000));
    // The API server still reaches the webhook (same CA).
    support::canary(env).await;
    let pid_alive = std::path::Path::new(&format!("/proc/{}", hook.process.pid())).exists();
    assert!(pid_alive, "no restart");
    let _ = Api::<Pod>::all(env.client().await);
}
