//! Webhook benchmarks without a cluster:
//! 1. decision time in-process — `review()` on a realistic AdmissionReview body (JSON decode,
//!    ledger of a 110-pod node, classify, victim selection, response) — p50/p99;
//! 2. HTTPS round trip through the real axum/rustls server on loopback with keep-alive
//!    connections: p50/p99 at a fixed 1,000 reviews/s (open loop, latency measured from the
//!    intended send time) and maximum throughput (closed loop) — of resize-guard's admission
//!    router, and in the same run of a no-op router (parses the review, answers allowed) served
//!    the same way, the floor any webhook on this stack pays.
//!
//! Server and load generator share this 2-core machine, each on a runtime of its own.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum_server::tls_rustls::RustlsConfig;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use resize_guard_bench::{Row, ms, percentile, rows_json, write_summary};
use resize_guard_cluster::FixedCluster;
use resize_guard_policy::fixture::packed_node;
use resize_guard_policy::policy::Policy;
use resize_guard_webhook::metrics::Metrics;
use resize_guard_webhook::review::{Stage, review};
use resize_guard_webhook::server::{AppState, admission_router};
use resize_guard_webhook::tls::CertFiles;
use serde_json::json;

const CONNECTIONS: usize = 8;
const FIXED_RATE: u64 = 1_000;

/// A node with 110 pods; the reviewed resize is Deferred and needs victims.
fn world() -> (FixedCluster, Vec<u8>) {
    let (node, pods, old, new) = packed_node(110);
    let body = serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "6c1f6a52-0000-4000-8000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "resize", "requestSubResource": "resize",
            "name": "model-server", "namespace": "prod", "operation": "UPDATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:vpa-updater"},
            "object": new, "oldObject": old, "dryRun": false,
            "options": {"kind": "PatchOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    }))
    .unwrap();
    let cluster = FixedCluster::new(Policy::default(), vec![node], pods, vec![]);
    (cluster, body)
}

fn in_process(cluster: &FixedCluster, body: &[u8]) -> serde_json::Value {
    let r = review(Stage::Validate, body, cluster).unwrap();
    assert_eq!(r.decision, "deferred-preemptible", "benchmark scenario");
    for _ in 0..500 {
        std::hint::black_box(review(Stage::Validate, body, cluster).unwrap());
    }
    let mut samples: Vec<Duration> = (0..5_000)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(review(Stage::Validate, body, cluster).unwrap());
            t.elapsed()
        })
        .collect();
    samples.sort();
    let (p50, p99) = (percentile(&samples, 0.5), percentile(&samples, 0.99));
    println!(
        "\n1. in-process review, 110-pod node, Deferred with victims ({} bytes body)",
        body.len()
    );
    println!(
        "   p50 {:.3} ms   p99 {:.3} ms   (5000 samples)",
        ms(p50),
        ms(p99)
    );
    json!({"p50_ms": ms(p50), "p99_ms": ms(p99), "samples": samples.len(), "body_bytes": body.len()})
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// A rustls client on the programs' ring provider trusting only the CA in `ca_pem`.
fn client_config(ca_pem: &str) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

