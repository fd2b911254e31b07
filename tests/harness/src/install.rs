//! Installing resize-guard's own objects from `deploy/` into the harness's cluster, and running
//! its binaries the way they run in a cluster: as the `resize-guard` ServiceAccount (so RBAC from
//! `deploy/rbac.yaml` is exercised), with logs kept next to the control plane's.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};

use crate::control_plane::Identity;
use crate::env::Env;
use crate::process::Process;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Applies the install namespace, ServiceAccount and RBAC from `deploy/`.
pub async fn apply_rbac(env: &Env) {
    let k = env.kubectl();
    for file in ["deploy/namespace.yaml", "deploy/rbac.yaml"] {
        let path = repo_root().join(file);
        let out = match k.run(["apply", "-f", &path.display().to_string()]).await {
            Ok(o) => o,
            Err(e) => panic!("kubectl apply {file}: {e}"),
        };
        assert!(out.success, "kubectl apply {file}: {}", out.stderr);
    }
}

/// Writes the policy ConfigMap (server-side apply: creates or replaces).
pub async fn set_policy(env: &Env, doc: &str) {
    apply_rbac(env).await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "resize-guard");
    let cm = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "resize-guard", "namespace": "resize-guard"},
        "data": {"policy.yaml": doc},
    });
    if let Err(e) = api
        .patch(
            "resize-guard",
            &PatchParams::apply("resize-guard-tests").force(),
            &Patch::Apply(&cm),
        )
        .await
    {
        panic!("policy ConfigMap: {e}");
    }
}

/// Starts `bin` with `args` as the resize-guard ServiceAccount; its log is
/// `<control-plane dir>/<name>.log`.
pub fn spawn_as_service_account(env: &Env, bin: &str, name: &str, args: &[String]) -> Process {
    let mut cmd = Command::new(bin);
    cmd.env(
        "KUBECONFIG",
        env.cp.kubeconfig_path_for(Identity::ServiceAccount),
    )
    .env(
        "RUST_LOG",
        "info,resize_guard_webhook=debug,resize_guard_controller=debug,kube_client=warn",
    )
    .args(args);
    let log = env.cp.dir().join(format!("{name}.log"));
    match Process::spawn(name, cmd, &log) {
        Ok(p) => p,
        Err(e) => panic!("starting {name}: {e}"),
    }
}

/// GET `http://127.0.0.1:<port><path>`: the body on 200, else the whole response.
pub async fn http_get(port: u16, path: &str) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text)
        .await
        .map_err(|e| e.to_string())?;
    match text.split_once("\r\n\r\n") {
        Some((head, body))
            if head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200") =>
        {
            Ok(body.to_owned())
        }
        _ => Err(text),
    }
}

/// Polls `GET /readyz` until it answers 200.
pub async fn wait_ready(port: u16, process: &Process, timeout: Duration) {
    let deadline = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < deadline {
        if http_get(port, "/readyz").await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{} not ready after {timeout:?}:\n{}",
        process.name(),
        process.log_tail(4000)
    );
}
