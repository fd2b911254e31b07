//! Shared setup of the controller's end-to-end suites: the real `resize-guard-controller`
//! binary, running as the resize-guard ServiceAccount, against the harness's kube-apiserver with
//! the simulated kubelet.
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use resize_guard_harness::env::Env;
use resize_guard_harness::install::{apply_rbac, spawn_as_service_account, wait_ready};
use resize_guard_harness::process::{Process, free_port};

/// A running controller replica.
pub struct Controller {
    pub process: Process,
    pub health_port: u16,
    pub identity: String,
}

/// Starts a replica named `identity` (short lease for fast failover tests).
pub async fn start(env: &Env, identity: &str) -> Controller {
    apply_rbac(env).await;
    let health_port = free_port().unwrap();
    let process = spawn_as_service_account(
        env,
        env!("CARGO_BIN_EXE_resize-guard-controller"),
        &format!("controller-{identity}"),
        &[
            format!("--health-addr=127.0.0.1:{health_port}"),
            "--namespace=resize-guard".into(),
            format!("--identity={identity}"),
            "--lease-duration=4s".into(),
            "--renew-interval=1s".into(),
        ],
    );
    wait_ready(health_port, &process, Duration::from_secs(30)).await;
    Controller {
        process,
        health_port,
        identity: identity.to_owned(),
    }
}

impl Controller {
    /// `resize_guard_leader` from /metrics.
    pub async fn is_leader(&self) -> bool {
        resize_guard_harness::install::http_get(self.health_port, "/metrics")
            .await
            .is_ok_and(|m| m.lines().any(|l| l.trim() == "resize_guard_leader 1"))
    }
}

/// Events in `ns` with `reason`, as (object name, note, reporting instance).
pub async fn events(env: &Env, ns: &str, reason: &str) -> Vec<(String, String, String)> {
    let api: Api<Event> = Api::namespaced(env.client().await, ns);
    let mut out = Vec::new();
    if let Ok(list) = api.list(&ListParams::default()).await {
        for e in list.items {
            if e.reason.as_deref() == Some(reason) {
                out.push((
                    e.involved_object.name.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                    e.reporting_instance.unwrap_or_default(),
                ));
            }
        }
    }
    out
}

/// Waits until an Event with `reason` exists in `ns`.
pub async fn wait_event(env: &Env, ns: &str, reason: &str) -> Vec<(String, String, String)> {
    for _ in 0..300 {
        let e = events(env, ns, reason).await;
        if !e.is_empty() {
            return e;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no {reason} event in {ns}");
}

/// Names of pods in `ns` that are terminating or gone, out of `names`.
pub async fn preempted(pods: &Api<Pod>, names: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for n in names {
        match pods.get_opt(n).await.unwrap() {
            Some(p) if p.metadata.deletion_timestamp.is_none() => {}
            _ => out.push((*n).to_owned()),
        }
    }
    out
}
