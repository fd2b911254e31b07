//! End-to-end resize latency through a real kube-apiserver v1.37.2: `PATCH pods/resize`
//! answered (stored) with both resize-guard webhooks installed vs none, measured in one run on
//! the same control plane, alternating blocks to spread noise. Prints p50/p99 and the ratio.
//!
//! Resizes rotate over 40 pods so that no resize races the kubelet's status update of
//! the previous one on the same pod (a conflict makes the API server retry the patch and run
//! admission again, which would measure the race rather than the webhooks).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use resize_guard_harness::admission::{Webhooks, register, remove};
use resize_guard_harness::bench::{ms, percentile, write_summary};
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::objects::{create_running, guaranteed_pod};
use resize_guard_webhook::args::Args;
use serde_json::json;

const ROUNDS: usize = 6;

const PER_BLOCK: usize = 50;

const PODS: usize = 40;

async fn resize(pods: &Api<Pod>, name: &str, cpu: &str) -> Duration {
    let patch = json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}});
    let t = Instant::now();
    pods.patch_subresource(
        "resize",
        name,
        &PatchParams::default(),
        &Patch::Strategic(patch),
    )
    .await
    .unwrap();
    t.elapsed()
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = shared(EnvOptions::default());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = env.client().await;
        // The webhook, embedded, reading the cluster as admin.
        let bundle = resize_guard_certs::generate(&resize_guard_certs::CertSpec::for_loopback()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        resize_guard_certs::write_dir(&bundle, dir.path()).unwrap();
        let port = resize_guard_harness::process::free_port().unwrap();
        let health_port = resize_guard_harness::process::free_port().unwrap();
        eprintln!("webhook metrics: http://127.0.0.1:{health_port}/metrics");
        let args = <Args as clap::Parser>::parse_from([
            "resize-guard-webhook",
            &format!("--tls-addr=127.0.0.1:{port}"),
            &format!("--health-addr=127.0.0.1:{health_port}"),
            &format!("--cert-dir={}", dir.path().display()),
        ]);
        eprintln!("embedded webhook on 127.0.0.1:{port}");
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(resize_guard_webhook::server::serve(args, client.clone(), async move {
            let _ = stop_rx.await;
        }));
        tokio::time::sleep(Duration::from_secs(1)).await;

        let ns = env.namespace("bench").await;
        let node = env.node("bench", "64", "256Gi").await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        for i in 0..PODS {
            create_running(&pods, &guaranteed_pod(&format!("app-{i}"), &node, "high", "250m", "256Mi")).await.unwrap();
        }
        let mut next = 0usize;
        let mut without = Vec::new();
        let mut with = Vec::new();
        let mut cpu = 250;
        for round in 0..ROUNDS {
            for installed in [false, true] {
                if installed {
                    register(env, &format!("https://127.0.0.1:{port}"), &bundle.ca_bundle_base64(), Webhooks::Both)
                        .await
                        .unwrap();
                } else {
                    remove(&client).await.unwrap();
                }
                // Let the API server's informer pick up the change, then warm up.
                tokio::time::sleep(Duration::from_millis(1500)).await;
                for _ in 0..5 {
                    cpu += 1;
                    next += 1;
                    resize(&pods, &format!("app-{}", next % PODS), &format!("{cpu}m")).await;
                }
                for _ in 0..PER_BLOCK {
                    cpu += 1;
                    next += 1;
                    let d = resize(&pods, &format!("app-{}", next % PODS), &format!("{cpu}m")).await;
                    if installed { with.push(d) } else { without.push(d) }
                }
            }
            eprintln!("round {}/{ROUNDS} done", round + 1);
        }
        remove(&client).await.unwrap();
        let _ = stop_tx.send(());
        let _ = server.await;
        without.sort();
        with.sort();
        let (a50, a99) = (percentile(&without, 0.5), percentile(&without, 0.99));
        let (b50, b99) = (percentile(&with, 0.5), percentile(&with, 0.99));
        let ratio = b50.as_secs_f64() / a50.as_secs_f64();
        println!("\n3. resize latency through kube-apiserver v1.37.2 ({} resizes each, fitting, {PODS}-pod node)", with.len());
        println!("   {:<22} {:>9} {:>9}", "", "p50 ms", "p99 ms");
        println!("   {:<22} {:>9.3} {:>9.3}", "no webhooks", ms(a50), ms(a99));
        println!("   {:<22} {:>9.3} {:>9.3}", "both webhooks", ms(b50), ms(b99));
        println!("   ratio (p50) {ratio:.3}x   ratio (p99) {:.3}x", b99.as_secs_f64() / a99.as_secs_f64());
        write_summary("resize_latency", &json!({
            "resizes_each": with.len(),
            "without": {"p50_ms": ms(a50), "p99_ms": ms(a99)},
            "with_both_webhooks": {"p50_ms": ms(b50), "p99_ms": ms(b99)},
            "ratio_p50": (ratio * 1000.0).round() / 1000.0,
            "ratio_p99": (b99.as_secs_f64() / a99.as_secs_f64() * 1000.0).round() / 1000.0,
        }));
    });
}
