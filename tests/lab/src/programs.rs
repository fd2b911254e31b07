//! The two programs the memory and scale benchmarks measure — a `resize-guard-webhook` and a
//! `resize-guard-controller` binary given on the command line — started on the harness's control
//! plane as their ServiceAccounts (so `deploy/`'s RBAC applies), timed to `/readyz`, and read from
//! `/proc/<pid>/status`.
//!
//! Only flags every version accepts are passed, so two builds can be compared:
//! `--certificates=external` (the controller leaves certificates alone) only when the
//! controller's `--help` lists it. The webhook serves a loopback certificate from files
//! (`--cert-dir`; no Secret), whose CA [`Programs::ca_bundle_base64`] gives for a webhook
//! configuration. The programs inherit this process's environment (e.g. `MALLOC_ARENA_MAX`) and
//! log to `<control-plane dir>/<program><suffix>.log`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Deserialize;

use resize_guard_harness::control_plane::{ControlPlane, Identity};
use resize_guard_harness::install::{Install, http_get, write_overlay};
use resize_guard_harness::kubectl::Kubectl;
use resize_guard_harness::process::{Process, free_port};

/// Process set-up of a measuring tool (`resize-guard-rss`, `resize-guard-scale`): warnings to
/// stderr (`RUST_LOG` overrides; kube-client's off), stdout kept for the tables; the rustls
/// crypto provider.
pub fn init_tool() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,kube_client=off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The command-line options naming the two binaries to measure.
#[derive(Debug, clap::Args)]
pub struct ProgramPaths {
    /// The `resize-guard-webhook` binary to measure.
    #[arg(long)]
    pub webhook: PathBuf,
    /// The `resize-guard-controller` binary to measure.
    #[arg(long)]
    pub controller: PathBuf,
}

/// The binaries to measure, checked.
#[derive(Debug, Clone)]
pub struct ProgramBinaries {
    /// The webhook, absolute.
    pub webhook: PathBuf,
    /// The controller, absolute.
    pub controller: PathBuf,
    controller_help: String,
}

impl ProgramBinaries {
    /// Checks both files exist and answer `--help`.
    pub fn new(webhook: &Path, controller: &Path) -> anyhow::Result<ProgramBinaries> {
        let webhook = absolute(webhook)?;
        let controller = absolute(controller)?;
        help(&webhook)?;
        let controller_help = help(&controller)?;
        Ok(ProgramBinaries {
            webhook,
            controller,
            controller_help,
        })
    }

    /// The controller accepts `--certificates` (and so `external`).
    pub fn controller_takes_certificates_flag(&self) -> bool {
        self.controller_help.contains("--certificates")
    }
}

/// `path` made absolute (the log says which file ran).
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

