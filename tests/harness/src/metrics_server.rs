//! Upstream metrics-server v0.8.0 (`third_party/metrics-server`, built by
//! `third_party/metrics-server/build.sh`) as the harness's metrics.k8s.io API: a local process with
//! the identity and RBAC its release manifests give it (`manifests/base/rbac.yaml`, applied as it
//! is: ServiceAccount `kube-system/metrics-server`, ClusterRole `system:metrics-server` with
//! `nodes/metrics`, `system:auth-delegator`, the `extension-apiserver-authentication-reader`
//! RoleBinding), registered by the release's own `apiservice.yaml` (`v1beta1.metrics.k8s.io`,
//! `insecureSkipTLSVerify`) behind a selector-less Service `kube-system/metrics-server` whose
//! EndpointSlice the harness publishes the way [`crate::replica`] publishes the webhook
//! (kube-apiserver runs `--enable-aggregator-routing`, and has the front-proxy client certificate
//! from [`crate::control_plane`]). It scrapes the hollow nodes' kubelets — those started with
//! [`crate::hollow_node::HollowNodeConfig::kubelet_api`] — at the InternalIP and port their Node
//! status advertises, authenticating with its ServiceAccount token, which the kubelet checks by
//! TokenReview and SubjectAccessReview as in production.
//!
//! ```no_run
//! # async fn demo(cp: &resize_guard_harness::control_plane::ControlPlane) -> anyhow::Result<()> {
//! use resize_guard_harness::metrics_server::MetricsServer;
//! let mut ms = MetricsServer::start(cp).await?;      // APIService Available
//! let m = ms.wait_for_pod(cp, "ns", "pod", |_| true).await?;   // a PodMetrics served
//! ms.stop();                                                      // "metrics-server is down"
//! ms.restart(cp).await?;
//! # Ok(()) }
//! ```
//!
//! Resolution: `--metric-resolution=10s`, metrics-server's minimum (its default is 60 s), with
//! `--kubelet-request-timeout=5s` (the default 10 s must stay under 90 % of the resolution). A
//! PodMetrics needs two scrapes of the pod, so a new value shows within about two resolutions.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use serde_json::json;

use crate::binaries::cached_path;
use crate::control_plane::ControlPlane;
use crate::kubectl::Kubectl;
use crate::objects::force_apply;
use crate::process::{Process, free_port};
use crate::replica::host_ip;

/// The environment variable naming the `metrics-server` binary; its directory also holds the
/// release's `rbac.yaml` and `apiservice.yaml` (`third_party/metrics-server/build.sh`).
pub const BIN_ENV: &str = "RESIZE_GUARD_METRICS_SERVER_BIN";
/// Namespace of its ServiceAccount and Service (`manifests/base`).
pub const NAMESPACE: &str = "kube-system";
/// Its ServiceAccount and Service name.
pub const NAME: &str = "metrics-server";
/// The APIService it is registered as.
pub const API_SERVICE: &str = "v1beta1.metrics.k8s.io";
/// `--metric-resolution`: how often it scrapes every kubelet.
pub const METRIC_RESOLUTION: Duration = Duration::from_secs(10);
/// How long [`MetricsServer::start`] waits for the APIService to be Available.
pub const AVAILABLE_TIMEOUT: Duration = Duration::from_secs(90);
/// The field manager of the objects the harness applies.
const FIELD_MANAGER: &str = "resize-guard-harness-metrics-server";

/// The binary and the release's manifests next to it.
#[derive(Debug, Clone)]
pub struct MetricsServerFiles {
    /// `metrics-server`.
    pub bin: PathBuf,
    /// `manifests/base/rbac.yaml` of the module.
    pub rbac: PathBuf,
    /// `manifests/base/apiservice.yaml` of the module.
    pub api_service: PathBuf,
}

impl MetricsServerFiles {
    /// [`BIN_ENV`], else the build script's stamp cache `metrics-server-current`
    /// ([`cached_path`]). A missing file is an error that says how to build it; tests never
    /// skip.
    pub fn locate() -> anyhow::Result<MetricsServerFiles> {
        let bin = cached_path(BIN_ENV, "metrics-server-current/metrics-server")?;
        let dir = bin
            .parent()
            .context("metrics-server path has no directory")?;
        let files = MetricsServerFiles {
            rbac: dir.join("rbac.yaml"),
            api_service: dir.join("apiservice.yaml"),
            bin: bin.clone(),
        };
        for f in [&files.bin, &files.rbac, &files.api_service] {
            anyhow::ensure!(
                f.is_file(),
                "{} not found: run `{BIN_ENV}=\"$(third_party/metrics-server/build.sh | tail -n 1)/metrics-server\"` \
                 (or `make upstream` once)",
                f.display()
            );
        }
        Ok(files)
    }
}

