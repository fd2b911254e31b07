//! HTTP: the admission endpoints on the TLS port and the health/metrics endpoints on a plain port,
//! plus the process lifecycle. The TLS listener closes a connection whose handshake takes longer
//! than `--tls-handshake-timeout` or whose request head takes longer than `--header-read-timeout`
//! (a slowloris), holds at most `--max-connections` ([`crate::connections`]), and every request
//! passes the [`crate::intake`] (body limit, lanes, load shedding, body deadline) before it is
//! reviewed. Also (ready after the caches sync, while no watch has been failing for longer than
//! `--watch-unhealthy-after` and while a usable serving certificate is loaded — `/readyz` says
//! which of these is missing; drain in-flight reviews on SIGTERM, Events queued on the program's
//! one bounded publisher, off the request path). Health endpoints, the Event publisher and the stop
//! signal belong to the [`Runtime`]. The serving certificate comes from the `--tls-secret` Secret
//! through the API, or from `--cert-dir` when given (see [`crate::tls`]).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum_server::tls_rustls::RustlsConfig;
use kube::runtime::events::Reporter;
use resize_guard_runtime::{Events, Runtime, health};
use serde_json::json;

use crate::args::Args;
use crate::connections::{ConnectionLimit, Peer};
use crate::intake::{Intake, Lane, Limits};
use crate::metrics::Metrics;
use crate::review::{Cluster, Decoded, Reviewed, Stage, decode};
use crate::serving_secret::SecretRef;
use crate::tls::ServingCert;
use crate::usage::MetricsApi;
use resize_guard_cluster::{ClusterView, ViewConfig};
use resize_guard_policy::usage::Evidence;

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
    /// Reads a pod's memory usage for a resize that lowers a memory limit; `None` (tests
    /// without a cluster) judges those without it.
    pub usage: Option<MetricsApi>,
}

/// `POST /mutate` and `POST /validate` behind the [`crate::intake`] with its default limits
/// and this body limit.
pub fn admission_router(state: AppState, max_body_bytes: usize) -> Router {
    guarded_router(state, Limits::with_max_body(max_body_bytes))
}

/// `POST /mutate` and `POST /validate` behind an [`Intake`] with these limits.
pub fn guarded_router(state: AppState, limits: Limits) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .route("/validate", post(validate))
        .with_state(Served {
            app: state,
            intake: Intake::new(limits),
        })
}

/// What the admission handlers share: the state and the intake's permits.
#[derive(Clone)]
struct Served {
    app: AppState,
    intake: Intake,
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

async fn mutate(State(served): State<Served>, request: Request) -> Response {
    handle(Stage::Mutate, served, request).await
}

async fn validate(State(served): State<Served>, request: Request) -> Response {
    handle(Stage::Validate, served, request).await
}

fn error(status: StatusCode, message: String) -> Response {
    (status, axum::Json(json!({"error": message}))).into_response()
}

async fn handle(stage: Stage, served: Served, request: Request) -> Response {
    let Served { app: state, intake } = served;
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    if !json_body(&parts.headers) {
        state.metrics.bad_request();
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "AdmissionReviews must be sent as application/json".into(),
        );
    }
    // The permit is held until the answer is built: it bounds the bodies in memory. The peer
    // (set by the admission listener) gets its own share of the permits.
    let peer = parts.extensions.get::<Peer>().map(|p| p.0);
    let (ticket, body) = match intake.admit_from(&parts.headers, peer).await {
        Ok(ticket) => match intake.read(&ticket, body).await {
            Ok(body) => (ticket, body),
            Err(refusal) => return refused(&state, stage, Some(ticket.lane), &refusal),
        },
        Err(refusal) => return refused(&state, stage, refusal.lane(), &refusal),
    };
    let reviewed = match judged(stage, &state, ticket.lane, body).await {
        Ok(r) => r,
        Err(response) => return response,
    };
    drop(ticket);
    answer(stage, &state, reviewed, started)
}

fn json_body(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        })
}

/// Answers a request the intake refused: logged (shedding at warn, the rest at debug, since a
/// flood would otherwise flood the log too) and counted.
fn refused(
    state: &AppState,
    stage: Stage,
    lane: Option<Lane>,
    refusal: &crate::intake::Refusal,
) -> Response {
    state
        .metrics
        .refusal(refusal.reason(), lane.map(Lane::name));
    let why = resize_guard_runtime::error_chain(refusal);
    // A source over its share is the flood itself: at debug, with the rest.
    if matches!(refusal, crate::intake::Refusal::Shed { .. }) {
        tracing::warn!(stage = stage.name(), reason = refusal.reason(), error = %why, "shed an admission request");
    } else {
        tracing::debug!(stage = stage.name(), reason = refusal.reason(), error = %why, "refused an admission request before review");
    }
    error(refusal.status(), why)
}

