//! The webhook keeps answering while kube-apiserver restarts: its watches break and resume, and
//! decisions afterwards still see the cluster (including pods created while it was down).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::webhook as support;

use std::time::Duration;

use resize_guard_harness::admission::Webhooks;
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::objects::*;

#[tokio::test]
async fn the_webhook_answers_after_the_api_server_restarts_its_watches() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let mut hook = support::start(env, Webhooks::Mutating).await;
    env.cp.restart_apiserver().unwrap();
    assert!(
        hook.health("/livez").await.is_ok(),
        "the webhook survived the restart"
    );
    // State created after the restart must reach the webhook's cache through the new watches.
    let (ns, node, _) = support::field_test(env, "restart").await;
    let k = env.kubectl();
    let expected = format!("resize-guard: node {node} lacks cpu 120m");
    let mut out = k.resize(&ns, "app", &cpu_resize("550m")).await.unwrap();
    for _ in 0..100 {
        if out.stderr.contains(&expected) {
            break;
        }
        // Revert and retry until the webhook's watches have caught up.
        tokio::time::sleep(Duration::from_millis(100)).await;
        k.resize(&ns, "app", &cpu_resize("250m")).await.unwrap();
        out = k.resize(&ns, "app", &cpu_resize("550m")).await.unwrap();
    }
    assert!(
        out.success && out.stderr.contains(&expected),
        "{}\n{}",
        out.stderr,
        hook.process.log_tail(3000)
    );
    let out = k.resize(&ns, "app", &cpu_resize("2430m")).await.unwrap();
    assert!(
        out.stderr.contains("mutate.resize-guard.io"),
        "{}",
        out.stderr
    );

    // SIGTERM: stop being ready, drain in-flight reviews, exit.
    std::process::Command::new("kill")
        .args(["-TERM", &hook.process.pid().to_string()])
        .status()
        .unwrap();
    for _ in 0..100 {
        if !hook.process.is_running() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!hook.process.is_running(), "exited after SIGTERM");
    let log = hook.process.log_tail(4000);
    assert!(
        log.contains("draining in-flight reviews") && log.contains("stopped"),
        "{log}"
    );
}
