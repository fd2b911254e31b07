//! End-to-end resize latency through a real kube-apiserver v1.37.2: `PATCH pods/resize` answered
//! (stored) under five webhook layouts, measured in one run on the same control plane, in
//! interleaved rounds (each round measures every layout once, in an order rotated by one each
//! round, so neither drift nor order favours a layout):
//!
//! | layout | what is registered |
//! |---|---|
//! | none | no webhook configuration |
//! | no-op | `deploy/`'s MutatingWebhookConfiguration pointed at a minimal always-allow HTTPS webhook written here (same TLS stack: rustls/ring, h2 + HTTP/1.1, TCP_NODELAY; same configuration fields): the floor any webhook pays |
//! | no-op, resize-guard's answer | the same no-op webhook answering with the warnings and audit annotations resize-guard gives a fitting resize (read from the embedded webhook at the start): what the answer's size costs, without the work |
//! | resize-guard | `deploy/` as shipped: the mutating webhook alone, one call per resize |
//! | resize-guard, two calls | the pre-0.2 layout, the mutating and the validating webhook, for reference |
//!
//! Prints p50/p99 per layout, the latency each adds over `none`, and resize-guard's added p50 as
//! a ratio of the no-op webhook's (goal ≤ 1.1×) with its 95 % confidence interval. Each
//! comparison is paired by round (a layout's round median minus the other's in the same round,
//! medianed over rounds), so drift between rounds cancels; the interval is a bootstrap over
//! rounds (drawn with replacement, 2,000 times). What the answer costs (answer-sized no-op −
//! no-op) and what resize-guard's work costs (resize-guard − answer-sized no-op) are reported
//! the same way, in ms. Writes
//! `target/bench/resize_latency.json`. `RESIZE_GUARD_BENCH_ROUNDS` (default 12) sets the rounds.
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
use axum::extract::State;
use axum::routing::post;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use resize_guard_bench::{Goal, Lcg, Row, ms, percentile, report_goals, rows_json, write_summary};
use resize_guard_harness::admission::{Webhooks, register, remove};
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::install::set_policy;
use resize_guard_harness::objects::{create_running, guaranteed_pod};
use resize_guard_webhook::args::Args;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};

#[path = "resize_latency/direct.rs"]
mod direct;

/// Rounds unless `RESIZE_GUARD_BENCH_ROUNDS` says otherwise.
const ROUNDS: usize = 12;

/// Bootstrap resamples of the rounds.
const RESAMPLES: usize = 2_000;

const PER_BLOCK: usize = 50;

const PODS: usize = 40;

/// Calls to each webhook in the direct (no API server) measurement.
const DIRECT_CALLS: usize = 3_000;

/// The registered layouts, in the order each round measures them.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Layout {
    None,
    NoOp,
    SizedNoOp,
    ResizeGuard,
    TwoCalls,
}

impl Layout {
    const ALL: [Layout; 5] = [
        Layout::None,
        Layout::NoOp,
        Layout::SizedNoOp,
        Layout::ResizeGuard,
        Layout::TwoCalls,
    ];

    fn label(self) -> &'static str {
        match self {
            Layout::None => "no webhook",
            Layout::NoOp => "no-op webhook",
            Layout::SizedNoOp => "no-op, resize-guard's answer",
            Layout::ResizeGuard => "resize-guard",
            Layout::TwoCalls => "resize-guard, 2 calls",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Layout::None => "none",
            Layout::NoOp => "noop",
            Layout::SizedNoOp => "noop_sized_answer",
            Layout::ResizeGuard => "resize_guard",
            Layout::TwoCalls => "resize_guard_two_calls",
        }
    }
}

/// The always-allow answer to an AdmissionReview: its uid, `allowed: true`, and `extra`'s
/// fields (none for the plain no-op; resize-guard's warnings and audit annotations for the
/// answer-sized one).
async fn allow(State(noop): State<Arc<NoOp>>, body: Bytes) -> axum::Json<Value> {
    let extra = &noop.extra;
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut response = json!({"uid": review["request"]["uid"], "allowed": true});
    if let (Some(r), Some(extra)) = (response.as_object_mut(), extra.as_object()) {
        r.extend(extra.clone());
    }
    *noop.last.lock().unwrap() = Some(body);
    axum::Json(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    }))
}

