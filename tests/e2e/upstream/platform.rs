//! End-to-end tests that pin upstream behaviour on a real kube-apiserver v1.37.2, *without*
//! resize-guard: they protect the product from wrong assumptions about the platform.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::events_saying;
use crate::scenario::run_guaranteed;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use resize_guard_harness::env::{Env, EnvOptions, LogGuard, shared};
use resize_guard_harness::objects::*;
use resize_guard_harness::text::assert_contains_all;

/// The suite's environment, and the guard that prints its logs on failure.
fn setup() -> (&'static Env, LogGuard<'static>) {
    let env = shared(EnvOptions::default());
    (env, env.guard())
}

const T: Duration = Duration::from_secs(30);

/// ARCHITECTURE.md's field test: a 1930m node, a 1500m filler, 250m → 550m is Deferred with the
/// kubelet's message; deleting the filler lets it complete in place.
#[tokio::test]
async fn field_test_deferred_resize_completes_after_the_filler_leaves() {
    let (env, _g) = setup();
    let (ns, _, pods) = env.field_test("field").await;
    let app = pods.get("app").await.unwrap();
    assert_eq!(
        app.status.as_ref().unwrap().qos_class.as_deref(),
        Some("Guaranteed")
    );

    env.resize_cpu(&ns, "app", "550m").await;
    let deferred = crate::scenario::wait_field_test_deferred(&pods).await;
    assert_eq!(allocated_cpu(&deferred).as_deref(), Some("250m"));
    let cond = resize_pending_condition(&deferred).unwrap();
    assert_eq!(cond.observed_generation, deferred.metadata.generation);
    assert_eq!(
        deferred.metadata.generation,
        Some(2),
        "every resize bumps the generation"
    );

    pods.delete("filler", &DeleteParams::default())
        .await
        .unwrap();
    let done = wait_pod(&pods, "app", T, |p| {
        resize_pending(p).is_none() && allocated_cpu(p).as_deref() == Some("550m")
    })
    .await
    .unwrap();
    assert_eq!(restart_count(&done), 0, "resized in place, no restart");
    wait_gone(&pods, "filler", T).await.unwrap();
}

/// A resize past the node's allocatable is refused by the v1.37 API server itself (capacity
/// check added in v1.36): 403 Forbidden with the node's numbers, before any kubelet sees it.
#[tokio::test]
async fn resize_past_allocatable_is_refused_by_the_api_server() {
    let (env, _g) = setup();
    let (ns, _, pods) = env
        .scenario(
            "infeasible",
            ("t3-medium", "1930m", "3Gi"),
            &[("app", "high", "250m", "256Mi")],
        )
        .await;
    let out = env.try_resize_cpu(&ns, "app", "2430m").await;
    assert!(!out.success);
    assert_eq!(
        out.stderr.trim(),
        r#"Error from server (Forbidden): pods "app" is forbidden: node didn't have enough allocatable resources: cpu, requested: 2430, allocatable: 1930"#
    );
    let patch: serde_json::Value = serde_json::from_str(&cpu_resize("2430m")).unwrap();
    let err = patch_resize(&pods, "app", &patch).await.unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    eprintln!("API status for the capacity refusal: {status:?}");
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    let causes: Vec<String> = status
        .details
        .iter()
        .flat_map(|d| d.causes.iter().map(|c| c.reason.clone()))
        .collect();
    assert_eq!(causes, ["NodeCapacity"]);
    let p = pods.get("app").await.unwrap();
    assert_eq!(p.metadata.generation, Some(1), "nothing was stored");
}

