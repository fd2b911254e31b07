//! On the real node, after everything else: the controller replicas' own admission probes (run
//! since the install, every minute) all reached the webhook; then the post-install check as the
//! operator's guide (docs/src/operator/install.md) has operators run it — `kubectl apply -k
//! deploy/post-install-check` with the same `images:` block as the install — runs its two real
//! containers and completes; and with the webhook scaled to zero, the same Job (its wait shortened)
//! fails, its log saying the probe bypassed resize-guard. The webhook is scaled back before
//! returning. The harness's control plane runs no Job controller (it would release the field test's
//! pods from the suspended Job that owns them), so kube-controller-manager is restarted with it for
//! this last step.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use resize_guard_harness::control_plane::ControlPlane;
use resize_guard_harness::kubectl::Kubectl;
use resize_guard_harness::objects::wait_object;

const RG: &str = "resize-guard";
const T: Duration = Duration::from_secs(180);

/// The controller replicas' probe counters, summed: (reached, bypassed), read through the API
/// server's pod proxy (the images have no shell).
async fn probes(kubectl: &Kubectl, client: &kube::Client) -> anyhow::Result<(f64, f64)> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), RG);
    let list = pods
        .list(&ListParams::default().labels("app.kubernetes.io/component=controller"))
        .await?;
    let (mut reached, mut bypassed) = (0.0, 0.0);
    for p in list.items {
        let name = p.metadata.name.unwrap_or_default();
        let out = kubectl
            .run([
                "get",
                "--raw",
                &format!("/api/v1/namespaces/{RG}/pods/{name}:8081/proxy/metrics"),
            ])
            .await?;
        anyhow::ensure!(out.success, "metrics of {name}: {}", out.stderr);
        let value = |series: &str| {
            out.stdout
                .lines()
                .find_map(|l| l.strip_prefix(series)?.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        reached += value("resize_guard_admission_probe_total{result=\"reached\"}");
        bypassed += value("resize_guard_admission_probe_total{result=\"bypassed\"}");
    }
    Ok((reached, bypassed))
}

/// A kustomization of `deploy/post-install-check` with the install's `images:` block (the one in
/// `own`, which `real_node::push_images` wrote) and `extra` appended.
fn check_overlay(own: &Path, name: &str, extra: &str) -> anyhow::Result<std::path::PathBuf> {
    let installed = std::fs::read_to_string(own.join("kustomization.yaml"))?;
    anyhow::ensure!(installed.contains("  - ../../../deploy\n"), "{installed}");
    let dir = own.with_file_name(format!(
        "{}-{name}",
        own.file_name().unwrap_or_default().to_string_lossy()
    ));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "{}{extra}",
            installed.replace(
                "  - ../../../deploy\n",
                "  - ../../../deploy/post-install-check\n"
            )
        ),
    )?;
    Ok(dir)
}

/// Applies `overlay`, waits for its Job to end; (Complete?, every container's log).
async fn run_job(
    kubectl: &Kubectl,
    client: &kube::Client,
    overlay: &Path,
) -> anyhow::Result<(bool, String)> {
    let out = kubectl
        .run(["apply", "-k", &overlay.display().to_string()])
        .await?;
    anyhow::ensure!(
        out.success,
        "apply -k {}: {}",
        overlay.display(),
        out.stderr
    );
    let jobs: Api<Job> = Api::namespaced(client.clone(), RG);
    let condition = |j: &Job, kind: &str| {
        j.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == kind && c.status == "True"))
    };
    let job = wait_object(&jobs, "resize-guard-check", T, |j| {
        condition(j, "Complete") || condition(j, "Failed")
    })
    .await?;
    let logs = kubectl
        .run([
            "logs",
            "-n",
            RG,
            "job/resize-guard-check",
            "--all-containers",
        ])
        .await?;
    Ok((condition(&job, "Complete"), logs.stdout + &logs.stderr))
}

async fn scale_webhook(kubectl: &Kubectl, client: &kube::Client, n: i32) -> anyhow::Result<()> {
    let out = kubectl
        .run([
            "scale",
            "-n",
            RG,
            "deployment/resize-guard-webhook",
            &format!("--replicas={n}"),
        ])
        .await?;
    anyhow::ensure!(out.success, "scale: {}", out.stderr);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), RG);
    wait_object(&deployments, "resize-guard-webhook", T, |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.available_replicas.unwrap_or(0) == n && s.replicas.unwrap_or(0) == n)
    })
    .await?;
    Ok(())
}

pub async fn run(cp: &ControlPlane, kubectl: &Kubectl, own: &Path) -> anyhow::Result<()> {
    let client = cp.client().await?;
    // The replicas' own probes, every minute (and up to a fifth more) since they started:
    // reached, never bypassed. A fast run gets here before the first one.
    let deadline = Instant::now() + Duration::from_secs(90);
    let (reached, bypassed) = loop {
        let (reached, bypassed) = probes(kubectl, &client).await?;
        if reached >= 1.0 || bypassed > 0.0 || Instant::now() > deadline {
            break (reached, bypassed);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    println!(
        "real-node: the controller replicas' admission probes: {reached} reached the webhook, {bypassed} bypassed it"
    );
    anyhow::ensure!(reached >= 1.0 && bypassed == 0.0);

    // The Job as shipped: the certificate, then the probe, both real containers.
    cp.stop_controller_manager();
    cp.start_controller_manager_with(&["job-controller"])?;
    let started = Instant::now();
    let (complete, logs) = run_job(kubectl, &client, &check_overlay(own, "check", "")?).await?;
    println!(
        "real-node: deploy/post-install-check completed in {} ms:\n{logs}",
        started.elapsed().as_millis()
    );
    anyhow::ensure!(complete, "the post-install check failed:\n{logs}");
    anyhow::ensure!(
        logs.contains("not within 168h: ok")
            && logs.contains(
                "admission probe reached resize-guard: webhook replica resize-guard-webhook-"
            ),
        "{logs}"
    );

    // No webhook: the probe is admitted without it, and the Job fails saying so.
    let out = kubectl
        .run(["delete", "-n", RG, "job/resize-guard-check", "--wait=true"])
        .await?;
    anyhow::ensure!(out.success, "delete job: {}", out.stderr);
    scale_webhook(kubectl, &client, 0).await?;
    let quick = "patches:\n  - target: {kind: Job, name: resize-guard-check}\n    patch: |-\n      - {op: replace, path: /spec/template/spec/containers/0/args/2, value: --wait=0s}\n";
    let (complete, logs) =
        run_job(kubectl, &client, &check_overlay(own, "check-down", quick)?).await?;
    println!("real-node: deploy/post-install-check with no webhook:\n{logs}");
    anyhow::ensure!(!complete, "passed with no webhook:\n{logs}");
    anyhow::ensure!(
        logs.contains("admission probe bypassed resize-guard"),
        "{logs}"
    );
    let out = kubectl
        .run([
            "delete",
            "-k",
            &check_overlay(own, "check-down", quick)?
                .display()
                .to_string(),
        ])
        .await?;
    anyhow::ensure!(out.success, "delete -k: {}", out.stderr);
    scale_webhook(kubectl, &client, 2).await
}
