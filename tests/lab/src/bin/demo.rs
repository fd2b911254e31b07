//! `make demo`: a real Kubernetes v1.37.2 control plane with a t3.medium-sized hollow node
//! (upstream's kubelet; 1930m allocatable), resize-guard's webhook and controller installed as in
//! `deploy/` (RBAC, policy, webhook configurations), and the three walls of the field test played
//! as narrated steps with the real `kubectl` output; then the memory wall, with upstream
//! metrics-server scraping the node's kubelet and a container's usage set on the hollow node. Exits
//! non-zero if any step does not behave as described.

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use resize_guard_harness::control_plane::{ControlPlane, Options};
use resize_guard_harness::hollow_node::{HollowNode, HollowNodeConfig};
use resize_guard_harness::metrics_server::container_usage;
use resize_guard_harness::objects::*;
use resize_guard_harness::quantity::parse_milli;
use resize_guard_lab::demo::{Demo, T, memory_resize};
use std::time::Duration;

const NS: &str = "shop";

fn main() -> anyhow::Result<()> {
    resize_guard_lab::demo::init();
    println!("resize-guard demo: starting etcd and kube-apiserver …");
    let cp = ControlPlane::start(&Options::default())?;
    let rt = tokio::runtime::Runtime::new()?;
    let code = rt.block_on(async {
        let client = cp.client().await?;
        // The field test's node, run by upstream's kubelet (a hollow node): 1930m, 3Gi allocatable,
        // serving its API to metrics-server.
        let node = HollowNode::start(&cp, &HollowNodeConfig::t3_medium("t3-medium").kubelet_api()).await?;
        let mut demo = Demo::new(&cp);
        let installed = demo.install(&cp).await?;
        demo.kubectl.create_priority_classes().await?;

        demo.say("The field test: a t3.medium node (1930m CPU allocatable), a low-priority batch pod \
                  using 1500m, and a high-priority Guaranteed shop pod at 250m.");
        demo.run(&["create", "namespace", NS]).await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
        create_running(&pods, &guaranteed_pod("batch", "t3-medium", "low", "1500m", "256Mi")).await?;
        create_running(&pods, &guaranteed_pod("shop", "t3-medium", "high", "250m", "256Mi")).await?;
        // kube-apiserver picks up new webhook configurations asynchronously: wait until a
        // dry-run resize is answered by resize-guard.
        demo.kubectl
            .wait_answered(NS, "shop", &cpu_resize("2430m"), T)
            .await?;
        demo.run(&["get", "pods", "-n", NS, "-o", "custom-columns=NAME:.metadata.name,PRIORITY:.spec.priority,CPU:.spec.containers[0].resources.requests.cpu,QOS:.status.qosClass"]).await;

        demo.say("Wall 1 — a requests-only resize (what VPA RequestsOnly sends) would turn the Guaranteed \
                  pod Burstable. Kubernetes refuses it tersely; resize-guard explains which container and how to fix it:");
        let out = demo.run(&["patch", "pod", "shop", "-n", NS, "--subresource", "resize", "-p",
            r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"500m"}}}]}}"#]).await;
        demo.expect(!out.success && out.stderr.contains("would change the pod's QoS class from Guaranteed to Burstable")
            && out.stderr.contains("container app: cpu request 500m ≠ limit 250m"), "QoS change explained, naming the container and the fix");

        demo.say("Wall 2 — asking for more CPU than the node has (2430m > 1930m) is Infeasible: it could never fit. \
                  resize-guard refuses it up front with the node's numbers:");
        let out = demo.run(&["patch", "pod", "shop", "-n", NS, "--subresource", "resize", "-p", &cpu_resize("2430m")]).await;
        demo.expect(!out.success && out.stderr.contains("can never fit on node t3-medium")
            && out.stderr.contains("2430m") && out.stderr.contains("1930m"), "Infeasible resize rejected with the node's numbers");

        demo.say("Wall 3 — 250m → 550m does not fit next to the batch pod now: the kubelet would defer it for ever. \
                  resize-guard warns, then preempts the lower-priority pod so the resize completes in place:");
        demo.say("First, what would happen? `kubectl resize-guard what-if` asks the API server (a dry run: the webhook \
                  answers, nothing changes) and shows resize-guard's plan:");
        let out = demo.plugin(&["what-if", "shop", "-n", NS, "--cpu", "550m"]).await;
        demo.expect(out.success && out.stdout.contains("Plan: deferred-preemptible")
            && out.stdout.contains("resize-guard will preempt shop/batch"), "what-if names the victim before anything changes");
        let out = demo.run(&["patch", "pod", "shop", "-n", NS, "--subresource", "resize", "-p", &cpu_resize("550m")]).await;
        demo.expect(out.success && out.stderr.contains("resize-guard will preempt shop/batch"), "Deferred resize accepted with a warning naming the victim");
        let done = wait_pod(&pods, "shop", T, |p| allocated_cpu(p).as_deref() == Some("550m") && resize_pending(p).is_none()).await;
        demo.expect(done.is_ok(), "the kubelet admitted the resize after the batch pod left");
        demo.expect(done.as_ref().is_ok_and(|p| restart_count(p) == 0), "resized in place: restartCount 0");
        demo.expect(wait_gone(&pods, "batch", T).await.is_ok(), "the batch pod was preempted");
        demo.run(&["get", "pod", "shop", "-n", NS, "-o", "custom-columns=NAME:.metadata.name,CPU:.spec.containers[0].resources.requests.cpu,ALLOCATED:.status.containerStatuses[0].allocatedResources.cpu,RESTARTS:.status.containerStatuses[0].restartCount"]).await;
        // Events arrive asynchronously (ResizeCompleted follows actuation): wait for them.
        for _ in 0..100 {
            let quiet = demo.kubectl.run(["events", "-n", NS]).await;
            if quiet.is_ok_and(|o| o.stdout.contains("ResizeCompleted") && o.stdout.contains("PreemptingForResize")) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let events = demo.run(&["events", "-n", NS]).await;
        demo.expect(events.stdout.contains("PreemptingForResize") && events.stdout.contains("Preempted")
            && events.stdout.contains("ResizeCompleted"), "kubectl events shows PreemptingForResize, Preempted and ResizeCompleted");
        demo.say("The whole story of this resize on one screen — QoS, the node's books, what resize-guard decided and its Events:");
        let out = demo.plugin(&["explain", "shop", "-n", NS]).await;
        demo.expect(out.success && out.stdout.contains("Resize: none pending")
            && out.stdout.lines().any(|l| l.contains("PreemptingForResize") && l.contains("preempting shop/batch")),
            "kubectl resize-guard explain tells the story: Deferred, preempted shop/batch, completed");

        memory_wall(&cp, &node, &mut demo, &pods).await?;

        node.stop();
        drop(installed);
        anyhow::Ok(demo.finish("All three walls and the memory wall behaved as described.", cp.dir()))
    })?;
    drop(cp);
    std::process::exit(code);
}

