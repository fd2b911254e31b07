//! One environment per process, owned by one suite ([`shared`]): a control plane, hollow nodes
//! (upstream's kubelet, one process per node, see [`crate::hollow_node`]) added by the tests, a
//! runtime of its own for background work that must outlive each `#[tokio::test]`'s runtime, and
//! PriorityClasses. Tests isolate by namespace and by the nodes they add; the first caller's
//! [`EnvOptions`] win.
//!
//! When a test panics while holding an [`Env::guard`], the tails of the control-plane logs are
//! printed with the failure.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, PostParams};

use crate::control_plane::{ControlPlane, Options};
use crate::hollow_node::{HollowNode, HollowNodeConfig};
use crate::hollow_usage::UsageFile;
use crate::kubectl::Kubectl;

/// PriorityClasses every environment has: (name, value).
pub const PRIORITY_CLASSES: [(&str, i32); 3] = [("low", 100), ("mid", 10_000), ("high", 1_000_000)];

/// How the shared environment starts.
#[derive(Debug, Clone, Default)]
pub struct EnvOptions {
    /// kube-apiserver feature gates.
    pub feature_gates: Vec<String>,
}

/// The shared environment.
#[derive(Debug)]
pub struct Env {
    /// The control plane.
    pub cp: ControlPlane,
    /// Runs background work for the life of the process.
    runtime: tokio::runtime::Runtime,
    /// The hollow nodes, kept running until the process exits (the process watchdog then
    /// stops them and removes their work directories).
    nodes: Mutex<Vec<HollowNode>>,
    counter: AtomicU32,
}

static ENV: OnceLock<(&'static str, Result<Env, String>)> = OnceLock::new();

/// The environment of this process, started on first use by the suite that calls it first.
///
/// A suite (one source file of `tests/e2e`) owns its environment: it installs webhook
/// configurations and runs controllers that act on the whole cluster, so two suites must never
/// share one. Any call from another source file panics with how to run one suite per process
/// (`make e2e` does that), instead of letting their webhooks and controllers meet.
#[track_caller]
pub fn shared(options: EnvOptions) -> &'static Env {
    let suite = std::panic::Location::caller().file();
    let (owner, env) = ENV.get_or_init(|| {
        let env = std::thread::spawn(move || Env::start(options).map_err(|e| format!("{e:#}")))
            .join()
            .unwrap_or_else(|_| Err("environment start panicked".to_owned()));
        (suite, env)
    });
    if *owner != suite {
        panic!(
            "this process's control plane belongs to the suite in {owner}; {suite} needs a \
             process of its own: run the suites with `make e2e` (one process per suite), or one \
             suite by hand with `cargo test --workspace --test e2e -- <subject>::<suite>::`"
        );
    }
    match env {
        Ok(env) => env,
        Err(e) => panic!("cannot start the real control plane: {e}"),
    }
}

/// A test's hold on its suite's environment, from [`alone`]: released (and the logs printed if
/// the test failed, [`Env::guard`]) when dropped.
#[derive(Debug)]
pub struct Alone {
    _lock: tokio::sync::MutexGuard<'static, ()>,
    _logs: LogGuard<'static>,
}

/// The calling suite's [`shared`] environment (default options), held alone among the suite's
/// tests that pass the same `lock` (they act on the whole cluster: controllers sharing a Lease,
/// installs, attacks); keep the [`Alone`] for the whole test.
#[track_caller]
pub fn alone(
    lock: &'static tokio::sync::Mutex<()>,
) -> impl std::future::Future<Output = (&'static Env, Alone)> {
    let env = shared(EnvOptions::default());
    async move {
        let held = Alone {
            _lock: lock.lock().await,
            _logs: env.guard(),
        };
        (env, held)
    }
}

/// For a tool's `main` (no test runtime): the [`shared`] environment with kube-scheduler and
/// kube-controller-manager running
/// ([`crate::control_plane::ControlPlane::start_workload_controllers`]), and a two-worker
/// runtime to drive it.
#[track_caller]
pub fn shared_with_workloads(
    options: EnvOptions,
) -> anyhow::Result<(&'static Env, tokio::runtime::Runtime)> {
    let env = shared(options);
    env.cp.start_workload_controllers()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    Ok((env, runtime))
}

