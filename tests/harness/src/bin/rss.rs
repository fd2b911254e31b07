//! `rss --webhook PATH --controller PATH [--pods N]`: resident memory of the webhook and the
//! controller binaries given on a realistic pod set.
//!
//! Starts a real control plane, installs `deploy/` (RBAC, policy; no webhook configurations),
//! creates `--nodes` Node objects (no kubelet behind them) and `--pods` pods spread over
//! `--namespaces` namespaces, each shaped like a Deployment's pod as a real cluster stores it: two
//! containers with ten env vars, probes, ports and security contexts, three volumes and their
//! mounts, owner reference, labels, a ~3.5 KB `kubectl.kubernetes.io/last-applied-configuration`
//! annotation, `spec.nodeName` and managedFields from two server-side-apply managers. No status
//! is written beyond what kube-apiserver sets: only a kubelet may write a pod's or node's status,
//! and none runs here (the pods stay Pending; a running pod's status would add ~2 kB each).
//! Then it starts both binaries as their ServiceAccounts, waits until both answer `/readyz` and
//! the controller leads (the controller of some versions caches pods only while leading), waits
//! `--settle` more (printing `VmRSS` every second to stderr), reads `VmRSS`, `VmHWM` and
//! `RssAnon` from `/proc/<pid>/status`, prints one table line per program and stops everything.
//!
//! By default the pods exist before the programs start (a restart or rollout into a running
//! cluster: the pods come in the initial list); `--programs-first` creates them after both are
//! ready (they come one by one through the watch).
//!
//! Only flags every version accepts are passed; `--certificates=external` (the controller
//! leaves certificates alone) only when the controller's `--help` lists it. The programs inherit
//! this process's environment (e.g. `MALLOC_ARENA_MAX`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use resize_guard_harness::control_plane::{ControlPlane, Identity, Options};
use resize_guard_harness::install::{Install, http_get, write_overlay};
use resize_guard_harness::kubectl::Kubectl;
use resize_guard_harness::process::{Process, free_port};
use serde_json::{Value, json};

/// Resident memory of resize-guard's webhook and controller on a realistic pod set.
#[derive(Debug, Parser)]
struct Args {
    /// The `resize-guard-webhook` binary to measure.
    #[arg(long)]
    webhook: PathBuf,
    /// The `resize-guard-controller` binary to measure.
    #[arg(long)]
    controller: PathBuf,
    /// Pods to create.
    #[arg(long, default_value_t = 3000)]
    pods: usize,
    /// Namespaces the pods are spread over.
    #[arg(long, default_value_t = 50)]
    namespaces: usize,
    /// Nodes the pods are spread over.
    #[arg(long, default_value_t = 100)]
    nodes: usize,
    /// Seconds to wait after both programs are ready (and the controller leads) before reading
    /// their memory.
    #[arg(long, default_value_t = 5)]
    settle: u64,
    /// Concurrent API requests while creating the pods.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// A label for the table lines (e.g. `before`, `after`).
    #[arg(long, default_value = "-")]
    label: String,
    /// Seconds each program may take to become ready.
    #[arg(long, default_value_t = 300)]
    ready_timeout: u64,
    /// Start the programs on the empty cluster and create the pods after they are ready (the
    /// pods then arrive through their watches one by one instead of in the initial list).
    #[arg(long)]
    programs_first: bool,
    /// Copy the control plane's logs (API server, audit, both programs) into this directory.
    #[arg(long)]
    logs: Option<PathBuf>,
}

/// Pods per Deployment (consecutive pods share an app name, labels and the last-applied copy).
const REPLICAS: usize = 6;

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,kube_client=off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    anyhow::ensure!(
        args.namespaces > 0 && args.nodes > 0 && args.concurrency > 0,
        "--namespaces, --nodes and --concurrency must be positive"
    );
    let webhook = absolute(&args.webhook)?;
    let controller = absolute(&args.controller)?;
    let controller_help = help(&controller)?;
    help(&webhook)?;

    eprintln!("rss: starting etcd and kube-apiserver …");
    let cp = ControlPlane::start(&Options::default())?;
    let rt = tokio::runtime::Runtime::new()?;
    let result = rt.block_on(measure(&cp, &args, &webhook, &controller, &controller_help));
    if let Some(dir) = &args.logs {
        copy_logs(cp.dir(), dir)?;
        eprintln!("rss: logs copied to {}", dir.display());
    }
    let lines = result?;
    println!("| label | program | pods | VmRSS MiB | VmHWM MiB | RssAnon MiB | ready after s |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for line in lines {
        println!("{line}");
    }
    drop(rt);
    drop(cp);
    Ok(())
}

