//! Victims taken until the preemptor's resize is admitted, end to end: resize-guard against
//! upstream kube-scheduler v1.37.2 with `InPlacePodVerticalScalingSchedulerPreemption`, on the
//! same generated single-node scenarios, each side on its own hollow node (upstream's v1.37.2
//! kubelet decides who gets freed room, retrying pending resizes in its own order). A scenario:
//! low-priority pods (some with Deferred growth of their own), 1–3 `preemptionPolicy: Never`
//! mid-priority pods with Deferred growth, and a high-priority pod whose resize is Deferred.
//! Victims take different times to exit (the hollow node's `stop-after`), the same on both sides,
//! so they go one by one in an order neither preemptor chose. Isolation as in
//! `preemption_latency`: resize-guard's pods use a `schedulerName` kube-scheduler does not serve,
//! upstream's live in a namespace resize-guard's policy excludes.
//!
//! Reported per scenario and in total: victims on each side, and for resize-guard the plans it
//! recorded (a second plan means the first one lost the room to someone else's growth).
//!
//! `RESIZE_GUARD_BENCH_SCENARIOS` (default 50) and `RESIZE_GUARD_BENCH_SEED` (default 17) choose
//! the scenarios.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use kube::runtime::{WatchStreamExt, watcher};
use resize_guard_bench::{Lcg, Row, rows_json, write_summary};
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::hollow_node::{HollowNode, HollowNodeConfig};
use resize_guard_harness::objects::*;

const GATE: &str = "InPlacePodVerticalScalingSchedulerPreemption=true";
const UPSTREAM_NS: &str = "upstream-victims";
const OURS_SCHEDULER: &str = "resize-guard-bench";
const PLAN: &str = "resize-guard.io/preemption";
const ADMIT_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Debug, Clone)]
struct PodSpec {
    name: String,
    class: &'static str,
    cpu: u64,
    grow_to: Option<u64>,
    stop_after_ms: u64,
}

#[derive(Debug, Clone)]
struct Scenario {
    allocatable: u64,
    /// Everyone but the preemptor, in creation order; those with `grow_to` are resized (and
    /// left Deferred if they do not fit) in this order before the preemptor.
    others: Vec<PodSpec>,
    high: PodSpec,
}

fn scenario(rng: &mut Lcg) -> Scenario {
    let allocatable = rng.range(30, 60) * 100;
    let high_cpu = rng.range(4, 10) * 50;
    let high = PodSpec {
        name: "high".into(),
        class: "high",
        cpu: high_cpu,
        grow_to: Some(high_cpu + rng.range(14, 30) * 50),
        stop_after_ms: 0,
    };
    let mut used = high_cpu;
    let mut others = Vec::new();
    for i in 0..rng.range(1, 3) {
        let cpu = rng.range(30, 70) * 10;
        others.push(PodSpec {
            name: format!("mid{i}"),
            class: "mid-never",
            cpu,
            grow_to: Some(cpu + rng.range(40, 90) * 10),
            stop_after_ms: rng.range(0, 4) * 500,
        });
        used += cpu;
    }
    let mut i = 0;
    loop {
        let cpu = rng.range(15, 60) * 10;
        if used + cpu > allocatable - 20 {
            break;
        }
        let grows = rng.next(4) == 0;
        others.push(PodSpec {
            name: format!("low{i}"),
            class: "low",
            cpu,
            grow_to: grows.then(|| cpu + rng.range(10, 40) * 10),
            stop_after_ms: rng.range(0, 4) * 500,
        });
        used += cpu;
        i += 1;
    }
    Scenario {
        allocatable,
        others,
        high,
    }
}

/// What one side did.
#[derive(Debug, Clone, Default)]
struct Outcome {
    victims: Vec<String>,
    plans: usize,
    admitted: bool,
    /// The preemptor's resize was admitted without anyone being preempted.
    needed_no_room: bool,
}

fn pod(spec: &PodSpec, node: &str, scheduler: Option<&str>) -> Pod {
    let mut p = guaranteed_pod(
        &spec.name,
        node,
        spec.class,
        &format!("{}m", spec.cpu),
        "64Mi",
    );
    if let Some(s) = scheduler {
        p.spec.as_mut().unwrap().scheduler_name = Some(s.into());
    }
    stopping_after(p, &format!("{}ms", spec.stop_after_ms))
}

