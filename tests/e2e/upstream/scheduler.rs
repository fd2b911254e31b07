//! The reference resize-guard's controller is compared against: upstream kube-scheduler v1.37.2
//! with the alpha gate `InPlacePodVerticalScalingSchedulerPreemption` preempts a lower-priority
//! pod for a Deferred resize. Runs with the gate on in kube-apiserver and kube-scheduler.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, ListParams};
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::objects::*;

const GATE: &str = "InPlacePodVerticalScalingSchedulerPreemption=true";
const T: Duration = Duration::from_secs(60);

fn env() -> &'static Env {
    let env = shared(EnvOptions {
        feature_gates: vec![GATE.to_owned()],
    });
    static SCHED: std::sync::Once = std::sync::Once::new();
    SCHED.call_once(|| {
        if let Err(e) = env.cp.start_scheduler(&[GATE]) {
            panic!("kube-scheduler: {e:#}");
        }
    });
    env
}

#[tokio::test]
async fn upstream_scheduler_preempts_a_lower_priority_pod_for_a_deferred_resize() {
    let env = env();
    let _g = env.guard();
    let (ns, node, pods) = env.field_test("upstream").await;

    env.resize_cpu(&ns, "app", "550m").await;

    // The victim is marked and deleted by the scheduler…
    let victim = wait_pod(&pods, "filler", T, |p| {
        p.metadata.deletion_timestamp.is_some()
    })
    .await
    .unwrap();
    let target = victim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "DisruptionTarget"))
        .cloned()
        .expect("DisruptionTarget condition on the victim");
    assert_eq!(target.reason.as_deref(), Some("PreemptionByScheduler"));
    // …and once it is gone the kubelet admits the resize in place.
    let app = wait_pod(&pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("550m")
    })
    .await
    .unwrap();
    assert!(resize_pending(&app).is_none());
    assert_eq!(restart_count(&app), 0);
    assert!(
        app.status
            .as_ref()
            .and_then(|s| s.nominated_node_name.clone())
            .is_none(),
        "no nominatedNodeName for a Deferred resize (KEP-5836)"
    );

    let events: Api<Event> = Api::namespaced(env.client().await, &ns);
    let preempted = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|e| e.reason.as_deref() == Some("Preempted"))
        .expect("Preempted event");
    let msg = preempted.message.unwrap_or_default();
    assert!(
        msg.starts_with("Preempted by pod ") && msg.ends_with(&format!("on node {node}")),
        "{msg}"
    );
}

#[tokio::test]
async fn node_opt_out_field_round_trips_with_the_gate_on() {
    let env = env();
    let _g = env.guard();
    let name = env.node("opted-out", "2", "2Gi").await;
    env.disable_resize_preemption(&name, &["autoscaler.example.com/resizer"])
        .await;
    let nodes: Api<Node> = Api::all(env.client().await);
    let n = nodes.get(&name).await.unwrap();
    let owners = n
        .spec
        .and_then(|s| s.pod_preemption_policy)
        .and_then(|p| p.disable_resize_preemption);
    assert_eq!(
        owners,
        Some(vec!["autoscaler.example.com/resizer".to_owned()])
    );
}
