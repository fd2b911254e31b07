//! Time from the kubelet writing `PodResizePending=Deferred` to every victim carrying a
//! `deletionTimestamp`, for resize-guard and for upstream kube-scheduler v1.37.2 with
//! `InPlacePodVerticalScalingSchedulerPreemption`, in one run on one control plane. Both sides
//! see the same field-test scenario on a fresh hollow node (upstream's v1.37.2 kubelet, started
//! for the run and removed after it, so at most one runs at a time); each side is kept away from
//! the other's pods (resize-guard's runs use a `schedulerName` kube-scheduler does not serve;
//! upstream's run in a namespace resize-guard's policy excludes). Times are taken by one watch, so
//! both ends of an interval come from the same clock and the same event stream. Two phases:
//! resize-guard with the Eviction API (its default), then with `pdb: bestEffort` (plain DELETE,
//! as kube-scheduler deletes); each interleaves its runs with kube-scheduler's, and each ratio is
//! against the upstream runs of its own phase, so a machine that slows down between phases does
//! not show up as a difference.
//!
//! `RESIZE_GUARD_BENCH_RUNS` sets the number of runs per side (default 40).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use kube::runtime::{WatchStreamExt, watcher};
use resize_guard_bench::{Goal, Row, ms, percentile, report_goals, rows_json, write_summary};
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::hollow_node::{HollowNode, HollowNodeConfig};
use resize_guard_harness::install::set_policy;
use resize_guard_harness::objects::*;

const GATE: &str = "InPlacePodVerticalScalingSchedulerPreemption=true";
const DEFAULT_RUNS: usize = 40;
const UPSTREAM_NS: &str = "upstream-bench";
/// The shipped policy with the per-namespace eviction budget raised to the cluster rate.
const BRAKES: &str = "mode: enforce\npreemption:\n  enabled: true\n  maxEvictionsPerMinute: 20\n  maxEvictionsPerNamespacePerMinute: 20\n";

type Seen = Arc<Mutex<HashMap<String, (Option<Instant>, Option<Instant>)>>>;

/// Records, per pod, when it was first seen Deferred and first seen terminating.
fn watch(api: Api<Pod>, seen: Seen) {
    tokio::spawn(async move {
        let mut s = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(Ok(p)) = s.next().await {
            let now = Instant::now();
            let name = format!(
                "{}/{}",
                p.metadata.namespace.as_deref().unwrap_or_default(),
                p.metadata.name.as_deref().unwrap_or_default()
            );
            let mut m = seen.lock().unwrap();
            let e = m.entry(name).or_default();
            if e.0.is_none() && resize_pending(&p).is_some_and(|r| r.0 == "Deferred") {
                e.0 = Some(now);
            }
            if e.1.is_none() && p.metadata.deletion_timestamp.is_some() {
                e.1 = Some(now);
            }
        }
    });
}

