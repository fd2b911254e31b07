//! VPA's whole loop with no hand-written status, end to end: a real kube-apiserver,
//! kube-scheduler and kube-controller-manager v1.37.2, a hollow node whose upstream kubelet
//! serves its API, upstream metrics-server v0.8.0 scraping it, and VPA v1.6.0's recommender,
//! updater and admission controller with the shortest intervals VPA supports
//! (`resize_guard_harness::vpa::intervals`, `VpaIntervals::Shortest`). Usage is set on the node;
//! everything after that — PodMetrics, the recommendation, the in-place resize, the kubelet's
//! answer, VPA's fall-back — is upstream's code (`resize_guard_harness::vpa::usage_loop`).
//!
//! Played in one test, in order:
//! 1. the memory wall without resize-guard: `maxAllowed.memory` below the working set, so the
//!    recommender's capped target is a memory limit below usage; the API server admits the
//!    resize, the kubelet refuses it (`PodResizeInProgress` `Error`, "cannot decrease memory
//!    limits"), and the updater evicts the pod on its next loop;
//! 2. resize-guard installed (webhook binary, `deploy/`), then at the same time: the memory wall
//!    again — refused at admission with the working set and the limit, `ResizeRejected`, and the
//!    updater evicts at once — and wall 3, the loop's lag: usage rises and the pod is resized in
//!    place (same UID, no restart), then usage drops and the pod shrinks in place.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::webhook as support;

use std::time::Duration;

use resize_guard_harness::admission::Webhooks;
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::hollow_node::parse_milli;
use resize_guard_harness::metrics_server::MetricsServer;
use resize_guard_harness::vpa::usage_loop::{LoopOutcome, MemoryWall, memory_wall, wall3};
use resize_guard_harness::vpa::{Recommender, Vpa, VpaIntervals, VpaOptions};

/// Per wall / per usage step: the Shortest preset needs well under a minute for each.
const T: Duration = Duration::from_secs(180);

/// Prints the recommender's log tail when the test panics.
struct RecommenderLogs<'a>(&'a Recommender);

impl Drop for RecommenderLogs<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.0.dump_log());
        }
    }
}

fn mib(q: &str) -> i128 {
    parse_milli(q).unwrap() / 1000 / (1 << 20)
}

fn print_wall(walls: &[&MemoryWall]) {
    println!(
        "\n| run | target (uncapped) | refused by | VPA | replacement |\n|---|---|---|---|---|"
    );
    for w in walls {
        println!("{}", w.row());
    }
    for w in walls {
        println!(
            "\n--- memory wall {} (pod {}/{})",
            w.run, w.namespace, w.pod
        );
        println!("  PodResizeInProgress: {:?}", w.in_progress);
        for (reason, message) in &w.events {
            println!("  event {reason}: {message}");
        }
        for l in &w.fallbacks {
            println!("  updater: {l}");
        }
    }
}

fn print_loop(l: &LoopOutcome) {
    println!(
        "\nwall 3 (Shortest preset, namespace {}), seconds from the usage change:\n\
         | step | PodMetrics | recommendation | PATCHed | applied by kubelet |\n|---|---|---|---|---|",
        l.namespace
    );
    for s in &l.steps {
        println!("{}", s.row());
    }
    for s in &l.steps {
        println!(
            "  {}: recommendation {:?}; stopped at {:?}",
            s.label, s.recommendation, s.stopped_at
        );
    }
    for (reason, object, message) in &l.events {
        println!("  event {reason} {object}: {message}");
    }
}