/// What a no-op webhook answers with, and the last review it was sent.
struct NoOp {
    extra: Value,
    last: std::sync::Mutex<Option<Bytes>>,
}

/// Serves the no-op webhook on `addr` with `bundle`'s serving certificate, as the real webhook
/// serves (rustls with ring, TLS 1.3/1.2, h2 and HTTP/1.1, TCP_NODELAY).
async fn serve_noop(
    addr: SocketAddr,
    bundle: &resize_guard_certs::Bundle,
    noop: Arc<NoOp>,
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
        .route("/validate", post(allow))
        .with_state(noop);
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
async fn install(env: &Env, layout: Layout, webhooks: &Urls) {
    remove(&env.client().await).await.unwrap();
    let (url, ca) = match layout {
        Layout::None => return,
        Layout::NoOp => (&webhooks.noop, &webhooks.noop_ca),
        Layout::SizedNoOp => (&webhooks.sized, &webhooks.noop_ca),
        Layout::ResizeGuard | Layout::TwoCalls => (&webhooks.webhook, &webhooks.ca),
    };
    register(env, url, ca, Webhooks::Mutating).await.unwrap();
    if layout == Layout::TwoCalls {
        // The overlay's output lacks the mutating configuration; applying it adds the
        // validating one and leaves the mutating one in place (no pruning).
        register(env, url, ca, Webhooks::ValidatingOnly)
            .await
            .unwrap();
    }
}

/// Where each webhook listens and the CA bundles to trust them by.
struct Urls {
    webhook: String,
    noop: String,
    sized: String,
    ca: String,
    noop_ca: String,
}

/// resize-guard's answer to a fitting resize of `pod` (cpu to `cpu`), asked over HTTPS of the
/// embedded webhook: its `warnings` and `auditAnnotations`, for the answer-sized no-op.
async fn answer_of_resize_guard(url: &str, ca_pem: &str, pod: &Pod, cpu: &str) -> Value {
    let mut config = kube::Config::new(url.parse().unwrap());
    config.root_cert = Some(
        CertificateDer::pem_slice_iter(ca_pem.as_bytes())
            .map(|c| c.unwrap().to_vec())
            .collect(),
    );
    let client = kube::Client::try_from(config).unwrap();
    let old = serde_json::to_value(pod).unwrap();
    let mut new = old.clone();
    new["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": cpu, "memory": "256Mi"}, "limits": {"cpu": cpu, "memory": "256Mi"}});
    let review = resize_guard_harness::review::resize_review(
        "answer-size",
        json!({"username": "bench"}),
        &old,
        &new,
    );
    let req = http::Request::post("/mutate")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(&review).unwrap())
        .unwrap();
    let answer: Value = client.request(req).await.unwrap();
    let r = &answer["response"];
    assert_eq!(
        r["allowed"],
        json!(true),
        "a fitting resize is allowed: {answer}"
    );
    assert_eq!(
        r["auditAnnotations"]["decision"],
        json!("fits"),
        "resize-guard judged the resize (a policy is in force): {answer}"
    );
    let mut extra = serde_json::Map::new();
    for field in ["warnings", "auditAnnotations"] {
        if !r[field].is_null() {
            extra.insert(field.into(), r[field].clone());
        }
    }
    Value::Object(extra)
}

/// kube-apiserver's running totals of admission webhook calls from its `/metrics`: (seconds, calls)
/// summed over every webhook and type (`apiserver_admission_webhook_admission_duration_seconds`),
/// so a block's difference is the time the API server spent in the webhooks it called.
async fn webhook_calls(client: &kube::Client) -> (f64, f64) {
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(req).await.unwrap();
    histogram_totals(
        &text,
        "apiserver_admission_webhook_admission_duration_seconds",
    )
}

