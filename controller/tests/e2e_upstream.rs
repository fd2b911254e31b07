//! resize-guard next to upstream kube-scheduler v1.37.2 with the alpha gate
//! `InPlacePodVerticalScalingSchedulerPreemption`, on hollow nodes (upstream's v1.37.2 kubelet):
//! (1) the KEP-5836 example run by upstream alone, for the victim-count comparison; (2) both
//! running at once on the field test — no double preemption, because terminating pods count as
//! space being freed.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::objects::*;

const GATE: &str = "InPlacePodVerticalScalingSchedulerPreemption=true";
const T: Duration = Duration::from_secs(60);

#[tokio::test]
async fn upstream_alpha_over_preempts_and_coexists_with_resize_guard_without_double_preemption() {
    let env = shared(EnvOptions {
        feature_gates: vec![GATE.to_owned()],
    });
    let _g = env.guard();
    env.cp.start_scheduler(&[GATE]).unwrap();
    let client = env.client().await;
    env.priority_class("mid-never", 10000, true).await;

    // 1. KEP-5836 example with upstream alone.
    let ns = env.namespace("kep5836-upstream").await;
    let node = env.node("n4", "4", "8Gi").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    for name in ["l0", "l1", "l2"] {
        create_running(&pods, &guaranteed_pod(name, &node, "low", "500m", "64Mi"))
            .await
            .unwrap();
    }
    create_running(
        &pods,
        &guaranteed_pod("m", &node, "mid-never", "1000m", "64Mi"),
    )
    .await
    .unwrap();
    create_running(&pods, &guaranteed_pod("h", &node, "high", "1000m", "64Mi"))
        .await
        .unwrap();
    env.kubectl()
        .resize(&ns, "m", &cpu_resize("2000m"))
        .await
        .unwrap();
    wait_pod(&pods, "m", T, |p| resize_pending(p).is_some())
        .await
        .unwrap();
    env.kubectl()
        .resize(&ns, "h", &cpu_resize("2000m"))
        .await
        .unwrap();
    wait_pod(&pods, "h", T, |p| allocated_cpu(p).as_deref() == Some("2"))
        .await
        .unwrap();
    // Upstream over-preempts (KEP-5836): all three low pods, counted as they go.
    support::wait_preempted(&pods, &["l0", "l1", "l2", "m"], &["l0", "l1", "l2"], T).await;
    eprintln!(
        "upstream kube-scheduler victims for the KEP-5836 example: [\"l0\", \"l1\", \"l2\"] (resize-guard: [\"l2\"])"
    );
    let m = pods.get("m").await.unwrap();
    assert!(
        m.metadata.deletion_timestamp.is_none(),
        "M is never a victim"
    );

    // 2. Both at once on the field test, with a bystander that is never needed.
    let _controller = support::start(env, "coexist").await;
    let ns = env.namespace("coexist").await;
    let node = env.node("t3-medium", "1930m", "3Gi").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create_running(
        &pods,
        &guaranteed_pod("bystander", &node, "low", "100m", "64Mi"),
    )
    .await
    .unwrap();
    create_running(
        &pods,
        &guaranteed_pod("filler", &node, "low", "1400m", "256Mi"),
    )
    .await
    .unwrap();
    create_running(
        &pods,
        &guaranteed_pod("app", &node, "high", "250m", "256Mi"),
    )
    .await
    .unwrap();
    env.kubectl()
        .resize(&ns, "app", &cpu_resize("550m"))
        .await
        .unwrap();
    // Both preemptors act only while the resize is Deferred and no victim is terminating. Once
    // it is admitted and the filler is gone, neither has anything left to act on.
    wait_pod(&pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("550m")
    })
    .await
    .unwrap();
    wait_gone(&pods, "filler", T).await.unwrap();
    assert_eq!(
        support::preempted(&pods, &["bystander", "filler"]).await,
        ["filler"],
        "one victim between the two preemptors"
    );
}
