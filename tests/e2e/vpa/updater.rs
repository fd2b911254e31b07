//! resize-guard's main client, end to end: the real Vertical Pod Autoscaler v1.6.0 updater and
//! admission-controller (`resize_guard_harness::vpa`) in `InPlaceOrRecreate` mode against a real
//! kube-apiserver, kube-scheduler and kube-controller-manager v1.37.2 with hollow nodes
//! (upstream's kubelet). The recommender does not run here: each wall needs an exact
//! recommendation (target and bounds picked so the updater acts at once), so the test writes each
//! VPA's `status.recommendation` in its place; everything downstream of it is VPA's own code. The
//! loop with the real recommender reading metrics-server — wall 3 (usage change to applied
//! resize) and the memory wall (`maxAllowed` below usage) — is `e2e_vpa_loop.rs`.
//!
//! Every wall of the field report (`resize_guard_harness::vpa_field`) is played twice in this one
//! test: first without resize-guard, then with it installed from `deploy/` (webhook binary plus
//! the controller, each as its ServiceAccount) — on fresh nodes and namespaces each time. The QoS
//! wall is played with `qos.onChange: reject` (as shipped) and then `repair`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::webhook as support;

use std::time::Duration;

use resize_guard_harness::admission::{Webhooks, wait_active};
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::vpa::{Vpa, VpaOptions};
use resize_guard_harness::vpa_field::{Outcome, Scenario, run};

/// VPA's fixed fall-back for a Deferred resize
/// (`pkg/updater/restriction/pods_inplace_restriction.go`, `DeferredResizeUpdateTimeout`).
const VPA_DEFERRED_TIMEOUT: Duration = Duration::from_secs(300);

async fn play(env: &Env, vpa: &Vpa, scenarios: &[Scenario], label: &str) -> Vec<Outcome> {
    let runs = scenarios.iter().map(|s| run(env, vpa, s, label));
    futures::future::join_all(runs)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect()
}

fn report(outcomes: &[&Outcome]) {
    println!("\n{}", Outcome::header());
    for o in outcomes {
        println!("{}", o.row());
    }
    for o in outcomes {
        println!(
            "\n--- {} / {} (namespace {})",
            o.scenario, o.run, o.namespace
        );
        for p in &o.pods {
            println!(
                "  pod {} original={} phase={} cpu={:?} allocated={:?} qos={} restarts={} {}",
                p.name,
                p.original,
                p.phase,
                p.cpu,
                p.allocated,
                p.qos,
                p.restarts,
                p.unschedulable.as_deref().unwrap_or("")
            );
        }
        for e in &o.events {
            println!("  event {} {}: {}", e.reason, e.object, e.message);
        }
        for l in &o.fallbacks {
            println!("  updater: {l}");
        }
    }
}

fn by_name<'a>(outcomes: &'a [Outcome], name: &str) -> &'a Outcome {
    outcomes.iter().find(|o| o.scenario == name).unwrap()
}