/// A Prometheus histogram's `_sum` and `_count` in `text`, each summed over every label set.
fn histogram_totals(text: &str, histogram: &str) -> (f64, f64) {
    let total = |suffix: &str| -> f64 {
        let name = format!("{histogram}_{suffix}");
        text.lines()
            .filter(|l| l.starts_with(&name))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    (total("sum"), total("count"))
}

/// resize-guard's own running totals of its time in the admission handler, from its
/// `/metrics` (`resize_guard_admission_duration_seconds`): (seconds, reviews).
async fn handler_time(health_port: u16) -> (f64, f64) {
    let text = resize_guard_harness::install::http_get(health_port, "/metrics")
        .await
        .unwrap();
    histogram_totals(&text, "resize_guard_admission_duration_seconds")
}

/// kube-apiserver's mean time per call to `layout`'s webhooks over the rounds `which`, ms.
fn per_call_ms(calls: &[Vec<f64>], which: &[usize], layout: usize) -> f64 {
    let (seconds, count) = which.iter().fold((0.0, 0.0), |(s, c), &r| {
        (s + calls[2 * layout][r], c + calls[2 * layout + 1][r])
    });
    if count > 0.0 {
        seconds / count * 1e3
    } else {
        f64::NAN
    }
}

/// Samples of one layout in one round.
type Rounds = Vec<Vec<Duration>>;

/// Median of one round's samples, ms.
fn median(round: &[Duration]) -> f64 {
    let mut all = round.to_vec();
    all.sort();
    ms(percentile(&all, 0.5))
}

/// Each layout's round medians, ms: `m[layout][round]`.
fn round_medians(samples: &[Rounds]) -> Vec<Vec<f64>> {
    samples
        .iter()
        .map(|rounds| rounds.iter().map(|r| median(r)).collect())
        .collect()
}

/// The median over the rounds `which` of `layout`'s round median minus `base`'s in the same
/// round: a paired difference, so that drift between rounds cancels.
fn paired(m: &[Vec<f64>], which: &[usize], layout: usize, base: usize) -> f64 {
    let mut d: Vec<f64> = which.iter().map(|&r| m[layout][r] - m[base][r]).collect();
    d.sort_by(f64::total_cmp);
    match d.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => d[n / 2],
        n => (d[n / 2 - 1] + d[n / 2]) / 2.0,
    }
}

/// A statistic of the round medians over a choice of rounds.
type Statistic<'a> = &'a dyn Fn(&[Vec<f64>], &[usize]) -> f64;

