//! `make demo-vpa`: the field report's walls as the Vertical Pod Autoscaler meets them, replayed
//! with the real VPA v1.6.0 updater and admission-controller against a real Kubernetes v1.37.2
//! control plane (kube-apiserver, kube-scheduler, kube-controller-manager, hollow nodes running
//! upstream's kubelet) — first without resize-guard, then with it installed from `deploy/`.
//! The walls write each VPA's recommendation in the recommender's place (an exact target each);
//! then the whole loop runs with no hand-written status: metrics-server, VPA's real recommender,
//! the memory wall and wall 3 (`resize_guard_harness::vpa::usage_loop`).
//!
//! `--full` also plays the Deferred wall without resize-guard, which takes VPA's fixed 5 minutes
//! before it evicts. Exits non-zero if any step does not behave as described.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use resize_guard_harness::admission::wait_active;
use resize_guard_harness::env::{Env, EnvOptions, shared_with_workloads};
use resize_guard_harness::metrics_server::MetricsServer;
use resize_guard_harness::objects::{cpu_resize, create_running, guaranteed_pod};
use resize_guard_harness::vpa::usage_loop::{memory_wall, wall3};
use resize_guard_harness::vpa::{Recommender, Vpa, VpaIntervals, VpaOptions};
use resize_guard_harness::vpa_field::{Outcome, Scenario, run};
use resize_guard_lab::demo::{Demo, T};

const PROBE_NS: &str = "vpa-demo-probe";

fn main() -> anyhow::Result<()> {
    resize_guard_lab::demo::init();
    let full = std::env::args().any(|a| a == "--full");
    println!(
        "resize-guard VPA demo: starting etcd, kube-apiserver, kube-scheduler and kube-controller-manager …"
    );
    let (env, rt) = shared_with_workloads(EnvOptions::default())?;
    let code = rt.block_on(play(env, full))?;
    std::process::exit(code);
}

