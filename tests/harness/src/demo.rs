//! What the narrated demos (`make demo`, `make demo-vpa`) share: steps printed with the real
//! `kubectl` output, expectations marked ✓/✗ (a miss makes the demo exit non-zero), and
//! resize-guard installed as a user installs it — `kubectl apply -k` of `deploy/` through an overlay
//! that only scales its Deployments to zero and points the webhook configurations at the local
//! webhook process — with the binaries from `RESIZE_GUARD_BIN_DIR` (default: the directory of the
//! running demo binary, i.e. cargo's target directory wherever `CARGO_TARGET_DIR` puts it) run as
//! their ServiceAccounts. The controller creates the certificates and injects `caBundle` itself.
//!
//! Colour (ANSI escapes) only when stdout is a terminal and `NO_COLOR` is unset or empty, so logs
//! and files get plain text.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use crate::control_plane::{ControlPlane, Identity};
use crate::install::{Install, wait_ready, write_overlay};
use crate::kubectl::{Kubectl, KubectlOutput};
use crate::process::{Process, free_port};

/// How long a demo step waits for the cluster.
pub const T: Duration = Duration::from_secs(60);

/// A narrated demo.
#[derive(Debug)]
pub struct Demo {
    /// kubectl as admin.
    pub kubectl: Kubectl,
    /// Expectations that were not met.
    pub failures: Vec<String>,
}

/// resize-guard's two processes, stopped on drop.
#[derive(Debug)]
pub struct Installed {
    /// The webhook.
    pub webhook: Process,
    /// The controller, unless stopped.
    pub controller: Option<Process>,
    /// The webhook's health port (`/readyz`, `/metrics`).
    pub webhook_health: u16,
    /// The controller's health port.
    pub controller_health: u16,
}

impl Demo {
    /// A demo driving `cp` with kubectl.
    pub fn new(cp: &ControlPlane) -> Demo {
        Demo {
            kubectl: Kubectl {
                bin: cp.binaries().kubectl.clone(),
                kubeconfig: cp.kubeconfig_path(),
            },
            failures: Vec::new(),
        }
    }

    /// Prints a step.
    pub fn say(&self, text: &str) {
        println!("\n{}", paint(BOLD, text));
    }

    /// Runs and prints `kubectl args`.
    pub async fn run(&self, args: &[&str]) -> KubectlOutput {
        println!("$ kubectl {}", args.join(" "));
        shown(self.kubectl.run(args).await)
    }

    /// Runs and prints `kubectl patch pod <pod> -n <ns> --subresource resize -p <patch>`.
    pub async fn resize(&self, ns: &str, pod: &str, patch: &str) -> KubectlOutput {
        println!("$ kubectl patch pod {pod} -n {ns} --subresource resize -p {patch}");
        shown(self.kubectl.resize(ns, pod, patch).await)
    }

    /// Runs and prints `kubectl resize-guard args`: the plugin next to the demo's programs
    /// (`RESIZE_GUARD_BIN_DIR`, else cargo's target directory), found by kubectl on `PATH`.
    pub async fn plugin(&self, args: &[&str]) -> KubectlOutput {
        println!("$ kubectl resize-guard {}", args.join(" "));
        let mut all = vec!["resize-guard"];
        all.extend_from_slice(args);
        let dir =
            bin("kubectl-resize_guard").map(|p| p.parent().map(PathBuf::from).unwrap_or_default());
        shown(match dir {
            Ok(dir) => self.kubectl.plugin(&dir, all).await,
            Err(e) => Err(e),
        })
    }

    /// Marks an expectation.
    pub fn expect(&mut self, ok: bool, what: &str) {
        if ok {
            println!("  {}", paint(GREEN, &format!("✓ {what}")));
        } else {
            println!("  {}", paint(RED, &format!("✗ {what}")));
            self.failures.push(what.to_owned());
        }
    }