/// The point estimate of `f` over every round and its 95 % bootstrap interval: rounds drawn
/// with replacement [`RESAMPLES`] times, each round's layouts kept together.
fn with_interval(m: &[Vec<f64>], f: Statistic<'_>) -> (f64, f64, f64) {
    let rounds = m[0].len();
    let all: Vec<usize> = (0..rounds).collect();
    let point = f(m, &all);
    let mut rng = Lcg(0x5eed);
    let mut draws: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let which: Vec<usize> = (0..rounds)
                .map(|_| rng.next(rounds as u64) as usize)
                .collect();
            f(m, &which)
        })
        .filter(|v| v.is_finite())
        .collect();
    draws.sort_by(f64::total_cmp);
    let at = |q: f64| {
        draws
            .get(((draws.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    (point, at(0.025), at(0.975))
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = shared(EnvOptions::default());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = env.client().await;
        // The policy in force (the defaults, as `deploy/` ships them): without it the webhook
        // judges nothing and answers "no policy" with no work done.
        let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": "resize-guard"}})).unwrap();
        match Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("namespace resize-guard: {e}"),
        }
        set_policy(env, "mode: enforce\n").await;
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
        // Built as the program builds its client (no read timeout on quiet watches).
        let config = env.cp.program_config(resize_guard_harness::control_plane::Identity::Admin).await.unwrap();
        let program_client = resize_guard_runtime::api_client::build(config).unwrap();
        let server = tokio::spawn(resize_guard_webhook::server::serve(args, program_client, async move {
            let _ = stop_rx.await;
        }));
        let deadline = Instant::now() + Duration::from_secs(30);
        while resize_guard_harness::install::http_get(health_port, "/readyz").await.is_err() {
            assert!(Instant::now() < deadline, "the embedded webhook never became ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let noop_bundle = resize_guard_certs::generate(&resize_guard_certs::CertSpec::for_loopback()).unwrap();
        let noop_port = resize_guard_harness::process::free_port().unwrap();
        let plain = Arc::new(NoOp { extra: json!({}), last: Default::default() });
        let noop = serve_noop(([127, 0, 0, 1], noop_port).into(), &noop_bundle, plain.clone()).await;
        eprintln!("no-op webhook on 127.0.0.1:{noop_port}");

        let ns = env.namespace("bench").await;
        let node = env.node("bench", "64", "256Gi").await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        for i in 0..PODS {
            create_running(&pods, &guaranteed_pod(&format!("app-{i}"), &node, "high", "250m", "256Mi")).await.unwrap();
        }
        let webhook_url = format!("https://127.0.0.1:{port}");
        let answer = answer_of_resize_guard(&webhook_url, &bundle.ca_cert_pem, &pods.get("app-0").await.unwrap(), "300m").await;
        let answer_bytes = answer.to_string().len();
        eprintln!("resize-guard's answer to a fitting resize adds {answer_bytes} bytes: {answer}");
        let sized_port = resize_guard_harness::process::free_port().unwrap();
        let sized = serve_noop(([127, 0, 0, 1], sized_port).into(), &noop_bundle, Arc::new(NoOp { extra: answer.clone(), last: Default::default() })).await;
        let urls = Urls {
            webhook: webhook_url,
            noop: format!("https://127.0.0.1:{noop_port}"),
            sized: format!("https://127.0.0.1:{sized_port}"),
            ca: bundle.ca_bundle_base64(),
            noop_ca: noop_bundle.ca_bundle_base64(),
        };

        let rounds: usize = std::env::var("RESIZE_GUARD_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(ROUNDS);
        let mut next = 0usize;
        let mut samples: Vec<Rounds> = vec![Vec::new(); Layout::ALL.len()];
        // kube-apiserver's own account of its webhook calls per layout: (seconds, calls).
        // Per round: `calls[2 * layout]` seconds, `calls[2 * layout + 1]` calls.
        let mut calls = vec![Vec::<f64>::new(); 2 * Layout::ALL.len()];
        let mut cpu = 250;
        let handler_at_start = handler_time(health_port).await;
        for round in 0..rounds {
            let mut blocks: Vec<Vec<Duration>> = vec![Vec::new(); Layout::ALL.len()];
            for k in 0..Layout::ALL.len() {
                let i = (k + round) % Layout::ALL.len();
                install(env, Layout::ALL[i], &urls).await;
                // Let the API server's informer pick up the change, then warm up.
                tokio::time::sleep(Duration::from_millis(1500)).await;
                for _ in 0..5 {
                    cpu += 1;
                    next += 1;
                    resize(&pods, &format!("app-{}", next % PODS), &format!("{cpu}m")).await;
                }
                let before = webhook_calls(&client).await;
                for _ in 0..PER_BLOCK {
                    cpu += 1;
                    next += 1;
                    let d = resize(&pods, &format!("app-{}", next % PODS), &format!("{cpu}m")).await;
                    blocks[i].push(d);
                }
                let after = webhook_calls(&client).await;
                calls[2 * i].push(after.0 - before.0);
                calls[2 * i + 1].push(after.1 - before.1);
            }
            for (layout, block) in samples.iter_mut().zip(blocks) {
                layout.push(block);
            }
            eprintln!("round {}/{rounds} done", round + 1);
        }
        remove(&client).await.unwrap();
        // The serving path alone: kube-apiserver's last review of the no-op, posted to each
        // webhook directly, with resize-guard's own account of its time in the handler.
        let review = plain.last.lock().unwrap().clone().expect("kube-apiserver called the no-op webhook");
        let handler_before = handler_time(health_port).await;
        // Its mean over the rounds' reviews (kube-apiserver's calls, the warm-ups included).
        let rounds_handler_ms = (handler_before.0 - handler_at_start.0) / (handler_before.1 - handler_at_start.1) * 1e3;
        let direct_samples = direct::measure(
            vec![
                direct::Target { addr: ([127, 0, 0, 1], noop_port).into(), ca_pem: noop_bundle.ca_cert_pem.clone() },
                direct::Target { addr: ([127, 0, 0, 1], sized_port).into(), ca_pem: noop_bundle.ca_cert_pem.clone() },
                direct::Target { addr: ([127, 0, 0, 1], port).into(), ca_pem: bundle.ca_cert_pem.clone() },
            ],
            review.clone(),
            DIRECT_CALLS,
        );
        let handler_after = handler_time(health_port).await;
        let handler_ms = (handler_after.0 - handler_before.0) / (handler_after.1 - handler_before.1) * 1e3;
        noop.shutdown();
        sized.shutdown();
        let _ = stop_tx.send(());
        let _ = server.await;

        let pooled = |i: usize| -> Vec<Duration> {
            let mut v: Vec<Duration> = samples[i].iter().flatten().copied().collect();
            v.sort();
            v
        };
        let p = |i: usize, q: f64| ms(percentile(&pooled(i), q));
        let (base50, base99) = (p(0, 0.5), p(0, 0.99));
        println!(
            "\n3. resize latency through kube-apiserver v1.37.2 ({} resizes per layout in {rounds} interleaved rounds, fitting, {PODS}-pod node)",
            rounds * PER_BLOCK
        );
        println!("   {:<30} {:>9} {:>9} {:>11} {:>11}", "", "p50 ms", "p99 ms", "+p50 ms", "+p99 ms");
        let mut layouts = serde_json::Map::new();
        for (i, layout) in Layout::ALL.into_iter().enumerate() {
            let (a50, a99) = (p(i, 0.5) - base50, p(i, 0.99) - base99);
            println!("   {:<30} {:>9.3} {:>9.3} {:>11.3} {:>11.3}", layout.label(), p(i, 0.5), p(i, 0.99), a50, a99);
            layouts.insert(layout.key().into(), json!({
                "p50_ms": p(i, 0.5), "p99_ms": p(i, 0.99), "added_p50_ms": a50, "added_p99_ms": a99,
                "round_medians_ms": round_medians(&samples)[i],
            }));
        }
        let (none, noop, sized, rg, two) = (0, 1, 2, 3, 4);
        let m = round_medians(&samples);
        let added_ratio = |of: usize| {
            move |m: &[Vec<f64>], w: &[usize]| paired(m, w, of, none) / paired(m, w, noop, none)
        };
        let (ratio, lo, hi) = with_interval(&m, &added_ratio(rg));
        let (two_ratio, two_lo, two_hi) = with_interval(&m, &added_ratio(two));
        // What the answer costs (the answer-sized no-op over the plain one) and what the work
        // costs (resize-guard over the no-op that answers the same), in ms.
        let (answer_ms, answer_lo, answer_hi) = with_interval(&m, &|m, w| paired(m, w, sized, noop));
        let (work_ms, work_lo, work_hi) = with_interval(&m, &|m, w| paired(m, w, rg, sized));
        let (noop_ms, noop_lo, noop_hi) = with_interval(&m, &|m, w| paired(m, w, noop, none));
        let per_call = |i: usize| per_call_ms(&calls, &(0..rounds).collect::<Vec<_>>(), i);
        let (call_ratio, call_lo, call_hi) =
            with_interval(&calls, &|c, w| per_call_ms(c, w, rg) / per_call_ms(c, w, noop));
        println!(
            "   kube-apiserver's mean time per webhook call (apiserver_admission_webhook_admission_duration_seconds): \
             no-op {:.3} ms, answer-sized no-op {:.3} ms, resize-guard {:.3} ms ({call_ratio:.2}x the no-op's, 95 % CI {call_lo:.2}-{call_hi:.2} over rounds), two calls {:.3} ms per call",
            per_call(noop), per_call(sized), per_call(rg), per_call(two)
        );
        // The same goal on kube-apiserver's own account of each call, free of the etcd and
        // scheduling noise around it (a mean over every call of each layout; the interval is a
        // bootstrap over rounds).
        let call_goal = Goal::at_most(
            "kube-apiserver's mean time per call to resize-guard as a multiple of its time per call to the no-op webhook",
            call_ratio,
            1.1,
            "×",
        )
        .with_detail(&format!(
            "{:.3} vs {:.3} ms per call over {} calls each, 95 % CI {call_lo:.2}–{call_hi:.2}",
            per_call(rg),
            per_call(noop),
            calls[2 * rg + 1].iter().sum::<f64>()
        ));
        let met = hi <= 1.1;
        let goal = Goal::at_most("resize-guard's added p50 as a multiple of the no-op webhook's", ratio, 1.1, "×")
            .with_detail(&format!(
                "95 % CI {lo:.2}–{hi:.2}, {}; paired by round over {rounds} rounds",
                if met { "all of it under the goal" } else { "not all under the goal" }
            ));
        println!("   (paired by round: each layout's round median minus no webhook's in the same round, medianed over rounds)");
        println!("   no-op webhook adds {noop_ms:.3} ms (95 % CI {noop_lo:.3}-{noop_hi:.3})");
        println!("   two calls: {two_ratio:.3}x the no-op's added p50 (95 % CI {two_lo:.3}-{two_hi:.3})");
        println!(
            "   the answer ({answer_bytes} more bytes than the no-op's) costs {answer_ms:.3} ms (95 % CI {answer_lo:.3}-{answer_hi:.3}); \
             resize-guard's work beyond the same answer {work_ms:.3} ms (95 % CI {work_lo:.3}-{work_hi:.3})"
        );
        let direct_stat = |i: usize| {
            let mut sorted = direct_samples[i].clone();
            sorted.sort();
            (ms(percentile(&sorted, 0.5)), ms(percentile(&sorted, 0.99)), direct::mean_ms(&direct_samples[i]))
        };
        let (d_noop, d_sized, d_rg) = (direct_stat(0), direct_stat(1), direct_stat(2));
        let d_answer = direct::paired_median_ms(&direct_samples[1], &direct_samples[0]);
        let d_work = direct::paired_median_ms(&direct_samples[2], &direct_samples[1]);
        println!(
            "\n4. the serving path alone: kube-apiserver's review ({} bytes) posted straight to each webhook over TLS + HTTP/2, {DIRECT_CALLS} calls each, interleaved",
            review.len()
        );
        println!("   {:<30} {:>9} {:>9} {:>9}", "", "p50 ms", "p99 ms", "mean ms");
        for (label, (p50, p99, mean)) in [("no-op webhook", d_noop), ("no-op, resize-guard's answer", d_sized), ("resize-guard", d_rg)] {
            println!("   {label:<30} {p50:>9.3} {p99:>9.3} {mean:>9.3}");
        }
        println!(
            "   paired medians: the answer costs {d_answer:.3} ms, resize-guard's work beyond the same answer {d_work:.3} ms; \
             resize-guard's own handler time (its resize_guard_admission_duration_seconds) {handler_ms:.3} ms a review here, {rounds_handler_ms:.3} ms a review during the rounds"
        );
        // The floor itself: resize-guard's answer on the wire against the no-op's, with no API
        // server around the call.
        let direct_goal = Goal::at_most(
            "the serving path alone (kube-apiserver's review posted straight over TLS + HTTP/2): resize-guard's p50 per call as a multiple of the no-op webhook's",
            d_rg.0 / d_noop.0,
            1.1,
            "×",
        )
        .with_detail(&format!(
            "{:.3} vs {:.3} ms, {DIRECT_CALLS} interleaved calls each; resize-guard's handler {handler_ms:.3} ms a review",
            d_rg.0, d_noop.0
        ));
        let added = |i: usize| p(i, 0.5) - base50;
        let added99 = |i: usize| p(i, 0.99) - base99;
        let row = Row::new(
            &format!(
                "`PATCH pods/resize` through kube-apiserver v1.37.2: none / a no-op webhook / the no-op answering with resize-guard's answer / resize-guard (one call) / the 0.1 two-call layout, {rounds} interleaved rounds of {PER_BLOCK} resizes each, the default policy in force; then the serving path alone"
            ),
            "`make bench` (`resize_latency`; `RESIZE_GUARD_BENCH_ROUNDS`, default 12)",
        )
        .percentiles(
            &format!(
                "added over none ({base50:.2} ms): no-op {:.2} ms, answer-sized no-op {:.2} ms, resize-guard {:.2} ms, two calls {:.2} ms",
                added(noop), added(sized), added(rg), added(two)
            ),
            &format!(
                "added: no-op {:.2} ms, resize-guard {:.2} ms",
                added99(noop), added99(rg)
            ),
        )
        .other(&format!(
            "**kube-apiserver's own mean time per webhook call**: no-op {:.3} ms, answer-sized no-op {:.3} ms, **resize-guard {:.3} ms = {call_ratio:.2}× the no-op's** (95 % CI {call_lo:.2}–{call_hi:.2}, bootstrap over rounds). \
             **The serving path alone** (kube-apiserver's {}-byte review posted straight to each webhook over TLS + HTTP/2, {DIRECT_CALLS} interleaved calls each): p50 no-op {:.3} ms, answer-sized {:.3} ms, **resize-guard {:.3} ms**; resize-guard's handler {handler_ms:.3} ms a review ({rounds_handler_ms:.3} ms during the rounds through kube-apiserver). \
             End to end, paired by round, resize-guard's added p50 is {ratio:.2}× the no-op's (95 % CI {lo:.2}–{hi:.2}): a round's median moves by more than a webhook call costs on 2 shared cores",
            per_call(noop), per_call(sized), per_call(rg),
            review.len(),
            d_noop.0, d_sized.0, d_rg.0,
        ));
        write_summary("resize_latency", &json!({
            "rows": rows_json(&[row]),
            "direct": {
                "calls": DIRECT_CALLS,
                "review_bytes": review.len(),
                "noop": {"p50_ms": d_noop.0, "p99_ms": d_noop.1, "mean_ms": round3(d_noop.2)},
                "noop_sized_answer": {"p50_ms": d_sized.0, "p99_ms": d_sized.1, "mean_ms": round3(d_sized.2)},
                "resize_guard": {"p50_ms": d_rg.0, "p99_ms": d_rg.1, "mean_ms": round3(d_rg.2)},
                "answer_cost_paired_ms": round3(d_answer),
                "work_beyond_same_answer_paired_ms": round3(d_work),
                "resize_guard_handler_mean_ms": round3(handler_ms),
                "resize_guard_handler_mean_ms_during_rounds": round3(rounds_handler_ms),
            },
            "rounds": rounds,
            "resizes_per_layout": rounds * PER_BLOCK,
            "answer_extra_bytes": answer_bytes,
            "layouts": layouts,
            "added_p50_vs_noop": {
                "resize_guard": round3(ratio), "resize_guard_ci95": [round3(lo), round3(hi)],
                "resize_guard_two_calls": round3(two_ratio), "resize_guard_two_calls_ci95": [round3(two_lo), round3(two_hi)],
            },
            "apiserver_mean_webhook_call_ms": {
                "noop": round3(per_call(noop)), "noop_sized_answer": round3(per_call(sized)),
                "resize_guard": round3(per_call(rg)), "resize_guard_two_calls": round3(per_call(two)),
                "resize_guard_vs_noop": round3(call_ratio),
                "resize_guard_vs_noop_ci95": [round3(call_lo), round3(call_hi)],
            },
            "noop_added_p50_ms": {"point": round3(noop_ms), "ci95": [round3(noop_lo), round3(noop_hi)]},
            "answer_cost_ms": {"point": round3(answer_ms), "ci95": [round3(answer_lo), round3(answer_hi)]},
            "work_beyond_same_answer_ms": {"point": round3(work_ms), "ci95": [round3(work_lo), round3(work_hi)]},
            "goals": report_goals(&[goal, call_goal, direct_goal]),
        }));
    });
}