async fn one_run(
    env: &'static resize_guard_harness::env::Env,
    ns: &str,
    scheduler: Option<&str>,
    i: usize,
    seen: &Seen,
) -> Duration {
    let client = env.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let config = HollowNodeConfig::with_allocatable(&env.unique("bench"), "1930m", "3Gi").unwrap();
    let hollow = HollowNode::start(&env.cp, &config).await.unwrap();
    let node = config.name.clone();
    let (filler, app) = (format!("filler-{i}"), format!("app-{i}"));
    let mut f = guaranteed_pod(&filler, &node, "low", "1500m", "256Mi");
    let mut a = guaranteed_pod(&app, &node, "high", "250m", "256Mi");
    if let Some(s) = scheduler {
        f.spec.as_mut().unwrap().scheduler_name = Some(s.into());
        a.spec.as_mut().unwrap().scheduler_name = Some(s.into());
    }
    create_running(&pods, &f).await.unwrap();
    create_running(&pods, &a).await.unwrap();
    let out = env
        .kubectl()
        .resize(ns, &app, &cpu_resize("550m"))
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
    wait_pod(&pods, &app, Duration::from_secs(60), |p| {
        allocated_cpu(p).as_deref() == Some("550m")
    })
    .await
    .unwrap();
    let took = {
        let m = seen.lock().unwrap();
        let deferred = m
            .get(&format!("{ns}/{app}"))
            .and_then(|e| e.0)
            .expect("saw the Deferred condition");
        let deleting = m
            .get(&format!("{ns}/{filler}"))
            .and_then(|e| e.1)
            .expect("saw the victim terminating");
        deleting.saturating_duration_since(deferred)
    };
    // Leave nothing behind: the victim gone, the app deleted by its kubelet, the node removed.
    wait_gone(&pods, &filler, Duration::from_secs(60))
        .await
        .unwrap();
    pods.delete(&app, &DeleteParams::default()).await.unwrap();
    wait_gone(&pods, &app, Duration::from_secs(60))
        .await
        .unwrap();
    hollow.remove(client).await.unwrap();
    took
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The embedded controller's log on stderr when `RUST_LOG` asks for it.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let runs: usize = std::env::var("RESIZE_GUARD_BENCH_RUNS")
        .ok()
        .map(|v| {
            v.parse()
                .expect("RESIZE_GUARD_BENCH_RUNS: a number of runs")
        })
        .unwrap_or(DEFAULT_RUNS)
        .max(1);
    let env = shared(EnvOptions {
        feature_gates: vec![GATE.into()],
    });
    env.cp.start_scheduler(&[GATE]).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // A plan every few seconds from one namespace for minutes: the shipped per-namespace
        // budget (6 a minute) would hold later runs back and this would time the brake, not the
        // path. The namespace may spend the whole cluster rate, as one tenant alone may.
        let controller = support::side_by_side(env, UPSTREAM_NS, BRAKES).await;
        let client = env.client().await;
        let ours_ns = env.namespace("rg-bench").await;
        let seen: Seen = Arc::default();
        watch(Api::namespaced(client.clone(), &ours_ns), seen.clone());
        watch(Api::namespaced(client.clone(), UPSTREAM_NS), seen.clone());
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (mut ours, mut upstream, mut ours_delete) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..runs {
            ours.push(one_run(env, &ours_ns, Some("resize-guard-bench"), i, &seen).await);
            upstream.push(one_run(env, UPSTREAM_NS, None, i, &seen).await);
            eprintln!("run {i}: resize-guard {:.1} ms, kube-scheduler {:.1} ms", ms(ours[i]), ms(upstream[i]));
        }
        // The same with pdb: bestEffort (plain DELETE, like kube-scheduler, instead of the
        // Eviction API's PDB check).
        set_policy(env, &format!("{BRAKES}  pdb: bestEffort\nnamespaces:\n  exclude: [kube-system, {UPSTREAM_NS}]\n")).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        // Interleaved with kube-scheduler again: the bestEffort ratio is against this phase's
        // runs, on the machine as it is now.
        let mut upstream_again = Vec::new();
        for i in runs..2 * runs {
            ours_delete.push(one_run(env, &ours_ns, Some("resize-guard-bench"), i, &seen).await);
            upstream_again.push(one_run(env, UPSTREAM_NS, None, i, &seen).await);
            eprintln!(
                "run {i}: resize-guard (pdb: bestEffort) {:.1} ms, kube-scheduler {:.1} ms",
                ms(ours_delete[i - runs]),
                ms(upstream_again[i - runs])
            );
        }
        let in_order = |v: &[Duration]| v.iter().map(|d| ms(*d)).collect::<Vec<_>>();
        let runs_ms = serde_json::json!({
            "resize_guard": in_order(&ours), "kube_scheduler_alpha": in_order(&upstream),
            "resize_guard_best_effort": in_order(&ours_delete),
            "kube_scheduler_alpha_again": in_order(&upstream_again),
        });
        ours_delete.sort();
        upstream_again.sort();
        let (d50, d99) = (percentile(&ours_delete, 0.5), percentile(&ours_delete, 0.99));
        let (a50, a99) = (percentile(&upstream_again, 0.5), percentile(&upstream_again, 0.99));
        controller.stop().await;
        ours.sort();
        upstream.sort();
        let (o50, o99, u50, u99) = (
            percentile(&ours, 0.5),
            percentile(&ours, 0.99),
            percentile(&upstream, 0.5),
            percentile(&upstream, 0.99),
        );
        println!("\nDeferred condition → all victims terminating, field test, {runs} runs each");
        println!("{:<44} {:>9} {:>9}", "", "p50 ms", "p99 ms");
        for (name, p50, p99) in [
            ("resize-guard (pdb: respect, Eviction API)", o50, o99),
            ("kube-scheduler v1.37.2 (alpha gate)", u50, u99),
            ("resize-guard (pdb: bestEffort, DELETE)", d50, d99),
            ("kube-scheduler v1.37.2, interleaved again", a50, a99),
        ] {
            println!("{name:<44} {:>9.1} {:>9.1}", ms(p50), ms(p99));
        }
        let r = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
        println!(
            "ratio resize-guard / upstream, each phase against its own interleaved upstream runs: respect p50 {:.2}x p99 {:.2}x; bestEffort p50 {:.2}x p99 {:.2}x",
            r(o50, u50),
            r(o99, u99),
            r(d50, a50),
            r(d99, a99)
        );
        write_summary(
            "preemption_latency",
            &serde_json::json!({
                "runs": runs,
                "runs_ms_in_order": runs_ms,
                "resize_guard": {"p50_ms": ms(o50), "p99_ms": ms(o99)},
                "resize_guard_best_effort": {"p50_ms": ms(d50), "p99_ms": ms(d99)},
                "kube_scheduler_alpha": {"p50_ms": ms(u50), "p99_ms": ms(u99)},
                "kube_scheduler_alpha_again": {"p50_ms": ms(a50), "p99_ms": ms(a99)},
                "ratio_p50": o50.as_secs_f64() / u50.as_secs_f64(),
                "ratio_p99": o99.as_secs_f64() / u99.as_secs_f64(),
                "rows": rows_json(&[Row::new(
                    &format!("Deferred condition → all victims terminating (field test, {runs} runs each, one run)"),
                    "`make bench` (`preemption_latency`; `RESIZE_GUARD_BENCH_RUNS`)",
                )
                .percentiles(
                    &format!("{:.1} ms (upstream {:.1})", ms(o50), ms(u50)),
                    &format!("{:.1} ms (upstream {:.1})", ms(o99), ms(u99)),
                )
                .other(&format!(
                    "resize-guard with the Eviction API {:.2}× upstream at p50, {:.2}× at p99; with `pdb: bestEffort` (plain DELETE like upstream) {:.1} / {:.1} ms, {:.2}× / {:.2}× upstream's {:.1} / {:.1} ms interleaved with it",
                    r(o50, u50), r(o99, u99), ms(d50), ms(d99), r(d50, a50), r(d99, a99), ms(a50), ms(a99)
                ))]),
                "goals": report_goals(&[
                    Goal::at_most(
                        "Deferred → victims terminating, resize-guard with pdb: bestEffort (DELETE, as kube-scheduler) p50 as a multiple of kube-scheduler v1.37.2 alpha's, runs interleaved",
                        r(d50, a50), 1.0, "×",
                    )
                    .with_detail(&format!("{:.1} vs {:.1} ms, {runs} runs each", ms(d50), ms(a50))),
                    Goal::at_most(
                        "Deferred → victims terminating p99, resize-guard with the Eviction API",
                        ms(o99), 250.0, "ms",
                    ),
                ]),
            }),
        );
    });
}
