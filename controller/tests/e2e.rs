//! The controller end to end on a real kube-apiserver v1.37.2 with the simulated kubelet: it
//! makes room for Deferred resizes with the fewest strictly-lower-priority victims, never more,
//! never the protected, and says why when it cannot.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::kubelet::NodeConfig;
use resize_guard_harness::objects::*;
use serde_json::json;
use tokio::sync::OnceCell;

static CONTROLLER: OnceCell<support::Controller> = OnceCell::const_new();
const T: Duration = Duration::from_secs(30);

async fn setup() -> &'static Env {
    let env = shared(EnvOptions::default());
    CONTROLLER
        .get_or_init(|| support::start(env, "e2e-leader"))
        .await;
    for _ in 0..100 {
        if CONTROLLER.get().unwrap().is_leader().await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    env
}

async fn deferred(pods: &Api<Pod>, env: &Env, ns: &str, name: &str, cpu: &str) {
    let out = env
        .kubectl()
        .resize(ns, name, &cpu_resize(cpu))
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
    wait_pod(pods, name, T, |p| resize_pending(p).is_some())
        .await
        .unwrap();
}

#[tokio::test]
async fn field_test_the_filler_is_preempted_and_the_resize_completes_in_place() {
    let env = setup().await;
    let _g = env.guard();
    let (ns, node, pods) = env.field_test("field").await;
    env.kubectl()
        .resize(&ns, "app", &cpu_resize("550m"))
        .await
        .unwrap();

    // The Eviction API writes DisruptionTarget (EvictionByEvictionAPI); resize-guard's own
    // reason follows right after it, while the victim terminates (1.5 s here).
    let marked = wait_pod(&pods, "filler", T, |p| {
        p.metadata.deletion_timestamp.is_some()
            && p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c.type_ == "DisruptionTarget"
                            && c.reason.as_deref() == Some("PreemptionByResizeGuard")
                    })
                })
    })
    .await;
    assert!(marked.is_ok(), "{marked:?}");
    let app = wait_pod(&pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("550m") && resize_pending(p).is_none()
    })
    .await
    .unwrap();
    assert_eq!(restart_count(&app), 0, "in place, no restart");
    let preempted = support::wait_event(env, &ns, "Preempted").await;
    assert_eq!(preempted[0].0, "filler");
    assert!(
        preempted[0].1.contains(&format!("{ns}/app")) && preempted[0].1.contains(&node),
        "{:?}",
        preempted
    );
    let preempting = support::wait_event(env, &ns, "PreemptingForResize").await;
    assert!(
        preempting[0]
            .1
            .contains(&format!("{ns}/filler (priority 100)")),
        "{:?}",
        preempting
    );
    // ResizeCompleted follows actuation asynchronously.
    let mut text = String::new();
    for _ in 0..100 {
        text = env.kubectl().events_for(&ns, "app").await.unwrap().stdout;
        if text.contains("PreemptingForResize") && text.contains("ResizeCompleted") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        text.contains("PreemptingForResize") && text.contains("ResizeCompleted"),
        "{text}"
    );
    let metrics =
        resize_guard_harness::install::http_get(CONTROLLER.get().unwrap().health_port, "/metrics")
            .await
            .unwrap();
    assert!(metrics.contains("resize_guard_deferred_pods"), "{metrics}");
    assert!(
        metrics.contains("resize_guard_preemptions_total{outcome=\"started\"}"),
        "{metrics}"
    );
    // The plan annotation is cleared once the kubelet admitted the resize.
    let cleared = wait_pod(&pods, "app", T, |p| {
        !p.metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .contains_key("resize-guard.io/preemption")
    })
    .await;
    assert!(cleared.is_ok());
}

#[tokio::test]
async fn never_preempts_equal_or_higher_priority_and_says_why() {
    let env = setup().await;
    let _g = env.guard();
    let ns = env.namespace("equal").await;
    let node = env.node("t3-medium", "1930m", "3Gi").await;
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    create_running(
        &pods,
        &guaranteed_pod("peer", &node, "high", "1500m", "256Mi"),
    )
    .await
    .unwrap();
    create_running(
        &pods,
        &guaranteed_pod("app", &node, "high", "250m", "256Mi"),
    )
    .await
    .unwrap();
    deferred(&pods, env, &ns, "app", "550m").await;
    let failed = support::wait_event(env, &ns, "ResizePreemptionFailed").await;
    assert!(
        failed[0].1.contains("no pod on node") && failed[0].1.contains("priority below 1000000"),
        "{failed:?}"
    );
    assert!(support::preempted(&pods, &["peer"]).await.is_empty());
}

