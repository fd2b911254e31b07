//! A real Kubernetes node next to the control plane: upstream's kubelet and kube-proxy v1.37,
//! containerd and runc (`third_party/node/build.sh`), pods on a CNI bridge, resize-guard's images
//! pulled from a local registry — all in a network namespace and a private mount namespace that
//! `tests/node/node.sh` makes and removes (its README has the layout).
//!
//! The life of one node: [`RealNode::prepare`] takes the machine-wide lock (one real node per
//! machine), sweeps what a killed run left and creates the network namespace, whose host end
//! kube-apiserver must then bind ([`crate::control_plane::Options::real_node_host`]);
//! [`RealNode::start`] boots the node against that control plane and waits until it is Ready;
//! [`RealNode::stop`] tears it down and checks that nothing is left. A watchdog tears it down if
//! the test process dies without stopping it, and the next `prepare` sweeps whatever remains.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;

use crate::control_plane::ControlPlane;

/// Where third_party/node/build.sh's binaries are (set by the Makefile).
pub const NODE_BIN_ENV: &str = "RESIZE_GUARD_NODE_BIN_DIR";
/// third_party/registry/build.sh's registry binary (set by the Makefile).
pub const REGISTRY_BIN_ENV: &str = "RESIZE_GUARD_REGISTRY_BIN";
/// The kubelet's feature gates for `node.sh up` (`Name=true,…`; empty: the defaults).
const FEATURE_GATES_ENV: &str = "RESIZE_GUARD_NODE_FEATURE_GATES";
/// The host end of the node's veth: kube-apiserver and the registry listen here.
pub const HOST: &str = "10.213.0.1";
/// The registry the node pulls resize-guard's images from (plain HTTP: containerd's `hosts.toml`).
pub const REGISTRY: &str = "10.213.0.1:5000";
/// The Node's name.
pub const NAME: &str = "real-node";
/// The image every test workload runs: a static `pause` that exits 0 on SIGTERM, imported into
/// the node at start (`imagePullPolicy: Never`).
pub const PAUSE_IMAGE: &str = "localhost/resize-guard/pause:1";
/// The node's cgroup root in every hierarchy (the kubelet's `cgroupRoot`).
const CGROUP_ROOT: &str = "rgnode1";
/// The host-wide sysctls the kubelet sets once at start; they must be as they were afterwards.
const SYSCTLS: [&str; 6] = [
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];

/// Pushes the images `make image` wrote to the registry the node pulls from, with `make push`,
/// the way an operator pushes them to their own registry, and writes the kustomization the
/// README's install then has them write: `deploy/` under `resources:` and the `images:` block
/// `make push` printed (each image renamed to this registry and pinned by its digest). Returns
/// `make push`'s output and that kustomization's directory, for `kubectl apply -k`.
pub fn push_images() -> anyhow::Result<(String, PathBuf)> {
    let push = Command::new("make")
        .current_dir(crate::install::repo_root())
        .args([
            "-s",
            "push",
            &format!("REGISTRY={REGISTRY}/resize-guard"),
            "PLAIN_HTTP=1",
        ])
        .output()?;
    let stdout = String::from_utf8_lossy(&push.stdout).into_owned();
    anyhow::ensure!(
        push.status.success(),
        "make push failed (make image first; make test does):\n{stdout}{}",
        String::from_utf8_lossy(&push.stderr)
    );
    // The block from `images:` to the first line that does not belong to it.
    let images: Vec<&str> = stdout
        .lines()
        .skip_while(|l| *l != "images:")
        .take_while(|l| *l == "images:" || l.starts_with("  "))
        .collect();
    anyhow::ensure!(
        images.len() == 7,
        "make push printed no images: block for both images:\n{stdout}"
    );
    let dir = crate::install::repo_root()
        .join("target/harness-overlays")
        .join(format!("{}-own-registry", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             resources:\n  - ../../../deploy\n{}\n",
            images.join("\n")
        ),
    )?;
    Ok((stdout, dir))
}

