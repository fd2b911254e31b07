//! resize-guard as a user runs it, on a real node: upstream's kubelet v1.37 and kube-proxy,
//! containerd and runc in a network namespace (`tests/node/`), the images `make image` wrote
//! pushed with `make push` to a local registry (an operator's own), and `kubectl apply -k` of
//! `deploy/` with the `images:` block `make push` printed, exactly as the README says — nothing
//! else changed.
//!
//! Then the field test's three walls with real containers: the QoS explanation, the Infeasible
//! refusal with the node's numbers, and the Deferred resize completed after the real victim got
//! SIGTERM and exited 0, the app resized in place (`restartCount` 0) with its cgroup holding the
//! new values. Then a real rolling restart of the webhook under a stream of resizes, and the
//! memory wall on real memory ([`memory_wall`]): what the kubelet and the kernel do when a limit
//! goes below what a container holds and resize-guard has no metrics to judge it by, then
//! metrics-server scraping the real kubelet and resize-guard refusing the same decrease up front
//! with the real working set; then the post-install check ([`post_install_check`]). At the end the
//! node is torn down and must leave nothing behind (netns, links, routes, cgroups, mounts,
//! processes, sysctls). Prints the numbers docs/src/testing/real-node.md quotes. The chart's
//! `helm test` has a suite of its own ([`helm_test`]).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use resize_guard_harness::control_plane::{ControlPlane, Options};
use resize_guard_harness::kubectl::Kubectl;
use resize_guard_harness::objects::*;
use resize_guard_harness::real_node::{self, RealNode, container_id, exit_code, runs_pause};
use serde_json::json;

mod helm_test;
mod memory_wall;
mod post_install_check;

const T: Duration = Duration::from_secs(120);
const NS: &str = "field";

#[test]
fn resize_guard_as_shipped_on_a_real_node() {
    on_the_real_node(|cp, node| Box::pin(walls(cp, node)));
}

/// The future a real-node test runs: it borrows the control plane and the node.
type NodeTest<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<()>> + 'a>>;

/// Runs `body` on a control plane whose one node is the real node (kube-scheduler and
/// kube-controller-manager started); on failure prints every part's log, then panics; either way
/// stops the node and checks it left nothing behind.
fn on_the_real_node(body: impl for<'a> FnOnce(&'a ControlPlane, &'a mut RealNode) -> NodeTest<'a>) {
    let mut node = RealNode::prepare().expect("real node network");
    let cp = ControlPlane::start(&Options {
        real_node_host: Some(real_node::HOST.to_owned()),
        ..Options::default()
    })
    .expect("control plane");
    cp.start_scheduler(&[]).expect("kube-scheduler");
    cp.start_controller_manager()
        .expect("kube-controller-manager");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let result = rt.block_on(body(&cp, &mut node));
    if let Err(e) = &result {
        eprintln!(
            "{}\n--- kubelet ---\n{}\n--- containerd ---\n{}\n--- kube-proxy ---\n{}",
            cp.dump_logs(),
            node.log_tail("kubelet", 8000),
            node.log_tail("containerd", 4000),
            node.log_tail("kube-proxy", 3000),
        );
        panic!("{e:#}");
    }
    drop(rt);
    drop(cp);
    node.stop().expect("the real node left something behind");
}

