//! `kubectl resize-guard` on the memory wall, through the real `kubectl` v1.37.2 against a real
//! kube-apiserver, a hollow node whose upstream kubelet serves its API, upstream metrics-server
//! v0.8.0, and resize-guard installed from `deploy/`:
//! - `what-if --memory` below the container's working set: the webhook's dry-run refusal with the
//!   numbers, exit 1;
//! - with `memory.decrease.belowUsage: warn` the same resize goes through, the kubelet refuses to
//!   lower the limit (`PodResizeInProgress` `Error`), and `explain` judges the limit it has not
//!   applied against the usage it reads from `metrics.k8s.io` itself.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::run_guaranteed;

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::hollow_node::HollowNodeConfig;
use resize_guard_harness::install::{policy_has, set_policy, wait_policy};
use resize_guard_harness::installed::Installed;
use resize_guard_harness::metrics_server::{MetricsServer, container_usage};
use resize_guard_harness::objects::*;

const T: Duration = Duration::from_secs(60);

#[tokio::test]
async fn what_if_and_explain_judge_a_memory_decrease_against_usage() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let (installed, _) = Installed::start(&env.cp, &env.kubectl()).await.unwrap();
    let node = env.unique("mem");
    env.add_node(HollowNodeConfig::new(&node, 2, "4Gi").kubelet_api())
        .await;
    let mut metrics = MetricsServer::start(&env.cp).await.unwrap();
    let ns = env.namespace("mem").await;
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    run_guaranteed(&pods, "app", &node, "low", "250m", "256Mi").await;
    env.usage_file(&node)
        .set(&ns, "app", "app", "150Mi", "100m")
        .unwrap();
    metrics
        .wait_for_pod(&env.cp, &ns, "app", |m| {
            container_usage(m, "app")
                .is_some_and(|(_, memory)| memory == "150Mi" || memory == "153600Ki")
        })
        .await
        .unwrap();
    let plugin = PathBuf::from(crate::scenario::program("kubectl-resize_guard"))
        .parent()
        .unwrap()
        .to_path_buf();

    // what-if: the webhook's own dry-run answer, refused with the working set.
    let out = env
        .kubectl()
        .plugin(
            &plugin,
            [
                "resize-guard",
                "what-if",
                "app",
                "-n",
                &ns,
                "--memory",
                "100Mi",
            ],
        )
        .await
        .unwrap();
    assert!(!out.success, "refused: exit 1\n{}", out.stdout);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(
        text.contains(r#"container "app" memory limit 256Mi → 100Mi, working set 150Mi"#),
        "{text}"
    );

    // Warned instead of refused: the kubelet then refuses to lower the limit, and explain says
    // why from the usage it reads.
    set_policy(
        env,
        "mode: enforce\nmemory:\n  decrease:\n    belowUsage: warn\n",
    )
    .await;
    wait_policy(&installed.webhook, |l| policy_has(l, "belowUsage: warn")).await;
    let patch = r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"memory":"100Mi"},"limits":{"memory":"100Mi"}}}]}}"#;
    let out = env.kubectl().resize(&ns, "app", patch).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("Warning: resize-guard: memory limit below usage plus headroom"),
        "{}",
        out.stderr
    );
    wait_pod(&pods, "app", T, |p| {
        condition(p, "PodResizeInProgress").is_some_and(|(reason, message)| {
            reason == "Error" && message.contains("cannot decrease memory limits")
        })
    })
    .await
    .unwrap();
    let out = env
        .kubectl()
        .plugin(&plugin, ["resize-guard", "explain", "app", "-n", &ns])
        .await
        .unwrap();
    assert!(out.success, "{}", out.stderr);
    assert!(
        out.stdout.contains(
            r#"memory (below-usage): resize-guard: this resize lowers a memory limit below what is in use"#
        ) && out.stdout.contains(r#"container "app" memory limit 256Mi → 100Mi, working set 150Mi"#),
        "{}",
        out.stdout
    );
    set_policy(env, "mode: enforce\n").await;
}