/// One real node (see the module docs).
#[derive(Debug)]
pub struct RealNode {
    /// The kubelet's feature gates (`Name=true` entries), set before [`RealNode::start`].
    pub feature_gates: Vec<String>,
    work: PathBuf,
    script: PathBuf,
    bin_dir: PathBuf,
    registry_bin: PathBuf,
    sysctls: Vec<(String, String)>,
    watchdog: Option<Child>,
    down: bool,
    // Held for the node's life: a second real node on this machine waits for it.
    _lock: File,
}

/// A container's resources as the kernel holds them (cgroup v1 files, or their v2 equivalents).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupValues {
    /// `cpu.cfs_quota_us` (v2: the quota of `cpu.max`); -1 when unlimited.
    pub cpu_quota_us: i64,
    /// `cpu.shares` (v1 only; 0 on v2).
    pub cpu_shares: u64,
    /// `memory.limit_in_bytes` (v2: `memory.max`); `u64::MAX` when unlimited.
    pub memory_limit: u64,
    /// `memory.usage_in_bytes` (v2: `memory.current`).
    pub memory_usage: u64,
    /// `nr_throttled` of `cpu.stat`: periods in which the container ran out of quota.
    pub nr_throttled: u64,
}

impl RealNode {
    /// Takes the lock, sweeps stale state and creates the network namespace. Blocking.
    pub fn prepare() -> anyhow::Result<RealNode> {
        let bin_dir = env_path(NODE_BIN_ENV, "third_party/node/build.sh | tail -n 1")?;
        let registry_bin = env_path(
            REGISTRY_BIN_ENV,
            "$(third_party/registry/build.sh | tail -n 1)/registry",
        )?;
        let script = crate::install::repo_root().join("tests/node/node.sh");
        let work = std::env::temp_dir().join("resize-guard-node");
        let lock = File::create(work.with_extension("lock"))?;
        lock.lock()?;
        let sysctls = SYSCTLS
            .iter()
            .map(|k| Ok(((*k).to_owned(), read_sysctl(k)?)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut node = RealNode {
            feature_gates: Vec::new(),
            work,
            script,
            bin_dir,
            registry_bin,
            sysctls,
            watchdog: None,
            down: false,
            _lock: lock,
        };
        node.run("net")?;
        // If this process dies without stopping the node, the watchdog does it.
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {} 2>/dev/null; do sleep 0.5; done; exec \"$0\" down \"$1\"",
                std::process::id()
            ))
            .arg(&node.script)
            .arg(&node.work)
            .envs(node.envs())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        node.watchdog = Some(watchdog);
        Ok(node)
    }

