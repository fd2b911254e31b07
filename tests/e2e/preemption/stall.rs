//! A resize that waits on a victim which ignores SIGTERM, on hollow nodes (upstream's v1.37.2
//! kubelet): with `preemption.stallAfterSeconds: 20` the preemptor gets a `PreemptionStalled`
//! Warning Event saying what it waits on and for how long, and its node's one-plan-at-a-time claim
//! is no longer held for it, so a second resize on the same node is planned while the victim still
//! terminates (before, the waiting plan refreshed the claim on every look and held the node for as
//! long as the victim took).
//!
//! The victim that ignores SIGTERM: a 600 s grace period, and the hollow node's
//! `hollow-node.resize-guard.io/stop-after` annotation making its container take 10 minutes to
//! exit (`third_party/control-plane/cmd/hollow-node/stop.go`: at most the grace period the kubelet
//! gives), so the real kubelet keeps it terminating and counts its room as used.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::controller as support;
use crate::scenario::run_guaranteed;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::install::{http_get, set_policy};
use resize_guard_harness::objects::*;
use tokio::sync::OnceCell;

static CONTROLLER: OnceCell<support::Controller> = OnceCell::const_new();
const STALL_AFTER: u64 = 20;
/// A t3.medium's node (1930m allocatable) and the older low-priority pod on it.
const T3_MEDIUM: (&str, &str, &str) = ("t3-medium", "1930m", "3Gi");
const FILLER: (&str, &str, &str, &str) = ("filler", "low", "1000m", "256Mi");

/// `held_node_busy` plans so far, from the controller's `/metrics`.
async fn held_node_busy(c: &support::Controller) -> f64 {
    let metrics = http_get(c.health_port, "/metrics").await.unwrap();
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("resize_guard_preemptions_total{outcome=\"held_node_busy\"}")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
}

/// When the API server started deleting `pod` (its `deletionTimestamp` is that plus the grace
/// period), in seconds.
fn deleted_at(pod: &Pod) -> i64 {
    let m = &pod.metadata;
    m.deletion_timestamp.as_ref().unwrap().0.as_second() - m.deletion_grace_period_seconds.unwrap()
}

/// The notes of `PreemptionStalled` about pod `name`, waited for until 30 s past the stall
/// timeout.
async fn wait_stalled(env: &resize_guard_harness::env::Env, ns: &str, name: &str) -> Vec<String> {
    let timeout = Duration::from_secs(STALL_AFTER + 30);
    wait_notes(env, ns, "PreemptionStalled", name, timeout).await
}

