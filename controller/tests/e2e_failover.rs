//! Restarts and failover: a recorded plan is resumed, not re-chosen (no extra victims), only the
//! Lease holder acts, and a follower takes over when the leader dies — on hollow nodes
//! (upstream's v1.37.2 kubelet), which retry a Deferred resize when a victim is removed.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::objects::*;
use serde_json::json;

const T: Duration = Duration::from_secs(30);

/// These tests start and kill controller replicas that share one Lease: they run one at a time so
/// that no replica of another test acts on this test's pods.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn a_restarted_controller_resumes_the_recorded_plan_and_takes_no_extra_victims() {
    let env = shared(EnvOptions::default());
    let _serial = SERIAL.lock().await;
    let _g = env.guard();
    let ns = env.namespace("resume").await;
    let node = env.node("n", "2500m", "4Gi").await;
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    for name in ["v1", "v2", "v3", "v4"] {
        create_running(&pods, &guaranteed_pod(name, &node, "low", "500m", "64Mi"))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(1100)).await; // distinct start times
    }
    create_running(&pods, &guaranteed_pod("app", &node, "high", "250m", "64Mi"))
        .await
        .unwrap();
    env.kubectl()
        .resize(&ns, "app", &cpu_resize("1250m"))
        .await
        .unwrap();
    wait_pod(&pods, "app", T, |p| resize_pending(p).is_some())
        .await
        .unwrap();

    // What a controller that died mid-plan left behind: a plan naming v1 and v2 (a fresh plan
    // would pick the youngest, v4 and v3), with v1 already terminating.
    let uid = |p: Pod| p.metadata.uid.unwrap();
    let (u1, u2) = (
        uid(pods.get("v1").await.unwrap()),
        uid(pods.get("v2").await.unwrap()),
    );
    let plan = json!({"generation": 2, "time": "2026-11-30T00:00:00Z", "victims": [
        {"namespace": ns, "name": "v1", "uid": u1}, {"namespace": ns, "name": "v2", "uid": u2}]});
    let patch =
        json!({"metadata": {"annotations": {"resize-guard.io/preemption": plan.to_string()}}});
    pods.patch("app", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    pods.delete(
        "v1",
        &DeleteParams {
            grace_period_seconds: Some(40),
            ..Default::default()
        },
    )
    .await
    .unwrap();

    let c = support::start(env, "resume").await;
    // Admitted, and the plan cleared: the controller saw the resize through and is done with it.
    wait_pod(&pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("1250m") && !support::has_plan(p)
    })
    .await
    .unwrap();
    assert_eq!(
        support::preempted(&pods, &["v1", "v2", "v3", "v4"]).await,
        ["v1", "v2"],
        "resumed, nothing extra"
    );
    // The Preempted Event is published after the eviction, off the critical path: count once
    // v2's is there (the plan was cleared after both evictions, so any other would be too).
    let preempted = support::wait_event_for(env, &ns, "Preempted", "v2").await;
    assert_eq!(
        preempted.len(),
        1,
        "only v2 needed preempting: {preempted:?}"
    );
    assert_eq!(preempted[0].0, "v2");
    drop(c);
}

