//! HTTP: the admission endpoints on the TLS port and the health/metrics endpoints on a plain
//! port, plus the process lifecycle (ready after the caches sync, while no watch has been failing
//! for longer than `--watch-unhealthy-after` and while a usable serving certificate is loaded —
//! `/readyz` says which of these is missing; drain in-flight reviews on SIGTERM, Events queued
//! on the program's one bounded publisher, off the request path). Health endpoints, the Event
//! publisher and the stop signal belong to the [`Runtime`]. The serving certificate comes from
//! the `--tls-secret` Secret through the API, or from `--cert-dir` when given (see
//! [`crate::tls`]).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum_server::tls_rustls::RustlsConfig;
use kube::runtime::events::{Event as KubeEvent, EventType, Reporter};
use resize_guard_runtime::{Events, Runtime, health};
use serde_json::json;

use crate::args::Args;
use crate::metrics::Metrics;
use crate::review::{Cluster, EventIntent, Stage, review};
use crate::serving_secret::SecretRef;
use crate::tls::ServingCert;
use resize_guard_cluster::{ClusterView, ViewConfig};

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct AppState {
    /// What reviews read.
    pub cluster: Arc<dyn Cluster>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// The program's Event publisher; `None` in tests without a cluster.
    pub events: Option<Events>,
    /// Readiness (caches synced, a usable serving certificate, not shutting down).
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

/// Why the process is not ready, or `Ok` (for `/readyz`).
pub use resize_guard_runtime::Readiness;

/// `GET /livez`, `/readyz`, `/metrics` (the runtime's [`health::router`]); `/readyz` follows
/// `state.ready`.
pub fn health_router(state: AppState) -> Router {
    let ready = state.ready.clone();
    health::router(
        Arc::new(move || {
            if ready() {
                Ok(None)
            } else {
                Err("caches not synced or shutting down".into())
            }
        }),
        render_metrics(&state),
    )
}

fn render_metrics(state: &AppState) -> resize_guard_runtime::RenderMetrics {
    render_metrics_of(&state.metrics)
}

fn render_metrics_of(metrics: &Arc<Metrics>) -> resize_guard_runtime::RenderMetrics {
    let metrics = metrics.clone();
    Arc::new(move || metrics.render())
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
            let why = resize_guard_runtime::error_chain(&e);
            tracing::warn!(stage = stage.name(), reason = e.reason(), error = %why, "refused a malformed admission request");
            return error(StatusCode::BAD_REQUEST, why);
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
    if let (Some(intent), Some(events)) = (reviewed.event, &state.events) {
        publish(events, intent);
    }
    axum::Json(reviewed.review).into_response()
}

fn publish(events: &Events, intent: EventIntent) {
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
    events.publish(event, intent.regarding);
}

/// Runs the webhook until SIGTERM/SIGINT, then drains in-flight reviews; a second SIGTERM or
/// SIGINT during the drain exits at once.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let client = kube::Client::try_default().await?;
    let shutdown = async {
        resize_guard_runtime::process::shutdown_signal().await;
        tokio::spawn(async {
            resize_guard_runtime::process::shutdown_signal().await;
            tracing::warn!("second stop signal: exiting without waiting for the drain");
            std::process::exit(143);
        });
    };
    serve(args, client, shutdown).await
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
    let runtime = Runtime::start(client.clone(), reporter, shutdown);
    let view = ClusterView::start(
        client.clone(),
        ViewConfig {
            unhealthy_after: args.common.watch_unhealthy_after,
            on_policy_reload: {
                let metrics = metrics.clone();
                Arc::new(move |ok| metrics.policy_reload(ok))
            },
            on_watch_error: {
                let metrics = metrics.clone();
                Arc::new(move |resource| metrics.watch_error(resource.as_str()))
            },
            version: runtime.version().clone(),
            ..ViewConfig::new(
                &args.common.namespace,
                &args.common.policy_configmap,
                runtime.events().clone(),
            )
        },
    );
    let cert = Arc::new(ServingCert::new());
    match &args.cert_dir {
        Some(dir) => {
            let files = crate::cert_dir::load(dir, &cert, &metrics)?;
            tracing::info!(dir = %dir.display(), "serving the TLS certificate from files");
            tokio::spawn(crate::cert_dir::reload_loop(
                dir.clone(),
                cert.clone(),
                files,
                args.cert_reload_interval,
                metrics.clone(),
            ));
        }
        None => {
            tokio::spawn(crate::serving_secret::watch(
                client.clone(),
                SecretRef {
                    namespace: args.common.namespace.clone(),
                    name: args.tls_secret.clone(),
                },
                cert.clone(),
                metrics.clone(),
            ));
        }
    }
    let tls = RustlsConfig::from_config(Arc::new(crate::tls::server_config(cert.clone())?));
    let readiness: Readiness = {
        let (view, runtime, cert) = (view.clone(), runtime.clone(), cert.clone());
        Arc::new(move || {
            if runtime.is_stopping() {
                return Err("shutting down".into());
            }
            view.readiness()?;
            cert.readiness(SystemTime::now())?;
            // No policy in force: still ready (every resize is allowed with a warning saying
            // why, rather than failing open unseen), but `/readyz` says so.
            Ok(view.policy_note())
        })
    };
    let ready = {
        let readiness = readiness.clone();
        Arc::new(move || readiness().is_ok())
    };
    let render = {
        let (base, view) = (render_metrics_of(&metrics), view.clone());
        Arc::new(move || {
            resize_guard_runtime::cluster_version::append_metrics(base(), &view.policy_metrics())
        })
    };
    let state = AppState {
        cluster: view,
        metrics,
        events: Some(runtime.events().clone()),
        ready,
    };
    runtime
        .serve_health(args.common.health_addr, readiness, render)
        .await?;

    // `/readyz` reports "shutting down" from the signal on (the runtime flips it first).
    let handle = axum_server::Handle::new();
    let (grace, h, stopped) = (args.shutdown_grace, handle.clone(), runtime.stopped());
    tokio::spawn(async move {
        stopped.await;
        tracing::info!(
            grace_secs = grace.as_secs(),
            "shutting down: draining in-flight reviews"
        );
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
