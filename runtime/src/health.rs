//! The health endpoints both programs serve on a plain port, outside any trace layer: `/livez` (200
//! `ok` while the process works; 503 `dead: <why>` once a part it cannot do without has stopped,
//! [`Liveness::fail`], e.g. the controller's reconcile loop or a watch task panicking, on its way
//! to stepping down and exiting), `/readyz` (200 `ok`; 200 `ok (degraded: <why>)` while the program
//! serves but cannot do all of its job, e.g. the webhook with no policy in force, which allows
//! every resize with a warning rather than fail open unseen; or 503 `not ready: <why>`) and
//! `/metrics` (the program's one registry as OpenMetrics text, labelled
//! [`crate::exposition::CONTENT_TYPE`]).

use std::net::SocketAddr;
use std::sync::{Arc, PoisonError, RwLock};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::{MethodRouter, get};

/// Why the process is not ready (`Err`), or `Ok` with what it cannot do while it serves
/// (`Some`: degraded).
pub type Readiness = Arc<dyn Fn() -> Result<Option<String>, String> + Send + Sync>;

/// Renders the program's metrics as OpenMetrics text (`src/exposition.rs`).
pub type RenderMetrics = Arc<dyn Fn() -> String + Send + Sync>;

/// Whether the process still works, for `/livez` (cheap to clone; clones share it).
#[derive(Debug, Clone, Default)]
pub struct Liveness {
    dead: Arc<RwLock<Option<String>>>,
}

impl Liveness {
    /// Marks the process dead for `why` (the first reason is kept).
    pub fn fail(&self, why: impl Into<String>) {
        // A poisoned lock still holds the state: a panic elsewhere must not hide this reason.
        let mut dead = self.dead.write().unwrap_or_else(PoisonError::into_inner);
        if dead.is_none() {
            *dead = Some(why.into());
        }
    }

    /// `Err(why)` once the process was marked dead.
    pub fn check(&self) -> Result<(), String> {
        match self.dead.read() {
            Ok(dead) => dead.clone().map_or(Ok(()), Err),
            Err(_) => Err("liveness state unavailable (a task panicked while updating it)".into()),
        }
    }
}

/// `GET /livez` (always `ok`), `/readyz` (503 with the reason `readiness` gives) and `/metrics`.
pub fn router(readiness: Readiness, metrics: RenderMetrics) -> Router {
    router_with_liveness(Liveness::default(), readiness, metrics)
}

/// [`router`] with `/livez` answering 503 `dead: <why>` once `liveness` failed.
pub fn router_with_liveness(
    liveness: Liveness,
    readiness: Readiness,
    metrics: RenderMetrics,
) -> Router {
    Router::new()
        .route(
            "/livez",
            probe(
                move || liveness.check(),
                |answer| match answer {
                    Ok(()) => (StatusCode::OK, "ok".to_owned()),
                    Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("dead: {why}")),
                },
            ),
        )
        .route(
            "/readyz",
            probe(
                move || readiness(),
                |answer| match answer {
                    Ok(None) => (StatusCode::OK, "ok".to_owned()),
                    Ok(Some(why)) => (StatusCode::OK, format!("ok (degraded: {why})")),
                    Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}")),
                },
            ),
        )
        .route(
            "/metrics",
            get(move || {
                let text = metrics();
                async move {
                    (
                        [(header::CONTENT_TYPE, crate::exposition::CONTENT_TYPE)],
                        text,
                    )
                }
            }),
        )
}

/// A `GET` route that runs `check` as the request arrives and answers with `answer` of it.
fn probe<T: Send + 'static>(
    check: impl Fn() -> T + Clone + Send + Sync + 'static,
    answer: fn(T) -> (StatusCode, String),
) -> MethodRouter {
    get(move || {
        let result = check();
        async move { answer(result) }
    })
}

/// Binds `addr` and serves `router` on it in the background, for as long as the process runs
/// (through a shutdown's drain, so `/readyz` can say it is shutting down).
pub async fn serve(addr: SocketAddr, router: Router) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::from_std(crate::listener::bind(addr)?)?;
    tracing::info!(%addr, "serving /livez /readyz /metrics");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(error = %e, "health server stopped");
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn get(app: &Router, path: &str) -> (StatusCode, String, Option<String>) {
        let resp = app
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (
            status,
            String::from_utf8(body.to_vec()).unwrap(),
            content_type,
        )
    }

    #[tokio::test]
    async fn readyz_names_the_reason_and_metrics_are_labelled_openmetrics() {
        let app = router(
            Arc::new(|| Err("watch pods failing".into())),
            Arc::new(|| "up 1\n".into()),
        );
        assert_eq!(get(&app, "/livez").await.0, StatusCode::OK);
        let (status, body, _) = get(&app, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "not ready: watch pods failing");
        let (status, body, content_type) = get(&app, "/metrics").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "up 1\n"));
        assert_eq!(
            content_type.as_deref(),
            Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
        );
    }

    #[tokio::test]
    async fn readyz_is_ok_but_says_so_when_degraded() {
        let app = router(
            Arc::new(|| Ok(Some("no policy in force".into()))),
            Arc::new(String::new),
        );
        let (status, body, _) = get(&app, "/readyz").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "ok (degraded: no policy in force)");
    }

    #[tokio::test]
    async fn livez_fails_once_the_process_is_marked_dead_with_the_first_reason() {
        let liveness = Liveness::default();
        let app = router_with_liveness(
            liveness.clone(),
            Arc::new(|| Ok(None)),
            Arc::new(String::new),
        );
        assert_eq!(get(&app, "/livez").await.1, "ok");
        liveness.fail("the reconcile loop panicked: boom");
        liveness.fail("later");
        let (status, body, _) = get(&app, "/livez").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "dead: the reconcile loop panicked: boom");
    }

    #[tokio::test]
    async fn readyz_is_ok_when_ready() {
        let app = router(Arc::new(|| Ok(None)), Arc::new(String::new));
        assert_eq!(
            get(&app, "/readyz").await,
            (
                StatusCode::OK,
                "ok".into(),
                Some("text/plain; charset=utf-8".into())
            )
        );
    }
}
