//! HTTP: the admission endpoints on the TLS port and the health/metrics endpoints on a plain
//! port, plus the process lifecycle (ready after the caches sync, drain in-flight reviews on
//! SIGTERM, Events published off the request path).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use serde_json::json;

use crate::args::Args;
use crate::metrics::Metrics;
use crate::review::{Cluster, EventIntent, Stage, review};
use resize_guard_cluster::ClusterView;

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct AppState {
    /// What reviews read.
    pub cluster: Arc<dyn Cluster>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Publishes Events; `None` in tests without a cluster.
    pub recorder: Option<Recorder>,
    /// Readiness (caches synced, not shutting down).
    pub ready: Arc<dyn Fn() -> bool + Send + Sync>,
}

/// `POST /mutate` and `POST /validate`, with a body limit.
pub fn admission_router(state: AppState, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .route("/validate", post(validate))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}

/// `GET /livez`, `/readyz`, `/metrics`.
pub fn health_router(state: AppState) -> Router {
    Router::new()
        .route("/livez", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State(s): State<AppState>| async move {
                if (s.ready)() {
                    (StatusCode::OK, "ok")
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "not ready: caches not synced or shutting down",
                    )
                }
            }),
        )
        .route(
            "/metrics",
            get(|State(s): State<AppState>| async move {
                (
                    [(
                        header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    s.metrics.render(),
                )
            }),
        )
        .with_state(state)
}

async fn mutate(state: State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    handle(Stage::Mutate, state, headers, body).await
}

async fn validate(state: State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    handle(Stage::Validate, state, headers, body).await
}

fn error(status: StatusCode, message: String) -> Response {
    (status, axum::Json(json!({"error": message}))).into_response()
}

async fn handle(
    stage: Stage,
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let started = Instant::now();
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if !json_body {
        state.metrics.bad_request();
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "AdmissionReviews must be sent as application/json".into(),
        );
    }
    let reviewed = match review(stage, &body, state.cluster.as_ref()) {
        Ok(r) => r,
        Err(e) => {
            state.metrics.bad_request();
            tracing::warn!(stage = stage.name(), error = %e, "refused a malformed admission request");
            return error(StatusCode::BAD_REQUEST, e.to_string());
        }
    };
    let elapsed = started.elapsed();
    state.metrics.review(
        stage.name(),
        &reviewed.decision,
        reviewed.allowed,
        elapsed.as_secs_f64(),
    );
    let acted = !reviewed.allowed || reviewed.event.is_some();
    if acted {
        tracing::info!(uid = %reviewed.uid, stage = stage.name(), decision = %reviewed.decision,
            allowed = reviewed.allowed, micros = elapsed.as_micros() as u64, "admission review");
    } else {
        tracing::debug!(uid = %reviewed.uid, stage = stage.name(), decision = %reviewed.decision,
            micros = elapsed.as_micros() as u64, "admission review");
    }
    if let (Some(intent), Some(recorder)) = (reviewed.event, state.recorder.clone()) {
        tokio::spawn(publish(recorder, intent));
    }
    axum::Json(reviewed.review).into_response()
}

async fn publish(recorder: Recorder, intent: EventIntent) {
    let event = KubeEvent {
        type_: if intent.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: intent.reason.into(),
        note: Some(intent.note),
        action: intent.action,
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &intent.regarding).await {
        tracing::warn!(error = %e, reason = intent.reason, "could not record event");
    }
}

/// Runs the webhook until SIGTERM/SIGINT, then drains in-flight reviews.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let client = kube::Client::try_default().await?;
    serve(
        args,
        client,
        resize_guard_cluster::process::shutdown_signal(),
    )
    .await
}

/// Serves with a given client until `shutdown` completes, then drains in-flight reviews (used
/// by [`run`] and by benchmarks that embed the webhook).
pub async fn serve(
    args: Args,
    client: kube::Client,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let metrics = Arc::new(Metrics::new());
    let instance = args
        .instance
        .clone()
        .or_else(|| std::env::var("HOSTNAME").ok());
    let reporter = Reporter {
        controller: "resize-guard-webhook".into(),
        instance,
    };
    let view = ClusterView::start(
        client.clone(),
        &args.namespace,
        &args.policy_configmap,
        reporter.clone(),
        {
            let metrics = metrics.clone();
            Arc::new(move |ok| metrics.policy_reload(ok))
        },
    );
    let (tls, files) = crate::tls::load(&args.cert_dir).await?;
    tokio::spawn(crate::tls::reload_loop(
        args.cert_dir.clone(),
        tls.clone(),
        files,
        args.cert_reload_interval,
        metrics.clone(),
    ));
    let stopping = Arc::new(AtomicBool::new(false));
    let ready = {
        let (view, stopping) = (view.clone(), stopping.clone());
        Arc::new(move || view.is_ready() && !stopping.load(Ordering::Acquire))
    };
    let state = AppState {
        cluster: view,
        metrics,
        recorder: Some(Recorder::new(client, reporter)),
        ready,
    };
    let health = tokio::net::TcpListener::bind(args.health_addr).await?;
    tracing::info!(addr = %args.health_addr, "serving /livez /readyz /metrics");
    let health_app = health_router(state.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(health, health_app).await {
            tracing::error!(error = %e, "health server stopped");
        }
    });

    let handle = axum_server::Handle::new();
    let (grace, h, stop) = (args.shutdown_grace, handle.clone(), stopping.clone());
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!(
            grace_secs = grace.as_secs(),
            "shutting down: draining in-flight reviews"
        );
        stop.store(true, Ordering::Release);
        h.graceful_shutdown(Some(grace));
    });
    tracing::info!(addr = %args.tls_addr, "serving /mutate /validate over TLS");
    // TCP_NODELAY: a review is one small request and one small response; without it Nagle's
    // algorithm and delayed ACKs add milliseconds to every call.
    let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(tls)
        .acceptor(axum_server::accept::NoDelayAcceptor::new());
    axum_server::bind(args.tls_addr)
        .acceptor(acceptor)
        .handle(handle)
        .serve(admission_router(state, args.max_body_bytes).into_make_service())
        .await?;
    tracing::info!("stopped");
    Ok(())
}
