//! A real Kubernetes control plane on loopback: etcd and kube-apiserver of one minor
//! (`RESIZE_GUARD_K8S_VERSION`, default v1.37; and, on demand, kube-scheduler and
//! kube-controller-manager), started from the binaries of [`crate::binaries`].
//!
//! Flags: token authentication (an admin in
//! `system:masters` and a ServiceAccount-style user for RBAC checks), RBAC authorization, the
//! `ServiceAccount` and `TaintNodesByCondition` admission plugins off (no ServiceAccount or node
//! lifecycle controller runs),
//! `Priority` kept, an audit log at `Metadata` level so tests can read `auditAnnotations`, and
//! the aggregation layer's front proxy (a client CA and certificate, the `--requestheader-*` and
//! `--proxy-client-*` flags as kubeadm sets them), so aggregated API servers such as
//! metrics-server ([`crate::metrics_server`]) can be registered.
//! kube-controller-manager, when a test asks for it, runs only the controllers the suites need
//! ([`CONTROLLERS`]).
//! Everything lives in one temporary directory; process logs are kept there and their tails are
//! printed by [`ControlPlane::dump_logs`].

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::binaries::Binaries;
use crate::process::{Process, free_port};

/// The admin identity's bearer token (`system:masters`).
pub const ADMIN_TOKEN: &str = "resize-guard-admin-token";
/// The webhook's user name (`deploy/base/rbac-webhook.yaml`).
pub const WEBHOOK_USER: &str = "system:serviceaccount:resize-guard:resize-guard-webhook";
/// The controller's user name (`deploy/base/rbac-controller.yaml`).
pub const CONTROLLER_USER: &str = "system:serviceaccount:resize-guard:resize-guard-controller";

/// Who a client or kubectl acts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// Cluster admin.
    Admin,
    /// The webhook's ServiceAccount, subject to RBAC.
    Webhook,
    /// The controller's ServiceAccount, subject to RBAC.
    Controller,
}

impl Identity {
    /// Every identity, each with a kubeconfig file in the control plane's directory.
    pub const ALL: [Identity; 3] = [Identity::Admin, Identity::Webhook, Identity::Controller];

    /// This identity's line of kube-apiserver's `--token-auth-file`: token, user, uid, groups.
    fn token_line(self) -> String {
        const SERVICE_ACCOUNTS: &str = "system:serviceaccounts,system:serviceaccounts:resize-guard";
        let (user, uid, groups) = match self {
            Identity::Admin => ("admin", "uid-admin", "system:masters"),
            Identity::Webhook => (WEBHOOK_USER, "uid-webhook", SERVICE_ACCOUNTS),
            Identity::Controller => (CONTROLLER_USER, "uid-controller", SERVICE_ACCOUNTS),
        };
        format!("{},{user},{uid},\"{groups}\"\n", self.token())
    }

    fn token(self) -> &'static str {
        match self {
            Identity::Admin => ADMIN_TOKEN,
            Identity::Webhook => "resize-guard-webhook-token",
            Identity::Controller => "resize-guard-controller-token",
        }
    }
    fn file_name(self) -> &'static str {
        match self {
            Identity::Admin => "kubeconfig",
            Identity::Webhook => "kubeconfig-webhook",
            Identity::Controller => "kubeconfig-controller",
        }
    }
}

/// How to start the control plane.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--feature-gates` entries for kube-apiserver, e.g.
    /// `InPlacePodVerticalScalingSchedulerPreemption=true`.
    pub feature_gates: Vec<String>,
    /// Serve a real node's pods (`crate::real_node`): kube-apiserver binds and advertises this
    /// address (the host end of the node's veth) with a serving certificate from its own CA for
    /// it and the `kubernetes` Service, the lease endpoint reconciler publishes it behind that
    /// Service, and the `ServiceAccount` admission plugin stays on, so pods get tokens and reach
    /// the API with in-cluster config; kube-apiserver calls the kubelet with a client
    /// certificate (`kubelet_client`), so `kubectl exec` and `logs` work. kube-controller-manager
    /// then also runs [`REAL_NODE_CONTROLLERS`].
    pub real_node_host: Option<String>,
}

