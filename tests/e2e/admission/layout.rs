//! One webhook call per resize, pinned on a real kube-apiserver v1.37.2: with `deploy/` as
//! shipped (the MutatingWebhookConfiguration alone) and with
//! `deploy/overlays/validating-only`, every kind of resize — a QoS change, an Infeasible one, a
//! Deferred one, one that fits — costs exactly one review, counted by the webhook process itself
//! (`resize_guard_admission_reviews_total`, whose `webhook` label is the stage that answered);
//! none where the API server refuses a resize before validating webhooks run (a QoS change, and
//! on v1.36+ an Infeasible one, in the validating-only layout).
//! The answers themselves (messages, warnings, audit annotations, Events) are pinned in
//! `admission/basics.rs` and `admission/validating_only.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::webhook as support;

use std::collections::BTreeMap;

use resize_guard_harness::admission::{Webhooks, remove};
use resize_guard_harness::env::{Env, EnvOptions, shared};
use resize_guard_harness::objects::cpu_resize;

/// Reviews answered so far, by stage (`mutate`, `validate`).
async fn reviews(hook: &support::Webhook) -> BTreeMap<String, u64> {
    let text = hook.health("/metrics").await.unwrap();
    let mut by_stage = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("resize_guard_admission_reviews_total{webhook=\"")
        else {
            continue;
        };
        let (stage, _) = rest.split_once('"').unwrap();
        let (_, n) = line.rsplit_once(' ').unwrap();
        *by_stage.entry(stage.to_owned()).or_default() += n.parse::<f64>().unwrap() as u64;
    }
    by_stage
}

/// Sends each resize as a dry run (admission runs in full; nothing is stored, so no kubelet
/// status write can make the API server retry the patch and call admission again) and asserts
/// that each cost `calls` (QoS change, Infeasible, Deferred, fits) reviews, by `stage`.
async fn count_calls(env: &Env, hook: &support::Webhook, ns: &str, stage: &str, calls: [u64; 4]) {
    let requests_only =
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"500m"}}}]}}"#;
    let resizes = [
        ("qos change", requests_only.to_owned(), "qos"),
        ("infeasible", cpu_resize("2430m"), "2430"),
        ("deferred", cpu_resize("550m"), "deferred"),
        ("fits", cpu_resize("300m"), ""),
    ];
    for ((what, patch, stderr_has), calls) in resizes.into_iter().zip(calls) {
        let before = reviews(hook).await;
        let out = env
            .kubectl()
            .resize_dry_run(ns, "app", &patch)
            .await
            .unwrap();
        assert!(
            out.stderr.to_lowercase().contains(stderr_has),
            "{what}: {}",
            out.stderr
        );
        let after = reviews(hook).await;
        let mut added = after.clone();
        for (k, n) in &before {
            *added.get_mut(k).unwrap() -= n;
        }
        added.retain(|_, n| *n > 0);
        let expected = match calls {
            0 => BTreeMap::new(),
            n => BTreeMap::from([(stage.to_owned(), n)]),
        };
        assert_eq!(
            added, expected,
            "{what}: {calls} {stage} review(s) ({before:?} -> {after:?})"
        );
    }
}

#[tokio::test]
async fn every_resize_costs_one_webhook_call_in_either_layout() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();

    let hook = support::start(env, Webhooks::Mutating).await;
    let (ns, _, _) = support::field_test(env, "layout").await;
    count_calls(env, &hook, &ns, "mutate", [1, 1, 1, 1]).await;
    drop(hook);

    remove(&env.client().await).await.unwrap();
    let hook = support::start(env, Webhooks::ValidatingOnly).await;
    let (ns, _, _) = support::field_test(env, "layout-v").await;
    // v1.37.2: built-in validation refuses the QoS change, and the capacity check
    // (`PodResizeValidator`, cause NodeCapacity) the Infeasible one, before validating webhooks.
    count_calls(env, &hook, &ns, "validate", [0, 0, 1, 1]).await;
}