/// `path` made absolute (the programs are started from this process's directory anyway, but the
/// log says which file ran).
fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    anyhow::ensure!(path.is_file(), "{} is not a file", path.display());
    Ok(std::fs::canonicalize(path)?)
}

/// `bin --help`, which must succeed.
fn help(bin: &Path) -> anyhow::Result<String> {
    let out = Command::new(bin)
        .arg("--help")
        .output()
        .with_context(|| format!("running {} --help", bin.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "{} --help failed: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

async fn measure(
    cp: &ControlPlane,
    args: &Args,
    webhook_bin: &Path,
    controller_bin: &Path,
    controller_help: &str,
) -> anyhow::Result<Vec<String>> {
    let client = cp.client().await?;
    let kubectl = Kubectl {
        bin: cp.binaries().kubectl.clone(),
        kubeconfig: cp.kubeconfig_path(),
    };
    install_rbac(&kubectl).await?;
    if !args.programs_first {
        create_all(&client, args).await?;
    }

    // The webhook serves a loopback certificate from files (no Secret needed).
    let bundle = resize_guard_certs::generate(&resize_guard_certs::CertSpec::for_loopback())?;
    let cert_dir = tempfile::tempdir()?;
    resize_guard_certs::write_dir(&bundle, cert_dir.path())?;

    let started = Instant::now();
    let (port, webhook_health) = (free_port()?, free_port()?);
    let webhook = spawn(
        cp,
        Identity::Webhook,
        webhook_bin,
        "resize-guard-webhook",
        &[
            format!("--tls-addr=127.0.0.1:{port}"),
            format!("--health-addr=127.0.0.1:{webhook_health}"),
            format!("--cert-dir={}", cert_dir.path().display()),
            "--namespace=resize-guard".into(),
            "--instance=rss".into(),
        ],
    )?;
    let controller_health = free_port()?;
    let mut controller_args = vec![
        format!("--health-addr=127.0.0.1:{controller_health}"),
        "--namespace=resize-guard".into(),
        "--identity=rss".into(),
    ];
    if controller_help.contains("--certificates") {
        controller_args.push("--certificates=external".into());
    }
    let controller = spawn(
        cp,
        Identity::Controller,
        controller_bin,
        "resize-guard-controller",
        &controller_args,
    )?;

    let timeout = Duration::from_secs(args.ready_timeout);
    let webhook_ready = async {
        wait_for(&webhook, webhook_health, "/readyz", timeout, |_| true).await?;
        anyhow::Ok(started.elapsed())
    };
    let controller_ready = async {
        wait_for(&controller, controller_health, "/readyz", timeout, |_| true).await?;
        let ready = started.elapsed();
        wait_for(&controller, controller_health, "/metrics", timeout, |m| {
            m.lines().any(|l| l.trim() == "resize_guard_leader 1")
        })
        .await?;
        anyhow::Ok(ready)
    };
    let (webhook_ready, controller_ready) = tokio::try_join!(webhook_ready, controller_ready)?;
    eprintln!(
        "rss: webhook ready after {webhook_ready:.1?}, controller ready after \
         {controller_ready:.1?} and leading"
    );
    if args.programs_first {
        create_all(&client, args).await?;
    }
    eprintln!("rss: settling {} s", args.settle);
    // The trajectory goes to stderr: a value still moving at the end means --settle is short.
    for second in 1..=args.settle {
        tokio::time::sleep(Duration::from_secs(1)).await;
        eprintln!(
            "rss: +{second}s VmRSS webhook {:.1} MiB, controller {:.1} MiB",
            kib(&proc_status("webhook", &webhook)?, "VmRSS")? as f64 / 1024.0,
            kib(&proc_status("controller", &controller)?, "VmRSS")? as f64 / 1024.0,
        );
    }

    let mut lines = Vec::new();
    for (name, process, ready) in [
        ("webhook", &webhook, webhook_ready),
        ("controller", &controller, controller_ready),
    ] {
        let status = proc_status(name, process)?;
        let mib = |field: &str| -> anyhow::Result<String> {
            Ok(format!("{:.1}", kib(&status, field)? as f64 / 1024.0))
        };
        lines.push(format!(
            "| {} | {name} | {} | {} | {} | {} | {:.1} |",
            args.label,
            args.pods,
            mib("VmRSS")?,
            mib("VmHWM")?,
            mib("RssAnon")?,
            ready.as_secs_f64()
        ));
    }
    drop((webhook, controller));
    Ok(lines)
}

/// [`create_objects`], timed, and a description of one stored pod.
async fn create_all(client: &kube::Client, args: &Args) -> anyhow::Result<()> {
    let started = Instant::now();
    create_objects(client, args).await?;
    eprintln!(
        "rss: {} pods on {} nodes in {} namespaces created in {:.0?}",
        args.pods,
        args.nodes,
        args.namespaces,
        started.elapsed()
    );
    describe_sample(client).await
}

/// Copies the `*.log` files of the control plane's directory into `to`.
fn copy_logs(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let path = entry?.path();
        if let Some(name) = path.file_name()
            && path.extension().is_some_and(|e| e == "log")
        {
            std::fs::copy(&path, to.join(name))?;
        }
    }
    Ok(())
}

/// `/proc/<pid>/status` of a running program.
fn proc_status(name: &str, process: &Process) -> anyhow::Result<String> {
    std::fs::read_to_string(format!("/proc/{}/status", process.pid()))
        .with_context(|| format!("{name} is gone:\n{}", process.log_tail(4000)))
}

/// A `/proc/<pid>/status` field in KiB (`VmRSS:\t  12345 kB`).
fn kib(status: &str, field: &str) -> anyhow::Result<u64> {
    let value = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .with_context(|| format!("no {field} in /proc/<pid>/status"))?;
    let number = value.trim().trim_end_matches("kB").trim();
    Ok(number.parse()?)
}

/// `deploy/` as installed by the e2e suites for a controller-only run (RBAC, namespace, policy,
/// no webhook configurations): `kubectl apply -k --server-side` of the harness overlay.
async fn install_rbac(kubectl: &Kubectl) -> anyhow::Result<()> {
    let dir = write_overlay(&Install::default())?;
    let path = dir.display().to_string();
    let out = kubectl
        .run(["apply", "-k", &path, "--server-side", "--force-conflicts"])
        .await?;
    let _ = std::fs::remove_dir_all(&dir);
    anyhow::ensure!(
        out.success,
        "kubectl apply -k {path}:\n{}\n{}",
        out.stdout,
        out.stderr
    );
    Ok(())
}

fn spawn(
    cp: &ControlPlane,
    identity: Identity,
    bin: &Path,
    name: &str,
    args: &[String],
) -> anyhow::Result<Process> {
    let mut cmd = Command::new(bin);
    cmd.env("KUBECONFIG", cp.kubeconfig_path_for(identity))
        .env("RUST_LOG", "info,kube_client=warn")
        .args(args);
    Process::spawn(name, cmd, &cp.dir().join(format!("{name}.log")))
}

/// Polls `GET http://127.0.0.1:<port><path>` until it answers 200 with a body `accept` takes.
async fn wait_for(
    process: &Process,
    port: u16,
    path: &str,
    timeout: Duration,
    accept: impl Fn(&str) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    while Instant::now() < deadline {
        match http_get(port, path).await {
            Ok(body) if accept(&body) => return Ok(()),
            Ok(body) => last = body,
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!(
        "{}: GET {path} not as wanted after {timeout:?} (last: {})\n{}",
        process.name(),
        last.chars().take(500).collect::<String>(),
        process.log_tail(4000)
    )
}

fn namespace_name(i: usize) -> String {
    format!("team-{i:02}")
}

fn node_name(i: usize) -> String {
    format!("node-{i:03}")
}

async fn create_objects(client: &kube::Client, args: &Args) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for i in 0..args.namespaces {
        let ns: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace_name(i), "labels": {"team": format!("team-{i:02}")}},
        }))?;
        namespaces.create(&PostParams::default(), &ns).await?;
    }
    let nodes: Api<Node> = Api::all(client.clone());
    futures::stream::iter((0..args.nodes).map(|i| {
        let nodes = nodes.clone();
        async move {
            let node: Node = serde_json::from_value(node_json(i))?;
            nodes.create(&PostParams::default(), &node).await?;
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(args.concurrency)
    .try_collect::<Vec<()>>()
    .await?;

    let created = std::sync::atomic::AtomicUsize::new(0);
    let created = &created;
    futures::stream::iter((0..args.pods).map(|i| {
        let client = client.clone();
        async move {
            create_pod(&client, args, i)
                .await
                .with_context(|| format!("pod {i}"))?;
            let n = created.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            if n.is_multiple_of(1000) {
                eprintln!("rss: {n} pods");
            }
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(args.concurrency)
    .try_collect::<Vec<()>>()
    .await?;
    Ok(())
}

/// A node object as its labels say (no kubelet runs, so no status: only a kubelet writes it).
fn node_json(i: usize) -> Value {
    let name = node_name(i);
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "m5.2xlarge",
            "topology.kubernetes.io/zone": format!("zone-{}", i % 3),
        }},
    })
}

/// Pod `i`: a replica of Deployment `i / REPLICAS` in namespace `i % namespaces`, on node
/// `i % nodes`, written as a cluster writes it (see the module documentation).
async fn create_pod(client: &kube::Client, args: &Args, i: usize) -> anyhow::Result<()> {
    let ns = namespace_name(i % args.namespaces);
    let node = node_name(i % args.nodes);
    let deployment = i / REPLICAS;
    let app = format!("svc-{deployment:04}");
    let hash = format!(
        "{:010x}",
        (deployment as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 24
    );
    let name = format!("{app}-{hash}-{:05x}", i.wrapping_mul(7919) % 0xfffff);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    // Manager 1 creates the pod (spec and the template's labels).
    let template = pod_template(&app, &hash, &ns);
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": ns,
            "labels": template["metadata"]["labels"],
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-{hash}"),
                "uid": format!("{deployment:08x}-1111-4222-8333-{deployment:012x}"),
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": template["spec"],
    });
    pod["spec"]["nodeName"] = json!(node);
    pods.patch(
        &name,
        &PatchParams::apply("kube-controller-manager").force(),
        &Patch::Apply(&pod),
    )
    .await?;

    // Manager 2 adds metadata: more labels, the last-applied copy, scrape annotations. (Not as
    // `kubectl`: kube-apiserver rewrites the last-applied annotation of an apply by `kubectl` to
    // that apply's own body.)
    let meta = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": ns,
            "labels": {"app.kubernetes.io/part-of": "shop", "cost-center": format!("cc-{}", deployment % 17)},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": last_applied(&app, &ns, &template),
                "prometheus.io/scrape": "true", "prometheus.io/port": "9090",
                "prometheus.io/path": "/metrics",
            },
        },
    });
    pods.patch(
        &name,
        &PatchParams::apply("argocd-controller").force(),
        &Patch::Apply(&meta),
    )
    .await?;

    Ok(())
}