/// Waits until the webhook answers with `qos.onChange: repair` (a dry-run requests-only resize
/// of the canary pod is repaired instead of refused).
async fn wait_repair_policy(env: &Env) {
    let k = env.kubectl();
    wait_active(Duration::from_secs(30), || async {
        let patch =
            r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"90m"}}}]}}"#;
        k.resize_dry_run("resize-guard-canary", "canary", patch)
            .await
            .is_ok_and(|o| o.success)
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vpa_updater_resizes_in_place_with_resize_guard_where_it_evicted_without() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    env.cp.start_workload_controllers().unwrap();
    let vpa = Vpa::start(&env.cp, VpaOptions::default()).await.unwrap();
    let _vg = vpa.guard();

    // 1. Without resize-guard.
    let without = play(env, &vpa, &Scenario::all(), "without resize-guard").await;

    // 2. With resize-guard installed from deploy/ (qos.onChange: reject, as shipped).
    let _hook = support::start(env, Webhooks::Mutating).await;
    // The test webhook serves a test certificate (support::start): the controller leaves the
    // certificates alone.
    let controller = support::controller(env, "vpa-e2e", &["--certificates=external"]).await;
    let mut with = play(env, &vpa, &Scenario::all(), "with resize-guard").await;

    // 3. The QoS wall again with qos.onChange: repair.
    support::set_policy(env, "mode: enforce\nqos:\n  onChange: repair\n").await;
    wait_repair_policy(env).await;
    let mut repaired = play(env, &vpa, &[Scenario::qos()], "with resize-guard, repair").await;
    controller.stop().await;

    // The Events the assertions below count, each waited for: an Event trails what it reports.
    for o in &mut with {
        match o.scenario {
            "qos" | "infeasible" => o.await_events(env, "ResizeRejected", 2).await.unwrap(),
            "deferred" => o.await_events(env, "PreemptingForResize", 1).await.unwrap(),
            _ => {}
        }
    }
    for reason in ["ResizeRepaired", "InPlaceResizedByVPA"] {
        repaired[0].await_events(env, reason, 2).await.unwrap();
    }

    let all: Vec<&Outcome> = without.iter().chain(&with).chain(&repaired).collect();
    report(&all);
    for o in &all {
        assert!(o.settled, "{} / {} did not settle", o.scenario, o.run);
    }

    // QoS: upstream refuses the requests-only decrease of a Guaranteed pod; VPA evicts both and
    // its admission-controller recreates them Burstable (requests 250m, limits still 500m).
    let (qos_up, qos_rg, qos_fix) = (
        by_name(&without, "qos"),
        by_name(&with, "qos"),
        &repaired[0],
    );
    for o in [qos_up, qos_rg] {
        assert_eq!((o.attempted, o.evicted, o.in_place), (2, 2, 0), "{}", o.run);
        for p in &o.pods {
            assert!(!p.original, "{}: {p:?}", o.run);
            assert_eq!(p.qos, "Burstable", "{}: {p:?}", o.run);
            assert_eq!(p.cpu, (Some("250m".into()), Some("500m".into())));
        }
    }
    assert!(
        qos_up
            .fallbacks
            .iter()
            .any(|l| l.contains("Pod QOS Class may not change")),
        "VPA logs the API server's own refusal: {:?}",
        qos_up.fallbacks
    );
    // With reject, the same fall-back, but each pod's events say why and how to keep it.
    let rejected = qos_rg.events_with("ResizeRejected");
    assert_eq!(rejected.len(), 2, "{:?}", qos_rg.events);
    assert!(
        rejected
            .iter()
            .all(|e| e.message.contains("Guaranteed") && e.message.contains("qos.onChange: repair")),
        "{rejected:?}"
    );
    assert!(qos_up.events_with("ResizeRejected").is_empty());
    // With repair: both resized in place, still Guaranteed (limits follow requests).
    assert_eq!((qos_fix.evicted, qos_fix.in_place), (0, 2));
    for p in &qos_fix.pods {
        assert!(p.original && p.restarts == 0, "{p:?}");
        assert_eq!(p.qos, "Guaranteed");
        assert_eq!(p.cpu, (Some("250m".into()), Some("250m".into())));
    }
    assert_eq!(qos_fix.events_with("ResizeRepaired").len(), 2);
    assert_eq!(qos_fix.events_with("InPlaceResizedByVPA").len(), 2);

    // Deferred: without resize-guard the resize waits VPA's 5 minutes, then VPA evicts and the
    // scheduler preempts for the replacement; with it, the victims go at once and both replicas
    // grow in place.
    let (def_up, def_rg) = (by_name(&without, "deferred"), by_name(&with, "deferred"));
    assert!(def_up.evicted >= 1, "{:?}", def_up.events);
    assert!(
        def_up
            .fallbacks
            .iter()
            .any(|l| l.contains("In-place update deferred for more than 5m0s")),
        "{:?}",
        def_up.fallbacks
    );
    assert!(
        def_up.first_eviction_after.unwrap() >= VPA_DEFERRED_TIMEOUT,
        "VPA waits {VPA_DEFERRED_TIMEOUT:?} before evicting a Deferred pod: {:?}",
        def_up.first_eviction_after
    );
    assert_eq!(
        (def_rg.evicted, def_rg.in_place),
        (0, 2),
        "{:?}",
        def_rg.events
    );
    assert!(!def_rg.events_with("PreemptingForResize").is_empty());
    assert_eq!(
        def_rg.victims, 1,
        "one 700m low pod frees the 200m: {:?}",
        def_rg.events
    );
    assert!(def_rg.pods.iter().all(|p| p.original && p.restarts == 0));

    // Infeasible: both ways VPA evicts one replica and its replacement can never be scheduled;
    // with resize-guard the refusal VPA gets (and the pod's event) explains it first.
    let (inf_up, inf_rg) = (
        by_name(&without, "infeasible"),
        by_name(&with, "infeasible"),
    );
    for o in [inf_up, inf_rg] {
        assert_eq!(
            (o.attempted, o.evicted),
            (2, 1),
            "{}: {:?}",
            o.run,
            o.events
        );
        assert!(
            o.pods.iter().any(|p| p.unschedulable.is_some()),
            "{}",
            o.run
        );
    }
    assert!(
        inf_up
            .fallbacks
            .iter()
            .any(|l| l.contains("node didn't have enough allocatable resources")),
        "v1.37's own capacity refusal: {:?}",
        inf_up.fallbacks
    );
    assert_eq!(
        inf_rg.events_with("ResizeRejected").len(),
        2,
        "{:?}",
        inf_rg.events
    );
    assert!(
        inf_rg
            .fallbacks
            .iter()
            .any(|l| l.contains("resize-guard: this resize can never fit")),
        "{:?}",
        inf_rg.fallbacks
    );

    // Many: with resize-guard every replica grows in place.
    let (many_up, many_rg) = (by_name(&without, "many"), by_name(&with, "many"));
    assert!(many_up.evicted >= 1, "{:?}", many_up.events);
    assert_eq!(many_rg.evicted, 0, "{:?}", many_rg.events);
    assert_eq!(many_rg.in_place, 20);
    assert!(
        many_rg.victims <= 2,
        "one low pod per full node: {:?}",
        many_rg.events
    );
    assert!(many_rg.in_place_rate() > many_up.in_place_rate());
}