/// A running metrics-server and the objects that publish it.
#[derive(Debug)]
pub struct MetricsServer {
    files: MetricsServerFiles,
    process: Process,
    ip: String,
    port: u16,
    kubeconfig: PathBuf,
    cert_dir: PathBuf,
    starts: u32,
}

impl MetricsServer {
    /// Applies the release's RBAC and APIService, the Service, a token kubeconfig for its
    /// ServiceAccount, starts the process on this machine's address at a free port, publishes it
    /// in an EndpointSlice, and waits until the APIService is Available.
    pub async fn start(cp: &ControlPlane) -> anyhow::Result<MetricsServer> {
        let files = MetricsServerFiles::locate()?;
        let kubectl = Kubectl::admin(cp);
        for manifest in [&files.rbac, &files.api_service] {
            let path = manifest.display().to_string();
            let out = kubectl
                .run([
                    "apply",
                    "--server-side",
                    "--field-manager",
                    FIELD_MANAGER,
                    "-f",
                    &path,
                ])
                .await?;
            anyhow::ensure!(out.success, "kubectl apply -f {path}: {}", out.stderr);
        }
        let client = cp.client().await?;
        let service = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"k8s-app": NAME}},
            "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": "https"}]},
        });
        apply(Api::<Service>::namespaced(client, NAMESPACE), &service)
            .await
            .context("apply Service kube-system/metrics-server")?;
        let out = kubectl
            .run(["create", "token", NAME, "-n", NAMESPACE, "--duration=24h"])
            .await?;
        anyhow::ensure!(out.success, "kubectl create token {NAME}: {}", out.stderr);
        let kubeconfig = cp.dir().join("metrics-server.kubeconfig");
        std::fs::write(&kubeconfig, token_kubeconfig(&cp.url(), out.stdout.trim()))?;
        let cert_dir = cp.dir().join("metrics-server-certs");
        std::fs::create_dir_all(&cert_dir)?;
        let (ip, port) = (host_ip()?, free_port()?);
        let mut ms = MetricsServer {
            process: spawn(cp, &files.bin, &kubeconfig, &cert_dir, &ip, port, 0)?,
            files,
            ip,
            port,
            kubeconfig,
            cert_dir,
            starts: 1,
        };
        ms.publish(cp).await?;
        ms.wait_available(cp, AVAILABLE_TIMEOUT).await?;
        Ok(ms)
    }

    /// Publishes the process's address in the Service's EndpointSlice, as the EndpointSlice
    /// controller would for a ready pod.
    async fn publish(&self, cp: &ControlPlane) -> anyhow::Result<()> {
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": NAME, "namespace": NAMESPACE,
                "labels": {"kubernetes.io/service-name": NAME,
                           "endpointslice.kubernetes.io/managed-by": FIELD_MANAGER}},
            "addressType": "IPv4",
            "ports": [{"name": "https", "port": self.port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [self.ip], "conditions": {"ready": true}}],
        });
        apply(
            Api::<EndpointSlice>::namespaced(cp.client().await?, NAMESPACE),
            &slice,
        )
        .await
        .context("apply EndpointSlice kube-system/metrics-server")?;
        Ok(())
    }

    /// Waits until the APIService's `Available` condition is True.
    pub async fn wait_available(
        &mut self,
        cp: &ControlPlane,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if !self.process.is_running() {
                anyhow::bail!("metrics-server exited:\n{}", self.process.log_tail(6000));
            }
            let last = match api_service_available(cp).await {
                Ok((true, _)) => return Ok(()),
                Ok((false, why)) => why,
                Err(e) => format!("{e:#}"),
            };
            if Instant::now() > deadline {
                anyhow::bail!(
                    "APIService {API_SERVICE} not Available after {timeout:?}: {last}\nmetrics-server log:\n{}",
                    self.process.log_tail(6000)
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Polls `PodMetrics` `namespace/pod` until one is served for which `accept` is true
    /// (timeout: six resolutions), and returns it.
    pub async fn wait_for_pod(
        &mut self,
        cp: &ControlPlane,
        namespace: &str,
        pod: &str,
        accept: impl Fn(&serde_json::Value) -> bool,
    ) -> anyhow::Result<serde_json::Value> {
        let timeout = METRIC_RESOLUTION * 6;
        let deadline = Instant::now() + timeout;
        let client = cp.client().await?;
        let mut last = None;
        loop {
            if !self.process.is_running() {
                anyhow::bail!("metrics-server exited:\n{}", self.process.log_tail(6000));
            }
            if let Some(m) = pod_metrics(&client, namespace, pod).await? {
                if accept(&m) {
                    return Ok(m);
                }
                last = Some(m);
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "no accepted PodMetrics {namespace}/{pod} after {timeout:?}; last: {}\nmetrics-server log:\n{}",
                    last.map_or("none served".to_owned(), |m| m.to_string()),
                    self.process.log_tail(4000)
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Stops the process (SIGTERM); its EndpointSlice and the APIService stay, so the aggregator
    /// reports it unavailable ([`api_service_available`]) and `metrics.k8s.io` requests get 503,
    /// as when its pod is down.
    pub fn stop(&mut self) {
        self.process.stop(Duration::from_secs(5));
    }

    /// Starts the process again on the same address and port (same token and serving
    /// certificate directory) and waits until the APIService is Available. Its metrics start
    /// empty: a PodMetrics needs two new scrapes.
    pub async fn restart(&mut self, cp: &ControlPlane) -> anyhow::Result<()> {
        self.stop();
        self.process = spawn(
            cp,
            &self.files.bin,
            &self.kubeconfig,
            &self.cert_dir,
            &self.ip,
            self.port,
            self.starts,
        )?;
        self.starts += 1;
        self.wait_available(cp, AVAILABLE_TIMEOUT).await
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// The process log.
    pub fn log_path(&self) -> &Path {
        self.process.log_path()
    }

    /// The last `bytes` of the process log.
    pub fn log_tail(&self, bytes: u64) -> String {
        self.process.log_tail(bytes)
    }
}

/// `GET /apis/metrics.k8s.io/v1beta1/namespaces/<namespace>/pods/<pod>`: the PodMetrics, or
/// None while metrics-server has none for the pod (404).
pub async fn pod_metrics(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
) -> anyhow::Result<Option<serde_json::Value>> {
    let req = http::Request::get(format!(
        "/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/{pod}"
    ))
    .body(Vec::new())?;
    match client.request::<serde_json::Value>(req).await {
        Ok(m) => Ok(Some(m)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(e).with_context(|| format!("GET PodMetrics {namespace}/{pod}")),
    }
}

/// A container's `usage` entry of a PodMetrics: (cpu, memory) as the API prints them.
pub fn container_usage(metrics: &serde_json::Value, container: &str) -> Option<(String, String)> {
    let c = metrics["containers"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == container)?;
    Some((
        c["usage"]["cpu"].as_str()?.to_owned(),
        c["usage"]["memory"].as_str()?.to_owned(),
    ))
}

/// The APIService's Available condition as the aggregator last checked it (every ~10 s): (status
/// is True, its status, reason and message). Use it to see "metrics-server is down": a
/// `metrics.k8s.io` request while it is down gets 503, which the kube client retries for a long
/// time (seen as repeated 503s in the audit log).
pub async fn api_service_available(cp: &ControlPlane) -> anyhow::Result<(bool, String)> {
    let client = cp.client().await?;
    let req = http::Request::get(format!(
        "/apis/apiregistration.k8s.io/v1/apiservices/{API_SERVICE}"
    ))
    .body(Vec::new())?;
    let svc: serde_json::Value = client.request(req).await?;
    let cond = svc["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"));
    Ok(match cond {
        Some(c) => (
            c["status"] == "True",
            format!(
                "Available={} {}: {}",
                c["status"], c["reason"], c["message"]
            ),
        ),
        None => (false, "no Available condition".to_owned()),
    })
}

/// Server-side applies `object` as [`NAME`] through `api`, as [`FIELD_MANAGER`] (forced).
async fn apply<K>(api: Api<K>, object: &serde_json::Value) -> kube::Result<K>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    force_apply(&api, NAME, FIELD_MANAGER, object).await
}

fn token_kubeconfig(server: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: harness\n  cluster:\n    server: {server}\n    \
         insecure-skip-tls-verify: true\nusers:\n- name: {NAME}\n  user:\n    token: {token}\n\
         contexts:\n- name: harness\n  context:\n    cluster: harness\n    user: {NAME}\n\
         current-context: harness\n"
    )
}

/// Starts the process: the flags of the release's `manifests/base/deployment.yaml` for a local
/// process (kubeconfig instead of in-cluster config, its own address, InternalIP only, the
/// minimum resolution), logging to `metrics-server.log` (`.<n>.log` after a restart).
fn spawn(
    cp: &ControlPlane,
    bin: &Path,
    kubeconfig: &Path,
    cert_dir: &Path,
    ip: &str,
    port: u16,
    start: u32,
) -> anyhow::Result<Process> {
    let mut cmd = std::process::Command::new(bin);
    let kubeconfig = kubeconfig.display();
    cmd.args([
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        format!("--cert-dir={}", cert_dir.display()),
        format!("--bind-address={ip}"),
        format!("--secure-port={port}"),
        "--kubelet-insecure-tls".to_owned(),
        "--kubelet-preferred-address-types=InternalIP".to_owned(),
        "--kubelet-use-node-status-port".to_owned(),
        format!("--metric-resolution={}s", METRIC_RESOLUTION.as_secs()),
        "--kubelet-request-timeout=5s".to_owned(),
        "--v=2".to_owned(),
    ]);
    let log = match start {
        0 => cp.dir().join("metrics-server.log"),
        n => cp.dir().join(format!("metrics-server.{n}.log")),
    };
    Process::spawn("metrics-server", cmd, &log)
}
