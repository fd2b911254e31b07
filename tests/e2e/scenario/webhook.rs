//! Shared setup of the webhook's end-to-end suites: the real `resize-guard-webhook` binary,
//! running as the `resize-guard-webhook` ServiceAccount, serving a loopback certificate from
//! `resize-guard-certs`, with `deploy/` installed by `kubectl apply -k` pointing at it.
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PostParams};
use resize_guard_harness::admission::{Webhooks, register, wait_active};
use resize_guard_harness::control_plane::Identity;
use resize_guard_harness::env::Env;
use resize_guard_harness::objects::create_all;
use resize_guard_harness::process::{Process, free_port};

/// A running webhook.
pub struct Webhook {
    pub process: Process,
    pub port: u16,
    pub health_port: u16,
    pub cert_dir: tempfile::TempDir,
    pub bundle: resize_guard_certs::Bundle,
}

impl Webhook {
    /// GET `http://127.0.0.1:<health><path>`: the body on 200, else the whole response.
    pub async fn health(&self, path: &str) -> Result<String, String> {
        resize_guard_harness::install::http_get(self.health_port, path).await
    }
}

#[allow(unused_imports)]
pub use resize_guard_harness::install::{apply_rbac, set_policy};

/// Starts the webhook binary as its ServiceAccount and installs `deploy/` pointing at it.
pub async fn start(env: &'static Env, which: Webhooks) -> Webhook {
    let bundle =
        resize_guard_certs::generate(&resize_guard_certs::CertSpec::for_loopback()).unwrap();
    let cert_dir = tempfile::tempdir().unwrap();
    resize_guard_certs::write_dir(&bundle, cert_dir.path()).unwrap();
    // The webhook's RBAC first; the ports are taken right before the webhook binds them (a
    // port picked earlier can be taken meanwhile by any outgoing connection).
    resize_guard_harness::install::apply_rbac(env).await;
    let (port, health_port) = (free_port().unwrap(), free_port().unwrap());
    let process = resize_guard_harness::install::spawn_as_service_account(
        env,
        Identity::Webhook,
        &crate::scenario::program("resize-guard-webhook"),
        &format!("webhook-{port}"),
        &[
            format!("--tls-addr=127.0.0.1:{port}"),
            format!("--health-addr=127.0.0.1:{health_port}"),
            format!("--cert-dir={}", cert_dir.path().display()),
            "--cert-reload-interval=200ms".into(),
            "--namespace=resize-guard".into(),
            "--instance=e2e".into(),
        ],
    );
    let hook = Webhook {
        process,
        port,
        health_port,
        cert_dir,
        bundle,
    };
    resize_guard_harness::install::wait_ready(health_port, &hook.process, Duration::from_secs(30))
        .await;
    register(
        env,
        &format!("https://127.0.0.1:{port}"),
        &hook.bundle.ca_bundle_base64(),
        which,
    )
    .await
    .unwrap();
    canary(env).await;
    hook
}

/// Waits until kube-apiserver calls the webhook: a dry-run resize that the kubelet would defer,
/// which only resize-guard's validating webhook comments on (a warning naming the shortfall).
/// (An Infeasible probe would not do: v1.37's own capacity check refuses it before validating
/// webhooks run.)
pub async fn canary(env: &Env) {
    let client = env.client().await;
    let ns_api: Api<Namespace> = Api::all(client.clone());
    let ns = "resize-guard-canary";
    if ns_api.get_opt(ns).await.unwrap().is_none() {
        let mut n = Namespace::default();
        n.metadata.name = Some(ns.into());
        ns_api.create(&PostParams::default(), &n).await.unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    if pods.get_opt("canary").await.unwrap().is_none() {
        let node = env.node("canary", "1", "1Gi").await;
        let pods_on_node = [
            ("canary-filler", "low", "800m", "64Mi"),
            ("canary", "high", "100m", "64Mi"),
        ];
        create_all(&pods, &node, &pods_on_node).await.unwrap();
    }
    let k = env.kubectl();
    wait_active(Duration::from_secs(30), || async {
        let out = k
            .resize_dry_run(ns, "canary", r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"300m"},"limits":{"cpu":"300m"}}}]}}"#)
            .await
            .unwrap();
        out.stderr.contains("resize-guard")
    })
    .await
    .unwrap();
}

