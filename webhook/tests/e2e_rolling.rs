//! A rolling restart of the webhook under a steady stream of resizes fails no review.
//!
//! resize-guard is installed from `deploy/` with the webhook configurations as shipped: they name
//! the Service `resize-guard/resize-guard-webhook`, and kube-apiserver (run with
//! `--enable-aggregator-routing`) calls a ready endpoint of the Service's EndpointSlices with its
//! own resolver (`k8s.io/apiserver/pkg/util/proxy.ResolveEndpoint`, a random ready endpoint per
//! call). Two webhook replicas run as local processes, serving the certificate the controller
//! issues for the Service's DNS names. No kubelet runs them, so the test does what the kubelet and
//! the EndpointSlice controller would do for a rolling update of `deploy/base/webhook.yaml`: a
//! replica being replaced is marked terminating (`ready: false`) in its EndpointSlice, gets the
//! manifest's `preStop` sleep, then SIGTERM; its replacement is published once its `/readyz`
//! says so (the manifest's readiness probe). Every resize of the stream must carry the
//! webhook's audit annotation — a call that failed open would leave it out — and the API
//! server's own fail-open counter must not move.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::install::{Install, http_get, install, repo_root};
use resize_guard_harness::objects::*;
use resize_guard_harness::replica::Replica;

const T: Duration = Duration::from_secs(60);

/// What `deploy/base/webhook.yaml` gives a terminating webhook pod: the `preStop` sleep.
fn shipped_pre_stop() -> Duration {
    let text = std::fs::read_to_string(repo_root().join("deploy/base/webhook.yaml")).unwrap();
    let deployment: serde_yaml_ng::Value = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .find(|d: &serde_yaml_ng::Value| d["kind"] == "Deployment")
        .expect("the webhook Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let seconds = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .expect("a preStop sleep in deploy/base/webhook.yaml");
    Duration::from_secs(seconds)
}

/// Starts a replica and publishes it once ready.
async fn bring_up(env: &Env, name: &str) -> Replica {
    Replica::bring_up(env, env!("CARGO_BIN_EXE_resize-guard-webhook"), name, T)
        .await
        .unwrap()
}

/// Replaces `old` as a rolling update does: terminating (not ready) in its slice, the preStop
/// sleep, SIGTERM, exit, slice gone; the replacement is started and published first
/// (`maxSurge`), so one replica is always ready.
async fn roll(env: &Env, mut old: Replica, new_name: &str, pre_stop: Duration) -> Replica {
    let new = bring_up(env, new_name).await;
    old.publish(env, false, true).await.unwrap();
    tokio::time::sleep(pre_stop).await; // the kubelet's preStop sleep, as shipped
    let pid = old.process.pid().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + T;
    while old.process.is_running() {
        assert!(Instant::now() < deadline, "{} did not exit", old.name);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    old.unpublish(env).await.unwrap();
    new
}

/// `apiserver_admission_webhook_fail_open_count` summed over resize-guard's webhooks.
fn fail_open(env: &Env) -> f64 {
    let metrics = env.cp.get_blocking("/metrics").unwrap_or_default();
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_admission_webhook_fail_open_count")
                && l.contains("resize-guard.io")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_under_a_steady_stream_of_resizes_fails_no_review() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let pre_stop = shipped_pre_stop();
    install(
        env,
        &Install {
            through_service: true,
            ..Default::default()
        },
    )
    .await;
    // The controller keeps the CA, the serving Secret (for the Service's DNS names) and caBundle.
    let controller = support::controller(env, "rolling", &[]).await;
    let a = bring_up(env, "replica-a").await;
    let b = bring_up(env, "replica-b").await;

    let (ns, _, _) = env
        .scenario(
            "rolling",
            ("roomy", "8", "16Gi"),
            &[("steady", "high", "250m", "256Mi")],
        )
        .await;
    // Through the Service: the first resize that resize-guard judges (its audit annotation).
    let k = env.kubectl();
    let deadline = Instant::now() + T;
    loop {
        let out = k
            .resize_dry_run(&ns, "steady", &cpu_resize("260m"))
            .await
            .unwrap();
        if out.stderr.contains("resize-guard") || reviewed_resizes(env, &ns).0 > 0 {
            break;
        }
        let real = k.resize(&ns, "steady", &cpu_resize("260m")).await.unwrap();
        assert!(real.success, "{}", real.stderr);
        if reviewed_resizes(env, &ns).0 > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "resize-guard never answered through the Service: {}",
            http_get(a.health, "/readyz").await.unwrap_or_else(|e| e)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let fail_open_before = fail_open(env);
    let stored_before = reviewed_resizes(env, &ns);

    // The steady stream.
    let sent = Arc::new(Mutex::new((0usize, Vec::<String>::new())));
    let (stop_stream, mut stream_stopped) = tokio::sync::oneshot::channel::<()>();
    let stream = {
        let (sent, ns) = (sent.clone(), ns.clone());
        tokio::spawn(async move {
            let k = env.kubectl();
            for i in 0u32.. {
                if stream_stopped.try_recv().is_ok() {
                    break;
                }
                let cpu = format!("{}m", 300 + 10 * (i % 30));
                let out = k.resize(&ns, "steady", &cpu_resize(&cpu)).await.unwrap();
                let mut s = sent.lock().unwrap();
                s.0 += 1;
                if !out.success {
                    s.1.push(out.stderr);
                }
            }
        })
    };
    let a2 = roll(env, a, "replica-a2", pre_stop).await;
    let b2 = roll(env, b, "replica-b2", pre_stop).await;
    let _ = stop_stream.send(());
    stream.await.unwrap();

    let (count, failures) = sent.lock().unwrap().clone();
    assert!(failures.is_empty(), "resizes failed: {failures:?}");
    // Each stored resize was reviewed by the webhook (its audit annotation is on it).
    let (stored, reviewed) = reviewed_resizes(env, &ns);
    let (stored, reviewed) = (stored - stored_before.0, reviewed - stored_before.1);
    let opened = fail_open(env) - fail_open_before;
    eprintln!(
        "rolling restart of 2 replicas (preStop {pre_stop:?}): {count} resizes sent, {stored} stored, \
         {reviewed} reviewed by the webhook, {opened} failed open"
    );
    assert!(count >= 10, "a steady stream: {count}");
    assert_eq!(reviewed, stored, "every stored resize was reviewed twice");
    assert_eq!(opened, 0.0, "no webhook call failed open");

    drop((a2, b2));
    controller.stop().await;
}

/// Stored resizes of `steady` in `ns` (audit `ResponseComplete`, 200), and how many of them
/// carry the webhook's decision annotation.
fn reviewed_resizes(env: &Env, ns: &str) -> (usize, usize) {
    let events = support::resize_audit(env, ns, "steady");
    let stored: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["responseStatus"]["code"] == 200 && e["verb"] == "patch")
        .collect();
    let reviewed = stored
        .iter()
        .filter(|e| {
            let a = &e["annotations"];
            a["mutate.resize-guard.io/decision"].is_string()
        })
        .count();
    (stored.len(), reviewed)
}