/// Decodes and judges the body: inline for the regular lane, on the blocking pool for the
/// large lane. Measured on the 2-core test machine
/// (`intake::tests::a_maximum_size_review_is_judged_in_milliseconds`, unoptimised build): a
/// maximum-size (1.5 MiB) review takes about 40 ms of CPU — two of them at once, inline, would
/// stall both async workers, and with them every TLS handshake and real review, for that long;
/// a review of the regular lane's size is a fraction of that, and most are a few KiB, cheaper
/// than the hand-off to another thread.
///
/// A resize that lowers a memory limit is judged twice: first without usage (which is how it is
/// found to lower one), then after one read of `metrics.k8s.io` ([`MetricsApi`]); every other
/// review is answered from the first pass, with no I/O.
async fn judged(
    stage: Stage,
    state: &AppState,
    lane: Lane,
    body: Bytes,
) -> Result<Reviewed, Response> {
    let first = match lane {
        Lane::Regular => first_pass(stage, &body, state.cluster.as_ref()),
        Lane::Large => {
            let cluster = state.cluster.clone();
            match tokio::task::spawn_blocking(move || first_pass(stage, &body, cluster.as_ref()))
                .await
            {
                Ok(result) => result,
                Err(e) => {
                    state.metrics.bad_request();
                    tracing::error!(stage = stage.name(), error = %e, "the review task failed");
                    return Err(error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("the review failed: {e}"),
                    ));
                }
            }
        }
    };
    let (reviewed, resize) = first.map_err(|e| {
        state.metrics.bad_request();
        let why = resize_guard_runtime::error_chain(&e);
        tracing::warn!(stage = stage.name(), reason = e.reason(), error = %why, "refused a malformed admission request");
        error(StatusCode::BAD_REQUEST, why)
    })?;
    if let Some(why) = &reviewed.usage_withheld {
        state.metrics.usage_withheld();
        tracing::info!(uid = %reviewed.uid, stage = stage.name(), reason = %why,
            "memory usage not read: the request names a pod the cluster view does not know");
    }
    // Only a pod the cluster view knows by UID on its node has its usage read, under the
    // view's namespace and name (`review::known_pod`), never the request's alone.
    let (Some(resize), Some(pod)) = (resize, reviewed.usage_of.clone()) else {
        return Ok(reviewed);
    };
    let usage = match &state.usage {
        Some(api) => api.fetch(&pod.namespace, &pod.name).await,
        None => Evidence::Unavailable("this webhook has no metrics.k8s.io client".to_owned()),
    };
    Ok(resize.judge(state.cluster.as_ref(), &usage))
}

/// Decodes and judges without usage; the resize comes back too, for a second pass with usage.
fn first_pass(
    stage: Stage,
    body: &[u8],
    cluster: &dyn Cluster,
) -> Result<(Reviewed, Option<Box<crate::review::Resize>>), crate::review::ReviewError> {
    Ok(match decode(stage, body)? {
        Decoded::Answered(reviewed) => (*reviewed, None),
        Decoded::Resize(resize) => {
            let reviewed = resize.judge(cluster, &Evidence::NotFetched);
            (reviewed, Some(resize))
        }
    })
}

fn answer(stage: Stage, state: &AppState, reviewed: Reviewed, started: Instant) -> Response {
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
            allowed = reviewed.allowed, namespace = %reviewed.asked.namespace,
            pod = %reviewed.asked.pod, user = %reviewed.asked.user,
            micros = elapsed.as_micros() as u64, "admission review");
    } else {
        tracing::debug!(uid = %reviewed.uid, stage = stage.name(), decision = %reviewed.decision,
            micros = elapsed.as_micros() as u64, "admission review");
    }
    if let Some(why) = &reviewed.event_withheld {
        state.metrics.event_withheld();
        tracing::info!(uid = %reviewed.uid, decision = %reviewed.decision, reason = %why,
            "no Event recorded: the request names a pod the cluster view does not know");
    }
    if let (Some(intent), Some(events)) = (reviewed.event, &state.events) {
        events.record(intent);
    }
    axum::Json(reviewed.review).into_response()
}