async fn walls(cp: &ControlPlane, node: &mut RealNode) -> anyhow::Result<()> {
    let ready = node.start(cp).await?;
    println!(
        "real-node: node Ready {} ms after the kubelet started",
        ready.as_millis()
    );
    let client = cp.client().await?;
    let kubectl = Kubectl {
        bin: cp.binaries().kubectl.clone(),
        kubeconfig: cp.kubeconfig_path(),
    };

    // The images, pushed the way an operator pushes them to their own registry; installed
    // exactly as the README says: deploy/ with the `images:` block `make push` printed.
    let (_, own) = real_node::push_images()?;
    let applied = Instant::now();
    let out = kubectl
        .run(["apply", "-k", &own.display().to_string()])
        .await?;
    anyhow::ensure!(
        out.success,
        "kubectl apply -k deploy/ + images: {}",
        out.stderr
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "resize-guard");
    for name in ["resize-guard-webhook", "resize-guard-controller"] {
        wait_object(&deployments, name, T, |d| {
            d.status
                .as_ref()
                .is_some_and(|s| s.available_replicas == Some(2) && s.updated_replicas == Some(2))
        })
        .await?;
    }
    println!(
        "real-node: both Deployments available (2/2, images pulled from the registry) {} ms after kubectl apply",
        applied.elapsed().as_millis()
    );
    let bundle = kubectl.ca_bundle().await?;
    anyhow::ensure!(!bundle.stdout.trim().is_empty(), "no caBundle injected");

    // The field test, sized from the node's real allocatable and what the install requests.
    let (alloc, free) = real_node::free_millicores(&client).await?;
    let filler = free - 250 - 100;
    kubectl.create_priority_classes().await?;
    kubectl.run(["create", "namespace", NS]).await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NS);
    wait_object(&accounts, "default", T, |_| true).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let started = Instant::now();
    create_running(
        &pods,
        &runs_pause(guaranteed_pod(
            "filler",
            real_node::NAME,
            "low",
            &format!("{filler}m"),
            "64Mi",
        )),
    )
    .await?;
    create_running(
        &pods,
        &runs_pause(guaranteed_pod(
            "app",
            real_node::NAME,
            "high",
            "250m",
            "64Mi",
        )),
    )
    .await?;
    println!(
        "real-node: two pods Running in {} ms",
        started.elapsed().as_millis()
    );
    let app = pods.get("app").await?;
    let before = node
        .cgroup(&uid(&app), &container_id(&app))
        .unwrap()
        .expect("app's cgroup");
    anyhow::ensure!(
        before.cpu_quota_us == 25_000,
        "250m should be a 25000 µs quota: {before:?}"
    );

    // kube-apiserver calls the kubelet as in a real cluster, with a client certificate the
    // kubelet trusts (`tests/harness/src/control_plane.rs` `kubelet_client`): exec and logs work.
    let exec = kubectl
        .run(["exec", "-n", NS, "app", "--", "/pause", "-v"])
        .await?;
    anyhow::ensure!(
        exec.success && exec.stdout.trim() == "pause resize-guard 2",
        "kubectl exec: {}{}",
        exec.stdout,
        exec.stderr
    );
    let logs = kubectl
        .run([
            "logs",
            "-n",
            "resize-guard",
            "deploy/resize-guard-webhook",
            "--tail=3",
        ])
        .await?;
    anyhow::ensure!(
        logs.success && logs.stdout.lines().count() == 3,
        "kubectl logs: {}{}",
        logs.stdout,
        logs.stderr
    );
    println!("real-node: kubectl exec and kubectl logs answered through the kubelet");

    kubectl
        .wait_answered(NS, "app", &cpu_resize(&format!("{}m", alloc + 500)), T)
        .await?;

    // Wall 1: a requests-only resize would make the Guaranteed pod Burstable.
    let out = kubectl
        .resize(
            NS,
            "app",
            r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"300m"}}}]}}"#,
        )
        .await?;
    anyhow::ensure!(
        !out.success
            && out
                .stderr
                .contains("would change the pod's QoS class from Guaranteed to Burstable"),
        "QoS wall: {}",
        out.stderr
    );

    // Wall 2: more than the node can ever hold.
    let out = kubectl
        .resize(NS, "app", &cpu_resize(&format!("{}m", alloc + 500)))
        .await?;
    anyhow::ensure!(
        !out.success
            && out
                .stderr
                .contains(&format!("can never fit on node {}", real_node::NAME)),
        "Infeasible wall: {}",
        out.stderr
    );

    // Wall 3: Deferred now; the filler is preempted, gets SIGTERM and exits 0.
    let mut filler_watch = pods
        .watch(&WatchParams::default().fields("metadata.name=filler"), "0")
        .await?
        .boxed();
    let want = 250 + 100 + 150;
    let sent = Instant::now();
    let out = kubectl
        .resize(NS, "app", &cpu_resize(&format!("{want}m")))
        .await?;
    anyhow::ensure!(
        out.success
            && out
                .stderr
                .contains(&format!("resize-guard will preempt {NS}/filler")),
        "Deferred wall: {}",
        out.stderr
    );
    let mut exited = None;
    while let Some(event) = tokio::time::timeout(T, filler_watch.next()).await? {
        match event? {
            WatchEvent::Modified(p) => {
                if let Some(code) = exit_code(&p) {
                    exited = Some(code);
                }
            }
            WatchEvent::Deleted(p) => {
                exited = exited.or(exit_code(&p));
                break;
            }
            _ => {}
        }
    }
    anyhow::ensure!(
        exited == Some(0),
        "the victim should exit 0 on SIGTERM, saw {exited:?}"
    );
    let app = wait_pod(&pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some(&format!("{want}m")) && resize_pending(p).is_none()
    })
    .await?;
    anyhow::ensure!(
        restart_count(&app) == 0,
        "resized in place: restartCount {}",
        restart_count(&app)
    );
    let quota = i64::try_from(want * 100)?;
    let after = node
        .wait_cgroup(&app, T, |v| v.cpu_quota_us == quota)
        .await?;
    println!(
        "real-node: Deferred resize {want}m: preempted, in the cgroup {} ms after the PATCH: {after:?}",
        sent.elapsed().as_millis()
    );
    if after.cpu_shares != 0 {
        anyhow::ensure!(
            after.cpu_shares == want * 1024 / 1000,
            "cpu.shares {after:?}"
        );
    }

    // Two more resizes, timed from the PATCH to the value in the kernel: CPU, then memory.
    let sent = Instant::now();
    kubectl.resize(NS, "app", &cpu_resize("400m")).await?;
    node.wait_cgroup(&app, T, |v| v.cpu_quota_us == 40_000)
        .await?;
    println!(
        "real-node: cpu 500m → 400m in the cgroup {} ms after the PATCH",
        sent.elapsed().as_millis()
    );
    let sent = Instant::now();
    let memory = json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"memory": "96Mi"}, "limits": {"memory": "96Mi"}}}]}});
    let out = kubectl.resize(NS, "app", &memory.to_string()).await?;
    anyhow::ensure!(out.success, "memory resize: {}", out.stderr);
    node.wait_cgroup(&app, T, |v| v.memory_limit == 96 * 1024 * 1024)
        .await?;
    println!(
        "real-node: memory 64Mi → 96Mi in the cgroup {} ms after the PATCH",
        sent.elapsed().as_millis()
    );

    rolling_restart(cp, &kubectl).await?;
    memory_wall::pinned(node, &kubectl, &pods).await?;
    memory_wall::guarded(cp, node, &kubectl, &pods).await?;
    post_install_check::run(cp, &kubectl, &own).await
}

