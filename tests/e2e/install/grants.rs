//! A policy that needs a grant `deploy/` leaves out, against a real kube-apiserver v1.37.2 with a
//! hollow node: `preemption.pdb: bestEffort` on `kubectl apply -k deploy/` alone (no
//! `deploy/components/best-effort-deletes`) is refused by RBAC when the controller deletes its
//! victim; the controller deletes nothing, says so (a `WriteForbidden` Warning Event on the
//! resizing pod naming the missing grant, `resize_guard_preemptions_total{outcome="forbidden"}`)
//! and, once the component is applied, makes room as it should.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::controller as support;

use std::time::Duration;

use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::install::{
    Install, http_get, install, policy_has, set_policy, wait_ready,
};
use resize_guard_harness::objects::{allocated_cpu, wait_pod};
use resize_guard_harness::text::assert_contains_all;

const T: Duration = Duration::from_secs(30);

#[tokio::test]
async fn best_effort_without_the_delete_grant_deletes_nothing_and_says_which_grant_is_missing() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    install(env, &Install::default()).await;
    let controller = support::start_unready(env, "e2e-grants").await;
    wait_ready(controller.health_port, &controller.process, T).await;
    set_policy(
        env,
        "mode: enforce\npreemption:\n  enabled: true\n  pdb: bestEffort\n",
    )
    .await;
    controller
        .wait_policy(|p| policy_has(p, "pdb: bestEffort"))
        .await;
    controller.wait_leading().await;

    let (ns, _node, pods) = env.field_test("grants").await;
    support::resize_pending_on(env, &pods, &ns, "app", "550m").await;
    let said = support::wait_event_for(env, &ns, "WriteForbidden", "app").await;
    let note = &said.iter().find(|e| e.0 == "app").unwrap().1;
    assert_contains_all(
        note,
        &[
            "forbade preempting",
            "cannot delete resource \"pods\"",
            "deploy/components/best-effort-deletes",
            "rbac.controller.deletePods",
        ],
    );
    let metrics = http_get(controller.health_port, "/metrics").await.unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("resize_guard_preemptions_total{outcome=\"forbidden\"}")),
        "{metrics}"
    );
    assert!(
        controller.process.log_tail(200_000).contains("Forbidden"),
        "the reconcile log names the refusal"
    );
    // Refused, the victim stays (marked DisruptionTarget, never deleted) and the resize waits.
    let filler = pods.get("filler").await.unwrap();
    assert!(filler.metadata.deletion_timestamp.is_none());
    assert_eq!(
        allocated_cpu(&pods.get("app").await.unwrap()).as_deref(),
        Some("250m")
    );

    // The grant installed (deploy/ plus the component): the next retry deletes the filler and
    // the kubelet admits the resize.
    install(
        env,
        &Install {
            with_policy_grants: true,
            ..Default::default()
        },
    )
    .await;
    wait_pod(&pods, "app", Duration::from_secs(60), |p| {
        allocated_cpu(p).as_deref() == Some("550m")
    })
    .await
    .unwrap();
    support::wait_event_for(env, &ns, "Preempted", "filler").await;
}
