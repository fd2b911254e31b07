//! Hollow nodes: one `hollow-node` process per node, each running upstream's kubelet of the control plane's minor
//! (kubemark's library, `tests/control-plane/cmd/hollow-node`) against the harness's
//! [`ControlPlane`], with fakes only at the runtime boundary (CRI, pod cgroups, cAdvisor machine
//! size and memory usage). Pod admission, resize admission, the `PodResizePending` /
//! `PodResizeInProgress` conditions, their messages, retries, Events and graceful deletion are the
//! real kubelet's.
//!
//! ```no_run
//! # async fn demo(cp: &resize_guard_harness::control_plane::ControlPlane) -> anyhow::Result<()> {
//! use resize_guard_harness::hollow_node::{HollowNode, HollowNodeConfig};
//! // A t3.medium: 2 cores, 70m reserved → 1930m allocatable; 4Gi, 1Gi reserved → 3Gi.
//! let node = HollowNode::start(cp, &HollowNodeConfig::t3_medium("n1")).await?;
//! // … bind pods with `spec.nodeName: n1` …
//! node.stop();
//! # Ok(()) }
//! ```
//!
//! [`HollowNodeConfig`] is also the format of a node in YAML (camelCase, unknown keys rejected):
//!
//! ```yaml
//! - {name: node-a, cpu: 2, memory: 4Gi, reservedCpu: 70m, reservedMemory: 1Gi}
//! - name: node-b
//!   cpu: 4
//!   memory: 8Gi
//!   pods: 30
//!   labels: {zone: b}
//!   taints: ["dedicated=batch:NoSchedule"]
//!   featureGates: ["InPlacePodLevelResourcesVerticalScaling=false"]
//!   podMemoryUsage: 200Mi
//!   kubeletApi: true
//! ```
//!
//! Usage: what each container "uses" is set at runtime with [`HollowNode::set_usage`] (or
//! [`UsageFile::of`] by node name), `{"<ns>/<pod>/<container>": {"memory": "150Mi", "cpu":
//! "200m"}}` in `usage-<node>.json` next to the control-plane logs, which the node re-reads when it
//! changes. The kubelet then reports it in its CRI container stats and cAdvisor pod cgroups, so
//! `/metrics/resource` (metrics-server, [`crate::metrics_server`]) and its own check before lowering
//! a memory limit see the same numbers; a pod with no entry keeps `podMemoryUsage` for its cgroup
//! and has no container stats. `kubeletApi: true` serves the kubelet's HTTPS API on this machine's
//! address ([`crate::replica::host_ip`]) at a free port, with webhook authentication and
//! authorization, advertised in the Node's status; off by default, so many nodes start cheaply.
//!
//! Each process lives in its own work directory inside the control plane's temporary directory
//! (kubelet root dir, checkpoints, CRI socket), logs to `hollow-node-<name>.log` (`.<n>.log` for a
//! restart) next to the control-plane logs, and is stopped — and its work directory removed —
//! when the [`HollowNode`] is dropped, or by the process watchdog when the test binary exits
//! without dropping it.
//!
//! Identity: the kubelet uses the control plane's **admin** kubeconfig. The harness API server
//! authorizes with RBAC only (no `Node` authorizer, and `NodeRestriction` has nothing to restrict
//! for a `system:masters` user), and its token file has no `system:node:<name>` users; a node
//! identity would only add ceremony to a test bench. A kubelet that acts as admin can do
//! everything a real one can, so nothing the tests observe depends on this.
//!
//! Timing: the kubelet's periodic retry of Deferred resizes is 3 minutes and cannot be scaled;
//! tests rely on the event-driven retries (a pod removed or resized on the node). Grace periods are
//! real time too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};
use serde::{Deserialize, Serialize};

use crate::control_plane::ControlPlane;
use crate::process::Process;