    /// Boots containerd, the kubelet and kube-proxy against `cp` (which must run with
    /// `real_node_host: Some(HOST)`) and waits until the Node is Ready; returns how long that took.
    pub async fn start(&mut self, cp: &ControlPlane) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let kubeconfig = cp.kubeconfig_path();
        let client_ca = cp.kubelet_client_ca_path();
        let (script, work, envs) = (self.script.clone(), self.work.clone(), self.envs());
        tokio::task::spawn_blocking(move || {
            node_sh(
                &script,
                &envs,
                &[
                    "up",
                    &path_str(&work),
                    &path_str(&kubeconfig),
                    "100m",
                    &path_str(&client_ca),
                ],
            )
        })
        .await??;
        let nodes: Api<Node> = Api::all(cp.client().await?);
        let deadline = started + Duration::from_secs(120);
        loop {
            if let Some(n) = nodes.get_opt(NAME).await?
                && ready(&n)
            {
                return Ok(started.elapsed());
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "node {NAME} not Ready after 120 s:\n{}",
                    self.log_tail("kubelet", 6000)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Imports OCI image archives (`tests/node/oci-archive.py`'s) into the running node's
    /// containerd under the names they carry (`node.sh import`), so pods naming them pull nothing.
    pub fn import_images(&self, archives: &[PathBuf]) -> anyhow::Result<()> {
        let work = path_str(&self.work);
        let mut args = vec!["import", work.as_str()];
        let archives: Vec<String> = archives.iter().map(|a| path_str(a)).collect();
        args.extend(archives.iter().map(String::as_str));
        node_sh(&self.script, &self.envs(), &args)
    }

    /// The node's work directory (logs under `logs/`).
    pub fn work(&self) -> &Path {
        &self.work
    }

    /// The last `bytes` of a node process's log (`kubelet`, `containerd`, `kube-proxy`,
    /// `registry`, `sysctl-guard`).
    pub fn log_tail(&self, name: &str, bytes: usize) -> String {
        let text = std::fs::read_to_string(self.work.join("logs").join(format!("{name}.log")))
            .unwrap_or_default();
        let start = text.len().saturating_sub(bytes);
        let start = (start..text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text[start..].to_owned()
    }

    /// The values the kernel holds for container `container_id` (the part after `containerd://`)
    /// of pod `pod_uid`, or `None` while its cgroup does not exist.
    pub fn cgroup(
        &self,
        pod_uid: &str,
        container_id: &str,
    ) -> anyhow::Result<Option<CgroupValues>> {
        let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let find = |hierarchy: &str| {
            find_dir(
                &Path::new("/sys/fs/cgroup")
                    .join(hierarchy)
                    .join(CGROUP_ROOT),
                &format!("pod{pod_uid}"),
            )
            .map(|pod| pod.join(container_id))
            .filter(|d| d.is_dir())
        };
        if v2 {
            let Some(dir) = find("") else { return Ok(None) };
            let cpu_max = read_trimmed(&dir.join("cpu.max"))?;
            let quota = cpu_max.split_whitespace().next().unwrap_or("max");
            return Ok(Some(CgroupValues {
                cpu_quota_us: if quota == "max" { -1 } else { quota.parse()? },
                cpu_shares: 0,
                memory_limit: parse_limit(&read_trimmed(&dir.join("memory.max"))?)?,
                memory_usage: read_trimmed(&dir.join("memory.current"))?.parse()?,
                nr_throttled: nr_throttled(&dir)?,
            }));
        }
        let (Some(cpu), Some(memory)) = (find("cpu"), find("memory")) else {
            return Ok(None);
        };
        Ok(Some(CgroupValues {
            cpu_quota_us: read_trimmed(&cpu.join("cpu.cfs_quota_us"))?.parse()?,
            cpu_shares: read_trimmed(&cpu.join("cpu.shares"))?.parse()?,
            memory_limit: parse_limit(&read_trimmed(&memory.join("memory.limit_in_bytes"))?)?,
            memory_usage: read_trimmed(&memory.join("memory.usage_in_bytes"))?.parse()?,
            nr_throttled: nr_throttled(&cpu)?,
        }))
    }

    /// Polls the cgroup of `pod`'s container `app` every 10 ms until `want` holds; the error
    /// carries the last values read.
    pub async fn wait_cgroup(
        &self,
        pod: &Pod,
        timeout: Duration,
        want: impl Fn(&CgroupValues) -> bool,
    ) -> anyhow::Result<CgroupValues> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let deadline = Instant::now() + timeout;
        let mut last = None;
        while Instant::now() < deadline {
            last = self.cgroup(&uid, &container_id(pod))?;
            if let Some(v) = last.as_ref().filter(|v| want(v)) {
                return Ok(v.clone());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        anyhow::bail!("the cgroup never held the wanted values; last {last:?}")
    }

    /// Tears the node down and checks that nothing is left: no netns, link, route, cgroup,
    /// mount, directory or process of the node, and every sysctl the kubelet touched as it was.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.teardown()?;
        let check = Command::new(&self.script)
            .args(["check", &path_str(&self.work)])
            .envs(self.envs())
            .output()?;
        let mut left = String::from_utf8_lossy(&check.stdout).trim().to_owned();
        for (key, was) in &self.sysctls {
            let now = read_sysctl(key)?;
            if &now != was {
                left.push_str(&format!("\nsysctl {key} is {now}, was {was}"));
            }
        }
        anyhow::ensure!(check.status.success() && !left.contains('\n'), "{left}");
        Ok(())
    }

    fn teardown(&mut self) -> anyhow::Result<()> {
        if self.down {
            return Ok(());
        }
        self.down = true;
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
        self.run("down")
    }

    /// `node.sh COMMAND WORK`.
    fn run(&self, command: &str) -> anyhow::Result<()> {
        node_sh(
            &self.script,
            &self.envs(),
            &[command, &path_str(&self.work)],
        )
    }

    fn envs(&self) -> Vec<(&'static str, String)> {
        vec![
            (NODE_BIN_ENV, path_str(&self.bin_dir)),
            (REGISTRY_BIN_ENV, path_str(&self.registry_bin)),
            (FEATURE_GATES_ENV, self.feature_gates.join(",")),
        ]
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("real node teardown: {e:#}");
        }
    }
}

/// `pod` running the node's `pause` ([`PAUSE_IMAGE`], never pulled) in its first container.
pub fn runs_pause(mut pod: Pod) -> Pod {
    if let Some(c) = pod.spec.as_mut().and_then(|s| s.containers.first_mut()) {
        c.image = Some(PAUSE_IMAGE.to_owned());
        c.image_pull_policy = Some("Never".to_owned());
    }
    pod
}

/// The runtime id of container `app` (after `containerd://`), empty until it has one.
pub fn container_id(pod: &Pod) -> String {
    crate::objects::container_status(pod, "app")
        .and_then(|c| c.container_id.as_deref())
        .and_then(|id| id.split("://").nth(1))
        .unwrap_or_default()
        .to_owned()
}

/// The exit code of container `app` once it has terminated.
pub fn exit_code(pod: &Pod) -> Option<i32> {
    crate::objects::container_status(pod, "app")?
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

/// A CPU quantity in millicores (`250m` → 250, `2` → 2000); `None` for other spellings.
pub fn millicores(q: &str) -> Option<u64> {
    match q.strip_suffix('m') {
        Some(m) => m.parse().ok(),
        None => q.parse::<u64>().ok()?.checked_mul(1000),
    }
}

/// Free CPU on the node in millicores: allocatable minus the requests of the pods bound to it.
pub async fn free_millicores(client: &kube::Client) -> anyhow::Result<(u64, u64)> {
    let node = Api::<Node>::all(client.clone()).get(NAME).await?;
    let alloc = node
        .status
        .and_then(|s| s.allocatable)
        .and_then(|a| a.get("cpu").and_then(|q| millicores(&q.0)))
        .ok_or_else(|| anyhow::anyhow!("node {NAME} reports no allocatable cpu"))?;
    let used: u64 = Api::<Pod>::all(client.clone())
        .list(&Default::default())
        .await?
        .items
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(NAME))
        .flat_map(|p| {
            p.spec
                .as_ref()
                .map(|s| s.containers.clone())
                .unwrap_or_default()
        })
        .filter_map(|c| millicores(&c.resources?.requests?.get("cpu")?.0))
        .sum();
    Ok((alloc, alloc.saturating_sub(used)))
}

/// Whether a Node's `Ready` condition is `True`.
pub fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn node_sh(script: &Path, envs: &[(&str, String)], args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(script)
        .args(args)
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", script.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "node.sh {} failed ({}):\n{}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn env_path(var: &str, how: &str) -> anyhow::Result<PathBuf> {
    match std::env::var_os(var) {
        Some(v) if !v.is_empty() => Ok(PathBuf::from(v)),
        _ => anyhow::bail!(
            "{var} is not set: a real node needs it ({var}=\"$({how})\"; make test sets it)"
        ),
    }
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

fn read_sysctl(key: &str) -> anyhow::Result<String> {
    read_trimmed(&Path::new("/proc/sys").join(key))
}

fn read_trimmed(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// `nr_throttled` from `cpu.stat` in `dir`.
fn nr_throttled(dir: &Path) -> anyhow::Result<u64> {
    let stat = read_trimmed(&dir.join("cpu.stat"))?;
    stat.lines()
        .find_map(|l| l.strip_prefix("nr_throttled "))
        .ok_or_else(|| anyhow::anyhow!("{}: no nr_throttled", dir.display()))?
        .parse()
        .map_err(Into::into)
}

fn parse_limit(text: &str) -> anyhow::Result<u64> {
    if text == "max" {
        return Ok(u64::MAX);
    }
    Ok(text.parse()?)
}

/// The first directory named `name` below `root` (depth-first).
fn find_dir(root: &Path, name: &str) -> Option<PathBuf> {
    let entries = std::fs::read_dir(root).ok()?;
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if entry.file_name() == name {
            return Some(path);
        }
        if let Some(found) = find_dir(&path, name) {
            return Some(found);
        }
    }
    None
}
