//! End-to-end resize latency through a real kube-apiserver v1.37.2: `PATCH pods/resize` answered
//! (stored) under four webhook layouts, measured in one run on the same control plane, in
//! alternating blocks to spread noise:
//!
//! | layout | what is registered |
//! |---|---|
//! | none | no webhook configuration |
//! | no-op | `deploy/`'s MutatingWebhookConfiguration pointed at a minimal always-allow HTTPS webhook written here (same TLS stack: rustls/ring, h2 + HTTP/1.1, TCP_NODELAY; same configuration fields): the floor any webhook pays |
//! | resize-guard | `deploy/` as shipped: the mutating webhook alone, one call per resize |
//! | resize-guard, two calls | the pre-0.2 layout, the mutating and the validating webhook, for reference |
//!
//! Prints p50/p99 per layout, the latency each adds over `none`, and resize-guard's added latency
//! as a ratio of the no-op webhook's (goal ≤ 1.1×). Writes `target/bench/resize_latency.json`.
//!
//! Resizes rotate over 40 pods so that no resize races the kubelet's status update of the
//! previous one on the same pod (a conflict makes the API server retry the patch and run
//! admission again, which would measure the race rather than the webhooks).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use resize_guard_harness::admission::{Webhooks, register, remove};
use resize_guard_harness::bench::{ms, percentile, write_summary};
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::objects::{create_running, guaranteed_pod};
use resize_guard_webhook::args::Args;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};

const ROUNDS: usize = 6;

const PER_BLOCK: usize = 50;

const PODS: usize = 40;

/// The registered layouts, in the order each round measures them.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Layout {
    None,
    NoOp,
    ResizeGuard,
    TwoCalls,
}

impl Layout {
    const ALL: [Layout; 4] = [
        Layout::None,
        Layout::NoOp,
        Layout::ResizeGuard,
        Layout::TwoCalls,
    ];

    fn label(self) -> &'static str {
        match self {
            Layout::None => "no webhook",
            Layout::NoOp => "no-op webhook",
            Layout::ResizeGuard => "resize-guard",
            Layout::TwoCalls => "resize-guard, 2 calls",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Layout::None => "none",
            Layout::NoOp => "noop",
            Layout::ResizeGuard => "resize_guard",
            Layout::TwoCalls => "resize_guard_two_calls",
        }
    }
}

/// The always-allow answer to an AdmissionReview: its uid, `allowed: true`, nothing else.
async fn allow(body: Bytes) -> axum::Json<Value> {
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    axum::Json(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": true},
    }))
}

