//! The process: the [`Runtime`] (health endpoints, the one Event publisher, the stop signal),
//! the cluster view, leader election, and the leader's work ([`Leading`]: the controller and,
//! with `--certificates=self`, the certificate manager), started on gaining the Lease and stopped
//! the moment it is lost. SIGTERM lets in-flight reconciles finish within the fence, releases the
//! Lease and exits.
//!
//! **Supervision.** The view's watch tasks and the leader's tasks run under one
//! [`Supervisor`](resize_guard_runtime::supervisor::Supervisor). The first that panics or ends
//! unasked makes this replica step down at once, leading or not: `/livez` and `/readyz` fail with
//! the reason, every write stops (leadership revoked, the leader's work aborted), the Lease is
//! released so a follower takes over within its retry period instead of the lease duration, the
//! exit is counted (`resize_guard_task_exits_total{task}`), and the process exits non-zero so the
//! kubelet restarts it with fresh caches. A replica with a frozen cache never leads again.

use std::sync::Arc;

use axum::http::{HeaderValue, header::USER_AGENT};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::events::Reporter;
use resize_guard_cluster::ClusterView;
use resize_guard_cluster::view::ViewConfig;
use resize_guard_runtime::Runtime;
use tokio::sync::broadcast::error::RecvError;

use crate::args::Args;
use crate::certificates;
use crate::certificates::CertificateMode;
use crate::leading::{Duties, Leading};
use crate::lease::elector::Elector;
use crate::lease::fence::Leadership;
use crate::metrics::Metrics;
use crate::preemption::actuator::Actuator;
use crate::preemption::reconcile::Course;

/// Runs until SIGTERM/SIGINT.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let client = client(&identity(&args)).await?;
    serve(
        args,
        client,
        resize_guard_runtime::process::shutdown_signal(),
    )
    .await
}

/// `resize-guard-controller probe`: the admission probe, once ([`crate::admission_probe::once`]).
pub async fn probe(
    args: Args,
    wait: std::time::Duration,
) -> anyhow::Result<std::process::ExitCode> {
    let client = client("probe").await?;
    crate::admission_probe::once(client, &args.common.namespace, &args.admission_probe, wait).await
}

/// The program's client; every request names this replica (`who`), so the audit log tells
/// replicas apart.
async fn client(who: &str) -> anyhow::Result<kube::Client> {
    let mut config = kube::Config::infer().await?;
    let agent = format!(
        "resize-guard-controller/{} ({who})",
        env!("CARGO_PKG_VERSION"),
    );
    config
        .headers
        .push((USER_AGENT, HeaderValue::from_str(&agent)?));
    Ok(resize_guard_runtime::api_client::build(config)?)
}

/// This replica's identity in the Lease: `--identity`, else the host (pod) name.
fn identity(args: &Args) -> String {
    args.identity
        .clone()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| format!("resize-guard-controller-{}", std::process::id()))
}