/// The pod template of Deployment `app`: an application container and a log-shipping sidecar.
fn pod_template(app: &str, hash: &str, ns: &str) -> Value {
    let fields = |path: &str| json!({"fieldRef": {"apiVersion": "v1", "fieldPath": path}});
    let app_env = json!([
        {"name": "POD_NAME", "valueFrom": fields("metadata.name")},
        {"name": "POD_NAMESPACE", "valueFrom": fields("metadata.namespace")},
        {"name": "POD_IP", "valueFrom": fields("status.podIP")},
        {"name": "NODE_NAME", "valueFrom": fields("spec.nodeName")},
        {"name": "GOMAXPROCS", "valueFrom": {"resourceFieldRef": {"containerName": "app", "resource": "limits.cpu", "divisor": "1"}}},
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": format!("{app}-db"), "key": "password"}}},
        {"name": "DB_HOST", "value": format!("postgres-primary.{ns}.svc.cluster.local")},
        {"name": "LOG_LEVEL", "value": "info"},
        {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector.observability.svc.cluster.local:4317"},
        {"name": "FEATURE_FLAGS", "value": "checkout-v2=true,recommendations=false,async-invoices=true,new-pricing=false"},
    ]);
    let sidecar_env = json!([
        {"name": "POD_NAME", "valueFrom": fields("metadata.name")},
        {"name": "POD_NAMESPACE", "valueFrom": fields("metadata.namespace")},
        {"name": "NODE_NAME", "valueFrom": fields("spec.nodeName")},
        {"name": "APP_NAME", "value": app},
        {"name": "FLUENT_BIT_HTTP_PORT", "value": "2020"},
        {"name": "LOKI_URL", "value": "http://loki-gateway.observability.svc.cluster.local/loki/api/v1/push"},
        {"name": "LOG_PATH", "value": "/var/log/app/*.log"},
        {"name": "BUFFER_SIZE", "value": "5MB"},
        {"name": "FLUSH_INTERVAL", "value": "5"},
        {"name": "TENANT_ID", "valueFrom": {"configMapKeyRef": {"name": "logging", "key": "tenant"}}},
    ]);
    let token = "kube-api-access-7x2kq";
    let api_mount = json!({"name": token, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true});
    let secure = json!({
        "runAsNonRoot": true, "runAsUser": 10001, "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    });
    json!({
        "metadata": {"labels": {
            "app": app, "pod-template-hash": hash,
            "app.kubernetes.io/name": app, "app.kubernetes.io/instance": format!("{app}-prod"),
            "app.kubernetes.io/version": "1.42.3", "app.kubernetes.io/component": "backend",
            "team": ns,
        }},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": format!("registry.example.com/{ns}/{app}:1.42.3@sha256:3b5c1e0a9f7d2c4b6e8a0f1d3c5b7a9e2f4d6c8b0a1e3f5d7c9b2a4e6f8d0c1b"),
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/app/server"],
                    "args": ["--port=8080", "--metrics-port=9090", "--config=/etc/app/config.yaml", "--log-format=json"],
                    "ports": [
                        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                        {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
                    ],
                    "env": app_env,
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "256Mi"},
                        "limits": {"cpu": "1", "memory": "512Mi"},
                    },
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                        "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 2, "failureThreshold": 3},
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": "http", "scheme": "HTTP"},
                        "periodSeconds": 5, "timeoutSeconds": 2, "successThreshold": 1, "failureThreshold": 3},
                    "startupProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                        "periodSeconds": 2, "failureThreshold": 30},
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/etc/app", "readOnly": true},
                        {"name": "logs", "mountPath": "/var/log/app"},
                        api_mount,
                    ],
                    "securityContext": secure,
                },
                {
                    "name": "log-shipper",
                    "image": "registry.example.com/platform/fluent-bit:3.2.4@sha256:9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c",
                    "imagePullPolicy": "IfNotPresent",
                    "args": ["--config=/fluent-bit/etc/fluent-bit.yaml", "--http", "--port=2020"],
                    "ports": [{"name": "shipper-http", "containerPort": 2020, "protocol": "TCP"}],
                    "env": sidecar_env,
                    "resources": {
                        "requests": {"cpu": "20m", "memory": "32Mi"},
                        "limits": {"cpu": "100m", "memory": "64Mi"},
                    },
                    "livenessProbe": {"httpGet": {"path": "/", "port": 2020, "scheme": "HTTP"},
                        "periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3},
                    "readinessProbe": {"httpGet": {"path": "/api/v1/health", "port": 2020, "scheme": "HTTP"},
                        "periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3},
                    "volumeMounts": [
                        {"name": "logs", "mountPath": "/var/log/app", "readOnly": true},
                        {"name": "config", "mountPath": "/fluent-bit/etc", "subPath": "fluent-bit"},
                        api_mount,
                    ],
                    "securityContext": secure,
                },
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": format!("{app}-config"), "defaultMode": 420}},
                {"name": "logs", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": token, "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                ]}},
            ],
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "securityContext": {"fsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100,
                "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"},
            }]}},
        },
    })
}