async fn run_side(
    env: &'static Env,
    ns: &str,
    scheduler: Option<&str>,
    s: &Scenario,
    tag: &str,
) -> Outcome {
    let client = env.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let config =
        HollowNodeConfig::with_allocatable(&env.unique(tag), &format!("{}m", s.allocatable), "8Gi")
            .unwrap();
    let hollow = HollowNode::start(&env.cp, &config).await.unwrap();
    let node = config.name.clone();
    futures::future::join_all(s.others.iter().chain([&s.high]).map(|spec| {
        let p = pod(spec, &node, scheduler);
        let pods = pods.clone();
        async move { create_running(&pods, &p).await.unwrap() }
    }))
    .await;
    for spec in s.others.iter().filter(|p| p.grow_to.is_some()) {
        resize_and_settle(env, &pods, ns, spec).await;
    }

    // Every version of the preemptor: the plans resize-guard recorded on it.
    let plans: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let sink = plans.clone();
    let watch = tokio::spawn({
        let api = pods.clone();
        async move {
            let config = watcher::Config::default().fields("metadata.name=high");
            let mut stream = watcher(api, config)
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(Ok(p)) = stream.next().await {
                // One plan per generation and time: each sealing draws a fresh nonce, so the
                // same plan written twice is still one plan.
                let plan = p.metadata.annotations.as_ref().and_then(|a| a.get(PLAN));
                if let Some(v) =
                    plan.and_then(|raw| serde_json::from_str::<serde_json::Value>(raw).ok())
                {
                    sink.lock()
                        .unwrap()
                        .insert(format!("{}@{}", v["generation"], v["time"]));
                }
            }
        }
    });
    let to = format!("{}m", s.high.grow_to.unwrap());
    let out = env
        .kubectl()
        .resize(ns, "high", &cpu_resize(&to))
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
    let admitted = wait_pod(&pods, "high", ADMIT_TIMEOUT, |p| {
        allocated(p, "cpu").is_some_and(|a| same_cpu(&a, &to))
    })
    .await
    .is_ok();
    let names: Vec<&str> = s.others.iter().map(|p| p.name.as_str()).collect();
    let mut victims = Vec::new();
    for n in names {
        match pods.get_opt(n).await.unwrap() {
            Some(p) if p.metadata.deletion_timestamp.is_none() => {}
            _ => victims.push(n.to_owned()),
        }
    }
    watch.abort();
    let plans = plans.lock().unwrap().len();
    // Leave nothing behind: every pod force-deleted, the node removed.
    let _ = pods
        .delete_collection(
            &DeleteParams::default().grace_period(0),
            &Default::default(),
        )
        .await;
    for spec in s.others.iter().chain([&s.high]) {
        let _ = wait_gone(&pods, &spec.name, Duration::from_secs(60)).await;
    }
    hollow.remove(client).await.unwrap();
    Outcome {
        needed_no_room: admitted && victims.is_empty(),
        victims,
        plans,
        admitted,
    }
}

/// Resizes a pod and waits until the kubelet has decided: admitted, or Deferred.
async fn resize_and_settle(env: &Env, pods: &Api<Pod>, ns: &str, spec: &PodSpec) {
    let to = format!("{}m", spec.grow_to.unwrap());
    let out = env
        .kubectl()
        .resize(ns, &spec.name, &cpu_resize(&to))
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
    wait_pod(pods, &spec.name, Duration::from_secs(60), |p| {
        resize_pending(p).is_some_and(|(r, _)| r == "Deferred")
            || allocated(p, "cpu").is_some_and(|a| same_cpu(&a, &to))
    })
    .await
    .unwrap();
}

/// `1530m` and `1530m`, or `2` and `2000m`.
fn same_cpu(a: &str, b: &str) -> bool {
    let milli = |s: &str| {
        s.strip_suffix('m')
            .and_then(|m| m.parse::<u64>().ok())
            .or_else(|| s.parse::<u64>().ok().map(|c| c * 1000))
    };
    milli(a).is_some() && milli(a) == milli(b)
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let count: usize = env_number("RESIZE_GUARD_BENCH_SCENARIOS", 50);
    let seed: u64 = env_number("RESIZE_GUARD_BENCH_SEED", 17);
    let env = shared(EnvOptions {
        feature_gates: vec![GATE.into()],
    });
    env.cp.start_scheduler(&[GATE]).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        env.priority_class("mid-never", 10_000, true).await;
        let controller =
            support::side_by_side(env, UPSTREAM_NS, "mode: enforce\npreemption:\n  enabled: true\n  maxVictimsPerResize: 100\n  maxEvictionsPerNamespacePerMinute: 20\n")
                .await;

        let mut rng = Lcg(seed);
        let mut rows = Vec::new();
        for i in 0..count {
            let s = scenario(&mut rng);
            let ours_ns = env.namespace("rg-victims").await;
            let (ours, theirs) = tokio::join!(
                run_side(env, &ours_ns, Some(OURS_SCHEDULER), &s, "rg"),
                run_side(env, UPSTREAM_NS, None, &s, "up"),
            );
            let pending = s.others.iter().filter(|p| p.grow_to.is_some()).count();
            eprintln!(
                "scenario {i:>2}: {}m, {} pods ({pending} growing): resize-guard {:?} ({} plans{}), upstream {:?}{}",
                s.allocatable,
                s.others.len() + 1,
                ours.victims,
                ours.plans,
                if ours.admitted { "" } else { ", NOT admitted" },
                theirs.victims,
                if theirs.admitted { "" } else { ", NOT admitted" },
            );
            rows.push((i, s, ours, theirs));
        }
        controller.stop().await;
        report(seed, &rows);
    });
}

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}: expected a number, got {v:?}")),
        Err(_) => default,
    }
}

