//! # resize-guard-runtime
//!
//! What the webhook and the controller do around their own work, written once: the flags they
//! share ([`args::CommonArgs`], flattened into each program's `Args`), the process set-up
//! ([`process`]: logging, the rustls crypto provider, SIGTERM/SIGINT, a tokio runtime that does
//! not wait on stuck blocking work), and one [`Runtime`] per program that owns
//!
//! | what | where | data flow |
//! |---|---|---|
//! | health endpoints | [`health`] | `/livez`, `/readyz` (the program's readiness with its reason), `/metrics` (the program's text) on `--health-addr` |
//! | Event publishing | [`events`] | every Event of the program (the cluster view's, the webhook's, the controller's) → one bounded queue → one publisher task |
//! | shutdown | [`Runtime::stopped`] | the stop signal, seen by every part that drains or stops |
//! | Kubernetes version | [`cluster_version`] | `/version` at start-up → log lines, `resize_guard_kubernetes_*` metrics (a collector each program registers), `/readyz` |
//! | supervision | [`supervisor`] | the first supervised task (a watch, the reconcile loop) that panics or ends unasked → the program steps down |
//! | retry jitter | [`jitter`] | a random fraction for retry schedules (watch back-off, leader election, the admission probe) |
//!
//! Behind the `testing` feature (never in a release build), `fault`: panics injected into
//! supervised tasks by the supervision tests.
//!
//! Both programs allocate with mimalloc (the reasons are in `src/allocator.rs`).
//!
//! Durations on every command line (these programs' and `resize-guard-certs`') use one syntax,
//! humantime's ([`parse_duration`]): `200ms`, `30s`, `5m`, `1h30m`, `2160h`, `30d`, `1w`.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod allocator;
pub mod api_client;
pub mod args;
pub mod build_info;
pub mod certificate_expiry;
pub mod cluster_version;
pub mod events;
pub mod exposition;
#[cfg(any(test, feature = "testing"))]
pub mod fault;
pub mod health;
pub mod jitter;
pub mod listener;
pub mod policy_mode;
pub mod process;
pub mod process_metrics;
pub mod supervisor;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use kube::runtime::events::Reporter;
use tokio::sync::watch;

pub use args::CommonArgs;
pub use cluster_version::ClusterVersion;
pub use events::Events;
pub use health::{Readiness, RenderMetrics};
/// Parses a duration flag: humantime's syntax (`200ms`, `30s`, `1h30m`, `30d`; a number needs a
/// unit).
pub use humantime::parse_duration;

/// `error` and each of its causes, once each, joined by `": "` (for logs and HTTP answers:
/// our error types keep their source out of `Display`).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// A program's health endpoints, Event publisher and shutdown.
#[derive(Debug, Clone)]
pub struct Runtime {
    events: Events,
    stop: Arc<watch::Sender<bool>>,
    version: ClusterVersion,
    liveness: health::Liveness,
}

impl Runtime {
    /// Starts the Event publisher (reporting as `reporter`) and the Kubernetes version's
    /// detection, and watches `shutdown`: once it completes, [`Runtime::stopped`] completes and
    /// [`Runtime::is_stopping`] is true.
    pub fn start(
        client: kube::Client,
        reporter: Reporter,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Runtime {
        let stop = Arc::new(watch::Sender::new(false));
        let signal = stop.clone();
        tokio::spawn(async move {
            shutdown.await;
            signal.send_replace(true);
        });
        Runtime {
            version: ClusterVersion::detect(client.clone()),
            events: Events::start(client, reporter),
            stop,
            liveness: health::Liveness::default(),
        }
    }

    /// The Event publisher.
    pub fn events(&self) -> &Events {
        &self.events
    }

    /// The API server's Kubernetes version, once read.
    pub fn version(&self) -> &ClusterVersion {
        &self.version
    }

    /// What `/livez` answers: mark it failed when a part the program cannot do without stopped.
    pub fn liveness(&self) -> &health::Liveness {
        &self.liveness
    }

    /// Serves `/livez`, `/readyz` and `/metrics` on `addr` (see [`health`]) in the background.
    /// `/livez` follows [`Runtime::liveness`]; `/readyz` also requires a live process and a known,
    /// supported Kubernetes version; `/metrics` is `metrics` alone (register
    /// [`ClusterVersion::collector`] in the program's registry for the version's metrics).
    pub async fn serve_health(
        &self,
        addr: SocketAddr,
        readiness: Readiness,
        metrics: RenderMetrics,
    ) -> std::io::Result<()> {
        let (v, live) = (self.version.clone(), self.liveness.clone());
        let readiness: Readiness = Arc::new(move || {
            live.check()?;
            v.readiness()?;
            readiness()
        });
        let router = health::router_with_liveness(self.liveness.clone(), readiness, metrics);
        health::serve(addr, router).await
    }

    /// True once the shutdown signal has come.
    pub fn is_stopping(&self) -> bool {
        *self.stop.borrow()
    }

    /// Completes once the shutdown signal has come (at once if it already has).
    pub fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.stop.subscribe();
        async move {
            // An error means the sender is gone, which only the watching task's end can cause
            // after it signalled.
            let _ = rx.wait_for(|stopping| *stopping).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn every_duration_the_flags_and_manifests_use_parses() {
        for (text, want) in [
            ("200ms", Duration::from_millis(200)),
            ("4s", Duration::from_secs(4)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("1h30m", Duration::from_secs(5400)),
            ("1s500ms", Duration::from_millis(1500)),
            ("2160h", Duration::from_secs(2160 * 3600)),
            ("87600h", Duration::from_secs(87_600 * 3600)),
            ("30d", Duration::from_secs(30 * 86_400)),
        ] {
            assert_eq!(parse_duration(text).ok(), Some(want), "{text}");
        }
        for bad in ["", "3", "soon", "h", "-1s", "1hh", "ms"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_chain_prints_each_cause_once() {
        let io = std::io::Error::other("disk on fire");
        let outer = std::io::Error::other(Wrapped(io));
        assert_eq!(error_chain(&outer), "writing: disk on fire");
    }

    #[derive(Debug)]
    struct Wrapped(std::io::Error);
    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("writing")
        }
    }
    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[tokio::test]
    async fn the_shutdown_signal_reaches_every_waiter_and_stays_given() {
        let (service, _handle) = tower_test::mock::pair::<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >();
        let client = kube::Client::new(service, "default");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let reporter = Reporter {
            controller: "test".into(),
            instance: None,
        };
        let runtime = Runtime::start(client, reporter, async {
            let _ = rx.await;
        });
        let waiter = tokio::spawn(runtime.stopped());
        tokio::task::yield_now().await;
        assert!(!runtime.is_stopping());
        assert!(!waiter.is_finished());
        tx.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(runtime.is_stopping());
        runtime.stopped().await;
    }
}