/// A unique namespace on a roomy node (8 cores, 16Gi) with one running `high` pod `steady`
/// (250m, 256Mi): room to resize it back and forth. Returns the namespace, the node and the pods.
pub async fn steady(env: &Env, prefix: &str) -> (String, String, Api<Pod>) {
    env.scenario(
        prefix,
        ("roomy", "8", "16Gi"),
        &[("steady", "high", "250m", "256Mi")],
    )
    .await
}

/// A unique namespace, a node and a started field-test pair (1500m low filler, 250m high app).
pub async fn field_test(env: &Env, prefix: &str) -> (String, String, Api<Pod>) {
    env.field_test(prefix).await
}

/// Audit events for `pods/resize` on a pod, with their annotations.
pub fn resize_audit(env: &Env, ns: &str, pod: &str) -> Vec<serde_json::Value> {
    env.cp
        .audit_events()
        .into_iter()
        .filter(|e| {
            e["objectRef"]["subresource"] == "resize"
                && e["objectRef"]["namespace"] == ns
                && e["objectRef"]["name"] == pod
                && e["stage"] == "ResponseComplete"
        })
        .collect()
}

/// The controller running in this test process (`resize_guard_controller::run::serve`) as its own
/// ServiceAccount.
pub struct InProcessController {
    pub health_port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

/// Starts the controller as `identity` with a short lease, its health port and `extra` flags.
pub async fn controller(env: &Env, identity: &str, extra: &[&str]) -> InProcessController {
    let health_port = free_port().unwrap();
    let mut argv = vec![
        "resize-guard-controller".to_owned(),
        format!("--health-addr=127.0.0.1:{health_port}"),
        "--namespace=resize-guard".to_owned(),
        format!("--identity={identity}"),
        "--lease-duration=4s".to_owned(),
        "--renew-interval=1s".to_owned(),
    ];
    argv.extend(extra.iter().map(|a| (*a).to_owned()));
    let (stop, task) = serve_in_process(env, Identity::Controller, argv).await;
    InProcessController {
        health_port,
        stop: Some(stop),
        task,
    }
}

/// Runs `resize_guard_controller::run::serve` in this process with the flags `argv` (the
/// program's name first) and a client for `identity` built as the program builds its own (no
/// read timeout on quiet watches), until the returned sender is sent to or dropped.
pub async fn serve_in_process(
    env: &Env,
    identity: Identity,
    argv: Vec<String>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let args = <resize_guard_controller::args::Args as clap::Parser>::parse_from(argv);
    let config = env.cp.program_config(identity).await.unwrap();
    let client = resize_guard_runtime::api_client::build(config).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let task = tokio::spawn(resize_guard_controller::run::serve(args, client, shutdown));
    (stop, task)
}

impl InProcessController {
    /// Stops it (releasing the Lease) and waits, at most 60 s.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(60), &mut self.task).await;
    }
}

/// Asserts that kubectl's resize of `pod` failed with `ValidatePodResize`'s 422 Invalid for a
/// Guaranteed pod's QoS change, printed from its causes: upstream's error, then resize-guard's
/// explanation as the last one, followed by each of `explained` (its details).
pub fn assert_qos_invalid(
    out: &resize_guard_harness::kubectl::KubectlOutput,
    pod: &str,
    explained: &[&str],
) {
    assert!(!out.success, "{}", out.stdout);
    let explanation = "* spec: resize-guard: this resize would change the pod's QoS class \
                       from Guaranteed to Burstable";
    let mut lines = vec![
        format!("The Pod \"{pod}\" is invalid: \n"),
        "* spec: Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of \
         resizing\n"
            .to_owned(),
        explanation.to_owned(),
    ];
    lines.extend(explained.iter().map(|e| (*e).to_owned()));
    resize_guard_harness::text::assert_contains_all(&out.stderr, &lines);
}