/// How long [`HollowNode::start`] waits for the Node to be Ready with the expected allocatable.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// One hollow node: the machine the fake cAdvisor reports and the kubelet's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HollowNodeConfig {
    /// Node name.
    pub name: String,
    /// Machine cores, i.e. capacity cpu (cAdvisor reports whole cores).
    pub cpu: u32,
    /// Machine memory, i.e. capacity memory, e.g. `4Gi`.
    pub memory: String,
    /// CPU reserved for the system (kubelet `systemReserved`): allocatable = `cpu` − this.
    #[serde(default = "zero")]
    pub reserved_cpu: String,
    /// Memory reserved for the system: allocatable = `memory` − this.
    #[serde(default = "zero")]
    pub reserved_memory: String,
    /// Pod capacity (kubelet `maxPods`).
    #[serde(default = "default_pods")]
    pub pods: u32,
    /// Extra node labels (kubelet `--node-labels`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Taints to register with, in the kubelet's `--register-with-taints` syntax
    /// (`key[=value]:Effect`).
    #[serde(default)]
    pub taints: Vec<String>,
    /// Kubelet feature gates, `Name=true|false`.
    #[serde(default)]
    pub feature_gates: Vec<String>,
    /// Memory usage the fake cAdvisor reports for every pod; the kubelet refuses to lower a pod's
    /// memory limit to this or below.
    #[serde(default = "zero")]
    pub pod_memory_usage: String,
    /// Serve the kubelet's HTTPS API (`/metrics/resource`, `/stats`, …) on this machine's address
    /// at a free port, as the Node's status advertises it: what metrics-server scrapes.
    #[serde(default)]
    pub kubelet_api: bool,
}

fn zero() -> String {
    "0".to_owned()
}

fn default_pods() -> u32 {
    110
}

