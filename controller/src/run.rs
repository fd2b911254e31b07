//! The process: cluster view, health endpoints, leader election, and the controller (and, with
//! `--certificates=self`, the certificate manager) running only while this replica leads: both
//! start on gaining the Lease and stop on losing it. SIGTERM stops them, releases the Lease and
//! exits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::{Controller, watcher};
use resize_guard_cluster::ClusterView;

use crate::actuate::Actuator;
use crate::args::{Args, CertificateMode};
use crate::certificates;
use crate::leader::Elector;
use crate::metrics::Metrics;
use crate::reconcile::{Ctx, error_policy, reconcile};

/// Runs until SIGTERM/SIGINT.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let client = kube::Client::try_default().await?;
    serve(
        args,
        client,
        resize_guard_cluster::process::shutdown_signal(),
    )
    .await
}

/// Runs with a given client until `shutdown` completes.
pub async fn serve(
    args: Args,
    client: kube::Client,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let identity = args
        .identity
        .clone()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| format!("resize-guard-controller-{}", std::process::id()));
    let certificates = match args.certificates.mode {
        CertificateMode::SelfManaged => Some(
            certificates::Settings::new(&args.namespace, &args.certificates)
                .map_err(anyhow::Error::msg)?,
        ),
        CertificateMode::External => {
            tracing::info!(
                "--certificates=external: the webhook's certificates and caBundle are provided by someone else"
            );
            None
        }
    };
    let metrics = Arc::new(Metrics::new());
    let reporter = Reporter {
        controller: "resize-guard-controller".into(),
        instance: Some(identity.clone()),
    };
    let view = ClusterView::start(
        client.clone(),
        &args.namespace,
        &args.policy_configmap,
        reporter.clone(),
        Arc::new(|_| {}),
    );
    let health = {
        let (view, metrics) = (view.clone(), metrics.clone());
        Router::new()
            .route("/livez", get(|| async { "ok" }))
            .route(
                "/readyz",
                get(move || {
                    let ready = view.is_ready();
                    async move {
                        if ready {
                            (StatusCode::OK, "ok")
                        } else {
                            (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
                        }
                    }
                }),
            )
            .route(
                "/metrics",
                get(move || {
                    let text = metrics.render();
                    async move { text }
                }),
            )
    };
    let listener = tokio::net::TcpListener::bind(args.health_addr).await?;
    tracing::info!(addr = %args.health_addr, identity, "serving /livez /readyz /metrics");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, health).await {
            tracing::error!(error = %e, "health server stopped");
        }
    });

    let elector = Elector::new(
        client.clone(),
        &args.namespace,
        &args.lease_name,
        &identity,
        args.lease_duration,
    );
    let actuator = Actuator {
        client: client.clone(),
        recorder: Recorder::new(client.clone(), reporter),
        metrics: metrics.clone(),
        pods: None,
    };
    let mut shutdown = Box::pin(shutdown);
    loop {
        // Follower: try to take the Lease.
        let leading = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            r = elector.try_acquire_or_renew() => r.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "lease");
                false
            }),
        };
        if !leading {
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                _ = tokio::time::sleep(args.renew_interval) => continue,
            }
        }
        tracing::info!(identity, "became leader");
        metrics.set_leader(true);
        let certs = certificates.clone().map(|settings| {
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
            let task = tokio::spawn(certificates::run(
                client.clone(),
                settings,
                metrics.clone(),
                async move {
                    let _ = stop_rx.await;
                },
            ));
            (stop_tx, task)
        });
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let pods: Api<Pod> = Api::all(client.clone());
        let controller = Controller::new(pods, watcher::Config::default());
        let ctx = Arc::new(Ctx {
            view: view.clone(),
            pods: controller.store(),
            actuator: Actuator {
                pods: Some(controller.store()),
                ..actuator.clone()
            },
        });
        // A new policy may turn waiting pods into actionable ones (or back): look at all again.
        let policy_changes = futures::stream::unfold(view.policy_changes(), |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        });
        let ctx_for_run = ctx.clone();
        let task = tokio::spawn(
            controller
                .reconcile_all_on(policy_changes)
                .graceful_shutdown_on(async move {
                    let _ = stop_rx.await;
                })
                .run(reconcile, error_policy, ctx_for_run)
                .for_each(|_| async {}),
        );
        // resize_guard_deferred_pods, from the controller's own cache.
        let gauge = {
            let (store, metrics) = (ctx.pods.clone(), metrics.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    let n = store
                        .state()
                        .iter()
                        .filter(|p| resize_guard_policy::pod::is_deferred_now(p))
                        .count();
                    metrics.set_deferred(n);
                }
            })
        };
        let mut last_renew = Instant::now();
        let exit = loop {
            tokio::select! {
                _ = &mut shutdown => break true,
                _ = tokio::time::sleep(args.renew_interval) => {
                    match elector.try_acquire_or_renew().await {
                        Ok(true) => last_renew = Instant::now(),
                        Ok(false) => break false,
                        Err(e) => {
                            tracing::warn!(error = %e, "could not renew the lease");
                            // Step down before a follower may take over.
                            if last_renew.elapsed() + args.renew_interval >= args.lease_duration {
                                break false;
                            }
                        }
                    }
                }
            }
        };
        let _ = stop_tx.send(());
        gauge.abort();
        if let Some((stop_certs, certs_task)) = certs {
            let _ = stop_certs.send(());
            let abort = certs_task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(10), certs_task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        metrics.set_leader(false);
        if exit {
            if let Err(e) = elector.release().await {
                tracing::warn!(error = %e, "could not release the lease");
            }
            tracing::info!("stopped; lease released");
            return Ok(());
        }
        tracing::warn!(identity, "lost leadership");
    }
}