/// `deploy/` as the e2e suites install it for a controller-only run (namespace, RBAC, policy,
/// PriorityClass; no webhook configurations): `kubectl apply -k --server-side` of the harness
/// overlay.
pub async fn install_deploy(kubectl: &Kubectl) -> anyhow::Result<()> {
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

/// Both programs, running.
#[derive(Debug)]
pub struct Programs {
    /// The webhook process.
    pub webhook: Process,
    /// The controller process.
    pub controller: Process,
    webhook_port: u16,
    webhook_health: u16,
    controller_health: u16,
    started: Instant,
    ca_bundle: String,
    // Declared last: removed once the webhook is stopped.
    _cert_dir: tempfile::TempDir,
}

/// From spawn to ready, per program.
#[derive(Debug, Clone, Copy)]
pub struct Readiness {
    /// Webhook `/readyz` 200.
    pub webhook: Duration,
    /// Controller `/readyz` 200.
    pub controller: Duration,
    /// Controller reports `resize_guard_leader 1` (some versions cache pods only while leading).
    pub leading: Duration,
}

impl Programs {
    /// Starts both programs as their ServiceAccounts; `instance` names the webhook instance and
    /// the controller's Lease identity, `log_suffix` goes into the log file names.
    pub fn start(
        cp: &ControlPlane,
        bins: &ProgramBinaries,
        instance: &str,
        log_suffix: &str,
    ) -> anyhow::Result<Programs> {
        let bundle = resize_guard_certs::generate(&resize_guard_certs::CertSpec::for_loopback())?;
        let cert_dir = tempfile::tempdir()?;
        resize_guard_certs::write_dir(&bundle, cert_dir.path())?;
        let started = Instant::now();
        let (webhook_port, webhook_health) = (free_port()?, free_port()?);
        let webhook = spawn(
            cp,
            Identity::Webhook,
            &bins.webhook,
            &format!("resize-guard-webhook{log_suffix}"),
            &[
                format!("--tls-addr=127.0.0.1:{webhook_port}"),
                format!("--health-addr=127.0.0.1:{webhook_health}"),
                format!("--cert-dir={}", cert_dir.path().display()),
                "--namespace=resize-guard".into(),
                format!("--instance={instance}"),
            ],
        )?;
        let controller_health = free_port()?;
        let mut controller_args = vec![
            format!("--health-addr=127.0.0.1:{controller_health}"),
            "--namespace=resize-guard".into(),
            format!("--identity={instance}"),
        ];
        if bins.controller_takes_certificates_flag() {
            controller_args.push("--certificates=external".into());
        }
        let controller = spawn(
            cp,
            Identity::Controller,
            &bins.controller,
            &format!("resize-guard-controller{log_suffix}"),
            &controller_args,
        )?;
        Ok(Programs {
            webhook,
            controller,
            webhook_port,
            webhook_health,
            controller_health,
            started,
            ca_bundle: bundle.ca_bundle_base64(),
            _cert_dir: cert_dir,
        })
    }

    /// Waits until both answer `/readyz` and the controller leads; times from spawn.
    pub async fn wait_ready(&self, timeout: Duration) -> anyhow::Result<Readiness> {
        let webhook_ready = async {
            wait_for(
                &self.webhook,
                self.webhook_health,
                "/readyz",
                timeout,
                |_| true,
            )
            .await?;
            anyhow::Ok(self.started.elapsed())
        };
        let controller_ready = async {
            wait_for(
                &self.controller,
                self.controller_health,
                "/readyz",
                timeout,
                |_| true,
            )
            .await?;
            let ready = self.started.elapsed();
            wait_for(
                &self.controller,
                self.controller_health,
                "/metrics",
                timeout,
                |m| m.lines().any(|l| l.trim() == "resize_guard_leader 1"),
            )
            .await?;
            anyhow::Ok((ready, self.started.elapsed()))
        };
        let (webhook, (controller, leading)) = tokio::try_join!(webhook_ready, controller_ready)?;
        Ok(Readiness {
            webhook,
            controller,
            leading,
        })
    }

    /// `https://127.0.0.1:<port>`, where the webhook serves `/mutate` and `/validate`.
    pub fn webhook_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.webhook_port)
    }

    /// The webhook's CA, base64 PEM, for `caBundle`.
    pub fn ca_bundle_base64(&self) -> &str {
        &self.ca_bundle
    }

    /// The webhook's `/metrics` text.
    pub async fn webhook_metrics(&self) -> anyhow::Result<String> {
        http_get(self.webhook_health, "/metrics")
            .await
            .map_err(|e| anyhow::anyhow!("webhook /metrics: {e}"))
    }

    /// Waits `seconds`, printing both programs' VmRSS to stderr each second as
    /// `<tool>: +Ns VmRSS …` (a value still moving at the end means the wait is short).
    pub async fn settle(&self, tool: &str, seconds: u64) -> anyhow::Result<()> {
        for second in 1..=seconds {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            let (webhook, controller) = self.memory()?;
            eprintln!(
                "{tool}: +{second}s VmRSS webhook {:.1} MiB, controller {:.1} MiB",
                mib(webhook.vm_rss),
                mib(controller.vm_rss),
            );
        }
        Ok(())
    }

    /// The webhook's and the controller's memory now.
    pub fn memory(&self) -> anyhow::Result<(Memory, Memory)> {
        Ok((
            Memory::of("webhook", &self.webhook)?,
            Memory::of("controller", &self.controller)?,
        ))
    }
}