async fn play(env: &'static Env, full: bool) -> anyhow::Result<i32> {
    println!("… and the VPA v1.6.0 admission-controller and updater (updater loop every 5 s) …");
    let vpa = Vpa::start(&env.cp, VpaOptions::default()).await?;
    let mut demo = Demo::new(&env.cp);

    demo.say(
        "Without resize-guard. Three Deployments under VPAs in InPlaceOrRecreate mode; the demo writes \
         each recommendation (the recommender needs metrics this cluster does not have):\n  \
         qos        2 Guaranteed replicas at 500m, controlledValues: RequestsOnly, recommendation 250m\n  \
         infeasible 2 replicas at 300m on a 1-CPU node, recommendation 1500m\n  \
         deferred   2 replicas at 300m grow to 500m on a node the rest of which low-priority pods hold",
    );
    let mut walls = vec![Scenario::qos(), Scenario::infeasible()];
    if full {
        walls.push(Scenario::deferred());
    }
    let without = play_all(env, &vpa, &walls, "without resize-guard").await?;
    table(&without);
    let qos = &without[0];
    show(qos, &["EvictedByVPA"]);
    demo.expect(
        qos.evicted == 2 && qos.pods.iter().all(|p| !p.original && p.qos == "Burstable"),
        "qos: the API server refused the in-place resize, VPA evicted both pods and they came back Burstable",
    );
    let infeasible = &without[1];
    show(infeasible, &["EvictedByVPA", "FailedScheduling"]);
    demo.expect(
        infeasible.evicted == 1 && infeasible.pods.iter().any(|p| p.unschedulable.is_some()),
        "infeasible: VPA evicted a replica whose replacement can never be scheduled",
    );
    if full {
        let deferred = &without[2];
        show(deferred, &["EvictedByVPA", "Preempted"]);
        demo.expect(
            deferred
                .first_eviction_after
                .is_some_and(|d| d >= Duration::from_secs(300)),
            "deferred: VPA waited 5 minutes, then evicted",
        );
    } else {
        println!(
            "\n  (deferred without resize-guard: VPA 1.6 waits 5 minutes — DeferredResizeUpdateTimeout in \
             pkg/updater/restriction/pods_inplace_restriction.go — then evicts; run with --full to watch it)"
        );
    }

    let _installed = demo.install(&env.cp).await?;
    probe(env, &demo).await?;
    demo.say(
        "With resize-guard (qos.onChange: reject, as shipped): the same three walls on fresh nodes.",
    );
    let walls = vec![
        Scenario::qos(),
        Scenario::infeasible(),
        Scenario::deferred(),
    ];
    let with = play_all(env, &vpa, &walls, "with resize-guard").await?;
    table(&with);
    show(&with[0], &["ResizeRejected", "EvictedByVPA"]);
    demo.expect(
        with[0].events_with("ResizeRejected").len() == 2,
        "qos: VPA still falls back to eviction, but each pod's events say why and how to keep it Guaranteed",
    );
    show(&with[1], &["ResizeRejected", "EvictedByVPA"]);
    demo.expect(
        with[1].fallbacks.iter().any(|l| l.contains("resize-guard")),
        "infeasible: the refusal VPA logs is resize-guard's, with the node's numbers",
    );
    show(
        &with[2],
        &["InPlaceResizedByVPA", "PreemptingForResize", "Preempted"],
    );
    demo.expect(
        with[2].evicted == 0 && with[2].in_place == 2,
        "deferred: resize-guard preempted the low-priority pods and both replicas grew in place",
    );

    demo.say("Now let resize-guard repair QoS-changing resizes (limits follow requests):");
    let policy =
        serde_json::json!({"data": {"policy.yaml": "mode: enforce\nqos:\n  onChange: repair\n"}})
            .to_string();
    demo.run(&[
        "patch",
        "configmap",
        "resize-guard",
        "-n",
        "resize-guard",
        "--type=merge",
        "-p",
        &policy,
    ])
    .await;
    let k = demo.kubectl.clone();
    wait_active(T, || {
        let k = k.clone();
        async move {
            let patch = r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"90m"}}}]}}"#;
            k.resize_dry_run(PROBE_NS, "probe", patch)
                .await
                .is_ok_and(|o| o.success)
        }
    })
    .await?;
    let repaired = play_all(env, &vpa, &[Scenario::qos()], "with resize-guard, repair").await?;
    table(&repaired);
    show(&repaired[0], &["ResizeRepaired", "InPlaceResizedByVPA"]);
    demo.expect(
        repaired[0].in_place == 2
            && repaired[0].evicted == 0
            && repaired[0].pods.iter().all(|p| p.qos == "Guaranteed"),
        "qos: both pods resized in place by VPA, still Guaranteed",
    );

    demo.say("All runs:");
    let all: Vec<Outcome> = without.into_iter().chain(with).chain(repaired).collect();
    table(&all);

    // The hand-written recommendations are done: the real recommender would overwrite them.
    drop(vpa);
    whole_loop(env, &mut demo).await?;
    Ok(demo.finish("The VPA walls behaved as described.", env.cp.dir()))
}

