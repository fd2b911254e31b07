//! With only the ValidatingWebhookConfiguration installed, policy denials are still enforced
//! (ARCHITECTURE.md, "webhook/"): a Deferred resize no preemption can resolve is denied under
//! `rejectStuckDeferred`, and an Infeasible one is still refused before it is stored.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::webhook as support;

use resize_guard_harness::admission::Webhooks;
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::objects::*;

#[tokio::test]
async fn the_validating_webhook_alone_enforces_infeasible_and_policy_denials() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    // The install brings deploy/'s policy; the test's own goes on after it.
    let _hook = support::start(env, Webhooks::ValidatingOnly).await;
    support::set_policy(
        env,
        "mode: enforce\nfeasibility:\n  rejectStuckDeferred: true\npreemption:\n  enabled: false\n",
    )
    .await;
    let (ns, node, pods) = support::field_test(env, "validating").await;
    let k = env.kubectl();

    // The policy reload is asynchronous: probe on dry run until the webhook enforces it.
    let resize = cpu_resize("550m");
    for _ in 0..100 {
        let out = k.resize_dry_run(&ns, "app", &resize).await.unwrap();
        if out.stderr.contains("validate.resize-guard.io") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let out = k.resize(&ns, "app", &resize).await.unwrap();
    assert!(!out.success);
    assert!(
        out.stderr.contains(
            r#"admission webhook "validate.resize-guard.io" denied the request: resize-guard: node"#
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("preemption is disabled by policy"),
        "{}",
        out.stderr
    );
    assert_eq!(pods.get("app").await.unwrap().metadata.generation, Some(1));

    // Infeasible: on v1.37 the API server's own capacity check (cause NodeCapacity) refuses it
    // before validating webhooks run, so without the mutating webhook users get the generic
    // message — which is why resize-guard also installs the mutating one. On v1.33–v1.35 the
    // validating webhook is what refuses it (covered by the in-process router tests).
    let out = k.resize(&ns, "app", &cpu_resize("2430m")).await.unwrap();
    assert!(!out.success);
    assert!(
        out.stderr.contains(
            "node didn't have enough allocatable resources: cpu, requested: 2430, allocatable: 1930"
        ),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr
            .contains(&format!("can never fit on node {node}")),
        "{}",
        out.stderr
    );
    assert_eq!(pods.get("app").await.unwrap().metadata.generation, Some(1));
}