/// Serves the no-op webhook on `addr` with `bundle`'s serving certificate, as the real webhook
/// serves (rustls with ring, TLS 1.3/1.2, h2 and HTTP/1.1, TCP_NODELAY).
async fn serve_noop(
    addr: SocketAddr,
    bundle: &resize_guard_certs::Bundle,
) -> axum_server::Handle<SocketAddr> {
    let certs = CertificateDer::pem_slice_iter(bundle.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(bundle.key_pem.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tls = axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(config));
    let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(tls)
        .acceptor(axum_server::accept::NoDelayAcceptor::new());
    let handle = axum_server::Handle::new();
    let app = Router::new()
        .route("/mutate", post(allow))
        .route("/validate", post(allow));
    let h = handle.clone();
    tokio::spawn(async move {
        axum_server::bind(addr)
            .acceptor(acceptor)
            .handle(h)
            .serve(app.into_make_service())
            .await
            .unwrap();
    });
    handle
}

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

/// Registers `layout` (everything else removed first).
async fn install(env: &Env, layout: Layout, webhook: &str, noop: &str, ca: &str, noop_ca: &str) {
    remove(&env.client().await).await.unwrap();
    match layout {
        Layout::None => {}
        Layout::NoOp => register(env, noop, noop_ca, Webhooks::Mutating)
            .await
            .unwrap(),
        Layout::ResizeGuard => register(env, webhook, ca, Webhooks::Mutating)
            .await
            .unwrap(),
        Layout::TwoCalls => {
            register(env, webhook, ca, Webhooks::Mutating)
                .await
                .unwrap();
            // The overlay's output lacks the mutating configuration; applying it adds the
            // validating one and leaves the mutating one in place (no pruning).
            register(env, webhook, ca, Webhooks::ValidatingOnly)
                .await
                .unwrap();
        }
    }
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
        let deadline = Instant::now() + Duration::from_secs(30);
        while resize_guard_harness::install::http_get(health_port, "/readyz").await.is_err() {
            assert!(Instant::now() < deadline, "the embedded webhook never became ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let noop_bundle = resize_guard_certs::generate(&resize_guard_certs::CertSpec::for_loopback()).unwrap();
        let noop_port = resize_guard_harness::process::free_port().unwrap();
        let noop = serve_noop(([127, 0, 0, 1], noop_port).into(), &noop_bundle).await;
        eprintln!("no-op webhook on 127.0.0.1:{noop_port}");
        let (webhook_url, noop_url) = (format!("https://127.0.0.1:{port}"), format!("https://127.0.0.1:{noop_port}"));
        let (ca, noop_ca) = (bundle.ca_bundle_base64(), noop_bundle.ca_bundle_base64());

        let ns = env.namespace("bench").await;
        let node = env.node("bench", "64", "256Gi").await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        for i in 0..PODS {
            create_running(&pods, &guaranteed_pod(&format!("app-{i}"), &node, "high", "250m", "256Mi")).await.unwrap();
        }
        let mut next = 0usize;
        let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); Layout::ALL.len()];
        let mut cpu = 250;
        for round in 0..ROUNDS {
            for (i, layout) in Layout::ALL.into_iter().enumerate() {
                install(env, layout, &webhook_url, &noop_url, &ca, &noop_ca).await;
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
                    samples[i].push(d);
                }
            }
            eprintln!("round {}/{ROUNDS} done", round + 1);
        }
        remove(&client).await.unwrap();
        noop.shutdown();
        let _ = stop_tx.send(());
        let _ = server.await;
        for s in &mut samples {
            s.sort();
        }
        let p = |i: usize, q: f64| ms(percentile(&samples[i], q));
        let (base50, base99) = (p(0, 0.5), p(0, 0.99));
        let added = |i: usize| (p(i, 0.5) - base50, p(i, 0.99) - base99);
        println!(
            "\n3. resize latency through kube-apiserver v1.37.2 ({} resizes per layout, fitting, {PODS}-pod node)",
            samples[0].len()
        );
        println!("   {:<24} {:>9} {:>9} {:>11} {:>11}", "", "p50 ms", "p99 ms", "+p50 ms", "+p99 ms");
        let mut layouts = serde_json::Map::new();
        for (i, layout) in Layout::ALL.into_iter().enumerate() {
            let (a50, a99) = added(i);
            println!("   {:<24} {:>9.3} {:>9.3} {:>11.3} {:>11.3}", layout.label(), p(i, 0.5), p(i, 0.99), a50, a99);
            layouts.insert(layout.key().into(), json!({
                "p50_ms": p(i, 0.5), "p99_ms": p(i, 0.99), "added_p50_ms": a50, "added_p99_ms": a99,
            }));
        }
        let ratio = |i: usize| {
            let (noop50, _) = added(1);
            ((added(i).0 / noop50) * 1000.0).round() / 1000.0
        };
        println!(
            "   added p50 as a multiple of the no-op webhook's: resize-guard {:.3}x (goal <= 1.1x), two calls {:.3}x",
            ratio(2),
            ratio(3)
        );
        println!("   ratio to no webhook (p50): resize-guard {:.3}x", p(2, 0.5) / base50);
        write_summary("resize_latency", &json!({
            "resizes_per_layout": samples[0].len(),
            "layouts": layouts,
            "added_p50_vs_noop": {"resize_guard": ratio(2), "resize_guard_two_calls": ratio(3)},
            "ratio_p50_vs_none": ((p(2, 0.5) / base50) * 1000.0).round() / 1000.0,
        }));
    });
}