/// The whole loop with no hand-written status: metrics-server, VPA's recommender, updater and
/// admission controller with the shortest intervals VPA supports; the memory wall (refused by
/// resize-guard) and wall 3 (usage up, then down, each resized in place).
async fn whole_loop(env: &'static Env, demo: &mut Demo) -> anyhow::Result<()> {
    demo.say(
        "The whole loop, no hand-written status: metrics-server v0.8.0 scrapes the hollow node, and VPA's \
         recommender, updater and admission controller run with the shortest intervals VPA supports. \
         A container's usage is set on the node; everything after is upstream's code.",
    );
    let _metrics = MetricsServer::start(&env.cp).await?;
    let vpa = Vpa::start(&env.cp, VpaOptions::with_intervals(VpaIntervals::Shortest)).await?;
    let _recommender = Recommender::start(&env.cp, VpaIntervals::Shortest, &[]).await?;
    let patience = Duration::from_secs(180);
    let (wall, lag) = tokio::join!(
        memory_wall(env, &vpa, "with resize-guard", patience),
        wall3(env, &vpa, 1, true, patience)
    );
    let (wall, lag) = (wall?, lag?);
    println!("\n  memory: 256Mi using 200Mi, maxAllowed.memory 128Mi");
    println!("  | run | target (uncapped) | refused by | VPA | replacement |");
    println!("  {}", wall.row());
    if let Some(m) = wall.event("ResizeRejected") {
        println!("    ResizeRejected: {m}");
    }
    demo.expect(
        wall.event("ResizeRejected")
            .is_some_and(|m| m.contains("working set 200Mi")),
        "memory: the recommender capped the target below usage; resize-guard refused the shrink with the working set, and VPA fell back to eviction",
    );
    println!("\n  wall 3, seconds from the usage change:");
    println!("  | step | PodMetrics | recommendation | PATCHed | applied by kubelet |");
    for s in &lag.steps {
        println!("  {}", s.row());
    }
    demo.expect(
        lag.steps.iter().all(|s| s.applied.is_some()) && lag.same_pods && lag.restarts == 0,
        "wall 3: usage rose and fell, the recommender followed, and the pod was resized in place each time",
    );
    Ok(())
}

async fn play_all(
    env: &Env,
    vpa: &Vpa,
    walls: &[Scenario],
    label: &str,
) -> anyhow::Result<Vec<Outcome>> {
    futures::future::join_all(walls.iter().map(|s| run(env, vpa, s, label)))
        .await
        .into_iter()
        .collect()
}

fn table(outcomes: &[Outcome]) {
    println!("\n  {}", Outcome::header());
    for o in outcomes {
        println!("  {}", o.row());
    }
}

fn show(o: &Outcome, reasons: &[&str]) {
    println!(
        "\n  {} / {} — namespace {}:",
        o.scenario, o.run, o.namespace
    );
    for e in o
        .events
        .iter()
        .filter(|e| reasons.contains(&e.reason.as_str()))
    {
        println!("    {:<20} pod/{:<28} {}", e.reason, e.object, e.message);
    }
    for l in o.fallbacks.iter().take(2) {
        println!("    vpa-updater: {l}");
    }
    for p in &o.pods {
        let restarts = if p.restarts < 0 {
            "-".to_owned()
        } else {
            p.restarts.to_string()
        };
        println!(
            "    pod/{:<28} {:<9} cpu {}/{} qos {:<10} restarts {} {}",
            p.name,
            if p.original { "original" } else { "new" },
            p.cpu.0.as_deref().unwrap_or("-"),
            p.cpu.1.as_deref().unwrap_or("-"),
            p.qos,
            restarts,
            p.unschedulable.as_deref().unwrap_or(""),
        );
    }
}

/// Waits until kube-apiserver calls resize-guard (an Infeasible dry-run resize of a probe pod is
/// refused with resize-guard's message).
async fn probe(env: &Env, demo: &Demo) -> anyhow::Result<()> {
    let node = env.node("probe", "1", "1Gi").await;
    demo.kubectl.run(["create", "namespace", PROBE_NS]).await?;
    let pods: Api<Pod> = Api::namespaced(env.client().await, PROBE_NS);
    create_running(
        &pods,
        &guaranteed_pod("probe", &node, "high", "100m", "64Mi"),
    )
    .await?;
    let k = demo.kubectl.clone();
    wait_active(T, || {
        let k = k.clone();
        async move {
            k.resize_dry_run(PROBE_NS, "probe", &cpu_resize("2"))
                .await
                .is_ok_and(|o| o.stderr.contains("resize-guard"))
        }
    })
    .await
}