    /// Prints the verdict and returns the exit code.
    pub fn finish(&self, what: &str, logs: &std::path::Path) -> i32 {
        if self.failures.is_empty() {
            println!("\n{} Logs: {}", paint(GREEN, what), logs.display());
            0
        } else {
            let failed = format!(
                "{} step(s) failed: {:?}",
                self.failures.len(),
                self.failures
            );
            println!("\n{} Logs: {}", paint(RED, &failed), logs.display());
            1
        }
    }

    /// Installs resize-guard from `deploy/` and starts the webhook and the controller; returns
    /// once both are ready and the controller has injected `caBundle`.
    pub async fn install(&mut self, cp: &ControlPlane) -> anyhow::Result<Installed> {
        self.say(
            "Installing resize-guard with kubectl apply -k: deploy/ as shipped, through an overlay that \
             scales its Deployments to zero and points the webhook configurations at the local webhook process …",
        );
        println!("$ kubectl apply -k <overlay of deploy/> --server-side");
        let (installed, out) = Installed::start(cp, &self.kubectl).await?;
        for line in out.stdout.lines().chain(out.stderr.lines()) {
            println!("  {line}");
        }
        let bundle = self
            .kubectl
            .run([
                "get",
                "mutatingwebhookconfiguration",
                "resize-guard",
                "-o",
                "jsonpath={.webhooks[0].clientConfig.caBundle}",
            ])
            .await?;
        self.expect(
            bundle.success && !bundle.stdout.trim().is_empty(),
            "the controller injected caBundle; no certificate was prepared by hand",
        );
        Ok(installed)
    }
}

impl Installed {
    /// Installs resize-guard from `deploy/` (`kubectl apply -k --server-side` of an overlay that
    /// only scales its Deployments to zero and points the webhook configuration at the local
    /// webhook process) and starts both programs as their ServiceAccounts, the certificates
    /// managed by the controller as shipped; returns once both are ready, with the apply's output.
    pub async fn start(
        cp: &ControlPlane,
        kubectl: &Kubectl,
    ) -> anyhow::Result<(Installed, KubectlOutput)> {
        let (port, wh_health) = (free_port()?, free_port()?);
        let overlay = write_overlay(&Install {
            webhook_url: Some(format!("https://127.0.0.1:{port}")),
            ..Default::default()
        })?;
        let out = kubectl
            .run([
                "apply",
                "-k",
                &overlay.display().to_string(),
                "--server-side",
            ])
            .await?;
        let _ = std::fs::remove_dir_all(&overlay);
        anyhow::ensure!(out.success, "kubectl apply -k failed: {}", out.stderr);
        // No certificate step: the controller (its leader) creates the CA and serving Secrets and
        // injects caBundle; the webhook reads its serving Secret through the API. The only local
        // change is the extra name on the serving certificate (the webhook is reached at
        // 127.0.0.1 instead of through its Service).
        let webhook = spawn(
            cp,
            Identity::Webhook,
            &bin("resize-guard-webhook")?,
            "resize-guard-webhook",
            &[
                format!("--tls-addr=127.0.0.1:{port}"),
                format!("--health-addr=127.0.0.1:{wh_health}"),
                "--namespace=resize-guard".into(),
            ],
        )?;
        let mut installed = Installed {
            webhook,
            controller: None,
            webhook_health: wh_health,
            controller_health: 0,
        };
        installed.start_controller(cp).await?;
        wait_ready(wh_health, &installed.webhook, T).await;
        Ok((installed, out))
    }

    /// (Re)starts the controller as its ServiceAccount and waits until it is ready.
    pub async fn start_controller(&mut self, cp: &ControlPlane) -> anyhow::Result<()> {
        self.stop_controller();
        let health = free_port()?;
        let controller = spawn(
            cp,
            Identity::Controller,
            &bin("resize-guard-controller")?,
            "resize-guard-controller",
            &[
                format!("--health-addr=127.0.0.1:{health}"),
                "--namespace=resize-guard".into(),
                "--identity=demo".into(),
                "--serving-host=127.0.0.1".into(),
            ],
        )?;
        wait_ready(health, &controller, T).await;
        self.controller = Some(controller);
        self.controller_health = health;
        Ok(())
    }