#[tokio::test]
async fn a_preemptor_with_preemption_policy_never_gets_no_victims_and_an_event() {
    let env = setup().await;
    let _g = env.guard();
    let client = env.client().await;
    env.priority_class("high-never", 1_000_000, true).await;
    let ns = env.namespace("never").await;
    let node = env.node("t3-medium", "1930m", "3Gi").await;
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    create_running(
        &pods,
        &guaranteed_pod("filler", &node, "low", "1500m", "256Mi"),
    )
    .await
    .unwrap();
    create_running(
        &pods,
        &guaranteed_pod("app", &node, "high-never", "250m", "256Mi"),
    )
    .await
    .unwrap();
    deferred(&pods, env, &ns, "app", "550m").await;
    let failed = support::wait_event(env, &ns, "ResizePreemptionFailed").await;
    assert!(
        failed[0].1.contains("preemptionPolicy: Never"),
        "{failed:?}"
    );
    assert!(support::preempted(&pods, &["filler"]).await.is_empty());
}

#[tokio::test]
async fn protected_pods_and_opted_out_nodes_are_respected() {
    let env = setup().await;
    let _g = env.guard();
    let ns = env.namespace("protected").await;
    let node = env.node("t3-medium", "1930m", "3Gi").await;
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    let mut guarded = guaranteed_pod("guarded", &node, "low", "1500m", "256Mi");
    guarded
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("resize-guard.io/protected".into(), "true".into());
    create_running(&pods, &guarded).await.unwrap();
    create_running(
        &pods,
        &guaranteed_pod("app", &node, "high", "250m", "256Mi"),
    )
    .await
    .unwrap();
    deferred(&pods, env, &ns, "app", "550m").await;
    let failed = support::wait_event(env, &ns, "ResizePreemptionFailed").await;
    assert!(failed[0].1.contains("protected by policy"), "{failed:?}");

    // A node labelled resize-guard.io/preemption=disabled never gets victims.
    let ns2 = env.namespace("optout").await;
    let mut cfg = NodeConfig::new(&env.unique("opted-out"), "1930m", "3Gi");
    cfg.labels
        .insert("resize-guard.io/preemption".into(), "disabled".into());
    env.add_node(cfg.clone()).await;
    let pods2: Api<Pod> = Api::namespaced(env.client().await, &ns2);
    create_running(
        &pods2,
        &guaranteed_pod("filler", &cfg.name, "low", "1500m", "256Mi"),
    )
    .await
    .unwrap();
    create_running(
        &pods2,
        &guaranteed_pod("app", &cfg.name, "high", "250m", "256Mi"),
    )
    .await
    .unwrap();
    deferred(&pods2, env, &ns2, "app", "550m").await;
    let failed = support::wait_event(env, &ns2, "ResizePreemptionFailed").await;
    assert!(
        failed[0].1.contains("resize-guard.io/preemption=disabled"),
        "{failed:?}"
    );
    assert!(support::preempted(&pods, &["guarded"]).await.is_empty());
    assert!(support::preempted(&pods2, &["filler"]).await.is_empty());
}