/// Runs the webhook until SIGTERM/SIGINT, then drains in-flight reviews; a second SIGTERM or
/// SIGINT during the drain exits at once.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let client = resize_guard_runtime::api_client::build(kube::Config::infer().await?)?;
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
    if let Some(name) = &instance {
        crate::review::probe::name_replica(name);
    }
    let reporter = Reporter {
        controller: "resize-guard-webhook".into(),
        instance,
    };
    let runtime = Runtime::start(client.clone(), reporter, shutdown);
    let view = start_view(&args, client.clone(), &metrics, &runtime);
    let supervisor = view.supervisor().clone();
    let cert = load_cert(&args, client.clone(), &metrics, &supervisor)?;
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
    let render = render_metrics_of(&metrics);
    let state = AppState {
        cluster: view,
        usage: Some(MetricsApi::new(
            client.clone(),
            args.usage_timeout,
            metrics.clone(),
        )),
        metrics,
        events: Some(runtime.events().clone()),
        ready,
    };
    runtime
        .serve_health(args.common.health_addr, readiness, render)
        .await?;

    // `/readyz` reports "shutting down" from the signal on (the runtime flips it first). A
    // supervised task (a watch of the view, the serving Secret's watch) that panicked or ended
    // leaves a cache or a certificate that no longer moves: `/livez` fails with the reason, the
    // in-flight reviews drain, and the process exits with it, so it restarts fresh.
    let handle = axum_server::Handle::new();
    {
        let (grace, h, stopped) = (args.shutdown_grace, handle.clone(), runtime.stopped());
        let (supervisor, runtime) = (supervisor.clone(), runtime.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = stopped => tracing::info!(
                    grace_secs = grace.as_secs(),
                    "shutting down: draining in-flight reviews"
                ),
                exit = supervisor.exited() => {
                    tracing::error!(%exit, "a supervised task stopped; /livez fails and the process exits so it is restarted");
                    runtime.liveness().fail(exit.to_string());
                }
            }
            h.graceful_shutdown(Some(grace));
        });
    }
    tracing::info!(addr = %args.tls_addr, "serving /mutate /validate over TLS");
    let limits = args.limits();
    let metrics = state.metrics.clone();
    serve_admission(&args, tls, handle, metrics, guarded_router(state, limits)).await?;
    if let Some(exit) = supervisor.exit() {
        anyhow::bail!("stopped because {exit}");
    }
    tracing::info!("stopped");
    Ok(())
}

/// Starts the cluster view with the webhook's hooks and exposes what it reads on `/metrics`
/// (its supervisor is watched by [`serve`]).
fn start_view(
    args: &Args,
    client: kube::Client,
    metrics: &Arc<Metrics>,
    runtime: &Runtime,
) -> Arc<ClusterView> {
    let view = ClusterView::start(
        client,
        ViewConfig {
            unhealthy_after: args.common.watch_unhealthy_after,
            initial_list: args.common.initial_list,
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
    // `/metrics` reads the version and the policy in force at each scrape.
    resize_guard_cluster::exposition::expose(&view, metrics.exposition(), runtime.version());
    view
}

/// The serving certificate, from `--cert-dir` (reloaded from files) or the `--tls-secret`
/// Secret (watched through the API, on a task of `supervisor`).
fn load_cert(
    args: &Args,
    client: kube::Client,
    metrics: &Arc<Metrics>,
    supervisor: &resize_guard_runtime::supervisor::Supervisor,
) -> anyhow::Result<Arc<ServingCert>> {
    let cert = Arc::new(ServingCert::new());
    match &args.cert_dir {
        Some(dir) => {
            let files = crate::cert_dir::load(dir, &cert, metrics)?;
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
            crate::serving_secret::spawn(
                supervisor,
                client,
                SecretRef {
                    namespace: args.common.namespace.clone(),
                    name: args.tls_secret.clone(),
                },
                cert.clone(),
                metrics.clone(),
            );
        }
    }
    Ok(cert)
}

/// The TLS listener: the connection caps run first (a refused connection costs no handshake),
/// then the handshake under its deadline; the first request's head must arrive within
/// `--header-read-timeout` (HTTP/1.1 and HTTP/2), and so must every later head on a kept-alive
/// HTTP/1.1 connection (hyper's `header_read_timeout`); after the first request the idle and
/// age timers and HTTP/2 keep-alive pings bound how long a connection stays
/// ([`crate::connections`]).
async fn serve_admission(
    args: &Args,
    tls: RustlsConfig,
    handle: axum_server::Handle<std::net::SocketAddr>,
    metrics: Arc<Metrics>,
    router: Router,
) -> std::io::Result<()> {
    // TCP_NODELAY: a review is one small request and one small response; without it Nagle's
    // algorithm and delayed ACKs add milliseconds to every call.
    let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(tls)
        .handshake_timeout(args.tls_handshake_timeout)
        .acceptor(ConnectionLimit::new(
            axum_server::accept::NoDelayAcceptor::new(),
            args.connection_caps(),
            args.connection_timers(),
            metrics.clone(),
        ));
    let mut server = axum_server::from_tcp(resize_guard_runtime::listener::bind(args.tls_addr)?)?
        .acceptor(acceptor)
        .handle(handle)
        .first_request_timeout(args.header_read_timeout)
        .accept_error_handler(move |peer, e| {
            // A refusal at the limit was counted where it happened.
            if !crate::connections::is_limit(e) {
                metrics.connection_error();
                tracing::debug!(peer = ?peer, error = %e, "an admission connection failed before its first request");
            }
        });
    let builder = server.http_builder();
    builder
        .http1()
        .header_read_timeout(args.header_read_timeout);
    // Pings find a peer that vanished without closing (a partitioned or crashed API server
    // instance, a half-open connection) within interval + timeout; the connection's idle and
    // age timers ([`crate::connections`]) end the ones that answer but send no reviews.
    builder
        .http2()
        .keep_alive_interval(Some(args.http2_keep_alive_interval))
        .keep_alive_timeout(args.http2_keep_alive_timeout);
    server.serve(router.into_make_service()).await
}
