//! `make demo-node`: the field test's three walls on a real node — upstream's kubelet and
//! kube-proxy v1.37.2, containerd and runc (`tests/node/`) — with resize-guard installed exactly
//! as the README says (`make push` to a local registry, `kubectl apply -k` of `deploy/` with the
//! `images:` block it printed):
//! both programs run as pods from their images, and the resize lands in the container's cgroup.
//! The numbers follow the node's real allocatable CPU. Then the memory wall on real memory:
//! metrics-server scraping the real kubelet, resize-guard refusing a limit below the container's
//! working set with the numbers and admitting one above it, which the kubelet writes into the
//! cgroup. Exits non-zero if any step does not behave as described, or if the node leaves
//! anything behind.

use std::time::Instant;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{EnvVar, Pod, ServiceAccount};
use kube::api::Api;
use resize_guard_harness::control_plane::{ControlPlane, Options};
use resize_guard_harness::metrics_server::container_usage;
use resize_guard_harness::objects::*;
use resize_guard_harness::quantity::parse_milli;
use resize_guard_harness::real_node::{self, RealNode, runs_pause};
use resize_guard_lab::demo::{Demo, T, memory_resize};

const NS: &str = "shop";

fn main() -> anyhow::Result<()> {
    resize_guard_lab::demo::init();
    println!("resize-guard demo on a real node: preparing its network namespace …");
    let mut node = RealNode::prepare()?;
    let cp = ControlPlane::start(&Options {
        real_node_host: Some(real_node::HOST.to_owned()),
        ..Options::default()
    })?;
    cp.start_workload_controllers()?;
    let rt = tokio::runtime::Runtime::new()?;
    let mut demo = Demo::new(&cp);
    let played = rt.block_on(Box::pin(play(&cp, &mut node, &mut demo)));
    drop(rt);
    drop(cp);
    if let Err(e) = &played {
        demo.expect(false, &format!("{e:#}"));
    }
    let stopped = node.stop();
    demo.expect(
        stopped.is_ok(),
        "the node is gone without a trace: netns, routes, cgroups, mounts, processes, sysctls",
    );
    if let Err(e) = stopped {
        println!("{e:#}");
    }
    let code = demo.finish(
        "All three walls and the memory wall behaved as described, on real containers.",
        &std::env::temp_dir(),
    );
    std::process::exit(code);
}