fn assert_capped_by_the_recommender(w: &MemoryWall) {
    let r = w.recommendation.as_ref().expect("a recommendation");
    assert_eq!(r.target.1, "128Mi", "capped at maxAllowed: {r:?}");
    assert!(
        mib(&r.uncapped.1) >= 200,
        "the estimate is above usage: {r:?}"
    );
    assert!(
        r.status_writers
            .iter()
            .any(|m| m.starts_with("vpa-recommender")),
        "status written by the recommender: {r:?}"
    );
    assert!(w.event("EvictedByVPA").is_some(), "{:?}", w.events);
    let (_, memory) = w.replacement.as_ref().expect("a replacement pod");
    assert_eq!(
        memory, "128Mi",
        "VPA's admission controller starts it capped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vpa_recommends_from_usage_and_resizes_in_place_and_resize_guard_refuses_shrinking_below_usage()
 {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    env.cp.start_workload_controllers().unwrap();
    let _metrics = MetricsServer::start(&env.cp).await.unwrap();
    let vpa = Vpa::start(&env.cp, VpaOptions::with_intervals(VpaIntervals::Shortest))
        .await
        .unwrap();
    let _vg = vpa.guard();
    let rec = Recommender::start(&env.cp, VpaIntervals::Shortest, &[])
        .await
        .unwrap();
    let _rg = RecommenderLogs(&rec);

    // 1. The memory wall without resize-guard.
    let without = memory_wall(env, &vpa, "without resize-guard", T)
        .await
        .unwrap();

    // 2. With resize-guard: the memory wall again, and wall 3.
    let _hook = support::start(env, Webhooks::Mutating).await;
    let (with, lag) = tokio::join!(
        memory_wall(env, &vpa, "with resize-guard", T),
        wall3(env, &vpa, 1, true, T)
    );
    let (with, lag) = (with.unwrap(), lag.unwrap());
    print_wall(&[&without, &with]);
    print_loop(&lag);

    // Without: the API server admits the shrink, the kubelet refuses it, the updater evicts.
    assert_capped_by_the_recommender(&without);
    assert!(
        without.event("InPlaceResizedByVPA").is_some(),
        "{:?}",
        without.events
    );
    assert!(
        without
            .in_progress
            .iter()
            .any(|(reason, message)| reason == "Error"
                && message.contains("cannot decrease memory limits")),
        "PodResizeInProgress Error: {:?}",
        without.in_progress
    );
    let kubelet = without
        .event("ResizeError")
        .expect("the kubelet's ResizeError event");
    assert!(
        kubelet.contains("cannot decrease memory limits"),
        "{kubelet}"
    );
    assert!(
        without
            .fallbacks
            .iter()
            .any(|l| l.contains("In-place update error, falling back to eviction")),
        "{:?}",
        without.fallbacks
    );
    assert!(without.event("ResizeRejected").is_none());

    // With: refused at admission with the numbers; the updater falls back to eviction at once.
    assert_capped_by_the_recommender(&with);
    let refused = with.event("ResizeRejected").expect("resize-guard's event");
    for part in [
        "this resize lowers a memory limit below what is in use",
        "memory limit 256Mi → 128Mi, working set 200Mi",
    ] {
        assert!(refused.contains(part), "{part}\n{refused}");
    }
    assert!(
        with.fallbacks.iter().any(|l| l
            .contains("In-place resize failed, falling back to eviction")
            && l.contains("resize-guard: this resize lowers a memory limit below what is in use")),
        "{:?}",
        with.fallbacks
    );
    assert!(with.in_progress.is_empty(), "{:?}", with.in_progress);
    assert!(with.event("ResizeError").is_none() && with.event("InPlaceResizedByVPA").is_none());

    // Wall 3: every step carried through to the kubelet, in place, by the recommender's numbers.
    for s in &lag.steps {
        assert!(
            s.applied.is_some(),
            "{} stopped at {:?}",
            s.label,
            s.stopped_at
        );
        let r = s.recommendation.as_ref().unwrap();
        assert!(
            r.status_writers
                .iter()
                .any(|m| m.starts_with("vpa-recommender")),
            "{r:?}"
        );
    }
    assert_eq!(lag.steps.len(), 3, "settle, rise, drop");
    assert!(lag.same_pods, "resized in place, never replaced");
    assert_eq!(lag.restarts, 0);
}