    /// Kills the controller (SIGKILL): its Lease stays, unrenewed, until it expires.
    pub fn kill_controller(&mut self) {
        if let Some(mut c) = self.controller.take() {
            c.kill();
        }
    }

    /// Stops the controller (SIGTERM: it releases its Lease on the way out).
    pub fn stop_controller(&mut self) {
        if let Some(mut c) = self.controller.take() {
            c.stop(Duration::from_secs(30));
        }
    }
}

/// Prints a command's output indented (a failure to run it as its stderr) and returns it.
fn shown(out: anyhow::Result<KubectlOutput>) -> KubectlOutput {
    let out = out.unwrap_or_else(|e| KubectlOutput {
        success: false,
        stdout: String::new(),
        stderr: e.to_string(),
    });
    for line in out.stdout.lines().chain(out.stderr.lines()) {
        println!("  {line}");
    }
    out
}

/// Process set-up of a demo binary: errors-only logging (`RUST_LOG` overrides) and the rustls
/// crypto provider.
pub fn init() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error,kube_client=off".into()),
        )
        .with_ansi(colour())
        .init();
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A resize-guard binary from `RESIZE_GUARD_BIN_DIR`, or else from the directory of the running
/// demo binary: `cargo run` starts it from the target directory (`target/debug`, or wherever
/// `CARGO_TARGET_DIR` puts it) where `cargo build` left the webhook and the controller.
pub fn bin(name: &str) -> anyhow::Result<PathBuf> {
    let dir = match std::env::var_os("RESIZE_GUARD_BIN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let exe = std::env::current_exe()?;
            let dir = exe
                .parent()
                .ok_or_else(|| anyhow::anyhow!("the running binary has no directory"))?;
            // Test executables live in `<target>/debug/deps`, the programs one level up.
            match dir.file_name() {
                Some(d) if d == "deps" => dir.parent().unwrap_or(dir).to_path_buf(),
                _ => dir.to_path_buf(),
            }
        }
    };
    let p = dir.join(name);
    anyhow::ensure!(
        p.is_file(),
        "{} not found (build it with cargo build -p {name}, or set RESIZE_GUARD_BIN_DIR)",
        p.display()
    );
    Ok(p)
}

const BOLD: &str = "1";
const GREEN: &str = "32";
const RED: &str = "31";

/// Whether the demo colours its output: stdout is a terminal and `NO_COLOR` is unset or empty
/// (<https://no-color.org>). Decided once per process.
pub fn colour() -> bool {
    static COLOUR: OnceLock<bool> = OnceLock::new();
    *COLOUR.get_or_init(|| {
        colour_for(
            std::io::stdout().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        )
    })
}

fn colour_for(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// `text` in the SGR style `code` when the demo colours its output, else as is.
fn paint(code: &str, text: &str) -> String {
    if colour() {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

fn spawn(
    cp: &ControlPlane,
    identity: Identity,
    path: &PathBuf,
    name: &str,
    args: &[String],
) -> anyhow::Result<Process> {
    let mut cmd = std::process::Command::new(path);
    cmd.env("KUBECONFIG", cp.kubeconfig_path_for(identity))
        .args(args);
    Process::spawn(name, cmd, &cp.dir().join(format!("{name}.log")))
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::colour_for;

    #[test]
    fn colours_only_a_terminal_without_no_color() {
        assert!(colour_for(true, None));
        assert!(
            colour_for(true, Some(OsStr::new(""))),
            "an empty NO_COLOR is unset"
        );
        assert!(!colour_for(true, Some(OsStr::new("1"))));
        assert!(!colour_for(false, None), "files and CI logs get plain text");
    }
}