/// Built-in validation refuses a QoS-changing resize with the upstream message, quoting the
/// *old* class (status is copied from the stored pod first).
#[tokio::test]
async fn qos_changing_resize_is_refused_by_built_in_validation() {
    let (env, _g) = setup();
    let (ns, _, _) = env
        .scenario(
            "qos",
            ("big", "8", "16Gi"),
            &[("app", "high", "250m", "256Mi")],
        )
        .await;
    // VPA RequestsOnly: only the request moves.
    let patch =
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"500m"}}}]}}"#;
    let out = env.kubectl().resize(&ns, "app", patch).await.unwrap();
    assert!(!out.success);
    assert!(
        out.stderr.contains(r#"spec: Invalid value: "Guaranteed": Pod QOS Class may not change as a result of resizing"#),
        "{}",
        out.stderr
    );
}

/// `kubectl events` shows what the kubelet reported: `ResizeDeferred` (its message quotes the
/// condition's, `Pod resize OutOfcpu: {…}`), `ResizeStarted`, `ResizeCompleted`.
#[tokio::test]
async fn kubectl_events_shows_the_kubelet_resize_events() {
    let (env, _g) = setup();
    let (ns, _, pods) = env.field_test("events").await;
    env.try_resize_cpu(&ns, "app", "550m").await;
    wait_pod(&pods, "app", T, |p| resize_pending(p).is_some())
        .await
        .unwrap();
    pods.delete("filler", &DeleteParams::default())
        .await
        .unwrap();
    wait_pod(&pods, "app", T, |p| {
        resize_pending(p).is_none() && allocated_cpu(p).as_deref() == Some("550m")
    })
    .await
    .unwrap();
    let reasons = ["ResizeDeferred", "ResizeStarted", "ResizeCompleted"];
    let text = events_saying(env, &ns, "app", &reasons).await;
    assert_contains_all(
        &text,
        &[
            "Node didn't have enough resource: cpu",
            "Pod resize OutOfcpu",
        ],
    );
}

/// The kubelet refuses to start a pod that does not fit (`OutOfcpu`).
#[tokio::test]
async fn a_pod_bound_to_a_full_node_is_rejected_out_of_cpu() {
    let (env, _g) = setup();
    let (_, node, pods) = env
        .scenario(
            "reject",
            ("small", "1", "1Gi"),
            &[("a", "low", "800m", "64Mi")],
        )
        .await;
    pods.create(
        &Default::default(),
        &guaranteed_pod("b", &node, "low", "800m", "64Mi"),
    )
    .await
    .unwrap();
    let b = wait_pod(&pods, "b", T, |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
    })
    .await
    .unwrap();
    assert_eq!(b.status.unwrap().reason.as_deref(), Some("OutOfcpu"));
}

/// A deleted pod holds its resources until the kubelet has stopped its containers: a resize sent
/// right after the deletion is Deferred, and admitted (by the kubelet's event-driven retry, not
/// its 3-minute timer) once the pod is gone from the kubelet's active pods
/// (`filterOutInactivePods`), without waiting for its grace period.
#[tokio::test]
async fn terminating_pods_hold_resources_until_gone() {
    let (env, _g) = setup();
    let (ns, node, pods) = env
        .scenario("grace", ("t3-medium", "1930m", "3Gi"), &[])
        .await;
    let mut slow = guaranteed_pod("slow", &node, "low", "1500m", "256Mi");
    slow.spec.as_mut().unwrap().termination_grace_period_seconds = Some(600);
    create_running(&pods, &slow).await.unwrap();
    run_guaranteed(&pods, "app", &node, "high", "250m", "256Mi").await;
    // Deferred while `slow` runs…
    env.try_resize_cpu(&ns, "app", "550m").await;
    let p = wait_pod(&pods, "app", T, |p| resize_pending(p).is_some())
        .await
        .unwrap();
    assert_eq!(resize_pending(&p).unwrap().0, "Deferred");
    // … and admitted once its deletion has stopped it, long before the 600 s grace period.
    pods.delete("slow", &DeleteParams::default()).await.unwrap();
    wait_pod(&pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("550m")
    })
    .await
    .unwrap();
    wait_gone(&pods, "slow", T).await.unwrap();
}

