//! Running the upstream `kubectl` v1.37.2 against the harness's control plane, to check what users
//! really see (warnings on stderr, `kubectl events`).

use std::path::PathBuf;
use std::process::Stdio;

/// A kubectl bound to a kubeconfig.
#[derive(Debug, Clone)]
pub struct Kubectl {
    /// The binary.
    pub bin: PathBuf,
    /// The kubeconfig it uses.
    pub kubeconfig: PathBuf,
}

/// A finished kubectl run.
#[derive(Debug, Clone)]
pub struct KubectlOutput {
    /// Exit status was 0.
    pub success: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error (warnings, errors).
    pub stderr: String,
}

impl Kubectl {
    /// kubectl as admin of control plane `cp`.
    pub fn admin(cp: &crate::control_plane::ControlPlane) -> Kubectl {
        Kubectl {
            bin: cp.binaries().kubectl.clone(),
            kubeconfig: cp.kubeconfig_path(),
        }
    }

    /// kubectl's discovery and HTTP cache: beside the kubeconfig, in the control plane's own
    /// directory, never in the runner's `~/.kube`.
    fn cache_dir(&self) -> PathBuf {
        self.kubeconfig.with_file_name("kubectl-cache")
    }

    /// Runs `kubectl <args>` and captures its output.
    pub async fn run<I, S>(&self, args: I) -> anyhow::Result<KubectlOutput>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env("KUBECACHEDIR", self.cache_dir());
        capture(cmd).await
    }

    /// Grants `subject` (`--user=NAME` or `--serviceaccount=NS:NAME`) `verbs` (`get,patch`) on
    /// `resources` (`pods,pods/resize`) in namespace `ns`: a Role and a RoleBinding, both `name`.
    pub async fn grant(
        &self,
        ns: &str,
        name: &str,
        verbs: &str,
        resources: &str,
        subject: &str,
    ) -> anyhow::Result<()> {
        let role = format!("--role={name}");
        let (verbs, resources) = (format!("--verb={verbs}"), format!("--resource={resources}"));
        for args in [
            [
                "create",
                "role",
                name,
                "-n",
                ns,
                verbs.as_str(),
                resources.as_str(),
            ],
            [
                "create",
                "rolebinding",
                name,
                "-n",
                ns,
                role.as_str(),
                subject,
            ],
        ] {
            let out = self.run(args).await?;
            anyhow::ensure!(out.success, "kubectl {}: {}", args.join(" "), out.stderr);
        }
        Ok(())
    }

    /// Runs `kubectl <args>` with `plugins` first on `PATH`, so kubectl finds plugins there
    /// (`kubectl resize-guard …` runs `kubectl-resize_guard`). The kubeconfig goes through
    /// `KUBECONFIG`: kubectl hands a plugin everything after its name, and does not look a plugin
    /// up behind a leading flag.
    pub async fn plugin<I, S>(
        &self,
        plugins: &std::path::Path,
        args: I,
    ) -> anyhow::Result<KubectlOutput>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![plugins.to_path_buf()];
        dirs.extend(std::env::split_paths(&path));
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", self.cache_dir())
            .env("PATH", std::env::join_paths(dirs)?)
            .env_remove("NO_COLOR");
        capture(cmd).await
    }

    /// `kubectl patch pod NAME -n NS --subresource resize -p PATCH`.
    pub async fn resize(&self, ns: &str, pod: &str, patch: &str) -> anyhow::Result<KubectlOutput> {
        self.patch_resize(ns, pod, &[], patch).await
    }

    /// The same resize on server-side dry run: admission answers (warnings, denials), nothing
    /// is stored.
    pub async fn resize_dry_run(
        &self,
        ns: &str,
        pod: &str,
        patch: &str,
    ) -> anyhow::Result<KubectlOutput> {
        self.patch_resize(ns, pod, &["--dry-run=server"], patch)
            .await
    }

    /// `kubectl patch pod NAME -n NS --subresource resize FLAGS… -p PATCH`.
    async fn patch_resize(
        &self,
        ns: &str,
        pod: &str,
        flags: &[&str],
        patch: &str,
    ) -> anyhow::Result<KubectlOutput> {
        let mut args = vec!["patch", "pod", pod, "-n", ns, "--subresource", "resize"];
        args.extend_from_slice(flags);
        args.extend(["-p", patch]);
        self.run(args).await
    }

    /// `kubectl create priorityclass` for each of [`crate::env::PRIORITY_CLASSES`].
    pub async fn create_priority_classes(&self) -> anyhow::Result<()> {
        for (name, value) in crate::env::PRIORITY_CLASSES {
            self.run(["create", "priorityclass", name, &format!("--value={value}")])
                .await?;
        }
        Ok(())
    }

    /// The `caBundle` of resize-guard's MutatingWebhookConfiguration (empty until injected).
    pub async fn ca_bundle(&self) -> anyhow::Result<KubectlOutput> {
        self.run([
            "get",
            "mutatingwebhookconfiguration",
            "resize-guard",
            "-o",
            "jsonpath={.webhooks[0].clientConfig.caBundle}",
        ])
        .await
    }

    /// Waits until resize-guard answers a server-side dry run of `patch` on pod `ns/pod` (its
    /// name on stderr): kube-apiserver picks up new webhook configurations asynchronously.
    pub async fn wait_answered(
        &self,
        ns: &str,
        pod: &str,
        patch: &str,
        timeout: std::time::Duration,
    ) -> anyhow::Result<()> {
        crate::admission::wait_active(timeout, || async move {
            self.resize_dry_run(ns, pod, patch)
                .await
                .is_ok_and(|o| o.stderr.contains("resize-guard"))
        })
        .await
    }

    /// `kubectl events -n NS --for pod/NAME`.
    pub async fn events_for(&self, ns: &str, pod: &str) -> anyhow::Result<KubectlOutput> {
        self.events_of(ns, &format!("pod/{pod}")).await
    }

    /// `kubectl events -n NS --for OBJECT` (`kind/name`).
    pub async fn events_of(&self, ns: &str, object: &str) -> anyhow::Result<KubectlOutput> {
        self.run(["events", "-n", ns, "--for", object]).await
    }
}

/// Runs `cmd` without stdin or an HTTPS proxy (the API server is local) and captures its output.
async fn capture(mut cmd: tokio::process::Command) -> anyhow::Result<KubectlOutput> {
    let out = cmd
        .stdin(Stdio::null())
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .output()
        .await?;
    Ok(KubectlOutput {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}
