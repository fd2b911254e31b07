//! The memory rule end to end on a real kube-apiserver v1.37.2, a hollow node whose upstream
//! kubelet serves its API, and upstream metrics-server v0.8.0 scraping it: a memory limit lowered
//! below the container's working set plus the headroom is refused with the numbers, one above it
//! is admitted and applied by the kubelet, a resize that lowers no memory limit never reads
//! `metrics.k8s.io`, and with metrics-server down the resize is admitted with a warning saying
//! the rule did not judge it. Also reports what the usage read adds to a review.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::events_saying;
use crate::scenario::run_guaranteed;
use crate::scenario::webhook as support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use resize_guard_harness::admission::Webhooks;
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::objects::*;
use resize_guard_policy::usage::PodUsage;
use serde_json::json;

const T: Duration = Duration::from_secs(60);

fn memory_patch(memory: &str) -> String {
    json!({"spec": {"containers": [{"name": "app", "resources": {
        "requests": {"memory": memory}, "limits": {"memory": memory}}}]}})
    .to_string()
}

/// `resize_guard_usage_lookups_total{result}` and the reviews answered, from `/metrics`.
async fn counters(hook: &support::Webhook) -> (u64, u64, u64) {
    let text = hook.health("/metrics").await.unwrap();
    let sum = |prefix: &str| -> u64 {
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    (
        sum("resize_guard_usage_lookups_total{result=\"ok\"}"),
        sum("resize_guard_usage_lookups_total{"),
        sum("resize_guard_admission_reviews_total{"),
    )
}

fn applied_memory(p: &Pod) -> Option<String> {
    let s = p.status.as_ref()?.container_statuses.as_ref()?.first()?;
    let q = s.resources.as_ref()?.limits.as_ref()?.get("memory")?;
    Some(q.0.clone())
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// `n` server-side dry-run resizes with `patch(i)`, each timed (nothing is stored).
async fn dry_runs(pods: &Api<Pod>, n: usize, patch: impl Fn(usize) -> String) -> Vec<Duration> {
    let params = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let mut took = Vec::new();
    for i in 0..n {
        let body: serde_json::Value = serde_json::from_str(&patch(i)).unwrap();
        let sent = Instant::now();
        pods.patch_subresource("resize", "app", &params, &Patch::Strategic(body))
            .await
            .unwrap();
        took.push(sent.elapsed());
    }
    took
}

#[tokio::test]
async fn a_memory_limit_below_usage_is_refused_above_is_admitted_and_without_metrics_warned() {
    let env: &Env = shared(EnvOptions::default());
    let hook = support::start(env, Webhooks::Mutating).await;
    let (node_name, node, mut metrics) = crate::scenario::metered_node(env, "mem").await;
    let ns = env.namespace("mem").await;
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    run_guaranteed(&pods, "app", &node_name, "low", "250m", "256Mi").await;

    // The container holds 150Mi; metrics-server reports it after its scrapes.
    node.set_usage(&ns, "app", "app", "150Mi", "100m").unwrap();
    let set = Instant::now();
    metrics
        .wait_for_pod(&env.cp, &ns, "app", |m| {
            PodUsage::from_pod_metrics(m.to_string().as_bytes(), Timestamp::now())
                .is_ok_and(|u| u.containers.get("app") == Some(&(150 << 20)))
        })
        .await
        .unwrap();
    println!(
        "memory: usage set → served by metrics.k8s.io in {} ms",
        set.elapsed().as_millis()
    );
    let kubectl = env.kubectl();

    // Below usage: refused up front, with the numbers, a Warning Event and an audit annotation.
    let out = kubectl
        .resize(&ns, "app", &memory_patch("100Mi"))
        .await
        .unwrap();
    assert!(!out.success, "{}", out.stdout);
    for part in [
        r#"admission webhook "mutate.resize-guard.io" denied the request: resize-guard: this resize lowers a memory limit below what is in use"#,
        r#"container "app" memory limit 256Mi → 100Mi, working set 150Mi"#,
        "cannot decrease memory limits",
        "at least 165Mi",
    ] {
        assert!(out.stderr.contains(part), "{part}\n{}", out.stderr);
    }
    let stored = pods.get("app").await.unwrap();
    assert_eq!(
        stored.spec.unwrap().containers[0]
            .resources
            .as_ref()
            .unwrap()
            .limits
            .as_ref()
            .unwrap()["memory"]
            .0,
        "256Mi",
        "nothing stored"
    );
    events_saying(env, &ns, "app", &["ResizeRejected", "working set 150Mi"]).await;
    let audit = support::resize_audit(env, &ns, "app");
    let annotated = audit.iter().any(|e| {
        e["annotations"]["mutate.resize-guard.io/memory"]
            == "container \"app\" 256Mi->100Mi usage 150Mi needed 165Mi"
    });
    assert!(annotated, "{audit:#?}");

    // Above usage plus the headroom: admitted, and the kubelet applies it.
    let out = kubectl
        .resize(&ns, "app", &memory_patch("200Mi"))
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
    wait_pod(&pods, "app", T, |p| {
        applied_memory(p).as_deref() == Some("200Mi")
    })
    .await
    .unwrap();

    // A resize that lowers no memory limit never reads metrics.k8s.io: the review is answered
    // (the reviews counter moves) and the usage reads do not.
    let (ok_before, lookups_before, reviews_before) = counters(&hook).await;
    assert_eq!((ok_before, lookups_before), (2, 2), "one read per lowering");
    let out = kubectl
        .resize(&ns, "app", &cpu_resize("300m"))
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
    let (_, lookups_after, reviews_after) = counters(&hook).await;
    assert!(
        reviews_after > reviews_before,
        "the CPU resize was reviewed"
    );
    assert_eq!(lookups_after, lookups_before, "and read no usage");

    // What the read adds: dry-run resizes through the API server, lowering memory (one GET of
    // PodMetrics each) against raising CPU (none), interleaved in rounds.
    let (mut lowering, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        lowering.extend(dry_runs(&pods, 6, |i| memory_patch(&format!("{}Mi", 190 - i))).await);
        cpu.extend(dry_runs(&pods, 6, |i| cpu_resize(&format!("{}m", 310 + i))).await);
    }
    let (lower_p50, cpu_p50) = (p50(lowering), p50(cpu));
    println!(
        "memory: dry-run resize p50 through kube-apiserver: lowering memory (reads usage) {:.2} ms, cpu only {:.2} ms, difference {:.2} ms (30 each)",
        lower_p50.as_secs_f64() * 1e3,
        cpu_p50.as_secs_f64() * 1e3,
        (lower_p50.as_secs_f64() - cpu_p50.as_secs_f64()) * 1e3
    );

    // metrics-server down: admitted, with a warning and an annotation saying the rule did not
    // judge, never a denial.
    metrics.stop();
    let out = kubectl
        .resize(&ns, "app", &memory_patch("180Mi"))
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "Warning: resize-guard did not check the lowered memory limit against usage: metrics.k8s.io"
        ),
        "{}",
        out.stderr
    );
    let (ok_now, lookups_now, _) = counters(&hook).await;
    assert_eq!(ok_now, ok_before + 30, "the dry runs read usage");
    assert_eq!(
        lookups_now,
        lookups_before + 31,
        "and the down one is counted"
    );
    let audit = support::resize_audit(env, &ns, "app");
    let unjudged = audit.iter().any(|e| {
        e["annotations"]["mutate.resize-guard.io/memory"]
            .as_str()
            .is_some_and(|a| a.starts_with("unjudged: metrics.k8s.io"))
    });
    assert!(unjudged, "{audit:#?}");
    drop(node);
}
