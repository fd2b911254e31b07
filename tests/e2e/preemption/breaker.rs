//! The circuit breaker tripped by plans that really were futile, on hollow nodes (upstream's
//! v1.37.2 kubelet), read back from kube-apiserver's audit log: tenant A's resize keeps paying
//! for room that the kubelet then gives to A's own later, higher-priority resizes, until
//! `preemption.circuitBreaker` pauses preemption for A's namespace — and only for it: tenant B's
//! plan still acts, and a namespace in `namespaces.exclude` is never touched.
//!
//! How the room goes elsewhere, with nothing but real parts: a victim's container takes 20 s to
//! exit (`hollow-node.resize-guard.io/stop-after`,
//! `third_party/control-plane/cmd/hollow-node/stop.go`),
//! and while it terminates a higher-priority pod on the node asks for the same room. When the
//! victim is gone the kubelet retries its pending resizes highest priority first
//! (`sortPendingResizes`, `pkg/kubelet/allocation/allocation_manager.go`): the newcomer is
//! admitted, the preemptor is still Deferred, and no resize pending when the plan was made was
//! admitted — a futile plan (`controller/src/preemption/brakes.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::controller as support;
use crate::scenario::run_guaranteed;

use std::time::Duration;

use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::objects::*;

use super::tenants::{
    Tenants, controller_pod_writes, evictions, metrics, reset_policy, three_tenants,
    wait_event_saying, wait_evictions, wait_resized,
};

/// How long a victim on the contested node takes to exit once asked to stop.
const STOP_AFTER: &str = "20s";

/// Tenant A: on node `ba`, `grower` (mid priority, 100m → 400m) and three low 300m victims that
/// take 20 s to exit, with `y1` and `y2` (high priority, 100m each) beside them, and a pod of the
/// excluded namespace X of the lowest priority — the cheapest victim there is. `futilePlans: 2`.
/// Each time a victim of `grower`'s plan terminates, the test has just asked for that room for
/// `y1`, then `y2`, which the kubelet admits first; the second re-plan opens A's breaker
/// (`PreemptionPaused` on `grower`, `outcome="breaker_opened"`), and A's next resize, on another
/// node, is held with a `PreemptionHeld` naming the breaker. Tenant B's Deferred resize, made
/// then, is seen through with B's own victim. From the audit log: two evictions in A, both of
/// `ba`'s victims; one in B; no pod write by the controller in X, kube-system or the install
/// namespace.
#[tokio::test]
async fn futile_plans_pause_only_their_own_tenants_preemption() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let Tenants {
        c,
        ns: [ns_a, ns_b, ns_x],
        pods: [pods_a, pods_b, pods_x],
    } = three_tenants(
        env,
        "br",
        "breaker",
        "  maxVictimsPerResize: 5\n  maxEvictionsPerMinute: 30\n  maxEvictionsPerNamespacePerMinute: 6\n  circuitBreaker:\n    futilePlans: 2\n    windowSeconds: 600\n    pauseSeconds: 600\n    scope: namespace\n",
    )
    .await;

    // The contested node: 100m + 3 × 300m + 2 × 100m + 300m, no room to spare.
    let node_a = env.node("ba", "1500m", "8Gi").await;
    let victims = ["ba-v0", "ba-v1", "ba-v2"];
    for v in victims {
        let mut p = stopping_after(
            guaranteed_pod(v, &node_a, "low", "300m", "64Mi"),
            STOP_AFTER,
        );
        p.spec.as_mut().unwrap().termination_grace_period_seconds = Some(60);
        create_running(&pods_a, &p).await.unwrap();
    }
    run_guaranteed(&pods_x, "ba-x", &node_a, "lowest", "300m", "64Mi").await;
    for (name, class) in [("grower", "mid"), ("y1", "high"), ("y2", "high")] {
        run_guaranteed(&pods_a, name, &node_a, class, "100m", "64Mi").await;
    }
    // A's second node, for the resize the open breaker must hold.
    let node_a2 = env.node("ba2", "400m", "8Gi").await;
    for p in [
        guaranteed_pod("ba2-v", &node_a2, "low", "300m", "64Mi"),
        guaranteed_pod("ba2-app", &node_a2, "mid", "100m", "64Mi"),
    ] {
        create_running(&pods_a, &p).await.unwrap();
    }
    // B's node: B's own victim.
    let node_b = env.node("bb", "400m", "8Gi").await;
    for p in [
        guaranteed_pod("bb-v", &node_b, "low", "300m", "64Mi"),
        guaranteed_pod("bb-app", &node_b, "high", "100m", "64Mi"),
    ] {
        create_running(&pods_b, &p).await.unwrap();
    }

    // grower asks for a victim's worth; each time its plan's victim terminates, a newcomer
    // asks for the same room first.
    support::resize_pending_on(env, &pods_a, &ns_a, "grower", "400m").await;
    for (round, newcomer) in ["y1", "y2"].into_iter().enumerate() {
        let evicted = wait_evictions(env, &[&ns_a], round + 1, Duration::from_secs(60)).await;
        let victim = evicted[round].victim.clone();
        support::resize_pending_on(env, &pods_a, &ns_a, newcomer, "400m").await;
        let still = pods_a.get(&victim).await.unwrap();
        assert!(
            still.metadata.deletion_timestamp.is_some(),
            "{newcomer} was Deferred while {victim} still terminated (else the race is not set up)"
        );
        wait_resized(&pods_a, newcomer, "400m", Duration::from_secs(60)).await;
    }
    let paused = wait_event_saying(env, &c, &ns_a, "PreemptionPaused", |e| {
        e.0 == "grower" && e.1.contains("preemption.circuitBreaker")
    })
    .await;
    assert!(paused.contains(&format!("namespace {ns_a}")), "{paused}");
    assert!(
        metrics(&c).await.contains("outcome=\"breaker_opened\""),
        "the plan that opened the breaker is counted"
    );

    // A's next resize is held by A's open breaker, saying so.
    support::resize_pending_on(env, &pods_a, &ns_a, "ba2-app", "400m").await;
    let held = format!("the circuit breaker of namespace {ns_a} is open");
    wait_event_saying(env, &c, &ns_a, "PreemptionHeld", |e| {
        e.0 == "ba2-app" && e.1.contains(&held)
    })
    .await;
    // B's plan acts within its own budget.
    support::resize_all(&pods_b, &["bb-app".to_owned()], "400m").await;
    wait_resized(&pods_b, "bb-app", "400m", Duration::from_secs(60)).await;

    let all = evictions(env, &[&ns_a, &ns_b, &ns_x]);
    eprintln!("evictions of the run: {all:#?}");
    let of_a: Vec<&str> = all
        .iter()
        .filter(|e| e.namespace == ns_a)
        .map(|e| e.victim.as_str())
        .collect();
    assert!(
        of_a.len() == 2 && of_a.iter().all(|v| victims.contains(v)),
        "A paid two of ba's victims, then its breaker held: {all:?}"
    );
    let of_b: Vec<&str> = all
        .iter()
        .filter(|e| e.namespace == ns_b)
        .map(|e| e.victim.as_str())
        .collect();
    assert_eq!(of_b, ["bb-v"], "B took its own victim: {all:?}");
    let writes = controller_pod_writes(env, &[&ns_x, "kube-system", "resize-guard"]);
    assert!(writes.is_empty(), "{writes:?}");
    assert!(
        support::preempted(&pods_x, &["ba-x"]).await.is_empty(),
        "X's pod stays"
    );
    let m = metrics(&c).await;
    assert!(m.contains("outcome=\"held_breaker_open\""), "{m}");
    drop(c);
    reset_policy(env).await;
}