/// What `kubectl apply` stores: the Deployment's manifest as applied — without what admission
/// adds to its pods (the log-shipping sidecar is injected, the tolerations defaulted) — padded
/// to ~3 KB with a description annotation when shorter.
fn last_applied(app: &str, ns: &str, template: &Value) -> String {
    let mut applied = template.clone();
    if let Some(containers) = applied["spec"]["containers"].as_array_mut() {
        containers.retain(|c| c["name"] != "log-shipper");
    }
    if let Some(spec) = applied["spec"].as_object_mut() {
        spec.remove("tolerations");
    }
    let mut manifest = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": app, "namespace": ns, "annotations": {}},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": app}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
            "template": applied,
        },
    });
    let len = manifest.to_string().len();
    const TARGET: usize = 3 * 1024;
    const OVERHEAD: usize = r#""description":"""#.len();
    if len + OVERHEAD < TARGET {
        manifest["metadata"]["annotations"]["description"] =
            json!("x".repeat(TARGET - len - OVERHEAD));
    }
    format!("{manifest}\n")
}

/// Prints the size of one stored pod (JSON as the API serves it) to stderr.
async fn describe_sample(client: &kube::Client) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::all(client.clone());
    let list = pods
        .list(&kube::api::ListParams::default().limit(1))
        .await?;
    if let Some(pod) = list.items.first() {
        let bytes = serde_json::to_vec(pod)?.len();
        let managers: Vec<String> = pod
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter_map(|m| m.manager.clone())
            .collect();
        let last_applied = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("kubectl.kubernetes.io/last-applied-configuration"))
            .map_or(0, String::len);
        eprintln!(
            "rss: a stored pod is {bytes} bytes of JSON (managedFields by {managers:?}, \
             last-applied {last_applied} bytes, phase {:?})",
            pod.status.as_ref().and_then(|s| s.phase.clone())
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_applied_copy_is_about_3_kb() {
        let template = pod_template("svc-0001", "abc", "team-01");
        let text = last_applied("svc-0001", "team-01", &template);
        assert!((3000..4000).contains(&text.len()), "{}: {text}", text.len());
    }
}