fn report(seed: u64, rows: &[(usize, Scenario, Outcome, Outcome)]) {
    println!(
        "\nvictims until the preemptor's resize is admitted, {} scenarios (seed {seed})",
        rows.len()
    );
    println!(
        "{:>3} {:>7} {:>5} {:>8} {:>13} {:>6} {:>9}",
        "#", "alloc", "pods", "growing", "resize-guard", "plans", "upstream"
    );
    let (mut ours_total, mut theirs_total) = (0, 0);
    let (mut fewer, mut same, mut more, mut second_rounds, mut compared) = (0, 0, 0, 0, 0);
    let (mut ours_stuck, mut theirs_stuck, mut no_room_needed) = (0, 0, 0);
    for (i, s, ours, theirs) in rows {
        let growing = s.others.iter().filter(|p| p.grow_to.is_some()).count();
        let show = |o: &Outcome| {
            if o.admitted {
                o.victims.len().to_string()
            } else {
                format!("{} stuck", o.victims.len())
            }
        };
        println!(
            "{i:>3} {:>6}m {:>5} {:>8} {:>13} {:>6} {:>9}",
            s.allocatable,
            s.others.len() + 1,
            growing,
            show(ours),
            ours.plans,
            show(theirs)
        );
        ours_stuck += usize::from(!ours.admitted);
        theirs_stuck += usize::from(!theirs.admitted);
        second_rounds += usize::from(ours.plans > 1);
        if ours.needed_no_room && theirs.needed_no_room {
            no_room_needed += 1;
            continue;
        }
        if !(ours.admitted && theirs.admitted) {
            continue;
        }
        compared += 1;
        ours_total += ours.victims.len();
        theirs_total += theirs.victims.len();
        match ours.victims.len().cmp(&theirs.victims.len()) {
            std::cmp::Ordering::Less => fewer += 1,
            std::cmp::Ordering::Equal => same += 1,
            std::cmp::Ordering::Greater => more += 1,
        }
    }
    println!(
        "\n{compared} scenarios admitted on both sides ({no_room_needed} more needed no preemption): \
         victims resize-guard {ours_total}, kube-scheduler alpha {theirs_total}; \
         resize-guard took fewer in {fewer}, as many in {same}, more in {more}"
    );
    println!(
        "resize-guard scenarios with a second plan: {second_rounds}; not admitted within {}s: resize-guard {ours_stuck}, upstream {theirs_stuck}",
        ADMIT_TIMEOUT.as_secs()
    );
    write_summary(
        "preemption_victims",
        &serde_json::json!({
            "seed": seed,
            "scenarios": rows.len(),
            "compared": compared,
            "resize_guard_victims": ours_total,
            "kube_scheduler_alpha_victims": theirs_total,
            "fewer": fewer, "same": same, "more": more,
            "second_rounds": second_rounds,
            "not_admitted": {"resize_guard": ours_stuck, "kube_scheduler_alpha": theirs_stuck},
            "rows": rows_json(&[Row::new(
                &format!("victims until the preemptor is admitted, end to end, {} seeded scenarios on hollow nodes (real v1.37.2 kubelet), victims exiting one by one", rows.len()),
                &format!("`make bench` (`preemption_victims`; `RESIZE_GUARD_BENCH_SCENARIOS`, `RESIZE_GUARD_BENCH_SEED={seed}`)"),
            )
            .other(&format!(
                "resize-guard **{ours_total}** vs kube-scheduler v1.37.2 alpha **{theirs_total}** over the {compared} scenarios admitted on both sides ({no_room_needed} more needed no preemption); fewer in {fewer}, as many in {same}, **more in {more}**; scenarios with a second resize-guard plan: {second_rounds}; not admitted within {} s: resize-guard {ours_stuck}, upstream {theirs_stuck}",
                ADMIT_TIMEOUT.as_secs()
            ))]),
        }),
    );
}