impl HollowNodeConfig {
    /// A node with `cpu` cores and `memory`, nothing reserved, 110 pods.
    pub fn new(name: &str, cpu: u32, memory: &str) -> HollowNodeConfig {
        HollowNodeConfig {
            name: name.to_owned(),
            cpu,
            memory: memory.to_owned(),
            reserved_cpu: zero(),
            reserved_memory: zero(),
            pods: default_pods(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            feature_gates: Vec::new(),
            pod_memory_usage: zero(),
            kubelet_api: false,
        }
    }

    /// The field test's t3.medium: 2 cores with 70m reserved (1930m allocatable), 4Gi with 1Gi
    /// reserved (3Gi allocatable).
    pub fn t3_medium(name: &str) -> HollowNodeConfig {
        HollowNodeConfig::new(name, 2, "4Gi").reserved("70m", "1Gi")
    }

    /// A node whose *allocatable* is `cpu` and `memory` (e.g. `1930m`, `3Gi`): the machine has
    /// `cpu` rounded up to whole cores (cAdvisor reports cores) and the difference is reserved
    /// for the system; memory capacity equals allocatable.
    pub fn with_allocatable(
        name: &str,
        cpu: &str,
        memory: &str,
    ) -> anyhow::Result<HollowNodeConfig> {
        let milli = parse_milli(cpu).with_context(|| format!("node {name}: cpu"))?;
        if milli <= 0 {
            anyhow::bail!("node {name}: cpu {cpu} must be positive");
        }
        // `parse_milli` gives millicores for cpu.
        let cores = (milli + 999) / 1000;
        let reserved = cores * 1000 - milli;
        let cores = u32::try_from(cores).with_context(|| format!("node {name}: cpu {cpu}"))?;
        Ok(HollowNodeConfig::new(name, cores, memory).reserved(&format!("{reserved}m"), "0"))
    }

    /// Sets the system reservation.
    pub fn reserved(mut self, cpu: &str, memory: &str) -> HollowNodeConfig {
        self.reserved_cpu = cpu.to_owned();
        self.reserved_memory = memory.to_owned();
        self
    }

    /// Sets the memory usage reported for every pod.
    pub fn pod_memory_usage(mut self, usage: &str) -> HollowNodeConfig {
        self.pod_memory_usage = usage.to_owned();
        self
    }

    /// Serves the kubelet's HTTPS API (for metrics-server).
    pub fn kubelet_api(mut self) -> HollowNodeConfig {
        self.kubelet_api = true;
        self
    }

    /// Sets the pod capacity.
    pub fn pods(mut self, pods: u32) -> HollowNodeConfig {
        self.pods = pods;
        self
    }

    /// Adds a node label.
    pub fn label(mut self, key: &str, value: &str) -> HollowNodeConfig {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Adds a taint (`key[=value]:Effect`).
    pub fn taint(mut self, taint: &str) -> HollowNodeConfig {
        self.taints.push(taint.to_owned());
        self
    }

    /// Adds a kubelet feature gate (`Name=true|false`).
    pub fn feature_gate(mut self, gate: &str) -> HollowNodeConfig {
        self.feature_gates.push(gate.to_owned());
        self
    }

    /// Checks the values before a process is started, so mistakes fail with the field's name.
    pub fn validate(&self) -> anyhow::Result<()> {
        let name = &self.name;
        if name.is_empty()
            || name.len() > 63
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        {
            anyhow::bail!(
                "hollow node name {name:?}: want a DNS-1123 name of at most 63 characters"
            );
        }
        if self.cpu == 0 {
            anyhow::bail!("hollow node {name}: cpu must be at least 1 core");
        }
        if self.pods == 0 {
            anyhow::bail!("hollow node {name}: pods must be at least 1");
        }
        for (field, value) in [
            ("memory", &self.memory),
            ("reservedCpu", &self.reserved_cpu),
            ("reservedMemory", &self.reserved_memory),
            ("podMemoryUsage", &self.pod_memory_usage),
        ] {
            let v = parse_milli(value).with_context(|| format!("hollow node {name}: {field}"))?;
            if v < 0 {
                anyhow::bail!("hollow node {name}: {field} {value} is negative");
            }
        }
        let (cpu, memory) = self.expected_allocatable()?;
        if cpu <= 0 || memory <= 0 {
            anyhow::bail!(
                "hollow node {name}: the reservation leaves no allocatable cpu or memory"
            );
        }
        let flag_values = self
            .labels
            .keys()
            .chain(&self.taints)
            .chain(&self.feature_gates);
        for s in flag_values.chain(self.labels.values()) {
            if s.contains(',') {
                anyhow::bail!("hollow node {name}: {s:?} must contain no comma");
            }
        }
        if let Some(s) = non_empty_check(self) {
            anyhow::bail!("hollow node {name}: an empty {s}");
        }
        Ok(())
    }

    /// The allocatable (millicores, milli-bytes) the kubelet should publish: capacity minus the
    /// reservation, computed here independently of the code under test.
    pub fn expected_allocatable(&self) -> anyhow::Result<(i128, i128)> {
        let cpu = i128::from(self.cpu) * 1000 - parse_milli(&self.reserved_cpu)?;
        let memory = parse_milli(&self.memory)? - parse_milli(&self.reserved_memory)?;
        Ok((cpu, memory))
    }

    /// The `hollow-node` command line (without the binary) for a work directory and kubeconfig.
    pub fn args(&self, work_dir: &Path, kubeconfig: &Path) -> Vec<String> {
        let mut args = vec![
            format!("--node-name={}", self.name),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--work-dir={}", work_dir.display()),
            format!("--cores={}", self.cpu),
            format!("--memory={}", self.memory),
            format!("--reserved-cpu={}", self.reserved_cpu),
            format!("--reserved-memory={}", self.reserved_memory),
            format!("--pod-memory-usage={}", self.pod_memory_usage),
            format!("--max-pods={}", self.pods),
        ];
        if !self.labels.is_empty() {
            let labels: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            args.push(format!("--node-labels={}", labels.join(",")));
        }
        if !self.taints.is_empty() {
            args.push(format!("--register-with-taints={}", self.taints.join(",")));
        }
        if !self.feature_gates.is_empty() {
            args.push(format!("--feature-gates={}", self.feature_gates.join(",")));
        }
        args
    }
}

fn non_empty_check(c: &HollowNodeConfig) -> Option<&'static str> {
    if c.labels.keys().any(String::is_empty) {
        Some("label key")
    } else if c.taints.iter().any(String::is_empty) {
        Some("taint")
    } else if c.feature_gates.iter().any(String::is_empty) {
        Some("feature gate")
    } else {
        None
    }
}

/// A running hollow node.
#[derive(Debug)]
pub struct HollowNode {
    name: String,
    process: Process,
    registration: Duration,
    usage: UsageFile,
    kubelet_port: Option<u16>,
    // Declared after `process`: the directory goes once the process is stopped.
    work_dir: tempfile::TempDir,
}

impl HollowNode {
    /// Starts a hollow node and waits until its Node is Ready with the expected allocatable.
    pub async fn start(cp: &ControlPlane, config: &HollowNodeConfig) -> anyhow::Result<HollowNode> {
        let mut nodes = HollowNode::start_all(cp, std::slice::from_ref(config)).await?;
        nodes.pop().context("no hollow node started")
    }