/// Runs with a given client until `shutdown` completes.
pub async fn serve(
    args: Args,
    client: kube::Client,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let identity = identity(&args);
    let timing = args.lease_timing().map_err(anyhow::Error::msg)?;
    let certificates = match args.certificates.mode {
        CertificateMode::SelfManaged => Some(
            certificates::Settings::new(&args.common.namespace, &args.certificates)
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
    let runtime = Runtime::start(client.clone(), reporter, shutdown);
    let common = &args.common;
    let view = ClusterView::start(client.clone(), {
        let mut config = ViewConfig::new(
            &common.namespace,
            &common.policy_configmap,
            runtime.events().clone(),
        );
        config.keep_pods = true;
        config.version = runtime.version().clone();
        config.keep_pod_if = crate::preemption::reconcile::concerns_controller;
        config.unhealthy_after = common.watch_unhealthy_after;
        config.initial_list = common.initial_list;
        // The controller acts on PDBs: a stale PDB cache is as unsafe to act on as a stale pod one.
        config.acts_on_pdbs = true;
        #[cfg(feature = "testing")]
        {
            config.injected_panics = resize_guard_runtime::fault::InjectedPanics::parse(
                args.inject_panic.iter().map(String::as_str),
            )
            .map_err(anyhow::Error::msg)?;
        }
        let m = metrics.clone();
        config.on_watch_error = Arc::new(move |w| m.watch_error(w.as_str()));
        config
    });
    // `/metrics` reads the version and the policy in force at each scrape.
    resize_guard_cluster::exposition::expose(&view, metrics.exposition(), runtime.version());
    let pods = view
        .pod_store()
        .ok_or_else(|| anyhow::anyhow!("the cluster view keeps no pod store"))?;
    let probe = crate::admission_probe::start(
        client.clone(),
        &common.namespace,
        &args.admission_probe,
        runtime.events().clone(),
        metrics.exposition(),
        runtime.stopped(),
    );
    // `/readyz`: 503 with the view's reason until every watch has listed and while one has been
    // failing too long.
    runtime
        .serve_health(
            common.health_addr,
            {
                // No policy in force: the controller idles, and is not ready, saying why. A
                // probe that did not reach the webhook is a note, never unreadiness
                // (`crate::admission_probe` says why).
                let view = view.clone();
                Arc::new(move || {
                    view.readiness()?;
                    match view.policy_problem() {
                        Some(why) => Err(why),
                        None => Ok(notes(
                            view.policy_note(),
                            probe.as_ref().and_then(|p| p.note()),
                        )),
                    }
                })
            },
            {
                let metrics = metrics.clone();
                Arc::new(move || metrics.render())
            },
        )
        .await?;

    let elector = Elector::new(
        client.clone(),
        &common.namespace,
        &args.lease_name,
        &identity,
        timing,
    );
    let supervisor = view.supervisor().clone();
    let leadership = Leadership::new();
    let course = Course {
        actuator: Actuator {
            client: client.clone(),
            events: runtime.events().clone(),
            metrics: metrics.clone(),
            leadership: leadership.clone(),
            seal: Arc::new(crate::preemption::seal::PlanSeal::new(&common.namespace)),
        },
        brakes: Arc::new(crate::preemption::brakes::Brakes::new()),
        waits: Arc::new(crate::preemption::decision::Waits::new()),
    };
    loop {
        // Follower: take the Lease (jittered retries) or stop.
        tokio::select! {
            _ = runtime.stopped() => return Ok(()),
            exit = supervisor.exited() => {
                return step_down(exit, &runtime, &metrics, &elector, &leadership, None).await;
            }
            _ = elector.acquire(&leadership) => {}
        }
        tracing::info!(identity, ?timing, "became leader");
        metrics.set_leader(true);
        let mut work = Leading::start(
            pods.clone(),
            triggers(&view, pods.clone()),
            &client,
            &view,
            &metrics,
            &course,
            Duties {
                certificates: certificates.clone(),
                last_good: crate::last_good::LastGood {
                    namespace: common.namespace.clone(),
                    policy_configmap: common.policy_configmap.clone(),
                },
            },
        );
        // Leader: renew until shutdown, a renewal that misses the renew deadline, or a fence
        // that passed unrenewed (a process that was stopped wakes up fenced).
        let exit = tokio::select! {
            _ = runtime.stopped() => true,
            _ = elector.keep(&leadership) => false,
            _ = leadership.lost() => false,
            exit = supervisor.exited() => {
                return step_down(exit, &runtime, &metrics, &elector, &leadership, Some(work)).await;
            }
        };
        if exit {
            work.drain(&leadership, &elector).await;
        }
        leadership.revoke();
        work.abort().await;
        metrics.set_leader(false);
        if exit {
            if let Err(e) = elector.release().await {
                tracing::warn!(error = %e, "could not release the lease");
            }
            tracing::info!("stopped; lease released");
            return Ok(());
        }
        tracing::warn!(identity, "lost leadership; every write stopped");
    }
}

/// The `/readyz` notes, joined.
fn notes(policy: Option<String>, probe: Option<String>) -> Option<String> {
    match (policy, probe) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

/// A supervised task stopped: stop acting, give the Lease up, fail `/livez`, and end the process
/// with the reason (the kubelet restarts it with fresh caches; meanwhile a follower leads).
async fn step_down(
    exit: resize_guard_runtime::supervisor::TaskExit,
    runtime: &Runtime,
    metrics: &Metrics,
    elector: &Elector,
    leadership: &Leadership,
    work: Option<Leading>,
) -> anyhow::Result<()> {
    let why = format!("{exit}; this replica stepped down");
    runtime.liveness().fail(why.clone());
    metrics.task_exited(&exit.task);
    leadership.revoke();
    if let Some(work) = work {
        work.abort().await;
    }
    metrics.set_leader(false);
    match elector.release().await {
        Ok(()) => tracing::error!(task = %exit.task, how = %exit.how,
            "stepped down: every write stopped and the lease released; exiting so the process restarts"),
        Err(e) => tracing::error!(task = %exit.task, how = %exit.how, error = %e,
            "stepped down: every write stopped, but the lease could not be released (a follower takes over once it expires); exiting so the process restarts"),
    }
    Err(anyhow::anyhow!(why))
}

/// What the controller reconciles: every pod already cached (a new leader looks at all of
/// them), then every pod the view's one watch applies or deletes. A receiver that fell behind
/// has missed events, so it looks at every cached pod again.
fn triggers(
    view: &ClusterView,
    pods: kube::runtime::reflector::Store<Pod>,
) -> impl futures::Stream<Item = Result<Pod, kube::runtime::watcher::Error>> + Send + 'static {
    let events = futures::stream::unfold(view.pod_events(), |mut rx| async move {
        match rx.recv().await {
            Ok(pod) => Some((Ok(pod), rx)),
            Err(RecvError::Lagged(n)) => Some((Err(n), rx)),
            Err(RecvError::Closed) => None,
        }
    });
    let all = |pods: &kube::runtime::reflector::Store<Pod>| {
        pods.state()
            .into_iter()
            .map(|p| Ok((*p).clone()))
            .collect::<Vec<_>>()
    };
    let now = futures::stream::iter(all(&pods));
    let later = events.flat_map(move |e| {
        let batch = match e {
            Ok(pod) => vec![Ok((*pod).clone())],
            Err(n) => {
                tracing::warn!(
                    missed = n,
                    "the controller fell behind the pod watch; looking at every pod again"
                );
                all(&pods)
            }
        };
        futures::stream::iter(batch)
    });
    now.chain(later)
}