async fn connect(addr: SocketAddr, ca_pem: &str) -> Sender {
    let config = client_config(ca_pem);
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(
            rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap(),
            tcp,
        )
        .await
        .unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

async fn call(sender: &mut Sender, body: &Bytes) {
    sender.ready().await.unwrap();
    let req = http::Request::post("/validate")
        .header("content-type", "application/json")
        .header("host", "127.0.0.1")
        .body(Full::new(body.clone()))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    std::hint::black_box(bytes);
}

/// An always-allow admission router: the review parsed, its uid answered with `allowed`.
fn noop_router() -> axum::Router {
    async fn allow(body: Bytes) -> axum::Json<serde_json::Value> {
        let review: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        axum::Json(
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": true}}),
        )
    }
    axum::Router::new().route("/validate", axum::routing::post(allow))
}

fn resize_guard_router(cluster: FixedCluster) -> axum::Router {
    let state = AppState {
        cluster: Arc::new(cluster),
        metrics: Arc::new(Metrics::new()),
        events: None,
        ready: Arc::new(|| true),
        usage: None,
    };
    admission_router(state, 4 << 20)
}

fn https(label: &str, router: axum::Router, body: Vec<u8>) -> serde_json::Value {
    let bundle =
        resize_guard_certs::generate(&resize_guard_certs::CertSpec::for_loopback()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    resize_guard_certs::write_dir(&bundle, dir.path()).unwrap();
    let files = CertFiles::read(dir.path()).unwrap();
    let tls = RustlsConfig::from_config(Arc::new(files.server_config(dir.path()).unwrap()));
    // Bound here and handed to the server, so the port is the server's before any client dials.
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    // The server gets a runtime (and so a core) of its own.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    server_rt.spawn(async move {
        let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(tls)
            .acceptor(axum_server::accept::NoDelayAcceptor::new());
        axum_server::from_tcp(listener)
            .unwrap()
            .acceptor(acceptor)
            .serve(router.into_make_service())
            .await
            .unwrap();
    });
    std::thread::sleep(Duration::from_millis(300));
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let body = Bytes::from(body);
    client_rt.block_on(async move {
        let mut senders = Vec::new();
        for _ in 0..CONNECTIONS {
            senders.push(connect(addr, &bundle.ca_cert_pem).await);
        }
        for s in senders.iter_mut() {
            for _ in 0..50 {
                call(s, &body).await;
            }
        }
        // Fixed rate, open loop: each connection sends on its own schedule.
        let seconds = 10u64;
        let per_conn = FIXED_RATE / CONNECTIONS as u64;
        let interval = Duration::from_micros(1_000_000 / per_conn);
        let start = tokio::time::Instant::now() + Duration::from_millis(50);
        let mut tasks = Vec::new();
        for (c, mut s) in senders.into_iter().enumerate() {
            let body = body.clone();
            tasks.push(tokio::spawn(async move {
                let (mut lat, mut sched) = (Vec::new(), Vec::new());
                let offset = interval / CONNECTIONS as u32 * c as u32;
                for i in 0..(per_conn * seconds) {
                    let due = start + offset + interval * i as u32;
                    tokio::time::sleep_until(due).await;
                    let sent = tokio::time::Instant::now();
                    call(&mut s, &body).await;
                    let done = tokio::time::Instant::now();
                    lat.push(done - sent);
                    sched.push(done - due);
                }
                (lat, sched, s)
            }));
        }
        let (mut latencies, mut scheduled) = (Vec::new(), Vec::new());
        let mut senders = Vec::new();
        for t in tasks {
            let (l, d, s) = t.await.unwrap();
            latencies.extend(l);
            scheduled.extend(d);
            senders.push(s);
        }
        latencies.sort();
        scheduled.sort();
        let (p50, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
        let (s50, s99) = (percentile(&scheduled, 0.5), percentile(&scheduled, 0.99));
        println!("\n2a. {label}: HTTPS round trip at a fixed {FIXED_RATE} reviews/s, {CONNECTIONS} keep-alive connections, {seconds} s");
        println!("   from send:            p50 {:.3} ms   p99 {:.3} ms   ({} reviews)", ms(p50), ms(p99), latencies.len());
        println!("   from scheduled time:  p50 {:.3} ms   p99 {:.3} ms   (adds the load generator's 1 ms timer granularity)", ms(s50), ms(s99));

        // Saturation, closed loop.
        let run = Duration::from_secs(5);
        let deadline = tokio::time::Instant::now() + run;
        let mut tasks = Vec::new();
        for mut s in senders {
            let body = body.clone();
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while tokio::time::Instant::now() < deadline {
                    call(&mut s, &body).await;
                    n += 1;
                }
                n
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        let rps = total as f64 / run.as_secs_f64();
        println!("\n2b. {label}: HTTPS saturation, {CONNECTIONS} keep-alive connections, closed loop, {} s", run.as_secs());
        println!("   {rps:.0} reviews/s ({total} reviews)");
        json!({
            "fixed_rate": {"rate_per_s": FIXED_RATE, "connections": CONNECTIONS, "p50_ms": ms(p50), "p99_ms": ms(p99),
                "from_schedule_p50_ms": ms(s50), "from_schedule_p99_ms": ms(s99), "reviews": latencies.len()},
            "saturation": {"connections": CONNECTIONS, "reviews_per_s": rps.round(), "reviews": total},
        })
    })
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (cluster, body) = world();
    let decision = in_process(&cluster, &body);
    let noop = https("no-op router", noop_router(), body.clone());
    let http = https("resize-guard", resize_guard_router(cluster), body.clone());
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    let (rate, sat) = (&http["fixed_rate"], &http["saturation"]);
    let (noop_rate, noop_sat) = (&noop["fixed_rate"], &noop["saturation"]);
    let rows = [
        Row::new(
            &format!(
                "webhook `review()` in-process: decode a {:.1} kB AdmissionReview, ledger of a 110-pod node, classify (Deferred, victims chosen), respond",
                body.len() as f64 / 1e3
            ),
            "`cargo bench -p resize-guard-webhook --bench admission`",
        )
        .percentiles(
            &format!("{:.0} µs", f(&decision["p50_ms"]) * 1e3),
            &format!("{:.0} µs", f(&decision["p99_ms"]) * 1e3),
        ),
        Row::new(
            &format!("HTTPS round trip at a fixed {FIXED_RATE} reviews/s, {CONNECTIONS} keep-alive connections (from send)"),
            "`cargo bench -p resize-guard-webhook --bench admission`",
        )
        .percentiles(
            &format!("{:.2} ms", f(&rate["p50_ms"])),
            &format!("{:.2} ms", f(&rate["p99_ms"])),
        )
        .other(&format!(
            "a no-op router served the same way, same run: {:.2} / {:.2} ms; from the scheduled time (adds the load generator's 1 ms timer): {:.2} / {:.2} ms",
            f(&noop_rate["p50_ms"]),
            f(&noop_rate["p99_ms"]),
            f(&rate["from_schedule_p50_ms"]),
            f(&rate["from_schedule_p99_ms"]),
        )),
        Row::new(
            &format!("HTTPS saturation, {CONNECTIONS} connections, closed loop"),
            "`cargo bench -p resize-guard-webhook --bench admission`",
        )
        .other(&format!(
            "**{:.0} reviews/s** (the no-op router, same run: {:.0})",
            f(&sat["reviews_per_s"]),
            f(&noop_sat["reviews_per_s"]),
        )),
    ];
    write_summary(
        "webhook",
        &json!({"in_process": decision, "https": http, "https_noop": noop, "rows": rows_json(&rows)}),
    );
}
