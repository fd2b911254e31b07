//! The chart's post-install check on a real node: the images pushed to the node's registry with
//! `make push`, the chart installed with the `--set` flags `make push` printed (as NOTES and the
//! operator's guide, docs/src/operator/install.md, have operators do), both Deployments rolled
//! out, then `helm test --logs`: the hooks' ServiceAccount and grant, then the pod —
//! `resize-guard-certs check` and the admission probe in real containers — passes, and its grant
//! is gone afterwards. A suite of its own: the `real_node` suite installs with kustomize into the
//! same namespace.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::Role;
use kube::api::Api;
use resize_guard_harness::control_plane::ControlPlane;
use resize_guard_harness::install::repo_root;
use resize_guard_harness::kubectl::Kubectl;
use resize_guard_harness::objects::wait_object;
use resize_guard_harness::real_node::{self, RealNode};

const RG: &str = "resize-guard";
const T: Duration = Duration::from_secs(180);

#[test]
fn helm_test_passes_on_a_real_node() {
    super::on_the_real_node(|cp, node| Box::pin(helm_test(cp, node)));
}

/// `helm` (RESIZE_GUARD_HELM_BIN, as the Makefile sets it) with the control plane's kubeconfig and
/// a private home.
async fn helm(
    cp: &ControlPlane,
    home: &std::path::Path,
    args: &[&str],
) -> anyhow::Result<(bool, String)> {
    let bin = std::env::var_os("RESIZE_GUARD_HELM_BIN").ok_or_else(|| {
        anyhow::anyhow!(
            "RESIZE_GUARD_HELM_BIN is not set: run through make e2e, or set it to \"$(third_party/helm/build.sh | tail -n 1)/helm\""
        )
    })?;
    let out = tokio::process::Command::new(bin)
        .args(args)
        .current_dir(repo_root())
        .env("KUBECONFIG", cp.kubeconfig_path())
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .await?;
    Ok((
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    ))
}

async fn helm_test(cp: &ControlPlane, node: &mut RealNode) -> anyhow::Result<()> {
    let ready = node.start(cp).await?;
    println!(
        "real-node helm: node Ready {} ms after the kubelet started",
        ready.as_millis()
    );
    let client = cp.client().await?;
    let (pushed, _) = real_node::push_images()?;
    // The flags `make push` printed: `--set image.<program>.repository=…,image.<program>.digest=…`.
    let sets: Vec<String> = pushed
        .split_whitespace()
        .filter(|w| w.starts_with("image."))
        .map(str::to_owned)
        .collect();
    anyhow::ensure!(
        sets.len() == 2,
        "make push printed no Helm flags:\n{pushed}"
    );
    let home = tempfile::tempdir()?;
    let mut install = vec![
        "install",
        "resize-guard",
        "charts/resize-guard",
        "-n",
        RG,
        "--create-namespace",
        "--wait",
        "--timeout=5m",
    ];
    for s in &sets {
        install.extend(["--set", s.as_str()]);
    }
    let started = Instant::now();
    let (ok, said) = helm(cp, home.path(), &install).await?;
    anyhow::ensure!(ok, "helm install:\n{said}");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), RG);
    for name in ["resize-guard-webhook", "resize-guard-controller"] {
        wait_object(&deployments, name, T, |d| {
            d.status
                .as_ref()
                .is_some_and(|s| s.available_replicas == Some(2))
        })
        .await?;
    }
    println!(
        "real-node helm: installed and rolled out in {} ms",
        started.elapsed().as_millis()
    );

    let started = Instant::now();
    let (ok, said) = helm(
        cp,
        home.path(),
        &["test", "resize-guard", "-n", RG, "--logs", "--timeout=5m"],
    )
    .await?;
    println!(
        "real-node helm: helm test ({} ms):\n{said}",
        started.elapsed().as_millis()
    );
    anyhow::ensure!(ok, "helm test failed:\n{said}");
    anyhow::ensure!(
        said.contains("Phase:          Succeeded")
            && said.contains(
                "admission probe reached resize-guard: webhook replica resize-guard-webhook-"
            ),
        "{said}"
    );
    // `--logs` shows the probe's container; the certificate check ran first, in the init
    // container of the pod the test leaves for its logs.
    let kubectl = Kubectl {
        bin: cp.binaries().kubectl.clone(),
        kubeconfig: cp.kubeconfig_path(),
    };
    let certificate = kubectl
        .run(["logs", "-n", RG, "resize-guard-check", "-c", "certificate"])
        .await?;
    anyhow::ensure!(
        certificate.success && certificate.stdout.contains("not within 168h: ok"),
        "{}{}",
        certificate.stdout,
        certificate.stderr
    );
    // The grant lived only while the test ran.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), RG);
    let roles: Api<Role> = Api::namespaced(client.clone(), RG);
    anyhow::ensure!(
        accounts.get_opt("resize-guard-check").await?.is_none()
            && roles.get_opt("resize-guard-check").await?.is_none(),
        "the check's ServiceAccount or Role outlived the test"
    );
    let (ok, said) = helm(
        cp,
        home.path(),
        &["uninstall", "resize-guard", "-n", RG, "--wait"],
    )
    .await?;
    anyhow::ensure!(ok, "helm uninstall:\n{said}");
    Ok(())
}
