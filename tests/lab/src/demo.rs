//! What the narrated demos (`make demo`, `make demo-vpa`) share: steps printed with the real
//! `kubectl` output, expectations marked ✓/✗ (a miss makes the demo exit non-zero), and
//! resize-guard installed as a user installs it — `kubectl apply -k` of `deploy/` through an
//! overlay that only scales its Deployments to zero and points the webhook configurations at the
//! local webhook process — with the binaries from `RESIZE_GUARD_BIN_DIR` (default: the directory of
//! the running demo binary, i.e. cargo's target directory wherever `CARGO_TARGET_DIR` puts it) run
//! as their ServiceAccounts. The controller creates the certificates and injects `caBundle` itself.
//!
//! Colour (ANSI escapes) only when stdout is a terminal and `NO_COLOR` is unset or empty, so logs
//! and files get plain text.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use resize_guard_harness::control_plane::ControlPlane;
use resize_guard_harness::installed::{Installed, bin};
use resize_guard_harness::kubectl::{Kubectl, KubectlOutput};
use resize_guard_harness::metrics_server::MetricsServer;

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

impl Demo {
    /// A demo driving `cp` with kubectl.
    pub fn new(cp: &ControlPlane) -> Demo {
        Demo {
            kubectl: Kubectl::admin(cp),
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

    /// Starts metrics-server on `cp`, waits until it serves pod `ns/pod` as `accept` wants,
    /// expects that (`what`) and shows the pod's containers in `kubectl top`. The caller stops it.
    pub async fn serve_metrics(
        &mut self,
        cp: &ControlPlane,
        (ns, pod): (&str, &str),
        accept: impl Fn(&serde_json::Value) -> bool,
        what: &str,
    ) -> anyhow::Result<MetricsServer> {
        let mut metrics = MetricsServer::start(cp).await?;
        let served = metrics.wait_for_pod(cp, ns, pod, accept).await;
        self.expect(served.is_ok(), what);
        self.run(&["top", "pod", pod, "-n", ns, "--containers"])
            .await;
        Ok(metrics)
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
        let bundle = self.kubectl.ca_bundle().await?;
        self.expect(
            bundle.success && !bundle.stdout.trim().is_empty(),
            "the controller injected caBundle; no certificate was prepared by hand",
        );
        Ok(installed)
    }
}

/// A resize of container `app`'s memory request and limit to `memory`.
pub fn memory_resize(memory: &str) -> String {
    serde_json::json!({"spec": {"containers": [{"name": "app", "resources": {
        "requests": {"memory": memory}, "limits": {"memory": memory}}}]}})
    .to_string()
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