    /// Starts several hollow nodes at once (all processes first, then one wait), in `configs`
    /// order. If one fails, the others are stopped.
    pub async fn start_all(
        cp: &ControlPlane,
        configs: &[HollowNodeConfig],
    ) -> anyhow::Result<Vec<HollowNode>> {
        let mut names = std::collections::BTreeSet::new();
        for c in configs {
            c.validate()?;
            if !names.insert(&c.name) {
                anyhow::bail!("hollow node {} configured twice", c.name);
            }
        }
        let client = cp.client().await?;
        let started = Instant::now();
        // A Node left by an earlier process of the same name may still say Ready: only a heartbeat
        // from now on counts.
        let since = k8s_openapi::jiff::Timestamp::now().as_second();
        let mut nodes = Vec::with_capacity(configs.len());
        for c in configs {
            nodes.push(HollowNode::spawn(cp, c)?);
        }
        let waits = nodes.iter_mut().zip(configs).map(|(node, config)| {
            let client = client.clone();
            async move { node.wait_ready(client, config, started, since).await }
        });
        for result in futures::future::join_all(waits).await {
            result?;
        }
        Ok(nodes)
    }

    fn spawn(cp: &ControlPlane, config: &HollowNodeConfig) -> anyhow::Result<HollowNode> {
        // A short path: the kubelet's unix sockets live under it (108-byte limit).
        let work_dir = tempfile::Builder::new()
            .prefix("hn-")
            .tempdir_in(cp.dir())
            .context("hollow node work dir")?;
        let (process, kubelet_port) = spawn_kubelet(cp, config, work_dir.path())?;
        Ok(HollowNode {
            name: config.name.clone(),
            process,
            registration: Duration::ZERO,
            usage: UsageFile::of(cp, &config.name),
            kubelet_port,
            work_dir,
        })
    }

    /// Stops the kubelet (SIGTERM) but keeps its work directory (checkpoints) and the Node
    /// object; no node-lifecycle controller runs, so the Node keeps its last status.
    pub fn stop_kubelet(&mut self) {
        self.process.stop(Duration::from_secs(5));
    }

    /// Starts the kubelet again, with `config` (same name), on the same work directory — as a
    /// kubelet restarted with a new configuration keeps its allocation checkpoints — and waits
    /// until the Node is Ready with the new allocatable, heartbeat from the new process.
    pub async fn restart(
        &mut self,
        cp: &ControlPlane,
        config: &HollowNodeConfig,
    ) -> anyhow::Result<()> {
        config.validate()?;
        anyhow::ensure!(
            config.name == self.name,
            "a restart keeps the node name ({} → {})",
            self.name,
            config.name
        );
        self.stop_kubelet();
        let (started, since) = (
            Instant::now(),
            k8s_openapi::jiff::Timestamp::now().as_second(),
        );
        (self.process, self.kubelet_port) = spawn_kubelet(cp, config, self.work_dir.path())?;
        let client = cp.client().await?;
        self.wait_ready(client, config, started, since).await
    }