/// Memory figures of a process, KiB, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// `VmRSS`: resident now.
    pub vm_rss: u64,
    /// `VmHWM`: peak resident.
    pub vm_hwm: u64,
    /// `RssAnon`: resident anonymous memory (heap, stacks).
    pub rss_anon: u64,
}

impl Memory {
    /// A running program's memory; the error carries its log tail if it is gone.
    pub fn of(name: &str, process: &Process) -> anyhow::Result<Memory> {
        Memory::of_pid(process.pid())
            .with_context(|| format!("{name} is gone:\n{}", process.log_tail(4000)))
    }

    /// Any process's memory.
    pub fn of_pid(pid: u32) -> anyhow::Result<Memory> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .with_context(|| format!("/proc/{pid}/status"))?;
        Ok(Memory {
            vm_rss: kib(&status, "VmRSS")?,
            vm_hwm: kib(&status, "VmHWM")?,
            rss_anon: kib(&status, "RssAnon")?,
        })
    }
}

/// MiB of KiB, one decimal's worth of precision for tables.
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A `/proc/<pid>/status` field in KiB (`VmRSS:\t  12345 kB`).
pub fn kib(status: &str, field: &str) -> anyhow::Result<u64> {
    let value = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .with_context(|| format!("no {field} in /proc/<pid>/status"))?;
    let number = value.trim().trim_end_matches("kB").trim();
    Ok(number.parse()?)
}

/// The plain `value` environment `deploy/base/<component>.yaml` gives the program's container
/// (`MIMALLOC_ARENA_EAGER_COMMIT`, …; `valueFrom` entries are the API's to fill): measured
/// programs run as deploy/ ships them.
pub fn shipped_env(component: &str) -> anyhow::Result<Vec<(String, String)>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/base")
        .join(format!("{component}.yaml"));
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut env = vec![];
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let v = serde_yaml_ng::Value::deserialize(doc)
            .with_context(|| format!("{} is not YAML", path.display()))?;
        if v["kind"].as_str() != Some("Deployment") {
            continue;
        }
        let containers = v["spec"]["template"]["spec"]["containers"].as_sequence();
        for e in containers
            .into_iter()
            .flatten()
            .flat_map(|c| c["env"].as_sequence().into_iter().flatten())
        {
            if let (Some(name), Some(value)) = (e["name"].as_str(), e["value"].as_str()) {
                env.push((name.to_owned(), value.to_owned()));
            }
        }
    }
    Ok(env)
}

fn spawn(
    cp: &ControlPlane,
    identity: Identity,
    bin: &Path,
    name: &str,
    args: &[String],
) -> anyhow::Result<Process> {
    let component = if matches!(identity, Identity::Controller) {
        "controller"
    } else {
        "webhook"
    };
    let mut cmd = Command::new(bin);
    cmd.envs(shipped_env(component)?)
        .env("KUBECONFIG", cp.kubeconfig_path_for(identity))
        .env("RUST_LOG", "info,kube_client=warn")
        .args(args);
    Process::spawn(name, cmd, &cp.dir().join(format!("{name}.log")))
}

/// Polls `GET http://127.0.0.1:<port><path>` until it answers 200 with a body `accept` takes.
pub async fn wait_for(
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

/// Copies the `*.log` files of the control plane's directory into `to`.
pub fn copy_logs(from: &Path, to: &Path) -> anyhow::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_status_fields_read_in_kib() {
        let status = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nRssAnon:\t 512 kB\n";
        assert_eq!(kib(status, "VmRSS").unwrap(), 1024);
        assert_eq!(kib(status, "VmHWM").unwrap(), 2048);
        assert_eq!(kib(status, "RssAnon").unwrap(), 512);
        assert!(kib(status, "VmSwap").is_err());
    }
}