/// The controllers a real node's pods need on top of [`CONTROLLERS`]: a `default`
/// ServiceAccount in every namespace, the `kube-root-ca.crt` ConfigMap their token volume
/// projects, and EndpointSlices for Services (kube-proxy and the webhook's route).
pub const REAL_NODE_CONTROLLERS: [&str; 3] = [
    "serviceaccount-controller",
    "root-ca-certificate-publisher-controller",
    "endpointslice-controller",
];

/// The first address of `--service-cluster-ip-range`: the `kubernetes` Service.
const KUBERNETES_SERVICE_IP: &str = "10.0.0.1";

/// The running control plane.
#[derive(Debug)]
pub struct ControlPlane {
    dir: tempfile::TempDir,
    binaries: Binaries,
    etcd: Process,
    apiserver: Mutex<Process>,
    apiserver_cmd: Vec<String>,
    scheduler: Mutex<Option<Process>>,
    controller_manager: Mutex<Option<Process>>,
    real_node_host: Option<String>,
    port: u16,
    version: String,
}

/// The kube-controller-manager controllers the suites use: Deployments and ReplicaSets create and
/// replace pods, the disruption controller writes PodDisruptionBudget status, the garbage collector
/// and namespace controller clean up. Left out on purpose: the ServiceAccount token and
/// ServiceAccount controllers (the `ServiceAccount` admission plugin is off, so pods mount no
/// token) and node lifecycle (tests stop hollow nodes' kubelets on purpose; its taints would evict
/// pods and change what a test measures).
pub const CONTROLLERS: [&str; 5] = [
    "deployment-controller",
    "replicaset-controller",
    "disruption-controller",
    "garbage-collector-controller",
    "namespace-controller",
];

/// The audit policy: Metadata for everything but the chatty leases and events.
const AUDIT_POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  resources:
  - group: "coordination.k8s.io"
    resources: ["leases"]
  - group: ""
    resources: ["events"]
  - group: "events.k8s.io"
    resources: ["events"]
- level: None
  nonResourceURLs: ["/readyz*", "/healthz*", "/livez*", "/version"]
- level: Metadata
"#;