impl Env {
    fn start(options: EnvOptions) -> anyhow::Result<Env> {
        let cp = ControlPlane::start(&Options {
            feature_gates: options.feature_gates.clone(),
            ..Options::default()
        })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("harness")
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let client = cp.client().await?;
            let classes: Api<PriorityClass> = Api::all(client.clone());
            for (name, value) in PRIORITY_CLASSES {
                let pc: PriorityClass = serde_json::from_value(serde_json::json!({
                    "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": name}, "value": value,
                }))?;
                match classes.create(&PostParams::default(), &pc).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            anyhow::Ok(())
        })?;
        Ok(Env {
            cp,
            runtime,
            nodes: Mutex::new(Vec::new()),
            counter: AtomicU32::new(0),
        })
    }

    /// An admin client on the caller's runtime.
    pub async fn client(&self) -> kube::Client {
        match self.cp.client().await {
            Ok(c) => c,
            Err(e) => panic!("admin client: {e}"),
        }
    }

    /// kubectl as admin.
    pub fn kubectl(&self) -> Kubectl {
        Kubectl::admin(&self.cp)
    }

    /// A name unique in this environment: `prefix-N`.
    pub fn unique(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.counter.fetch_add(1, Ordering::SeqCst))
    }

    /// Creates a fresh namespace.
    pub async fn namespace(&self, prefix: &str) -> String {
        let name = self.unique(prefix);
        let api: Api<Namespace> = Api::all(self.client().await);
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.clone());
        if let Err(e) = api.create(&PostParams::default(), &ns).await {
            panic!("create namespace {name}: {e}");
        }
        name
    }

    /// Adds a hollow node named `prefix-N` whose *allocatable* is `cpu` and `memory` (whole
    /// cores minus a system reservation for the rest, see
    /// [`HollowNodeConfig::with_allocatable`]) and returns its name once it is Ready.
    pub async fn node(&self, prefix: &str, cpu: &str, memory: &str) -> String {
        let cfg = match HollowNodeConfig::with_allocatable(&self.unique(prefix), cpu, memory) {
            Ok(c) => c,
            Err(e) => panic!("node {prefix}: {e:#}"),
        };
        let name = cfg.name.clone();
        self.add_node(cfg).await;
        name
    }

    /// Adds a hollow node as configured, once it is Ready.
    pub async fn add_node(&self, cfg: HollowNodeConfig) {
        match HollowNode::start(&self.cp, &cfg).await {
            Ok(node) => match self.nodes.lock() {
                Ok(mut nodes) => nodes.push(node),
                Err(e) => panic!("hollow node list poisoned: {e}"),
            },
            Err(e) => panic!("add node {}: {e:#}", cfg.name),
        }
    }

    /// The usage file of hollow node `node` ([`UsageFile::of`]): what its containers use, set with
    /// [`UsageFile::set`]; the node need not run yet. The kubelet sees it on its next stats read.
    pub fn usage_file(&self, node: &str) -> UsageFile {
        UsageFile::of(&self.cp, node)
    }

    /// Sets `spec.podPreemptionPolicy.disableResizePreemption` on a node, as an administrator
    /// would (v1.37; the field needs the alpha gate on the API server).
    pub async fn disable_resize_preemption(&self, node: &str, owners: &[&str]) {
        let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client().await);
        let patch = serde_json::json!({"spec": {"podPreemptionPolicy": {"disableResizePreemption": owners}}});
        if let Err(e) = api
            .patch(
                node,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
        {
            panic!("opt node {node} out of resize preemption: {e}");
        }
    }

    /// The harness runtime (for background work that must outlive a test).
    pub fn runtime(&self) -> &tokio::runtime::Handle {
        self.runtime.handle()
    }

    /// The field test on a fresh namespace and t3.medium node (1930m): a 1500m `low` filler and a
    /// 250m `high` Guaranteed app, both running. Returns (namespace, node, pods API).
    pub async fn field_test(
        &self,
        prefix: &str,
    ) -> (String, String, kube::Api<k8s_openapi::api::core::v1::Pod>) {
        self.scenario(
            prefix,
            ("t3-medium", "1930m", "3Gi"),
            &[
                ("filler", "low", "1500m", "256Mi"),
                ("app", "high", "250m", "256Mi"),
            ],
        )
        .await
    }

    /// A fresh namespace and hollow node (`name`, allocatable cpu, memory) with running
    /// Guaranteed pods (`name`, priority class, cpu, memory), created in order; returns the
    /// namespace, the node's name and the namespace's pods.
    pub async fn scenario(
        &self,
        prefix: &str,
        (node_name, cpu, memory): (&str, &str, &str),
        pods: &[(&str, &str, &str, &str)],
    ) -> (String, String, kube::Api<k8s_openapi::api::core::v1::Pod>) {
        let ns = self.namespace(prefix).await;
        let node = self.node(node_name, cpu, memory).await;
        let api = kube::Api::namespaced(self.client().await, &ns);
        if let Err(e) = crate::objects::create_all(&api, &node, pods).await {
            panic!("scenario in {ns}: {e:#}");
        }
        (ns, node, api)
    }

    /// KEP-5836's over-preemption example on a fresh namespace and 4-CPU node: three 500m `low`
    /// pods l0–l2, M (1000m, `mid-never`: 10000, `preemptionPolicy: Never`) and H (1000m, `high`),
    /// all running; then M asks for 2000m and is Deferred, and H asks for 2000m. Returns the
    /// namespace, the node's name and the namespace's pods.
    pub async fn kep_5836(
        &self,
        prefix: &str,
    ) -> (String, String, kube::Api<k8s_openapi::api::core::v1::Pod>) {
        use crate::objects::{resize_pending, wait_pod};
        self.priority_class("mid-never", 10000, true).await;
        let (ns, node, pods) = self
            .scenario(
                prefix,
                ("n4", "4", "8Gi"),
                &[
                    ("l0", "low", "500m", "64Mi"),
                    ("l1", "low", "500m", "64Mi"),
                    ("l2", "low", "500m", "64Mi"),
                    ("m", "mid-never", "1000m", "64Mi"),
                    ("h", "high", "1000m", "64Mi"),
                ],
            )
            .await;
        self.resize_cpu(&ns, "m", "2000m").await;
        let timeout = std::time::Duration::from_secs(60);
        if let Err(e) = wait_pod(&pods, "m", timeout, |p| resize_pending(p).is_some()).await {
            panic!("M's resize never pending: {e:#}");
        }
        self.resize_cpu(&ns, "h", "2000m").await;
        (ns, node, pods)
    }

    /// Sends a resize of container `app` of pod `pod` in `ns` to `cpu` (requests and limits)
    /// through `kubectl patch --subresource resize` and returns what kubectl printed, whatever the
    /// API server answered; panics only if kubectl could not run.
    pub async fn try_resize_cpu(
        &self,
        ns: &str,
        pod: &str,
        cpu: &str,
    ) -> crate::kubectl::KubectlOutput {
        match self
            .kubectl()
            .resize(ns, pod, &crate::objects::cpu_resize(cpu))
            .await
        {
            Ok(out) => out,
            Err(e) => panic!("resize {ns}/{pod} to cpu {cpu}: {e:#}"),
        }
    }

    /// Resizes container `app` of pod `pod` in `ns` to `cpu` (requests and limits) through
    /// `kubectl patch --subresource resize`; panics unless the API server stored it, else returns
    /// what kubectl printed (warnings on stderr).
    pub async fn resize_cpu(
        &self,
        ns: &str,
        pod: &str,
        cpu: &str,
    ) -> crate::kubectl::KubectlOutput {
        let out = self.try_resize_cpu(ns, pod, cpu).await;
        assert!(
            out.success,
            "resize {ns}/{pod} to cpu {cpu}: {}",
            out.stderr
        );
        out
    }

    /// Creates (if missing) a PriorityClass; `never` sets `preemptionPolicy: Never`
    /// ([`crate::objects::priority_class`]).
    pub async fn priority_class(&self, name: &str, value: i32, never: bool) {
        if let Err(e) =
            crate::objects::priority_class(&self.client().await, name, value, never).await
        {
            panic!("{e:#}");
        }
    }

    /// A guard that prints the control-plane logs if the test panics.
    pub fn guard(&self) -> LogGuard<'_> {
        LogGuard::new(&self.cp)
    }
}

/// Processes whose log tails a failing test prints ([`LogGuard`]).
pub trait Logs: std::fmt::Debug {
    /// What the logs are of, for the heading.
    fn heading(&self) -> String;
    /// The tail of every log.
    fn tails(&self) -> String;
}

impl Logs for ControlPlane {
    fn heading(&self) -> String {
        format!("control-plane logs ({})", self.dir().display())
    }

    fn tails(&self) -> String {
        self.dump_logs()
    }
}

/// Prints the log tails of what it guards when dropped during a panic.
#[derive(Debug)]
pub struct LogGuard<'a> {
    logs: &'a dyn Logs,
}

impl<'a> LogGuard<'a> {
    /// A guard over `logs` (e.g. a [`ControlPlane`] a test started itself).
    pub fn new(logs: &'a dyn Logs) -> LogGuard<'a> {
        LogGuard { logs }
    }
}

impl Drop for LogGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("==== {} ====\n{}", self.logs.heading(), self.logs.tails());
        }
    }
}