#[tokio::test]
async fn only_the_leader_acts_and_a_follower_takes_over_when_it_dies() {
    let env = shared(EnvOptions::default());
    let _serial = SERIAL.lock().await;
    let _g = env.guard();
    let a = support::start(env, "replica-a").await;
    let b = support::start(env, "replica-b").await;
    let mut leader = None;
    // (Another test's replica may hold the Lease for a while: wait it out.)
    for _ in 0..400 {
        match (a.is_leader().await, b.is_leader().await) {
            (true, false) => leader = Some("replica-a"),
            (false, true) => leader = Some("replica-b"),
            (true, true) => panic!(
                "two leaders:\n{:?}\n{:?}",
                resize_guard_harness::install::http_get(a.health_port, "/metrics").await,
                resize_guard_harness::install::http_get(b.health_port, "/metrics").await
            ),
            _ => {}
        }
        if leader.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let leader = leader.expect("a leader");

    let (ns, _node, pods) = env.field_test("leader").await;
    env.kubectl()
        .resize(&ns, "app", &cpu_resize("550m"))
        .await
        .unwrap();
    // Admitted, and the plan cleared: the leader has seen the resize through, so every replica
    // had its chance to act by now.
    wait_pod(&pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("550m") && !support::has_plan(p)
    })
    .await
    .unwrap();
    let acted = support::wait_event(env, &ns, "PreemptingForResize").await;
    assert!(
        acted.iter().all(|e| e.2 == leader),
        "only {leader} acts: {acted:?}"
    );

    // Kill the leader without letting it release the Lease; the follower must take over within
    // the lease duration (4 s) plus a renew interval.
    let (dead, follower) = if leader == a.identity {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let killed = Instant::now();
    std::process::Command::new("kill")
        .args(["-KILL", &dead.process.pid().to_string()])
        .status()
        .unwrap();
    let mut took_over = None;
    for _ in 0..200 {
        if follower.is_leader().await {
            took_over = Some(killed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took_over = took_over.expect("the follower never took over");
    eprintln!(
        "failover: {} took the lease {:.1} s after the leader was killed",
        follower.identity,
        took_over.as_secs_f64()
    );
    // Lease duration (4 s) + one renew interval (1 s) + the follower's retry period (1 s), with
    // slack for a loaded 2-core machine.
    assert!(took_over < Duration::from_secs(12), "{took_over:?}");

    let (ns2, _node2, pods2) = env.field_test("failover").await;
    env.kubectl()
        .resize(&ns2, "app", &cpu_resize("550m"))
        .await
        .unwrap();
    wait_pod(&pods2, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("550m") && !support::has_plan(p)
    })
    .await
    .unwrap();
    let acted = support::wait_event(env, &ns2, "PreemptingForResize").await;
    assert!(acted.iter().all(|e| e.2 == follower.identity), "{acted:?}");
}

#[tokio::test]
async fn killed_right_after_the_first_eviction_a_new_replica_finishes_the_same_plan() {
    let env = shared(EnvOptions::default());
    let _serial = SERIAL.lock().await;
    let _g = env.guard();
    let ns = env.namespace("crash").await;
    let node = env.node("n", "2500m", "4Gi").await;
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    for name in ["v1", "v2", "v3", "v4"] {
        let mut p = guaranteed_pod(name, &node, "low", "500m", "64Mi");
        p.spec.as_mut().unwrap().termination_grace_period_seconds = Some(30);
        create_running(&pods, &p).await.unwrap();
    }
    create_running(&pods, &guaranteed_pod("app", &node, "high", "250m", "64Mi"))
        .await
        .unwrap();
    // Wait for any other test's replica to let go of the Lease, so this one leads.
    let first = support::start(env, "crash-1").await;
    for _ in 0..400 {
        if first.is_leader().await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(first.is_leader().await);
    env.kubectl()
        .resize(&ns, "app", &cpu_resize("1250m"))
        .await
        .unwrap();
    // SIGKILL the moment the first victim starts terminating.
    loop {
        if !support::preempted(&pods, &["v1", "v2", "v3", "v4"])
            .await
            .is_empty()
        {
            std::process::Command::new("kill")
                .args(["-KILL", &first.process.pid().to_string()])
                .status()
                .unwrap();
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let plan: serde_json::Value = serde_json::from_str(
        &pods.get("app").await.unwrap().metadata.annotations.unwrap()["resize-guard.io/preemption"],
    )
    .unwrap();
    let planned: Vec<String> = plan["victims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(planned.len(), 2, "{plan}");
    let _second = support::start(env, "crash-2").await;
    // Admitted, and the plan cleared by the new replica: it has finished with the resize, so any
    // extra victim it would take is taken by now.
    wait_pod(&pods, "app", Duration::from_secs(60), |p| {
        allocated_cpu(p).as_deref() == Some("1250m") && !support::has_plan(p)
    })
    .await
    .unwrap();
    let mut gone = support::preempted(&pods, &["v1", "v2", "v3", "v4"]).await;
    gone.sort();
    let mut planned = planned;
    planned.sort();
    assert_eq!(
        gone, planned,
        "exactly the recorded plan's victims, none extra"
    );
}