/// Waits (at most `timeout`) until an Event with `reason` about pod `name` exists in `ns`;
/// returns its notes.
async fn wait_notes(
    env: &resize_guard_harness::env::Env,
    ns: &str,
    reason: &str,
    name: &str,
    timeout: Duration,
) -> Vec<String> {
    let deadline = Instant::now() + timeout;
    loop {
        let notes: Vec<String> = support::events(env, ns, reason)
            .await
            .into_iter()
            .filter(|e| e.0 == name)
            .map(|e| e.1)
            .collect();
        if !notes.is_empty() {
            return notes;
        }
        assert!(
            Instant::now() < deadline,
            "no {reason} Event for {name} in {ns} after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The suite's controller, leading, with `stallAfterSeconds` in force.
async fn stalling(env: &'static resize_guard_harness::env::Env) -> &'static support::Controller {
    let c = support::leading(&CONTROLLER, env, "e2e-stall").await;
    set_policy(
        env,
        &format!(
            "mode: enforce\npreemption:\n  enabled: true\n  stallAfterSeconds: {STALL_AFTER}\n"
        ),
    )
    .await;
    c.wait_policy(|p| p.contains(&format!("stallAfterSeconds: {STALL_AFTER}")))
        .await;
    c.wait_leading().await;
    c
}

#[tokio::test]
async fn a_victim_that_ignores_sigterm_stalls_its_resize_and_frees_the_node_for_the_next() {
    let env = shared(EnvOptions::default());
    let c = stalling(env).await;
    let _g = env.guard();

    // 1930m allocatable: filler 1000m (the older low pod), slow 400m (the younger), first and
    // second 250m each: 30m free.
    let (ns, node, pods) = env.scenario("stall", T3_MEDIUM, &[FILLER]).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut slow = stopping_after(guaranteed_pod("slow", &node, "low", "400m", "256Mi"), "10m");
    slow.spec.as_mut().unwrap().termination_grace_period_seconds = Some(600);
    create_running(&pods, &slow).await.unwrap();
    for name in ["first", "second"] {
        run_guaranteed(&pods, name, &node, "high", "250m", "256Mi").await;
    }
    let slow_history = support::History::start(&pods, "slow").await;
    let filler_history = support::History::start(&pods, "filler").await;

    // first: +300m. The fewest victims, the younger first: slow, which then stays terminating.
    support::resize_pending_on(env, &pods, &ns, "first", "550m").await;
    let slow_deleted = slow_history
        .wait(Duration::from_secs(30), |p| {
            p.metadata.deletion_timestamp.is_some()
        })
        .await;
    let slow_deleted_at = deleted_at(&slow_deleted);
    let held_before = held_node_busy(c).await;

    // second: +550m, more than slow frees: it needs filler too, and is planned only once
    // first's plan no longer claims the node.
    support::resize_pending_on(env, &pods, &ns, "second", "800m").await;
    let deadline = Instant::now() + Duration::from_secs(STALL_AFTER / 2);
    while held_node_busy(c).await <= held_before {
        assert!(
            Instant::now() < deadline,
            "second's plan was never held by first's claim on the node"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !crate::scenario::terminating(&pods, "filler").await,
        "filler was taken while first's plan held the node"
    );

    // first's stall: the Event says what it waits on, how long, and that the node is free.
    let notes = wait_stalled(env, &ns, "first").await;
    assert!(
        notes
            .iter()
            .any(|n| n.contains("its planned victims terminating")
                && n.contains(&format!("stallAfterSeconds ({STALL_AFTER}s)"))
                && n.contains(&format!("{ns}/slow"))
                && n.contains("claim is no longer held for it")),
        "{notes:?}"
    );

    // Then second's plan goes: filler is preempted by resize-guard while slow still terminates.
    let filler = filler_history
        .wait(Duration::from_secs(30), |p| {
            p.metadata.deletion_timestamp.is_some()
        })
        .await;
    let waited = deleted_at(&filler) - slow_deleted_at;
    assert!(
        waited >= STALL_AFTER as i64 - 1,
        "filler went {waited}s after slow, before first's stall released the node"
    );
    let planned = wait_notes(
        env,
        &ns,
        "PreemptingForResize",
        "second",
        Duration::from_secs(30),
    )
    .await;
    assert!(
        planned.iter().any(|n| n.contains(&format!("{ns}/filler"))),
        "{planned:?}"
    );
    // With filler's room the kubelet admits both resizes; slow is still terminating.
    for (name, cpu) in [("first", "550m"), ("second", "800m")] {
        wait_pod(&pods, name, Duration::from_secs(30), |p| {
            allocated_cpu(p).as_deref() == Some(cpu) && resize_pending(p).is_none()
        })
        .await
        .unwrap();
    }
    let slow = pods.get("slow").await.unwrap();
    assert!(
        slow.metadata.deletion_timestamp.is_some(),
        "slow still terminates: it ignores SIGTERM for its 600 s grace period"
    );
}

/// A pod its owner deleted that ignores SIGTERM (no plan named it) covers a Deferred resize's
/// shortfall: resize-guard waits for it rather than take another victim, and once
/// `stallAfterSeconds` passed says so in a `PreemptionStalled` Warning Event — still taking no
/// victim.
#[tokio::test]
async fn terminating_pods_nobody_planned_that_ignore_sigterm_stall_the_resize_with_an_event() {
    let env = shared(EnvOptions::default());
    stalling(env).await;
    let _g = env.guard();
    // filler 1000m (a victim resize-guard could take), leaving 400m (ignores SIGTERM), app 250m.
    let (ns, node, pods) = env.scenario("unplanned", T3_MEDIUM, &[FILLER]).await;
    let mut leaving = stopping_after(
        guaranteed_pod("leaving", &node, "low", "400m", "256Mi"),
        "10m",
    );
    leaving
        .spec
        .as_mut()
        .unwrap()
        .termination_grace_period_seconds = Some(600);
    create_running(&pods, &leaving).await.unwrap();
    run_guaranteed(&pods, "app", &node, "high", "250m", "256Mi").await;
    pods.delete("leaving", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    // +300m: the kubelet still counts leaving's 400m, resize-guard counts it as being freed.
    let asked = Instant::now();
    support::resize_pending_on(env, &pods, &ns, "app", "550m").await;
    let notes = wait_stalled(env, &ns, "app").await;
    let took = asked.elapsed();
    assert!(took >= Duration::from_secs(STALL_AFTER), "{took:?}");
    assert!(
        notes
            .iter()
            .any(|n| n.contains("terminating pods no plan of it named")
                && n.contains(&format!("{ns}/leaving"))
                && n.contains("chooses no other victim")),
        "{notes:?}"
    );
    let filler = pods.get("filler").await.unwrap();
    assert!(
        filler.metadata.deletion_timestamp.is_none(),
        "no victim was taken for room already being freed"
    );
    assert!(
        support::events(env, &ns, "PreemptingForResize")
            .await
            .is_empty(),
        "no plan was made"
    );
}
