//! resize-guard next to upstream kube-scheduler v1.37.2 with the alpha gate
//! `InPlacePodVerticalScalingSchedulerPreemption`, on hollow nodes (upstream's v1.37.2 kubelet):
//! (1) the KEP-5836 example run by upstream alone, for the victim-count comparison; (2) both
//! running at once on the field test — no double preemption, because terminating pods count as
//! space being freed.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::controller as support;

use std::time::Duration;

use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::objects::*;

const GATE: &str = "InPlacePodVerticalScalingSchedulerPreemption=true";
const T: Duration = Duration::from_secs(60);

#[tokio::test]
async fn upstream_alpha_over_preempts_and_coexists_with_resize_guard_without_double_preemption() {
    let env = shared(EnvOptions {
        feature_gates: vec![GATE.to_owned()],
    });
    let _g = env.guard();
    env.cp.start_scheduler(&[GATE]).unwrap();

    // 1. KEP-5836 example with upstream alone.
    let (_, _, pods) = env.kep_5836("kep5836-upstream").await;
    wait_pod(&pods, "h", T, |p| allocated_cpu(p).as_deref() == Some("2"))
        .await
        .unwrap();
    // Upstream over-preempts (KEP-5836): all three low pods, counted as they go.
    support::wait_preempted(&pods, &["l0", "l1", "l2", "m"], &["l0", "l1", "l2"], T).await;
    eprintln!(
        "upstream kube-scheduler victims for the KEP-5836 example: [\"l0\", \"l1\", \"l2\"] (resize-guard: [\"l2\"])"
    );
    let m = pods.get("m").await.unwrap();
    assert!(
        m.metadata.deletion_timestamp.is_none(),
        "M is never a victim"
    );

    // 2. Both at once on the field test, with a bystander that is never needed.
    let _controller = support::start(env, "coexist").await;
    let (ns, node, pods) = env
        .scenario(
            "coexist",
            ("t3-medium", "1930m", "3Gi"),
            &[
                ("bystander", "low", "100m", "64Mi"),
                ("filler", "low", "1400m", "256Mi"),
                ("app", "high", "250m", "256Mi"),
            ],
        )
        .await;
    env.resize_cpu(&ns, "app", "550m").await;
    // Both preemptors act only while the resize is Deferred and no victim is terminating. Once
    // it is admitted and the filler is gone, neither has anything left to act on.
    wait_pod(&pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("550m")
    })
    .await
    .unwrap();
    wait_gone(&pods, "filler", T).await.unwrap();
    // Proof that resize-guard had its chance after that: a later pod on the node deferred with
    // nothing below it to preempt, and resize-guard's answer on it (upstream, too, has no
    // strictly-lower-priority victim for it). 650m in use, so 1400m more is Deferred.
    support::controller_caught_up(env, &pods, &ns, &node, "1400m").await;
    assert_eq!(
        support::preempted(&pods, &["bystander", "filler", "marker"]).await,
        ["filler"],
        "one victim between the two preemptors"
    );
}
