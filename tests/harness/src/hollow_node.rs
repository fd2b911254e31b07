//! Hollow nodes: one `hollow-node` process per node, each running upstream's kubelet of the control
//! plane's minor (kubemark's library, `third_party/control-plane/cmd/hollow-node`) against the
//! harness's [`ControlPlane`], with fakes only at the runtime boundary (CRI, pod cgroups, cAdvisor
//! machine size and memory usage). Pod admission, resize admission, the `PodResizePending` /
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
//! [`HollowNodeConfig`] (its own module, [`crate::hollow_config`]) is also the YAML format of a
//! node. What each container uses is set at runtime with [`HollowNode::set_usage`] (the usage
//! file, [`crate::hollow_usage`]): the kubelet reports it in its container stats, its cAdvisor pod
//! cgroups and its own check before lowering a memory limit. `kubeletApi: true` serves the
//! kubelet's HTTPS API on this machine's address ([`crate::replica::host_ip`]) at a free port,
//! with webhook authentication and authorization, advertised in the Node's status: what
//! metrics-server ([`crate::metrics_server`]) scrapes; off by default, so many nodes start cheaply.
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
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};

use crate::control_plane::ControlPlane;
use crate::process::Process;

pub use crate::hollow_config::HollowNodeConfig;
pub use crate::hollow_usage::UsageFile;
pub use crate::quantity::parse_milli;

/// How long [`HollowNode::start`] waits for the Node to be Ready with the expected allocatable.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

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
