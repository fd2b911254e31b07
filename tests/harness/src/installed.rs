//! resize-guard installed as a user installs it — `kubectl apply -k` of `deploy/` through an
//! overlay that only scales its Deployments to zero and points the webhook configurations at the
//! local webhook process — with its two programs run as their ServiceAccounts; the controller
//! creates the certificates and injects `caBundle` itself. The programs come from
//! `RESIZE_GUARD_BIN_DIR`, else from the directory of the running binary (cargo's target
//! directory, wherever `CARGO_TARGET_DIR` puts it): [`bin`]. Used by the end-to-end suites and the
//! lab's demos.

use std::path::PathBuf;
use std::time::Duration;

use crate::control_plane::{ControlPlane, Identity};
use crate::install::{Install, wait_ready, write_overlay};
use crate::kubectl::{Kubectl, KubectlOutput};
use crate::process::{Process, free_port};

/// How long installing waits for each program to be ready.
const T: Duration = Duration::from_secs(60);

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

/// A resize-guard binary from `RESIZE_GUARD_BIN_DIR`, or else from the directory of the running
/// demo binary: the Makefile starts it from cargo's target directory (`target/debug`, or wherever
/// `CARGO_TARGET_DIR` puts it), where the same build left the webhook and the controller.
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