/// The fifth act, the memory wall: metrics-server scraping the node's kubelet, a cache pod whose
/// container uses 150Mi, a resize to 100Mi refused with the numbers, one to 200Mi admitted and
/// applied by the kubelet.
async fn memory_wall(
    cp: &ControlPlane,
    node: &HollowNode,
    demo: &mut Demo,
    pods: &Api<Pod>,
) -> anyhow::Result<()> {
    demo.say("The memory wall — memory is not compressible: a limit below what a container uses is refused by the \
              kubelet (the spec then says one limit while the container keeps another) or, if usage grows between \
              the kubelet's check and its cgroup write, OOM-kills the container. resize-guard reads the working set \
              from metrics.k8s.io; here upstream metrics-server scrapes the node's kubelet, and a cache pod uses \
              150Mi of its 256Mi:");
    create_running(
        pods,
        &guaranteed_pod("cache", "t3-medium", "mid", "100m", "256Mi"),
    )
    .await?;
    node.set_usage(NS, "cache", "app", "150Mi", "50m")?;
    let mut metrics = demo
        .serve_metrics(
            cp,
            (NS, "cache"),
            |m| {
                container_usage(m, "app").is_some_and(|(_, mem)| {
                    parse_milli(&mem).is_ok_and(|b| b == (150 << 20) * 1000)
                })
            },
            "metrics-server serves the container's working set, 150Mi",
        )
        .await?;

    demo.say("Lowering its limit to 100Mi, below what it uses: resize-guard refuses it up front, with the numbers:");
    let out = demo.resize(NS, "cache", &memory_resize("100Mi")).await;
    demo.expect(!out.success
        && out.stderr.contains("resize-guard: this resize lowers a memory limit below what is in use")
        && out.stderr.contains("container \"app\" memory limit 256Mi → 100Mi, working set 150Mi")
        && out.stderr.contains("at least 165Mi"), "refused with the container, the limits, the working set and the least limit (usage + 10 %)");
    let stored = pods.get("cache").await?;
    demo.expect(
        limit(&stored).as_deref() == Some("256Mi"),
        "nothing stored: the spec still says 256Mi",
    );

    demo.say("200Mi stays above usage plus the 10 % headroom: admitted, and the kubelet applies it in place:");
    let out = demo.resize(NS, "cache", &memory_resize("200Mi")).await;
    demo.expect(
        out.success,
        "the decrease above usage plus headroom is admitted",
    );
    let applied = wait_pod(pods, "cache", T, |p| {
        applied_limit(p).as_deref() == Some("200Mi") && resize_pending(p).is_none()
    })
    .await;
    demo.expect(
        applied.as_ref().is_ok_and(|p| restart_count(p) == 0),
        "the kubelet applied 200Mi in place: restartCount 0",
    );
    demo.run(&["get", "pod", "cache", "-n", NS, "-o", "custom-columns=NAME:.metadata.name,LIMIT:.spec.containers[0].resources.limits.memory,APPLIED:.status.containerStatuses[0].resources.limits.memory,RESTARTS:.status.containerStatuses[0].restartCount"]).await;
    metrics.stop();
    Ok(())
}

/// Container `app`'s memory limit in the spec.
fn limit(p: &Pod) -> Option<String> {
    let c = p.spec.as_ref()?.containers.first()?;
    Some(
        c.resources
            .as_ref()?
            .limits
            .as_ref()?
            .get("memory")?
            .0
            .clone(),
    )
}

/// Container `app`'s memory limit as the kubelet reports it applied.
fn applied_limit(p: &Pod) -> Option<String> {
    let s = p.status.as_ref()?.container_statuses.as_ref()?.first()?;
    Some(
        s.resources
            .as_ref()?
            .limits
            .as_ref()?
            .get("memory")?
            .0
            .clone(),
    )
}
