//! Preemption on nodes where other pods have pending (Deferred) growth, on hollow nodes: the real
//! v1.37.2 kubelet decides who gets the freed room, retrying its pending resizes in its own order
//! on every pod removal. Victims take different times to exit (the hollow node's
//! `stop-after` annotation), so they go one at a time. The preemptor's resize completes after
//! exactly the planned victims, with one plan and no second round.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::controller as support;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use resize_guard_harness::env::{Env, EnvOptions, LogGuard, shared};
use resize_guard_harness::objects::*;
use tokio::sync::OnceCell;

static CONTROLLER: OnceCell<support::Controller> = OnceCell::const_new();
const T: Duration = Duration::from_secs(60);

/// The suite's environment with its controller leading, and the guard that prints the logs if
/// the test fails.
async fn setup() -> (&'static Env, LogGuard<'static>) {
    let env = shared(EnvOptions::default());
    env.priority_class("mid-never", 10_000, true).await;
    support::leading(&CONTROLLER, env, "e2e-pending-growth").await;
    (env, env.guard())
}

/// Every plan the controller recorded on the pod, as seen by a watch, by generation and time
/// (each sealing draws a fresh nonce, so the same plan written twice is still one plan).
fn plans(history: &support::History) -> BTreeSet<String> {
    history
        .all()
        .iter()
        .filter_map(|p| {
            let raw = p
                .metadata
                .annotations
                .as_ref()?
                .get("resize-guard.io/preemption")?;
            let v: serde_json::Value = serde_json::from_str(raw).ok()?;
            Some(format!("{}@{}", v["generation"], v["time"]))
        })
        .collect()
}

/// Resizes pod `high` (its watch `high`) to `cpu` and waits, on that watch, until the kubelet has
/// allocated it with no resize pending.
async fn grows_in_place(env: &Env, ns: &str, high: &support::History, cpu: &str) {
    env.resize_cpu(ns, "high", cpu).await;
    high.wait(T, |p| {
        allocated_cpu(p).as_deref() == Some(cpu) && resize_pending(p).is_none()
    })
    .await;
}

/// Creates a running `low` pod `name` (`cpu`) on `node` that takes `after` to exit once deleted.
async fn exiting_low(pods: &Api<Pod>, node: &str, name: &str, cpu: &str, after: &str) {
    let p = guaranteed_pod(name, node, "low", cpu, "64Mi");
    create_running(pods, &stopping_after(p, after))
        .await
        .unwrap();
}

#[tokio::test]
async fn issue_example_preempts_the_two_growing_pods_instead_of_four() {
    // Upstream's alpha took low2, low4, low5 and mid1; the kubelet-accounting plan
    // (low3, low4, low5) lost the room to mid0's growth and needed a second round of two more.
    let (env, _g) = setup().await;
    let (ns, node, pods) = env
        .scenario("race-example", ("race", "3930m", "8Gi"), &[])
        .await;
    let lows = ["510m", "420m", "390m", "230m", "310m", "420m"];
    for (i, cpu) in lows.iter().enumerate() {
        exiting_low(
            &pods,
            &node,
            &format!("low{i}"),
            cpu,
            &format!("{}ms", 300 * i),
        )
        .await;
    }
    for (i, (cpu, after)) in [("440m", "2s"), ("540m", "0s")].iter().enumerate() {
        let p = guaranteed_pod(&format!("mid{i}"), &node, "mid-never", cpu, "64Mi");
        create_running(&pods, &stopping_after(p, after))
            .await
            .unwrap();
    }
    create_all(&pods, &node, &[("high", "high", "300m", "64Mi")])
        .await
        .unwrap();
    support::resize_pending_on(env, &pods, &ns, "mid0", "1160m").await;
    support::resize_pending_on(env, &pods, &ns, "mid1", "1310m").await;

    let high = support::History::start(&pods, "high").await;
    grows_in_place(env, &ns, &high, "1530m").await;

    let everyone: Vec<String> = (0..6)
        .map(|i| format!("low{i}"))
        .chain(["mid0".into(), "mid1".into()])
        .collect();
    let names: Vec<&str> = everyone.iter().map(String::as_str).collect();
    assert_eq!(
        support::preempted(&pods, &names).await,
        ["mid0", "mid1"],
        "exactly the planned victims"
    );
    assert_eq!(plans(&high).len(), 1, "one plan, no second round");
    let preempting = support::wait_event(env, &ns, "PreemptingForResize").await;
    assert!(
        preempting.iter().any(|(_, note, _)| note.contains(&format!(
            "{ns}/mid1 (priority 10000), {ns}/mid0 (priority 10000)"
        )) || note.contains(&format!(
            "{ns}/mid0 (priority 10000), {ns}/mid1 (priority 10000)"
        ))),
        "{preempting:?}"
    );
}

#[tokio::test]
async fn room_is_left_for_growth_the_kubelet_admits_first_while_victims_go_one_by_one() {
    // mid cannot be preempted (protected by policy) and its resize is Deferred (+400m). On the
    // kubelet's accounting b and c would make room for high (+600m) — but with b gone and c
    // still exiting, mid's growth fits and high's does not, the kubelet admits mid, and once c
    // is gone high is still short. The plan takes a too and leaves room for mid's growth.
    // Victims exit one by one (a at once, b after 1s, c after 3s): the kubelet admits mid as
    // soon as a is gone, and high once c is.
    let (env, _g) = setup().await;
    let (ns, node, pods) = env
        .scenario("race-protected", ("race", "1930m", "4Gi"), &[])
        .await;
    let mid = labelled(
        guaranteed_pod("mid", &node, "mid-never", "300m", "64Mi"),
        "resize-guard.io/protected",
        "true",
    );
    create_running(&pods, &mid).await.unwrap();
    for (name, cpu, after) in [
        ("a", "450m", "0s"),
        ("b", "450m", "1s"),
        ("c", "400m", "3s"),
    ] {
        exiting_low(&pods, &node, name, cpu, after).await;
    }
    create_all(&pods, &node, &[("high", "high", "300m", "64Mi")])
        .await
        .unwrap();
    support::resize_pending_on(env, &pods, &ns, "mid", "700m").await;

    let high = support::History::start(&pods, "high").await;
    let mid = support::History::start(&pods, "mid").await;
    grows_in_place(env, &ns, &high, "900m").await;
    // The race happened: mid was admitted on the way (seconds before high), in the room the
    // plan left for it.
    let mid_allocations: Vec<Option<String>> = mid.all().iter().map(allocated_cpu).collect();
    assert!(
        mid_allocations.iter().any(|a| a.as_deref() == Some("700m")),
        "the kubelet admitted mid's growth first: {mid_allocations:?}"
    );
    assert_eq!(
        support::preempted(&pods, &["mid", "a", "b", "c"]).await,
        ["a", "b", "c"],
        "exactly the planned victims"
    );
    assert_eq!(plans(&high).len(), 1, "one plan, no second round");
    let preempting = support::wait_event(env, &ns, "PreemptingForResize").await;
    assert!(
        preempting.iter().any(|(_, note, _)| note
            .contains(&format!("leaves room for the pending resize of {ns}/mid"))),
        "{preempting:?}"
    );
}
