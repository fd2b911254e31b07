//! Chaos on the real control plane, each asserting no victim beyond the plan, no double
//! preemption, and that the resize completes:
//! - a leader stopped (SIGSTOP: a long GC pause, a frozen VM) past its Lease wakes after another
//!   replica took over and acted: it writes nothing, however stale its cache and however many
//!   timers fired while it slept (checked in the API server's audit log, by user agent);
//! - kube-apiserver restarts in the middle of a multi-victim plan.
//!
//! Its own binary (its own control plane): these tests restart the API server and set
//! cluster-wide policies no other suite expects; they run one at a time.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::controller as support;
use crate::scenario::run_guaranteed;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use resize_guard_harness::env::{Env, alone};
use resize_guard_harness::install::{http_get, set_policy};
use resize_guard_harness::objects::*;

const T: Duration = Duration::from_secs(30);

/// One test at a time: they share the Lease, the policy and the API server they restart.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The API writes `identity` made at or after `since` (Leases and Events are not audited), as
/// `verb resource/subresource ns/name`.
fn writes_by(env: &Env, identity: &str, since: Timestamp) -> Vec<String> {
    let agent = format!("({identity})");
    env.cp
        .audit_events()
        .iter()
        .filter(|e| e["userAgent"].as_str().is_some_and(|a| a.contains(&agent)))
        .filter(|e| {
            matches!(
                e["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete" | "deletecollection")
            )
        })
        .filter(|e| {
            e["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<Timestamp>().ok())
                .is_some_and(|t| t >= since)
        })
        .map(|e| {
            let o = &e["objectRef"];
            format!(
                "{} {}/{} {}/{}",
                e["verb"].as_str().unwrap_or_default(),
                o["resource"].as_str().unwrap_or_default(),
                o["subresource"].as_str().unwrap_or_default(),
                o["namespace"].as_str().unwrap_or_default(),
                o["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

fn signal(sig: &str, pid: u32) {
    let status = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {sig} {pid}");
}

async fn wait_log(c: &support::Controller, needle: &str, what: &str) {
    let deadline = Instant::now() + T;
    while !c.process.log_tail(200_000).contains(needle) {
        assert!(
            Instant::now() < deadline,
            "{what}; log tail:\n{}",
            c.process.log_tail(4000)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_leader_stopped_past_its_lease_writes_nothing_when_it_wakes() {
    let (env, _alone) = alone(&SERIAL).await;
    let old = support::start(env, "stopped-a").await;
    assert!(old.leads_within(400).await, "stopped-a never led");
    let new = support::start(env, "stopped-b").await;
    // Every Deferred resize waits 8 s before anyone preempts for it: the leader is frozen while
    // its timer for the resize is pending, and that timer has long fired when it wakes. (Set
    // after both started: installing resets the policy.)
    set_policy(
        env,
        "mode: enforce\npreemption:\n  enabled: true\n  minDeferredSeconds: 8\n",
    )
    .await;
    for c in [&old, &new] {
        c.wait_policy(|p| p.contains("minDeferredSeconds: 8")).await;
    }

    let (ns, _node, pods) = env
        .scenario(
            "frozen",
            ("n", "1930m", "3Gi"),
            &[
                ("filler", "low", "800m", "256Mi"),
                ("spare", "low", "700m", "256Mi"),
                ("app", "high", "250m", "256Mi"),
            ],
        )
        .await;
    support::resize_pending_on(env, &pods, &ns, "app", "900m").await;
    // The leader has judged the resize and set its timer: freeze it now.
    wait_log(
        &old,
        "waiting minDeferredSeconds",
        "the leader never started waiting out minDeferredSeconds",
    )
    .await;
    signal("-STOP", old.process.pid());

    let took_over = new.leads_within(300).await;
    assert!(
        took_over,
        "stopped-b never took over from the frozen leader"
    );
    wait_pod(&pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("900m")
    })
    .await
    .unwrap();
    let by_new = writes_by(env, &new.identity, Timestamp::UNIX_EPOCH);
    assert!(
        by_new.iter().any(|w| w.starts_with("create pods/eviction")),
        "the audit log names the new leader's evictions (else this test could not see the old one's): {by_new:?}"
    );
    let victims = support::preempted(&pods, &["filler", "spare"]).await;
    assert_eq!(victims.len(), 1, "one victim frees 650m: {victims:?}");

    // Wake the old leader: its minDeferredSeconds timer fired long ago and its cache still says
    // the resize is Deferred. Its fence passed while it was frozen: it must stop, writing nothing.
    let woke = Timestamp::now();
    signal("-CONT", old.process.pid());
    wait_log(
        &old,
        "lost leadership",
        "the woken leader never noticed it lost the Lease",
    )
    .await;
    assert!(!old.is_leader().await && new.is_leader().await);
    let after = writes_by(env, &old.identity, woke);
    let fenced = http_get(old.health_port, "/metrics")
        .await
        .map(|m| crate::scenario::metric_line(&m, "resize_guard_fenced_writes_total"));
    eprintln!(
        "frozen leader: {} writes after waking ({fenced:?})",
        after.len()
    );
    assert_eq!(after, Vec::<String>::new(), "the woken leader wrote");
    assert_eq!(
        support::preempted(&pods, &["filler", "spare"]).await,
        victims,
        "no victim beyond the plan"
    );
}

#[tokio::test]
async fn an_api_server_restart_mid_plan_neither_loses_the_plan_nor_adds_a_victim() {
    let (env, _alone) = alone(&SERIAL).await;
    let controller = support::start(env, "restart").await;
    set_policy(env, "mode: enforce\n").await;
    controller
        .wait_policy(|p| p.contains("minDeferredSeconds: 0"))
        .await;
    let deadline = Instant::now() + T;
    while !controller.is_leader().await {
        assert!(Instant::now() < deadline, "the controller never led");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (ns, node, pods) = env.scenario("apirestart", ("n", "2500m", "4Gi"), &[]).await;
    let names = ["v1", "v2", "v3", "v4"];
    for name in names {
        // Each victim takes 3 s to stop, so the plan is still in flight across the restart.
        let p = stopping_after(guaranteed_pod(name, &node, "low", "500m", "64Mi"), "3s");
        create_running(&pods, &p).await.unwrap();
    }
    run_guaranteed(&pods, "app", &node, "high", "250m", "64Mi").await;
    env.try_resize_cpu(&ns, "app", "1250m").await;
    // The plan is recorded before any victim is touched; restart once a victim is terminating.
    let deadline = Instant::now() + T;
    while support::preempted(&pods, &names).await.is_empty() {
        assert!(Instant::now() < deadline, "nothing was preempted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let plan = |p: &Pod| -> Vec<String> {
        p.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("resize-guard.io/preemption"))
            .and_then(|raw| serde_json::from_str::<serde_json::Value>(raw).ok())
            .map(|v| {
                // The victims are in the preemptor's namespace: named in the clear part.
                v["own"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut planned = plan(&pods.get("app").await.unwrap());
    assert_eq!(planned.len(), 2, "a two-victim plan: {planned:?}");
    let restarted = Instant::now();
    env.cp.restart_apiserver().unwrap();
    eprintln!(
        "kube-apiserver restarted in {:.1} s mid-plan",
        restarted.elapsed().as_secs_f64()
    );
    wait_pod(&pods, "app", Duration::from_secs(90), |p| {
        allocated_cpu(p).as_deref() == Some("1250m")
    })
    .await
    .unwrap();
    let mut gone = support::preempted(&pods, &names).await;
    gone.sort();
    planned.sort();
    assert_eq!(gone, planned, "exactly the plan's victims, none extra");
    // No double preemption: one eviction per victim in the audit log.
    let evictions: Vec<String> = env
        .cp
        .audit_events()
        .iter()
        .filter(|e| {
            e["verb"] == "create"
                && e["objectRef"]["subresource"] == "eviction"
                && e["objectRef"]["namespace"] == ns.as_str()
        })
        .filter_map(|e| e["objectRef"]["name"].as_str().map(str::to_owned))
        .collect();
    let mut once = evictions.clone();
    once.sort();
    once.dedup();
    assert_eq!(
        once.len(),
        evictions.len(),
        "each victim evicted once: {evictions:?}"
    );
    assert_eq!(once, planned);
}
