//! Installing resize-guard into the harness's cluster exactly as a user does — `kubectl apply -k`
//! (server side) of `deploy/` — with only what local processes need changed, through a
//! kustomize overlay written next to the control plane's files: the Deployments scaled to zero
//! (the binaries run as local processes instead, each as its own ServiceAccount, so the RBAC in
//! `deploy/base/rbac-*.yaml` is exercised) and the webhook configurations' `clientConfig`
//! pointed at the local webhook (or left out when no webhook runs, or left as shipped — the
//! Service — when the test publishes its replicas as the Service's endpoints).

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::control_plane::Identity;
use crate::env::Env;
use crate::objects::force_apply;
use crate::process::Process;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What to install from `deploy/`.
#[derive(Debug, Clone, Default)]
pub struct Install {
    /// Where kube-apiserver reaches the local webhook (`https://127.0.0.1:PORT`); `None` leaves
    /// the webhook configurations out (no webhook runs, so nothing would answer them).
    pub webhook_url: Option<String>,
    /// Install `deploy/overlays/validating-only` instead of `deploy/`.
    pub validating_only: bool,
    /// Keep the shipped `clientConfig` (the Service `resize-guard/resize-guard-webhook`): the
    /// API server (with `--enable-aggregator-routing`, as the harness runs it) then calls a ready
    /// endpoint of the Service's EndpointSlices, which the test writes for its local replicas.
    /// Takes precedence over `webhook_url`.
    pub through_service: bool,
    /// Add the grants only some policies need (`deploy/components/best-effort-deletes` and
    /// `deploy/components/revert-infeasible`), as an operator does who sets `pdb: bestEffort` or
    /// `revertInfeasible: true`. Off by default: `kubectl apply -k deploy/` as shipped.
    pub with_policy_grants: bool,
}

/// The kustomization the harness applies: `deploy/` (or an overlay) plus the local changes.
pub fn overlay(how: &Install) -> String {
    let base = if how.validating_only {
        "../../../deploy/overlays/validating-only"
    } else {
        "../../../deploy"
    };
    let components = if how.with_policy_grants {
        "components:\n  - ../../../deploy/components/best-effort-deletes\n  - ../../../deploy/components/revert-infeasible\n"
    } else {
        ""
    };
    let mut out = format!(
        "# Written by resize-guard-harness: deploy/ as shipped, with local processes in place of\n\
         # the Deployments.\n\
         apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {base}\n\
         {components}patches:\n  - target: {{kind: Deployment}}\n    patch: |-\n      - {{op: replace, path: /spec/replicas, value: 0}}\n"
    );
    for (kind, path) in [
        ("MutatingWebhookConfiguration", "/mutate"),
        ("ValidatingWebhookConfiguration", "/validate"),
    ] {
        // deploy/ installs the mutating configuration, the overlay the validating one.
        if how.validating_only == kind.starts_with("Mutating") {
            continue;
        }
        if how.through_service {
            continue;
        }
        // Both entries: the webhook's and the admission probe's (`probe.resize-guard.io`).
        let patch = match &how.webhook_url {
            Some(url) => (0..2)
                .map(|i| {
                    format!(
                        "      - {{op: replace, path: /webhooks/{i}/clientConfig, value: {{url: \"{url}{path}\"}}}}\n"
                    )
                })
                .collect::<String>(),
            None => format!(
                "      $patch: delete\n      apiVersion: admissionregistration.k8s.io/v1\n      kind: {kind}\n      metadata: {{name: resize-guard}}\n"
            ),
        };
        out.push_str(&format!(
            "  - target: {{kind: {kind}, name: resize-guard}}\n    patch: |-\n{patch}"
        ));
    }
    out
}

/// Writes [`overlay`] into a fresh directory three levels below the repository root, so that
/// `../../../deploy` is the real `deploy/` (kustomize takes bases by relative path only), and
/// returns the directory.
pub fn write_overlay(how: &Install) -> anyhow::Result<PathBuf> {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let dir = repo_root()
        .join("target")
        .join("harness-overlays")
        .join(format!(
            "{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("kustomization.yaml"), overlay(how))?;
    Ok(dir)
}

/// Installs resize-guard: `kubectl apply -k <overlay> --server-side --force-conflicts` (the
/// policy ConfigMap goes back to `deploy/`'s; tests that need another policy set it after).
pub async fn install(env: &Env, how: &Install) {
    let dir = match write_overlay(how) {
        Ok(d) => d,
        Err(e) => panic!("writing the harness overlay: {e}"),
    };
    let path = dir.display().to_string();
    let out = match env
        .kubectl()
        .run(["apply", "-k", &path, "--server-side", "--force-conflicts"])
        .await
    {
        Ok(o) => o,
        Err(e) => panic!("kubectl apply -k {path}: {e}"),
    };
    assert!(
        out.success,
        "kubectl apply -k {path}:\n{}\n{}",
        out.stdout, out.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Installs everything but the webhook configurations: for suites that run only the
/// controller.
pub async fn apply_rbac(env: &Env) {
    install(env, &Install::default()).await;
}

/// Writes the policy ConfigMap (server-side apply: creates or replaces).
pub async fn set_policy(env: &Env, doc: &str) {
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "resize-guard");
    let cm = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "resize-guard", "namespace": "resize-guard"},
        "data": {"policy.yaml": doc},
    });
    if let Err(e) = force_apply(&api, "resize-guard", "resize-guard-tests", &cm).await {
        panic!("policy ConfigMap: {e}");
    }
}

/// Waits until the latest `policy loaded` line in `process`'s log (the cluster view logs the
/// effective policy as YAML after it, one field per line) satisfies `loaded`: the bounded wait for
/// a policy edit to reach a webhook or controller process. Panics with the log tail after 30 s.
pub async fn wait_policy(process: &Process, loaded: impl Fn(&str) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let log = process.log_tail(200_000);
        if let Some((_, latest)) = log.rsplit_once("policy loaded")
            && loaded(latest)
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} did not load the expected policy; log tail:\n{}",
            process.name(),
            process.log_tail(4000)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// True when the effective policy YAML `policy` (as [`wait_policy`] passes it: its first line
/// follows the `effective_policy=` field name, maybe among ANSI colour codes) has the line `line`,
/// indentation ignored.
pub fn policy_has(policy: &str, line: &str) -> bool {
    policy.lines().any(|l| {
        let l = l.trim();
        l == line || (l.contains("effective_policy") && l.ends_with(line))
    })
}

/// Starts `bin` with `args` as the ServiceAccount `identity`; its log is
/// `<control-plane dir>/<name>.log`.
pub fn spawn_as_service_account(
    env: &Env,
    identity: Identity,
    bin: &str,
    name: &str,
    args: &[String],
) -> Process {
    spawn_with_kubeconfig(env, &env.cp.kubeconfig_path_for(identity), bin, name, args)
}

/// Starts `bin` with `args`, reaching the API server through `kubeconfig`; its log is
/// `<control-plane dir>/<name>.log`.
pub fn spawn_with_kubeconfig(
    env: &Env,
    kubeconfig: &std::path::Path,
    bin: &str,
    name: &str,
    args: &[String],
) -> Process {
    let mut cmd = Command::new(bin);
    cmd.env("KUBECONFIG", kubeconfig)
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