/// `kubectl rollout restart` of the webhook under a steady stream of resizes of `app`: the real
/// kubelet runs the shipped `preStop`, the real EndpointSlice controller takes the terminating
/// replica out of the Service. Every resize must succeed and carry the webhook's audit
/// annotation (a call that failed open leaves it out), and kube-apiserver's fail-open counter
/// must not move.
async fn rolling_restart(cp: &ControlPlane, kubectl: &Kubectl) -> anyhow::Result<()> {
    let opened_before = fail_open(cp);
    let before = reviewed_resizes(cp);
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let stream = {
        let k = kubectl.clone();
        tokio::spawn(async move {
            let (mut sent, mut failures) = (0usize, Vec::new());
            for i in 0u32.. {
                if stopped.try_recv().is_ok() {
                    break;
                }
                let out = k
                    .resize(NS, "app", &cpu_resize(&format!("{}m", 300 + 10 * (i % 30))))
                    .await?;
                sent += 1;
                if !out.success {
                    failures.push(out.stderr);
                }
            }
            anyhow::Ok((sent, failures))
        })
    };
    let started = Instant::now();
    let out = kubectl
        .run([
            "rollout",
            "restart",
            "deployment/resize-guard-webhook",
            "-n",
            "resize-guard",
        ])
        .await?;
    anyhow::ensure!(out.success, "rollout restart: {}", out.stderr);
    let out = kubectl
        .run([
            "rollout",
            "status",
            "deployment/resize-guard-webhook",
            "-n",
            "resize-guard",
            "--timeout=180s",
        ])
        .await?;
    anyhow::ensure!(out.success, "rollout status: {}{}", out.stdout, out.stderr);
    // The old replicas are gone only after their preStop sleep and exit: keep the stream going.
    let webhooks: Api<Pod> = Api::namespaced(cp.client().await?, "resize-guard");
    let params = ListParams::default().labels("app.kubernetes.io/component=webhook");
    wait_until(T, "the old webhook pods gone", || async {
        let pods = webhooks.list(&params).await?;
        Ok(pods.items.len() == 2
            && pods
                .items
                .iter()
                .all(|p| p.metadata.deletion_timestamp.is_none()))
    })
    .await?;
    let rolled = started.elapsed();
    let _ = stop.send(());
    let (sent, failures) = stream.await??;
    let after = reviewed_resizes(cp);
    let (stored, reviewed) = (after.0 - before.0, after.1 - before.1);
    let opened = fail_open(cp) - opened_before;
    println!(
        "real-node: rolling restart of the webhook ({} ms): {sent} resizes sent, {} failed, {stored} stored, \
         {reviewed} reviewed by the webhook, {opened} failed open",
        rolled.as_millis(),
        failures.len()
    );
    anyhow::ensure!(
        failures.is_empty(),
        "resizes failed during the rollout: {failures:?}"
    );
    anyhow::ensure!(sent >= 10, "a steady stream: {sent}");
    anyhow::ensure!(
        reviewed == stored,
        "{stored} resizes stored, only {reviewed} reviewed"
    );
    anyhow::ensure!(opened == 0.0, "{opened} webhook calls failed open");
    Ok(())
}