impl ControlPlane {
    /// Starts etcd and kube-apiserver and waits until the API server is ready. Blocking; call it
    /// outside an async context (or from a plain thread).
    pub fn start(options: &Options) -> anyhow::Result<ControlPlane> {
        let binaries = Binaries::locate()?;
        let dir = tempfile::Builder::new()
            .prefix("resize-guard-cp-")
            .tempdir()?;
        let root = dir.path();

        let etcd_port = free_port()?;
        let peer_port = free_port()?;
        let etcd_cmd = {
            let mut c = Command::new(&binaries.etcd);
            c.arg(format!("--data-dir={}", root.join("etcd").display()))
                .arg(format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"))
                .arg(format!(
                    "--advertise-client-urls=http://127.0.0.1:{etcd_port}"
                ))
                .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"))
                .arg(format!(
                    "--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"
                ))
                .arg(format!(
                    "--initial-cluster=default=http://127.0.0.1:{peer_port}"
                ))
                .arg("--unsafe-no-fsync")
                .arg("--log-level=warn")
                .arg("--quota-backend-bytes=4294967296");
            c
        };
        // etcd outlives everything else, so its watchdog removes the directory at exit.
        let etcd =
            Process::spawn_with_cleanup("etcd", etcd_cmd, &root.join("etcd.log"), Some(root))?;
        wait_tcp(etcd_port, Duration::from_secs(30))
            .map_err(|e| anyhow::anyhow!("etcd did not start: {e}\n{}", etcd.log_tail(4000)))?;

        // Service-account signing keys (ECDSA P-256: fast to make).
        let sa = rcgen::KeyPair::generate()?;
        fs::write(root.join("sa.key"), sa.serialize_pem())?;
        fs::write(root.join("sa.pub"), sa.public_key_pem())?;
        let tokens: String = Identity::ALL.iter().map(|i| i.token_line()).collect();
        fs::write(root.join("tokens.csv"), tokens)?;
        fs::write(root.join("audit-policy.yaml"), AUDIT_POLICY)?;

        let port = free_port()?;
        let host = options
            .real_node_host
            .clone()
            .unwrap_or_else(|| "127.0.0.1".to_owned());
        let mut args = vec![
            format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
            format!("--bind-address={host}"),
            format!("--advertise-address={host}"),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", root.join("certs").display()),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            "--allow-privileged=true".to_owned(),
            "--authorization-mode=RBAC".to_owned(),
            format!("--token-auth-file={}", root.join("tokens.csv").display()),
            "--service-account-issuer=https://kubernetes.default.svc".to_owned(),
            format!(
                "--service-account-key-file={}",
                root.join("sa.pub").display()
            ),
            format!(
                "--service-account-signing-key-file={}",
                root.join("sa.key").display()
            ),
            format!("--audit-log-path={}", root.join("audit.log").display()),
            format!(
                "--audit-policy-file={}",
                root.join("audit-policy.yaml").display()
            ),
            "--audit-log-format=json".to_owned(),
            "--profiling=false".to_owned(),
            "--enable-priority-and-fairness=false".to_owned(),
            // Webhooks named by Service are called at a ready endpoint of its EndpointSlices
            // (upstream's own resolver), since no kube-proxy routes a ClusterIP here.
            "--enable-aggregator-routing=true".to_owned(),
        ];
        args.extend(front_proxy(root)?);
        if !options.feature_gates.is_empty() {
            args.push(format!(
                "--feature-gates={}",
                options.feature_gates.join(",")
            ));
        }
        if options.real_node_host.is_some() {
            args.extend(serving_certificate(root, &host)?);
            args.extend(kubelet_client(root)?);
            args.push("--disable-admission-plugins=TaintNodesByCondition".to_owned());
        } else {
            args.extend([
                // 1.37 refuses a loopback advertise address with the default endpoint reconciler.
                "--endpoint-reconciler-type=none".to_owned(),
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition".to_owned(),
            ]);
        }
        let apiserver = spawn_apiserver(&binaries, &args, root)?;
        let cp = ControlPlane {
            binaries,
            etcd,
            apiserver: Mutex::new(apiserver),
            apiserver_cmd: args,
            scheduler: Mutex::new(None),
            controller_manager: Mutex::new(None),
            real_node_host: options.real_node_host.clone(),
            port,
            dir,
            version: String::new(),
        };
        for id in Identity::ALL {
            fs::write(cp.dir.path().join(id.file_name()), cp.kubeconfig_yaml(id))?;
        }
        cp.wait_ready(Duration::from_secs(120))?;
        let mut cp = cp;
        cp.version = cp.check_version()?;
        Ok(cp)
    }

    /// The API server's `gitVersion` from `/version`, which must be of the minor asked for
    /// (`RESIZE_GUARD_K8S_VERSION`): a `RESIZE_GUARD_K8S_BIN_DIR` of another minor fails here
    /// instead of testing the wrong Kubernetes.
    fn check_version(&self) -> anyhow::Result<String> {
        let body: serde_json::Value = serde_json::from_str(&self.get_blocking("/version")?)?;
        let git = body["gitVersion"].as_str().unwrap_or_default().to_owned();
        let want = crate::binaries::requested_minor()?;
        anyhow::ensure!(
            crate::binaries::parse_minor(&git) == Some(want),
            "kube-apiserver is {git}, but {}=1.{want} asks for v1.{want}: point {} at that minor's \
             binaries (third_party/control-plane/build.sh builds them)",
            crate::binaries::VERSION_ENV,
            crate::binaries::BIN_DIR_ENV,
        );
        Ok(git)
    }

    /// The API server's version, e.g. `v1.35.4`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The API server's minor: 35 for `v1.35.4`.
    pub fn minor(&self) -> u32 {
        crate::binaries::parse_minor(&self.version).unwrap_or_default()
    }

    /// `https://127.0.0.1:<port>` (or the real node's host address).
    pub fn url(&self) -> String {
        let host = self.real_node_host.as_deref().unwrap_or("127.0.0.1");
        format!("https://{host}:{}", self.port)
    }

    /// The working directory (logs, kubeconfigs, audit log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The binaries in use.
    pub fn binaries(&self) -> &Binaries {
        &self.binaries
    }

    /// The CA a real node's kubelet must trust for kube-apiserver's client certificate (written
    /// only with `real_node_host`).
    pub fn kubelet_client_ca_path(&self) -> PathBuf {
        self.dir().join(KUBELET_CLIENT_CA)
    }

    /// The admin kubeconfig's path.
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.kubeconfig_path_for(Identity::Admin)
    }

