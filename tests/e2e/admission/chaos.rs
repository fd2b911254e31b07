//! Chaos on the real control plane, webhook side: etcd paused while a steady stream of resizes is
//! being reviewed. The API server cannot store anything meanwhile; resize-guard must neither
//! refuse a resize because of the outage nor stop guarding after it: every resize of the stream
//! is eventually admitted, none is denied by resize-guard, and the controller, which lost its
//! watches' progress during the pause, still makes room for a Deferred resize afterwards.
//! Its own binary: pausing etcd stalls every other test sharing the control plane.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::webhook as support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use resize_guard_harness::admission::Webhooks;
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::objects::*;

const T: Duration = Duration::from_secs(60);

/// One resize of the stream: when it was sent (relative to the start), whether it was stored,
/// and what kubectl said.
#[derive(Debug, Clone)]
struct Outcome {
    sent: Duration,
    stored: bool,
    stderr: String,
}

fn signal(sig: &str, pid: u32) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

#[tokio::test]
async fn a_paused_etcd_neither_makes_resize_guard_refuse_resizes_nor_stops_its_preemption() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let hook = support::start(env, Webhooks::Mutating).await;
    let controller = support::controller(env, "chaos-etcd", &["--certificates=external"]).await;
    resize_guard_harness::install::wait_ready(controller.health_port, &hook.process, T).await;

    // A pod with room to grow, resized back and forth for the whole test.
    let (ns, _, _) = support::steady(env, "etcd").await;
    let outcomes: Arc<Mutex<Vec<Outcome>>> = Arc::default();
    let (stream_stop, mut stream_stopped) = tokio::sync::oneshot::channel::<()>();
    let stream = {
        let (outcomes, ns) = (outcomes.clone(), ns.clone());
        tokio::spawn(async move {
            let k = env.kubectl();
            let start = Instant::now();
            for i in 0u32.. {
                if stream_stopped.try_recv().is_ok() {
                    break;
                }
                let cpu = format!("{}m", 300 + 10 * (i % 20));
                let sent = start.elapsed();
                let out = k.resize(&ns, "steady", &cpu_resize(&cpu)).await.unwrap();
                outcomes.lock().unwrap().push(Outcome {
                    sent,
                    stored: out.success,
                    stderr: out.stderr,
                });
            }
        })
    };
    let stored =
        |o: &Arc<Mutex<Vec<Outcome>>>| o.lock().unwrap().iter().filter(|o| o.stored).count();
    let wait_stored = |n: usize| {
        let outcomes = outcomes.clone();
        async move {
            let deadline = Instant::now() + T;
            while stored(&outcomes) < n {
                assert!(
                    Instant::now() < deadline,
                    "only {} resizes stored",
                    stored(&outcomes)
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    wait_stored(5).await;

    // Pause etcd for 8 s (the outage itself, not a wait for an outcome).
    signal("-STOP", env.cp.etcd_pid());
    tokio::time::sleep(Duration::from_secs(8)).await;
    signal("-CONT", env.cp.etcd_pid());
    let before_resume = stored(&outcomes);
    wait_stored(before_resume + 10).await;
    let _ = stream_stop.send(());
    stream.await.unwrap();

    let all = outcomes.lock().unwrap().clone();
    let refused: Vec<&Outcome> = all
        .iter()
        .filter(|o| !o.stored && o.stderr.contains("resize-guard"))
        .collect();
    let failed: Vec<&Outcome> = all.iter().filter(|o| !o.stored).collect();
    eprintln!(
        "etcd paused 8 s: {} resizes sent, {} stored, {} failed ({:?})",
        all.len(),
        all.len() - failed.len(),
        failed.len(),
        failed
            .iter()
            .map(|o| (o.sent, o.stderr.trim()))
            .collect::<Vec<_>>()
    );
    assert!(refused.is_empty(), "resize-guard refused: {refused:?}");

    // The controller still makes room for a Deferred resize (the field test's third wall).
    let (ns2, _node, pods2) = support::field_test(env, "etcd-after").await;
    env.try_resize_cpu(&ns2, "app", "550m").await;
    wait_pod(&pods2, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("550m")
    })
    .await
    .unwrap();
    controller.stop().await;
    drop(hook);
}