async fn play(cp: &ControlPlane, node: &mut RealNode, demo: &mut Demo) -> anyhow::Result<()> {
    let ready = node.start(cp).await?;
    demo.say(&format!(
        "A real node: the kubelet v1.37.2 with containerd and runc, Ready {} ms after it started.",
        ready.as_millis()
    ));
    demo.run(&["get", "nodes", "-o", "wide"]).await;

    demo.say("Pushing resize-guard's images to the registry the node pulls from, as an operator pushes to theirs:");
    println!(
        "$ make push REGISTRY={}/resize-guard PLAIN_HTTP=1",
        real_node::REGISTRY
    );
    let pushed = real_node::push_images();
    if let Ok((stdout, _)) = &pushed {
        print!("{stdout}");
    }
    demo.expect(
        pushed.is_ok(),
        "both images pushed (make image wrote them), with the images: block that runs them",
    );
    let (_, own) = pushed?;

    demo.say("Installing resize-guard exactly as the README says: deploy/ with the images: block make push printed:");
    let kustomization = own.join("kustomization.yaml");
    print!("{}", std::fs::read_to_string(&kustomization)?);
    let applied = Instant::now();
    demo.run(&["apply", "-k", &own.display().to_string()]).await;
    let client = cp.client().await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "resize-guard");
    let mut available = true;
    for name in ["resize-guard-webhook", "resize-guard-controller"] {
        available &= wait_object(&deployments, name, T, |d| {
            d.status.as_ref().and_then(|s| s.available_replicas) == Some(2)
        })
        .await
        .is_ok();
    }
    demo.expect(
        available,
        &format!(
            "both Deployments available under Pod Security restricted, {} ms after the apply",
            applied.elapsed().as_millis()
        ),
    );
    demo.run(&["get", "pods", "-n", "resize-guard", "-o", "wide"])
        .await;
    let bundle = demo
        .run(&[
            "get",
            "mutatingwebhookconfiguration",
            "resize-guard",
            "-o",
            "jsonpath={.webhooks[0].clientConfig.caBundle}",
        ])
        .await;
    demo.expect(
        !bundle.stdout.trim().is_empty(),
        "the controller injected caBundle; no certificate was prepared by hand",
    );

    let (alloc, free) = real_node::free_millicores(&client).await?;
    let batch = free - 250 - 100;
    demo.kubectl.create_priority_classes().await?;
    demo.say(&format!(
        "The field test on this node ({alloc}m CPU allocatable, {} used by resize-guard): a low-priority \
         batch pod using {batch}m and a high-priority Guaranteed shop pod at 250m, both real containers.",
        format_args!("{}m", alloc - free)
    ));
    demo.run(&["create", "namespace", NS]).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NS);
    wait_object(&accounts, "default", T, |_| true).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let name = real_node::NAME;
    create_running(
        &pods,
        &runs_pause(guaranteed_pod(
            "batch",
            name,
            "low",
            &format!("{batch}m"),
            "64Mi",
        )),
    )
    .await?;
    create_running(
        &pods,
        &runs_pause(guaranteed_pod("shop", name, "high", "250m", "64Mi")),
    )
    .await?;
    let too_much = format!("{}m", alloc + 500);
    demo.kubectl
        .wait_answered(NS, "shop", &cpu_resize(&too_much), T)
        .await?;
    demo.run(&["get", "pods", "-n", NS, "-o", "custom-columns=NAME:.metadata.name,PRIORITY:.spec.priority,CPU:.spec.containers[0].resources.requests.cpu,QOS:.status.qosClass,NODE:.spec.nodeName"]).await;

    demo.say("Wall 1 — a requests-only resize (what VPA RequestsOnly sends) would turn the Guaranteed pod Burstable:");
    let out = resize(
        demo,
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"300m"}}}]}}"#,
    )
    .await;
    demo.expect(
        !out.success
            && out
                .stderr
                .contains("would change the pod's QoS class from Guaranteed to Burstable"),
        "QoS change explained, naming the container and the fix",
    );

    demo.say(&format!(
        "Wall 2 — {too_much} is more than this node can ever hold ({alloc}m):"
    ));
    let out = resize(demo, &cpu_resize(&too_much)).await;
    demo.expect(
        !out.success
            && out
                .stderr
                .contains(&format!("can never fit on node {name}")),
        "Infeasible resize rejected with the node's numbers",
    );

    demo.say("Wall 3 — 250m → 500m does not fit next to the batch pod now. resize-guard warns, preempts it, and the \
              kubelet writes the new quota into the container's cgroup:");
    let out = resize(demo, &cpu_resize("500m")).await;
    demo.expect(
        out.success
            && out
                .stderr
                .contains(&format!("resize-guard will preempt {NS}/batch")),
        "Deferred resize accepted with a warning naming the victim",
    );
    let done = wait_pod(&pods, "shop", T, |p| {
        allocated_cpu(p).as_deref() == Some("500m") && resize_pending(p).is_none()
    })
    .await;
    demo.expect(
        done.as_ref().is_ok_and(|p| restart_count(p) == 0),
        "resized in place: restartCount 0",
    );
    demo.expect(
        wait_gone(&pods, "batch", T).await.is_ok(),
        "the batch pod was preempted",
    );
    if let Ok(p) = &done {
        let cgroup = node.wait_cgroup(p, T, |v| v.cpu_quota_us == 50_000).await;
        println!("  the container's cgroup on the node: {cgroup:?}");
        demo.expect(
            cgroup.is_ok(),
            "cpu.cfs_quota_us is 50000 µs per 100 ms: 500m, in the kernel",
        );
    }
    demo.run(&["events", "-n", NS]).await;
    let out = demo.plugin(&["explain", "shop", "-n", NS]).await;
    demo.expect(
        out.success && out.stdout.contains("Resize: none pending"),
        "kubectl resize-guard explain tells the story",
    );
    memory_wall(cp, node, demo, &pods).await
}