/// `apiserver_admission_webhook_fail_open_count` summed over resize-guard's webhooks.
fn fail_open(cp: &ControlPlane) -> f64 {
    cp.get_blocking("/metrics")
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_admission_webhook_fail_open_count")
                && l.contains("resize-guard.io")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Stored resizes of `app` (audit `ResponseComplete`, 200) and how many carry the webhook's
/// decision annotation.
fn reviewed_resizes(cp: &ControlPlane) -> (usize, usize) {
    let stored: Vec<serde_json::Value> = cp
        .audit_events()
        .into_iter()
        .filter(|e| {
            e["objectRef"]["subresource"] == "resize"
                && e["objectRef"]["namespace"] == NS
                && e["objectRef"]["name"] == "app"
                && e["stage"] == "ResponseComplete"
                && e["verb"] == "patch"
                && e["responseStatus"]["code"] == 200
        })
        .collect();
    let reviewed = stored
        .iter()
        .filter(|e| e["annotations"]["mutate.resize-guard.io/decision"].is_string())
        .count();
    (stored.len(), reviewed)
}

fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut probe: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    while Instant::now() < deadline {
        match probe().await {
            Ok(true) => return Ok(()),
            Ok(false) => last.clear(),
            Err(e) => last = format!("{e:#}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    anyhow::bail!("{what}: not after {timeout:?} {last}")
}