    /// The kubeconfig file for an identity.
    pub fn kubeconfig_path_for(&self, id: Identity) -> PathBuf {
        self.dir.path().join(id.file_name())
    }

    /// etcd's process id (chaos tests pause it with SIGSTOP).
    pub fn etcd_pid(&self) -> u32 {
        self.etcd.pid()
    }

    /// The API server's audit log (JSON lines).
    pub fn audit_log_path(&self) -> PathBuf {
        self.dir.path().join("audit.log")
    }

    fn kubeconfig_yaml(&self, id: Identity) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: resize-guard\n  cluster:\n    server: {url}\n    \
             insecure-skip-tls-verify: true\nusers:\n- name: {user}\n  user:\n    token: {token}\n\
             contexts:\n- name: resize-guard\n  context:\n    cluster: resize-guard\n    user: {user}\n    \
             namespace: default\ncurrent-context: resize-guard\n",
            url = self.url(),
            user = match id {
                Identity::Admin => "admin",
                Identity::Webhook => "resize-guard-webhook",
                Identity::Controller => "resize-guard-controller",
            },
            token = id.token(),
        )
    }

    /// A kube client config for an identity.
    pub async fn config(&self, id: Identity) -> anyhow::Result<kube::Config> {
        let kc = Kubeconfig::read_from(self.kubeconfig_path_for(id))?;
        let mut config =
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
        config.read_timeout = Some(Duration::from_secs(60));
        Ok(config)
    }

    /// A kube client config for an identity as the programs configure theirs
    /// (`kube::Config::infer`: no read timeout, so a quiet watch ends on the API server's own
    /// timeout). [`Self::config`]'s 60 s read timeout keeps a test from hanging, but fails every
    /// watch that sees nothing for a minute — a PDB watch failing holds the controller's
    /// evictions back until it delivers again — so a program run in process gets this one.
    pub async fn program_config(&self, id: Identity) -> anyhow::Result<kube::Config> {
        let mut config = self.config(id).await?;
        config.read_timeout = None;
        Ok(config)
    }

    /// An admin client, bound to the caller's async runtime.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        self.client_as(Identity::Admin).await
    }

    /// A client acting as `id`.
    pub async fn client_as(&self, id: Identity) -> anyhow::Result<kube::Client> {
        Ok(kube::Client::try_from(self.config(id).await?)?)
    }

    /// Polls `/readyz` until it answers `ok` or `timeout` passes.
    pub fn wait_ready(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        while Instant::now() < deadline {
            {
                let mut api = self
                    .apiserver
                    .lock()
                    .map_err(|_| anyhow::anyhow!("poisoned"))?;
                if !api.is_running() {
                    anyhow::bail!("kube-apiserver exited:\n{}", api.log_tail(6000));
                }
            }
            match self.get_blocking("/readyz") {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                Ok(body) => last = body,
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        let tail = self
            .apiserver
            .lock()
            .map(|a| a.log_tail(6000))
            .unwrap_or_default();
        anyhow::bail!("kube-apiserver not ready after {timeout:?}: {last}\n{tail}")
    }

    /// A blocking GET as admin on a fresh single-threaded runtime in its own thread (safe to call
    /// from anywhere, including inside another runtime).
    pub fn get_blocking(&self, path: &str) -> anyhow::Result<String> {
        let kubeconfig = self.kubeconfig_path();
        let path = path.to_owned();
        std::thread::spawn(move || -> anyhow::Result<String> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let kc = Kubeconfig::read_from(kubeconfig)?;
                let mut config =
                    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
                config.connect_timeout = Some(Duration::from_secs(2));
                config.read_timeout = Some(Duration::from_secs(5));
                let client = kube::Client::try_from(config)?;
                let req = http::Request::get(path).body(Vec::new())?;
                Ok(client.request_text(req).await?)
            })
        })
        .join()
        .map_err(|_| anyhow::anyhow!("readiness probe thread panicked"))?
    }

    /// Stops and restarts kube-apiserver on the same port and etcd (watches break, clients
    /// reconnect), then waits for readiness.
    pub fn restart_apiserver(&self) -> anyhow::Result<()> {
        {
            let mut api = self
                .apiserver
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?;
            api.stop(Duration::from_secs(10));
            *api = spawn_apiserver(&self.binaries, &self.apiserver_cmd, self.dir.path())?;
        }
        self.wait_ready(Duration::from_secs(120))
    }

    /// Starts kube-scheduler (no feature gates) and kube-controller-manager: what a workload
    /// (a Deployment's pods, scheduled to nodes) needs.
    pub fn start_workload_controllers(&self) -> anyhow::Result<()> {
        self.start_scheduler(&[])?;
        self.start_controller_manager()
    }

    /// Starts kube-scheduler with the given feature gates (replacing a running one).
    pub fn start_scheduler(&self, feature_gates: &[&str]) -> anyhow::Result<()> {
        let mut slot = self
            .scheduler
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        *slot = None;
        let kubeconfig = self.kubeconfig_path();
        let config = self.dir.path().join("scheduler-config.yaml");
        fs::write(
            &config,
            format!(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
                 clientConnection:\n  kubeconfig: {}\n  qps: 500\n  burst: 1000\nleaderElection:\n  leaderElect: false\n\
                 podInitialBackoffSeconds: 1\npodMaxBackoffSeconds: 1\n",
                kubeconfig.display()
            ),
        )?;
        let mut args = vec![format!("--config={}", config.display())];
        if !feature_gates.is_empty() {
            args.push(format!("--feature-gates={}", feature_gates.join(",")));
        }
        *slot = Some(self.spawn_component("kube-scheduler", &self.binaries.scheduler, &args)?);
        Ok(())
    }

    /// Starts kube-controller-manager with [`CONTROLLERS`] unless it already runs (several
    /// tests of one binary may ask), and waits until it serves.
    pub fn start_controller_manager(&self) -> anyhow::Result<()> {
        self.start_controller_manager_with(&[])
    }

    /// [`ControlPlane::start_controller_manager`] with `extra` controllers on top (e.g.
    /// `resourcequota-controller`, which upstream's ResourceQuota specs need for the quota's
    /// `status.used`).
    pub fn start_controller_manager_with(&self, extra: &[&str]) -> anyhow::Result<()> {
        let mut slot = self
            .controller_manager
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        if let Some(p) = slot.as_mut()
            && p.is_running()
        {
            return Ok(());
        }
        let mut controllers = CONTROLLERS.to_vec();
        let mut args = vec![
            format!("--kubeconfig={}", self.kubeconfig_path().display()),
            "--leader-elect=false".to_owned(),
            "--use-service-account-credentials=false".to_owned(),
            "--kube-api-qps=200".to_owned(),
            "--kube-api-burst=400".to_owned(),
        ];
        controllers.extend(extra);
        if self.real_node_host.is_some() {
            controllers.extend(REAL_NODE_CONTROLLERS);
            args.push(format!(
                "--root-ca-file={}",
                self.dir.path().join("ca.crt").display()
            ));
        }
        args.push(format!("--controllers={}", controllers.join(",")));
        *slot = Some(self.spawn_component(
            "kube-controller-manager",
            &self.binaries.controller_manager,
            &args,
        )?);
        Ok(())
    }

    /// Starts a control-plane component serving on a free loopback port, authenticating and
    /// authorizing its clients through the admin kubeconfig, with `args`; waits until it listens.
    fn spawn_component(
        &self,
        name: &str,
        binary: &Path,
        args: &[String],
    ) -> anyhow::Result<Process> {
        let port = free_port()?;
        let kubeconfig = self.kubeconfig_path();
        let mut c = Command::new(binary);
        c.args(args)
            .arg(format!(
                "--authentication-kubeconfig={}",
                kubeconfig.display()
            ))
            .arg(format!(
                "--authorization-kubeconfig={}",
                kubeconfig.display()
            ))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg("--v=2");
        let mut p = Process::spawn(name, c, &self.dir.path().join(format!("{name}.log")))?;
        wait_tcp(port, Duration::from_secs(60)).map_err(|e| {
            let running = p.is_running();
            anyhow::anyhow!(
                "{name} did not start ({e}, running: {running}):\n{}",
                p.log_tail(6000)
            )
        })?;
        Ok(p)
    }

    /// Stops kube-controller-manager if it runs (a later [`ControlPlane::start_controller_manager`]
    /// starts a new one).
    pub fn stop_controller_manager(&self) {
        if let Ok(mut slot) = self.controller_manager.lock() {
            *slot = None;
        }
    }

    /// Stops kube-scheduler if it runs.
    pub fn stop_scheduler(&self) {
        if let Ok(mut slot) = self.scheduler.lock() {
            *slot = None;
        }
    }

    /// The tail of every process log, for a failing test's output.
    pub fn dump_logs(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "--- etcd ({}) ---\n{}\n",
            self.etcd.log_path().display(),
            self.etcd.log_tail(2000)
        ));
        if let Ok(api) = self.apiserver.lock() {
            out.push_str(&format!("--- {} ---\n{}\n", api.name(), api.log_tail(6000)));
        }
        if let Ok(s) = self.scheduler.lock()
            && let Some(s) = s.as_ref()
        {
            out.push_str(&format!("--- {} ---\n{}\n", s.name(), s.log_tail(4000)));
        }
        if let Ok(s) = self.controller_manager.lock()
            && let Some(s) = s.as_ref()
        {
            out.push_str(&format!("--- {} ---\n{}\n", s.name(), s.log_tail(4000)));
        }
        out
    }

    /// Audit events (parsed JSON lines) so far.
    pub fn audit_events(&self) -> Vec<serde_json::Value> {
        fs::read_to_string(self.audit_log_path())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// kube-apiserver's serving certificate for a real node's pods, from a CA of its own (written as
/// `ca.crt`, which kube-controller-manager publishes as `kube-root-ca.crt`): the names in-cluster
/// clients dial — the `kubernetes` Service's IP and DNS names — and `host`.
fn serving_certificate(root: &Path, host: &str) -> anyhow::Result<Vec<String>> {
    let spec = resize_guard_certs::spec::CertSpec {
        common_name: "kube-apiserver".to_owned(),
        dns_names: [
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "localhost",
        ]
        .map(str::to_owned)
        .to_vec(),
        ip_addresses: vec![
            host.parse()?,
            KUBERNETES_SERVICE_IP.parse()?,
            "127.0.0.1".parse()?,
        ],
        ..resize_guard_certs::spec::CertSpec::for_loopback()
    };
    let bundle = resize_guard_certs::issue::generate(&spec)?;
    fs::write(root.join("ca.crt"), &bundle.ca_cert_pem)?;
    fs::write(root.join("apiserver.crt"), &bundle.cert_pem)?;
    fs::write(root.join("apiserver.key"), &bundle.key_pem)?;
    Ok(vec![
        format!("--tls-cert-file={}", root.join("apiserver.crt").display()),
        format!(
            "--tls-private-key-file={}",
            root.join("apiserver.key").display()
        ),
    ])
}

/// The CA a real node's kubelet trusts for client certificates (its
/// `authentication.x509.clientCAFile`), in the control plane's directory.
pub const KUBELET_CLIENT_CA: &str = "kubelet-client-ca.crt";
/// The user kube-apiserver is to kubelets (kubeadm's `apiserver-kubelet-client` certificate).
pub const KUBELET_CLIENT: &str = "kube-apiserver-kubelet-client";

/// kube-apiserver's client certificate for kubelets (`--kubelet-client-certificate`), as kubeadm
/// issues it: from a CA the kubelet trusts ([`KUBELET_CLIENT_CA`]), user [`KUBELET_CLIENT`] in
/// `system:masters`, so the kubelet's webhook authorization (a SubjectAccessReview) allows
/// `nodes/proxy` — `kubectl exec`, `logs`, `attach`, `port-forward`. Without it kube-apiserver
/// calls kubelets anonymously and a kubelet that allows only authenticated clients answers 401.
fn kubelet_client(root: &Path) -> anyhow::Result<Vec<String>> {
    let files = ClientFiles {
        ca: root.join(KUBELET_CLIENT_CA),
        cert: root.join("apiserver-kubelet-client.crt"),
        key: root.join("apiserver-kubelet-client.key"),
    };
    files.write("kubelet-client-ca", KUBELET_CLIENT, Some("system:masters"))?;
    Ok(vec![
        format!("--kubelet-client-certificate={}", files.cert.display()),
        format!("--kubelet-client-key={}", files.key.display()),
        // As kubeadm: the node's name resolves nowhere here, its InternalIP does.
        "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname".to_owned(),
    ])
}

/// Where a CA's certificate and a client certificate it signed (with its key) are written.
struct ClientFiles {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl ClientFiles {
    /// Makes a CA named `ca_name` and a client certificate it signed for `user` (in `group`, if
    /// any), and writes them as PEM.
    fn write(&self, ca_name: &str, user: &str, group: Option<&str>) -> anyhow::Result<()> {
        let (ca_pem, cert_pem, key_pem) = client_certificate(ca_name, user, group)?;
        fs::write(&self.ca, ca_pem)?;
        fs::write(&self.cert, cert_pem)?;
        fs::write(&self.key, key_pem)?;
        Ok(())
    }
}

/// A CA named `ca_name` and a client certificate it signed for `user` (in `group`, if any), as
/// PEM: (CA certificate, client certificate, client key).
fn client_certificate(
    ca_name: &str,
    user: &str,
    group: Option<&str>,
) -> anyhow::Result<(String, String, String)> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name.push(DnType::CommonName, ca_name);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate()?;
    let mut client = CertificateParams::default();
    client.distinguished_name.push(DnType::CommonName, user);
    if let Some(group) = group {
        client
            .distinguished_name
            .push(DnType::OrganizationName, group);
    }
    client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = client.signed_by(&key, &issuer)?;
    Ok((ca_cert.pem(), cert.pem(), key.serialize_pem()))
}

/// The client certificate's common name kube-apiserver proxies to aggregated API servers with
/// (kubeadm's `front-proxy-client`).
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

/// The aggregation layer's front proxy, as kubeadm configures it (`front-proxy-ca.crt`,
/// `front-proxy-client.crt`): a CA of its own, whose client certificate kube-apiserver presents to
/// aggregated API servers with the user in `X-Remote-User`; they trust it through the
/// `extension-apiserver-authentication` ConfigMap kube-apiserver publishes in `kube-system`.
fn front_proxy(root: &Path) -> anyhow::Result<Vec<String>> {
    let files = ClientFiles {
        ca: root.join("front-proxy-ca.crt"),
        cert: root.join("front-proxy-client.crt"),
        key: root.join("front-proxy-client.key"),
    };
    files.write("front-proxy-ca", FRONT_PROXY_CLIENT, None)?;
    Ok(vec![
        format!("--requestheader-client-ca-file={}", files.ca.display()),
        format!("--requestheader-allowed-names={FRONT_PROXY_CLIENT}"),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".to_owned(),
        "--requestheader-group-headers=X-Remote-Group".to_owned(),
        "--requestheader-username-headers=X-Remote-User".to_owned(),
        format!("--proxy-client-cert-file={}", files.cert.display()),
        format!("--proxy-client-key-file={}", files.key.display()),
    ])
}

fn spawn_apiserver(binaries: &Binaries, args: &[String], root: &Path) -> anyhow::Result<Process> {
    let mut c = Command::new(&binaries.apiserver);
    c.args(args);
    Process::spawn("kube-apiserver", c, &root.join("kube-apiserver.log"))
}

fn wait_tcp(port: u16, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!("nothing listens on 127.0.0.1:{port} after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_identity_has_its_own_token_line() {
        let lines: Vec<String> = Identity::ALL.iter().map(|i| i.token_line()).collect();
        assert_eq!(
            lines[0],
            "resize-guard-admin-token,admin,uid-admin,\"system:masters\"\n"
        );
        assert_eq!(
            lines[1],
            format!(
                "resize-guard-webhook-token,{WEBHOOK_USER},uid-webhook,\
                 \"system:serviceaccounts,system:serviceaccounts:resize-guard\"\n"
            )
        );
        let tokens: std::collections::BTreeSet<_> =
            Identity::ALL.iter().map(|i| i.token()).collect();
        assert_eq!(tokens.len(), Identity::ALL.len(), "a token is shared");
    }
}