/// The memory wall with real memory: a container holding 150 MiB under 256Mi, metrics-server
/// scraping the real kubelet, resize-guard refusing 100Mi with the real working set and
/// admitting 200Mi, which lands in the cgroup.
async fn memory_wall(
    cp: &ControlPlane,
    node: &RealNode,
    demo: &mut Demo,
    pods: &Api<Pod>,
) -> anyhow::Result<()> {
    demo.say(
        "The memory wall — memory is not compressible: a limit below what a container holds is refused by the \
         kubelet (the spec then says one limit, the container keeps another) or, if usage grows between the \
         kubelet's check and its cgroup write, OOM-kills it. A cache pod whose container really holds 150 MiB \
         under a 256Mi limit, and upstream metrics-server scraping the real kubelet:",
    );
    let mut cache = runs_pause(guaranteed_pod(
        "cache",
        real_node::NAME,
        "mid",
        "100m",
        "256Mi",
    ));
    if let Some(c) = cache.spec.as_mut().and_then(|s| s.containers.first_mut()) {
        c.env = Some(vec![EnvVar {
            name: "HOLD_MIB".to_owned(),
            value: Some("150".to_owned()),
            ..EnvVar::default()
        }]);
    }
    let cache = create_running(pods, &cache).await?;
    let mut metrics = demo
        .serve_metrics(
            cp,
            (NS, "cache"),
            |m| working_set(m).is_some_and(|b| b >= 150 << 20),
            "metrics-server serves the container's real working set",
        )
        .await?;
    let cgroup = node.cgroup(
        cache.metadata.uid.as_deref().unwrap_or_default(),
        &real_node::container_id(&cache),
    )?;
    println!(
        "  the container's cgroup on the node: memory.usage_in_bytes {:.1} MiB, memory.limit_in_bytes {} MiB",
        cgroup
            .as_ref()
            .map_or(0.0, |v| v.memory_usage as f64 / 1048576.0),
        cgroup.as_ref().map_or(0, |v| v.memory_limit >> 20)
    );

    demo.say("Lowering its limit to 100Mi, below what it holds: resize-guard refuses it up front, with the numbers:");
    let out = demo.resize(NS, "cache", &memory_resize("100Mi")).await;
    demo.expect(
        !out.success
            && out
                .stderr
                .contains("resize-guard: this resize lowers a memory limit below what is in use")
            && out
                .stderr
                .contains("container \"app\" memory limit 256Mi → 100Mi, working set "),
        "refused with the container, the limits and the real working set",
    );
    let kept = node
        .wait_cgroup(&cache, T, |v| v.memory_limit == 256 << 20)
        .await;
    let now = pods.get("cache").await?;
    demo.expect(
        kept.is_ok() && restart_count(&now) == 0,
        "nothing changed: the cgroup keeps 256 MiB, restartCount 0",
    );

    demo.say("200Mi stays above usage plus resize-guard's 10 % headroom: admitted, and the kubelet writes it into the cgroup:");
    let out = demo.resize(NS, "cache", &memory_resize("200Mi")).await;
    demo.expect(
        out.success,
        "the decrease above usage plus headroom is admitted",
    );
    let lowered = node
        .wait_cgroup(&cache, T, |v| v.memory_limit == 200 << 20)
        .await;
    println!("  the container's cgroup on the node: {lowered:?}");
    let now = pods.get("cache").await?;
    demo.expect(
        lowered.is_ok() && restart_count(&now) == 0,
        "memory.limit_in_bytes is 200 MiB, in place: restartCount 0",
    );
    metrics.stop();
    Ok(())
}

/// Container `app`'s working set in a PodMetrics, in bytes.
fn working_set(metrics: &serde_json::Value) -> Option<u64> {
    let (_, memory) = container_usage(metrics, "app")?;
    u64::try_from(parse_milli(&memory).ok()? / 1000).ok()
}

/// Runs and prints `kubectl patch pod shop --subresource resize -p PATCH`.
async fn resize(demo: &Demo, patch: &str) -> resize_guard_harness::kubectl::KubectlOutput {
    demo.run(&[
        "patch",
        "pod",
        "shop",
        "-n",
        NS,
        "--subresource",
        "resize",
        "-p",
        patch,
    ])
    .await
}