/// Reverting a Deferred resize clears the condition; a Deferred resize of a higher-priority pod
/// is admitted before a lower one when room appears (kubelet retry order).
#[tokio::test]
async fn room_goes_to_the_higher_priority_deferred_resize_first() {
    let (env, _g) = setup();
    // 400 + 400 + 700 + 300 = 1800 of 2000; freeing the 700m filler leaves room for one +500m.
    let (ns, _, pods) = env
        .scenario(
            "order",
            ("n", "2", "4Gi"),
            &[
                ("filler", "low", "700m", "64Mi"),
                ("other", "low", "300m", "64Mi"),
                ("mid", "mid", "400m", "64Mi"),
                ("top", "high", "400m", "64Mi"),
            ],
        )
        .await;
    let k = env.kubectl();
    k.resize(&ns, "mid", &cpu_resize("900m")).await.unwrap();
    wait_pod(&pods, "mid", T, |p| resize_pending(p).is_some())
        .await
        .unwrap();
    k.resize(&ns, "top", &cpu_resize("900m")).await.unwrap();
    wait_pod(&pods, "top", T, |p| resize_pending(p).is_some())
        .await
        .unwrap();
    pods.delete("filler", &DeleteParams::default())
        .await
        .unwrap();
    let top = wait_pod(&pods, "top", T, |p| {
        allocated_cpu(p).as_deref() == Some("900m")
    })
    .await
    .unwrap();
    assert!(resize_pending(&top).is_none());
    let mid = pods.get("mid").await.unwrap();
    assert_eq!(
        resize_pending(&mid).map(|r| r.0).as_deref(),
        Some("Deferred")
    );
    // Reverting the waiting resize clears its condition.
    k.resize(&ns, "mid", &cpu_resize("400m")).await.unwrap();
    wait_pod(&pods, "mid", T, |p| resize_pending(p).is_none())
        .await
        .unwrap();
    let _ = pods
        .patch(
            "mid",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({})),
        )
        .await;
}

/// Hollow nodes keep up with many pods: 8 nodes × 30 pods all start, and a Deferred resize on
/// each node resolves when room appears.
#[tokio::test]
async fn hollow_nodes_handle_hundreds_of_pods() {
    let (env, _g) = setup();
    let ns = env.namespace("scale").await;
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    let started = std::time::Instant::now();
    let mut nodes = Vec::new();
    for _ in 0..8 {
        nodes.push(env.node("scale", "3100m", "8Gi").await);
    }
    let mut creates = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        for i in 0..30 {
            let p = guaranteed_pod(&format!("p-{n}-{i}"), node, "low", "100m", "64Mi");
            let api = pods.clone();
            creates.push(async move { api.create(&Default::default(), &p).await });
        }
    }
    for r in futures::future::join_all(creates).await {
        r.unwrap();
    }
    for (n, _) in nodes.iter().enumerate() {
        for i in 0..30 {
            wait_pod(&pods, &format!("p-{n}-{i}"), T, |p| {
                p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
            .await
            .unwrap();
        }
    }
    eprintln!("240 pods on 8 nodes running after {:?}", started.elapsed());
    // 3000m used of 3100m: growing one pod by 200m is Deferred until a neighbour goes.
    let k = env.kubectl();
    for (n, _) in nodes.iter().enumerate() {
        k.resize(&ns, &format!("p-{n}-0"), &cpu_resize("300m"))
            .await
            .unwrap();
    }
    for (n, _) in nodes.iter().enumerate() {
        wait_pod(&pods, &format!("p-{n}-0"), T, |p| {
            resize_pending(p).is_some()
        })
        .await
        .unwrap();
        pods.delete(&format!("p-{n}-1"), &DeleteParams::default())
            .await
            .unwrap();
    }
    for (n, _) in nodes.iter().enumerate() {
        wait_pod(&pods, &format!("p-{n}-0"), T, |p| {
            allocated_cpu(p).as_deref() == Some("300m")
        })
        .await
        .unwrap();
    }
    eprintln!("all resizes resolved after {:?}", started.elapsed());
}