#[tokio::test]
async fn a_pdb_protected_pod_is_not_evicted_and_another_victim_is_used() {
    let env = setup().await;
    let _g = env.guard();
    let ns = env.namespace("pdb").await;
    let node = env.node("t3-medium", "1930m", "3Gi").await;
    let client = env.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    // Two equally good victims; the younger one (normally preferred) is covered by a PDB.
    create_running(
        &pods,
        &guaranteed_pod("older", &node, "low", "700m", "256Mi"),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    create_running(&pods, &guaranteed_pod("db", &node, "low", "700m", "256Mi"))
        .await
        .unwrap();
    create_running(
        &pods,
        &guaranteed_pod("app", &node, "high", "250m", "256Mi"),
    )
    .await
    .unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}
    }))
    .unwrap();
    let created = pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    // No disruption controller runs here: write the status it would (0 disruptions allowed).
    let status = json!({"status": {"observedGeneration": created.metadata.generation, "disruptionsAllowed": 0,
        "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}});
    pdbs.patch_status("db", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    deferred(&pods, env, &ns, "app", "550m").await;
    wait_pod(&pods, "older", T, |p| {
        p.metadata.deletion_timestamp.is_some()
    })
    .await
    .unwrap();
    wait_pod(&pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("550m")
    })
    .await
    .unwrap();
    assert!(
        support::preempted(&pods, &["db"]).await.is_empty(),
        "the PDB-protected pod stays"
    );
}

/// KEP-5836's over-preemption example: H (high) grows 1000m→2000m on a 4-CPU node while M (mid,
/// `preemptionPolicy: Never`) is itself Deferred 1000m→2000m; three 500m low pods. The kubelet
/// needs one low pod gone for H; upstream's alpha scheduler counts M at its desired size and
/// preempts all three (`controller/tests/e2e_upstream.rs` runs the same scenario there).
#[tokio::test]
async fn kep_5836_example_takes_one_victim() {
    let env = setup().await;
    let _g = env.guard();
    let ns = env.namespace("kep5836").await;
    let node = env.node("n4", "4", "8Gi").await;
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    for (i, name) in ["l0", "l1", "l2"].iter().enumerate() {
        create_running(&pods, &guaranteed_pod(name, &node, "low", "500m", "64Mi"))
            .await
            .unwrap();
        let _ = i;
    }
    env.priority_class("mid-never", 10000, true).await;
    create_running(
        &pods,
        &guaranteed_pod("m", &node, "mid-never", "1000m", "64Mi"),
    )
    .await
    .unwrap();
    create_running(&pods, &guaranteed_pod("h", &node, "high", "1000m", "64Mi"))
        .await
        .unwrap();
    // M asks first (Deferred, 500m short); H asks next.
    env.kubectl()
        .resize(&ns, "m", &cpu_resize("2000m"))
        .await
        .unwrap();
    env.kubectl()
        .resize(&ns, "h", &cpu_resize("2000m"))
        .await
        .unwrap();
    if let Err(e) = wait_pod(&pods, "h", T, |p| allocated_cpu(p).as_deref() == Some("2")).await {
        let ev = env
            .kubectl()
            .run([
                "get",
                "events",
                "-n",
                &ns,
                "-o",
                "custom-columns=OBJ:.involvedObject.name,REASON:.reason,MSG:.message",
            ])
            .await
            .unwrap();
        panic!("{e}\n{}", ev.stdout);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let gone = support::preempted(&pods, &["l0", "l1", "l2", "m"]).await;
    eprintln!("resize-guard victims for the KEP-5836 example: {gone:?}");
    assert_eq!(gone, ["l2"], "exactly one victim, the youngest low pod");
    let m = pods.get("m").await.unwrap();
    assert_eq!(
        resize_pending(&m).map(|r| r.0).as_deref(),
        Some("Deferred"),
        "M still waits"
    );
}

/// `feasibility.revertInfeasible`: a resize the kubelet marks Infeasible (here the kubelet's
/// allocatable is smaller than what the node object advertised to the API server's capacity
/// check) is patched back to the pod's actual resources.
#[tokio::test]
async fn an_infeasible_resize_is_reverted_when_the_policy_asks() {
    let env = setup().await;
    let _g = env.guard();
    resize_guard_harness::install::set_policy(env, "feasibility:\n  revertInfeasible: true\n")
        .await;
    let ns = env.namespace("revert").await;
    let node = env.node("shrunk", "1930m", "3Gi").await;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(env.client().await);
    let grow = json!({"status": {"allocatable": {"cpu": "4"}, "capacity": {"cpu": "4"}}});
    nodes
        .patch_status(&node, &PatchParams::default(), &Patch::Merge(&grow))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    create_running(
        &pods,
        &guaranteed_pod("app", &node, "high", "250m", "256Mi"),
    )
    .await
    .unwrap();
    let out = env
        .kubectl()
        .resize(&ns, "app", &cpu_resize("2430m"))
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
    let reverted = wait_pod(&pods, "app", T, |p| {
        p.spec.as_ref().unwrap().containers[0]
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()["cpu"]
            .0
            == "250m"
            && resize_pending(p).is_none()
    })
    .await;
    assert!(reverted.is_ok(), "{reverted:?}");
    let ev = support::wait_event(env, &ns, "ResizeReverted").await;
    assert!(
        ev[0].1.contains("requested: 2430, capacity: 1930"),
        "{ev:?}"
    );
    resize_guard_harness::install::set_policy(env, "").await;
}