    async fn wait_ready(
        &mut self,
        client: kube::Client,
        config: &HollowNodeConfig,
        started: Instant,
        since: i64,
    ) -> anyhow::Result<()> {
        let nodes: Api<Node> = Api::all(client);
        let want = config.expected_allocatable()?;
        let deadline = started + READY_TIMEOUT;
        let mut last = String::from("(not registered)");
        loop {
            if !self.process.is_running() {
                anyhow::bail!(
                    "hollow node {} exited before it was Ready; log {}:\n{}",
                    self.name,
                    self.process.log_path().display(),
                    self.log_tail(6000)
                );
            }
            if let Some(node) = nodes.get_opt(&self.name).await? {
                match ready_with(&node, want, config.pods, since) {
                    Ok(()) => {
                        self.registration = started.elapsed();
                        return Ok(());
                    }
                    Err(why) => last = why,
                }
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "hollow node {} not Ready with allocatable cpu {}m, memory {} bytes, pods {} after \
                     {READY_TIMEOUT:?}: {last}; log {}:\n{}",
                    self.name,
                    want.0,
                    want.1 / 1000,
                    config.pods,
                    self.process.log_path().display(),
                    self.log_tail(6000)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The node name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// From process start to the Node being Ready with the expected allocatable.
    pub fn registration_time(&self) -> Duration {
        self.registration
    }

    /// Sets what container `namespace/pod/container` uses: `memory` (a quantity, e.g. `150Mi`:
    /// usage = working set) and `cpu` (a rate, e.g. `200m`, integrated into its cumulative CPU).
    /// The kubelet sees it on its next stats read.
    pub fn set_usage(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        memory: &str,
        cpu: &str,
    ) -> anyhow::Result<()> {
        self.usage.set(namespace, pod, container, memory, cpu)
    }

    /// The node's usage file.
    pub fn usage_file(&self) -> &UsageFile {
        &self.usage
    }

    /// The kubelet API's port on [`crate::replica::host_ip`], if
    /// [`HollowNodeConfig::kubelet_api`] is on.
    pub fn kubelet_port(&self) -> Option<u16> {
        self.kubelet_port
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The work directory (kubelet root dir, checkpoints, CRI socket).
    pub fn work_dir(&self) -> &Path {
        self.work_dir.path()
    }

    /// The process log.
    pub fn log_path(&self) -> &Path {
        self.process.log_path()
    }

    /// The last `bytes` of the process log.
    pub fn log_tail(&self, bytes: u64) -> String {
        self.process.log_tail(bytes)
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// Memory only this process uses (USS: `Private_Clean` + `Private_Dirty` from
    /// `/proc/<pid>/smaps_rollup`), in bytes; the binary's pages are shared between nodes.
    pub fn unshared_memory_bytes(&self) -> Option<u64> {
        let rollup = std::fs::read_to_string(format!("/proc/{}/smaps_rollup", self.pid())).ok()?;
        let kib = |key: &str| -> Option<u64> {
            rollup
                .lines()
                .find_map(|l| l.strip_prefix(key))?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()
        };
        Some((kib("Private_Clean:")? + kib("Private_Dirty:")?) * 1024)
    }

    /// CPU time the process has used so far (user + system).
    pub fn cpu_time(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).ok()?;
        // Fields after the parenthesised command: state is field 3, utime 14, stime 15.
        let rest = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        // USER_HZ is 100 on Linux.
        Some(Duration::from_millis(ticks * 10))
    }

    /// Stops the kubelet (SIGTERM, SIGKILL after 5 s) and removes its work directory, unless
    /// `RESIZE_GUARD_KEEP_TMP` is set. The Node object stays, as when a real kubelet stops; no
    /// node-lifecycle controller runs, so it is not marked NotReady either.
    pub fn stop(self) -> PathBuf {
        let path = self.work_dir.path().to_owned();
        drop(self);
        path
    }

    /// Stops the kubelet and deletes its Node object.
    pub async fn remove(self, client: kube::Client) -> anyhow::Result<()> {
        let name = self.name.clone();
        self.stop();
        let nodes: Api<Node> = Api::all(client);
        match nodes.delete(&name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

impl Drop for HollowNode {
    fn drop(&mut self) {
        self.process.stop(Duration::from_secs(5));
        if std::env::var_os("RESIZE_GUARD_KEEP_TMP").is_some() {
            self.work_dir.disable_cleanup(true);
        }
    }
}

/// Spawns one `hollow-node` process for `config` on `work_dir`, logging next to the control
/// plane's logs (a node restarted under the same name gets a numbered log); with its kubelet API
/// port, if on.
fn spawn_kubelet(
    cp: &ControlPlane,
    config: &HollowNodeConfig,
    work_dir: &Path,
) -> anyhow::Result<(Process, Option<u16>)> {
    let mut cmd = Command::new(&cp.binaries().hollow_node);
    cmd.args(config.args(work_dir, &cp.kubeconfig_path()));
    cmd.arg(format!(
        "--usage-file={}",
        UsageFile::of(cp, &config.name).path().display()
    ));
    let kubelet_port = if config.kubelet_api {
        let port = crate::process::free_port()?;
        cmd.arg(format!("--kubelet-port={port}"))
            .arg(format!("--node-ip={}", crate::replica::host_ip()?));
        Some(port)
    } else {
        None
    };
    // A node restarted under the same name keeps the earlier process's log.
    let log = (0..)
        .map(|n| match n {
            0 => cp.dir().join(format!("hollow-node-{}.log", config.name)),
            n => cp
                .dir()
                .join(format!("hollow-node-{}.{n}.log", config.name)),
        })
        .find(|p| !p.exists())
        .context("hollow node log file")?;
    let process = Process::spawn_with_cleanup(
        &format!("hollow-node {}", config.name),
        cmd,
        &log,
        Some(work_dir),
    )?;
    Ok((process, kubelet_port))
}

/// A hollow node's usage file: `{"<namespace>/<pod>/<container>": {"memory": "<quantity>",
/// "cpu": "<quantity>"}}`, re-read by the node whenever it changes (format and semantics:
/// `tests/control-plane/cmd/hollow-node/usage.go`). Writes are atomic (a temporary file renamed
/// over it) and serialised within the test binary, so tests sharing a node keep each other's
/// entries.
#[derive(Debug, Clone)]
pub struct UsageFile {
    path: PathBuf,
}

/// Serialises read-modify-write of usage files within this process.
static USAGE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl UsageFile {
    /// The usage file of node `node` of `cp` (whether or not it runs yet): `usage-<node>.json`
    /// in the control plane's directory, so it survives a restart of the node.
    pub fn of(cp: &ControlPlane, node: &str) -> UsageFile {
        UsageFile {
            path: cp.dir().join(format!("usage-{node}.json")),
        }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sets container `namespace/pod/container`'s memory (bytes quantity) and CPU (cores
    /// quantity, a rate); both must be non-negative quantities.
    pub fn set(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        memory: &str,
        cpu: &str,
    ) -> anyhow::Result<()> {
        for (what, value) in [("memory", memory), ("cpu", cpu)] {
            let v = parse_milli(value).with_context(|| format!("usage {what} {value:?}"))?;
            anyhow::ensure!(v >= 0, "usage {what} {value} is negative");
        }
        let key = usage_key(namespace, pod, container)?;
        self.update(|entries| {
            entries.insert(key, serde_json::json!({"memory": memory, "cpu": cpu}));
        })
    }

    /// Removes container `namespace/pod/container`'s entry: it reports no container stats again.
    pub fn remove(&self, namespace: &str, pod: &str, container: &str) -> anyhow::Result<()> {
        let key = usage_key(namespace, pod, container)?;
        self.update(|entries| {
            entries.remove(&key);
        })
    }

    fn update(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, serde_json::Value>),
    ) -> anyhow::Result<()> {
        let _guard = USAGE_LOCK
            .lock()
            .map_err(|_| anyhow::anyhow!("usage file lock poisoned"))?;
        let mut entries: BTreeMap<String, serde_json::Value> = match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("usage file {}", self.path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(e).with_context(|| format!("read {}", self.path.display())),
        };
        change(&mut entries);
        let tmp = self
            .path
            .with_extension(format!("json.tmp-{}", std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec_pretty(&entries)?)
            .with_context(|| format!("write {}", tmp.display()))?;
        std::fs::rename(&tmp, &self.path)
            .with_context(|| format!("rename {} to {}", tmp.display(), self.path.display()))
    }
}

fn usage_key(namespace: &str, pod: &str, container: &str) -> anyhow::Result<String> {
    for (what, name) in [
        ("namespace", namespace),
        ("pod", pod),
        ("container", container),
    ] {
        anyhow::ensure!(
            !name.is_empty() && !name.contains('/'),
            "usage {what} {name:?}: want a non-empty name without '/'"
        );
    }
    Ok(format!("{namespace}/{pod}/{container}"))
}

/// Ready=True, heartbeat at or after `since` (Unix seconds), and the allocatable the
/// configuration implies; otherwise what is missing.
fn ready_with(node: &Node, want: (i128, i128), pods: u32, since: i64) -> Result<(), String> {
    let status = node.status.as_ref().ok_or("no status")?;
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .ok_or("no Ready condition")?;
    if ready.status != "True" {
        return Err(format!("Ready={}", ready.status));
    }
    let heartbeat = ready
        .last_heartbeat_time
        .as_ref()
        .map_or(0, |t| t.0.as_second());
    if heartbeat < since {
        return Err("Ready from an earlier kubelet, no heartbeat from this one yet".to_owned());
    }
    let alloc = status.allocatable.as_ref().ok_or("no allocatable")?;
    let get = |key: &str| -> Result<i128, String> {
        let q = alloc.get(key).ok_or(format!("no allocatable {key}"))?;
        parse_milli(&q.0).map_err(|e| format!("allocatable {key} {}: {e}", q.0))
    };
    let got = (get("cpu")?, get("memory")?, get("pods")?);
    if got != (want.0, want.1, i128::from(pods) * 1000) {
        return Err(format!(
            "allocatable cpu {}, memory {}, pods {}",
            alloc["cpu"].0, alloc["memory"].0, alloc["pods"].0
        ));
    }
    Ok(())
}

/// A Kubernetes quantity in thousandths of its unit (millicores, milli-bytes), rounded up like
/// `resource.Quantity.MilliValue`. A small parser of its own so the harness does not check the
/// kubelet with the code under test.
pub fn parse_milli(s: &str) -> anyhow::Result<i128> {
    let s = s.trim();
    const BINARY: [(&str, u32); 6] = [
        ("Ki", 10),
        ("Mi", 20),
        ("Gi", 30),
        ("Ti", 40),
        ("Pi", 50),
        ("Ei", 60),
    ];
    const DECIMAL: [(&str, i32); 8] = [
        ("n", -9),
        ("u", -6),
        ("m", -3),
        ("k", 3),
        ("M", 6),
        ("G", 9),
        ("T", 12),
        ("P", 15),
    ];
    let (number, scale2, scale10) = if let Some((n, p)) = BINARY
        .iter()
        .find_map(|(suf, p)| s.strip_suffix(suf).map(|n| (n, *p)))
    {
        (n, p, 0)
    } else if let Some(pos) = s.find(['e', 'E']).filter(|&i| i + 1 < s.len()) {
        let exp: i32 = s[pos + 1..]
            .parse()
            .with_context(|| format!("quantity {s:?}: exponent"))?;
        (&s[..pos], 0, exp)
    } else if let Some(n) = s.strip_suffix('E') {
        (n, 0, 18)
    } else if let Some((n, e)) = DECIMAL
        .iter()
        .find_map(|(suf, e)| s.strip_suffix(suf).map(|n| (n, *e)))
    {
        (n, 0, e)
    } else {
        (s, 0, 0)
    };
    let (negative, digits) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number.strip_prefix('+').unwrap_or(number)),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        anyhow::bail!("{s:?} is not a quantity");
    }
    // mantissa × 10^(scale10 + 3 − frac digits) × 2^scale2, rounded up.
    let mantissa: i128 = format!("{int}{frac}")
        .parse()
        .with_context(|| format!("quantity {s:?}"))?;
    let exp10 = scale10 + 3 - i32::try_from(frac.len()).context("quantity too long")?;
    let mut value = mantissa
        .checked_mul(1i128 << scale2)
        .context("quantity overflows")?;
    if exp10 >= 0 {
        value = value
            .checked_mul(
                10i128
                    .checked_pow(exp10.unsigned_abs())
                    .context("quantity overflows")?,
            )
            .context("quantity overflows")?;
    } else {
        let div = 10i128
            .checked_pow(exp10.unsigned_abs())
            .context("quantity too precise")?;
        value = (value + div - 1) / div;
    }
    Ok(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_to_thousandths() {
        for (s, want) in [
            ("2", 2000),
            ("1930m", 1930),
            ("70m", 70),
            ("0.5", 500),
            ("4Gi", 4 * 1024 * 1024 * 1024 * 1000),
            ("1.5Gi", 3 * 512 * 1024 * 1024 * 1000),
            ("200Mi", 200 * 1024 * 1024 * 1000),
            ("1k", 1_000_000),
            ("1e3", 1_000_000),
            ("1E", 1_000_000_000_000_000_000_000),
            ("1n", 1),
            ("0", 0),
            ("-1", -1000),
        ] {
            assert_eq!(parse_milli(s).unwrap(), want, "{s}");
        }
        for bad in ["", "m", "1x", "abc", "1.2.3"] {
            assert!(parse_milli(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn config_from_yaml_with_defaults_and_typos_rejected() {
        let c: HollowNodeConfig = serde_yaml_ng::from_str(
            "{name: a, cpu: 2, memory: 4Gi, reservedCpu: 70m, reservedMemory: 1Gi}",
        )
        .unwrap();
        assert_eq!(c, HollowNodeConfig::t3_medium("a"));
        assert_eq!(
            c.expected_allocatable().unwrap(),
            (1930, 3 * 1024 * 1024 * 1024 * 1000)
        );
        assert_eq!(c.pods, 110);
        let full: HollowNodeConfig = serde_yaml_ng::from_str(
            "name: b\ncpu: 4\nmemory: 8Gi\npods: 30\nlabels: {zone: b}\ntaints: [\"dedicated=batch:NoSchedule\"]\n\
             featureGates: [\"InPlacePodLevelResourcesVerticalScaling=false\"]\npodMemoryUsage: 200Mi\n",
        )
        .unwrap();
        full.validate().unwrap();
        let args = full.args(Path::new("/w"), Path::new("/k"));
        assert!(args.contains(&"--node-labels=zone=b".to_owned()));
        assert!(args.contains(&"--register-with-taints=dedicated=batch:NoSchedule".to_owned()));
        assert!(
            args.contains(
                &"--feature-gates=InPlacePodLevelResourcesVerticalScaling=false".to_owned()
            )
        );
        assert!(args.contains(&"--pod-memory-usage=200Mi".to_owned()));
        assert!(args.contains(&"--max-pods=30".to_owned()));
        let typo = serde_yaml_ng::from_str::<HollowNodeConfig>(
            "{name: a, cpu: 2, memory: 4Gi, reservedCPU: 1}",
        );
        assert!(typo.unwrap_err().to_string().contains("reservedCPU"));
    }

    #[test]
    fn usage_file_keeps_other_entries_and_refuses_bad_values() {
        let dir = tempfile::tempdir().unwrap();
        let file = UsageFile {
            path: dir.path().join("usage-n.json"),
        };
        file.set("ns", "p", "a", "150Mi", "200m").unwrap();
        file.set("ns", "p", "b", "1Gi", "0").unwrap();
        file.set("ns", "p", "a", "300Mi", "1").unwrap();
        let read = || -> serde_json::Value {
            serde_json::from_slice(&std::fs::read(file.path()).unwrap()).unwrap()
        };
        assert_eq!(
            read(),
            serde_json::json!({"ns/p/a": {"memory": "300Mi", "cpu": "1"},
                               "ns/p/b": {"memory": "1Gi", "cpu": "0"}})
        );
        file.remove("ns", "p", "b").unwrap();
        assert_eq!(read().as_object().unwrap().len(), 1);
        let err = |r: anyhow::Result<()>| format!("{:#}", r.unwrap_err());
        assert!(err(file.set("ns", "p", "a", "lots", "1")).contains("memory"));
        assert!(err(file.set("ns", "p", "a", "1Mi", "-1")).contains("negative"));
        assert!(err(file.set("ns", "p/q", "a", "1Mi", "1")).contains("pod"));
        assert!(err(file.set("ns", "p", "", "1Mi", "1")).contains("container"));
        assert_eq!(
            read()["ns/p/a"]["memory"],
            "300Mi",
            "a refused value changes nothing"
        );
    }

    #[test]
    fn validation_names_the_field() {
        let err = |c: HollowNodeConfig| c.validate().unwrap_err().to_string();
        assert!(err(HollowNodeConfig::new("a", 2, "lots")).contains("memory"));
        assert!(err(HollowNodeConfig::new("a", 0, "1Gi")).contains("cpu"));
        assert!(err(HollowNodeConfig::new("A_b", 1, "1Gi")).contains("name"));
        assert!(
            err(HollowNodeConfig::new("a", 1, "1Gi").reserved("1", "0")).contains("no allocatable")
        );
        assert!(err(HollowNodeConfig::new("a", 1, "1Gi").label("k", "a,b")).contains("comma"));
        HollowNodeConfig::t3_medium("n-1.x").validate().unwrap();
    }
}
