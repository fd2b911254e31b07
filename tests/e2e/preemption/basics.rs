//! The controller end to end on a real kube-apiserver v1.37.2 with hollow nodes (upstream's
//! v1.37.2 kubelet): it makes room for Deferred resizes with the fewest strictly-lower-priority
//! victims, never more, never the protected, never for a resize that can never fit, and says why
//! when it cannot.
//!
//! Timing: the kubelet retries Deferred resizes when a pod is removed or resized on the node; its
//! periodic retry (3 minutes) is never waited for.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::controller as support;
use crate::scenario::events_saying;
use crate::scenario::run_guaranteed;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use resize_guard_harness::env::{Env, EnvOptions, LogGuard, shared};
use resize_guard_harness::hollow_node::{HollowNode, HollowNodeConfig};
use resize_guard_harness::objects::*;
use serde_json::json;
use tokio::sync::OnceCell;

static CONTROLLER: OnceCell<support::Controller> = OnceCell::const_new();
const T: Duration = Duration::from_secs(30);
/// The field test's node and pods (`Env::field_test`), for tests that vary one of them.
const T3_MEDIUM: (&str, &str, &str) = ("t3-medium", "1930m", "3Gi");
const FILLER: (&str, &str, &str, &str) = ("filler", "low", "1500m", "256Mi");
const APP: (&str, &str, &str, &str) = ("app", "high", "250m", "256Mi");

/// The suite's environment with its controller leading, and the guard that prints the logs if
/// the test fails.
async fn setup() -> (&'static Env, LogGuard<'static>) {
    let env = shared(EnvOptions::default());
    support::leading(&CONTROLLER, env, "e2e-leader").await;
    (env, env.guard())
}

async fn deferred(pods: &Api<Pod>, env: &Env, ns: &str, name: &str, cpu: &str) {
    support::resize_pending_on(env, pods, ns, name, cpu).await;
}

/// Sets the policy to exclude `ns` (beside kube-system) or, `excluded` false, back to the
/// suite's (no exclusion of it), and waits until the controller runs with it.
async fn set_excluded(env: &Env, ns: &str, excluded: bool) {
    // The effective policy is logged as YAML: `namespaces: exclude:` one `- name` per line.
    let listed = |policy: &str| policy.lines().any(|l| l.trim() == format!("- {ns}"));
    let policy = if excluded {
        format!("mode: enforce\nnamespaces:\n  exclude: [kube-system, {ns}]\n")
    } else {
        "mode: enforce\n".to_owned()
    };
    resize_guard_harness::install::set_policy(env, &policy).await;
    let controller = CONTROLLER.get().unwrap();
    controller.wait_policy(|p| listed(p) == excluded).await;
}

/// Resizes `app` to 550m, waits until the kubelet holds it pending and for the
/// `ResizePreemptionFailed` Event the controller answers with; asserts its note names each of
/// `says`.
async fn preemption_failed(env: &Env, pods: &Api<Pod>, ns: &str, says: &[&str]) {
    deferred(pods, env, ns, "app", "550m").await;
    let failed = support::wait_event(env, ns, "ResizePreemptionFailed").await;
    for words in says {
        assert!(failed[0].1.contains(words), "{words:?} in {failed:?}");
    }
}

#[tokio::test]
async fn field_test_the_filler_is_preempted_and_the_resize_completes_in_place() {
    let (env, _g) = setup().await;
    let (ns, node, pods) = env.field_test("field").await;
    // The real kubelet finishes a graceful deletion quickly with its fake runtime, and the
    // resize may complete while the victim still terminates: watch the victim, don't poll it.
    let filler = support::History::start(&pods, "filler").await;
    env.try_resize_cpu(&ns, "app", "550m").await;

    // The Eviction API writes DisruptionTarget (EvictionByEvictionAPI); resize-guard's own
    // reason follows right after it, while the victim terminates.
    filler
        .wait(T, |p| {
            p.metadata.deletion_timestamp.is_some()
                && p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c.type_ == "DisruptionTarget"
                                && c.reason.as_deref() == Some("PreemptionByResizeGuard")
                        })
                    })
        })
        .await;
    let app = wait_pod(&pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("550m") && resize_pending(p).is_none()
    })
    .await
    .unwrap();
    assert_eq!(restart_count(&app), 0, "in place, no restart");
    let preempted = support::wait_event(env, &ns, "Preempted").await;
    assert_eq!(preempted[0].0, "filler");
    assert!(
        preempted[0].1.contains(&format!("{ns}/app")) && preempted[0].1.contains(&node),
        "{:?}",
        preempted
    );
    let preempting = support::wait_event(env, &ns, "PreemptingForResize").await;
    assert!(
        preempting[0]
            .1
            .contains(&format!("{ns}/filler (priority 100)")),
        "{:?}",
        preempting
    );
    // ResizeCompleted follows actuation asynchronously.
    events_saying(env, &ns, "app", &["PreemptingForResize", "ResizeCompleted"]).await;
    let metrics =
        resize_guard_harness::install::http_get(CONTROLLER.get().unwrap().health_port, "/metrics")
            .await
            .unwrap();
    assert!(metrics.contains("resize_guard_deferred_pods"), "{metrics}");
    assert!(
        metrics.contains("resize_guard_preemptions_total{outcome=\"started\"}"),
        "{metrics}"
    );
    // The plan annotation is cleared once the kubelet admitted the resize.
    let cleared = wait_pod(&pods, "app", T, |p| !support::has_plan(p)).await;
    assert!(cleared.is_ok(), "{cleared:?}");
}

#[tokio::test]
async fn never_preempts_equal_or_higher_priority_and_says_why() {
    let (env, _g) = setup().await;
    let (ns, _, pods) = env
        .scenario(
            "equal",
            T3_MEDIUM,
            &[("peer", "high", "1500m", "256Mi"), APP],
        )
        .await;
    preemption_failed(
        env,
        &pods,
        &ns,
        &["no pod on node", "priority below 1000000"],
    )
    .await;
    assert!(support::preempted(&pods, &["peer"]).await.is_empty());
}

#[tokio::test]
async fn a_preemptor_with_preemption_policy_never_gets_no_victims_and_an_event() {
    let (env, _g) = setup().await;
    env.priority_class("high-never", 1_000_000, true).await;
    let (ns, _, pods) = env
        .scenario(
            "never",
            T3_MEDIUM,
            &[FILLER, ("app", "high-never", "250m", "256Mi")],
        )
        .await;
    preemption_failed(env, &pods, &ns, &["preemptionPolicy: Never"]).await;
    assert!(support::preempted(&pods, &["filler"]).await.is_empty());
}

#[tokio::test]
async fn protected_pods_and_opted_out_nodes_are_respected() {
    let (env, _g) = setup().await;
    let (ns, node, pods) = env.scenario("protected", T3_MEDIUM, &[]).await;
    let mut guarded = guaranteed_pod("guarded", &node, "low", "1500m", "256Mi");
    guarded
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("resize-guard.io/protected".into(), "true".into());
    create_running(&pods, &guarded).await.unwrap();
    create_all(&pods, &node, &[APP]).await.unwrap();
    preemption_failed(env, &pods, &ns, &["protected by policy"]).await;

    // A node labelled resize-guard.io/preemption=disabled never gets victims.
    let ns2 = env.namespace("optout").await;
    let cfg = HollowNodeConfig::with_allocatable(&env.unique("opted-out"), "1930m", "3Gi")
        .unwrap()
        .label("resize-guard.io/preemption", "disabled");
    env.add_node(cfg.clone()).await;
    let pods2: Api<Pod> = Api::namespaced(env.client().await, &ns2);
    create_all(&pods2, &cfg.name, &[FILLER, APP]).await.unwrap();
    preemption_failed(env, &pods2, &ns2, &["resize-guard.io/preemption=disabled"]).await;
    assert!(support::preempted(&pods, &["guarded"]).await.is_empty());
    assert!(support::preempted(&pods2, &["filler"]).await.is_empty());
}

/// A pod with no controlling owner is gone for good once preempted: by default
/// (`preemption.allowBarePodVictims: false`) it is no victim, and the Event names the rule.
#[tokio::test]
async fn a_bare_pod_is_not_a_victim_by_default_and_the_event_names_the_rule() {
    let (env, _g) = setup().await;
    let (ns, node, pods) = env.scenario("bare", T3_MEDIUM, &[]).await;
    let (name, class, cpu, memory) = FILLER;
    let bare = guaranteed_pod(name, &node, class, cpu, memory);
    let created = create_running_as_is(&pods, &bare).await.unwrap();
    assert!(created.metadata.owner_references.is_none());
    create_all(&pods, &node, &[APP]).await.unwrap();
    preemption_failed(
        env,
        &pods,
        &ns,
        &["1 without a controlling owner (preemption.allowBarePodVictims)"],
    )
    .await;
    assert!(support::preempted(&pods, &["filler"]).await.is_empty());
}

/// `namespaces.exclude` means resize-guard leaves a namespace alone: its pods are no victims
/// either. The only pod that could make room is in an excluded namespace: nothing is evicted and
/// the preemptor's Event names the rule.
#[tokio::test]
async fn a_pod_in_an_excluded_namespace_is_not_a_victim_and_the_event_says_why() {
    let (env, _g) = setup().await;
    let (ns, node, pods) = env.scenario("tenant", T3_MEDIUM, &[]).await;
    let payments = env.namespace("payments").await;
    let payments_pods: Api<Pod> = Api::namespaced(env.client().await, &payments);
    create_all(&payments_pods, &node, &[FILLER]).await.unwrap();
    create_all(&pods, &node, &[APP]).await.unwrap();
    set_excluded(env, &payments, true).await;
    preemption_failed(
        env,
        &pods,
        &ns,
        &["1 in a namespace resize-guard leaves alone (namespaces.exclude)"],
    )
    .await;
    assert!(
        support::preempted(&payments_pods, &["filler"])
            .await
            .is_empty()
    );
    set_excluded(env, &payments, false).await;
}

/// RBAC grants the controller `patch pods` cluster-wide, for its plan annotation only; the
/// shipped ValidatingAdmissionPolicy `resize-guard-controller-pod-writes` makes kube-apiserver
/// refuse any other change it would make to a pod, while the same changes by anyone else, and
/// the annotation by the controller, go through.
#[tokio::test]
async fn the_controllers_pod_patches_reach_only_the_plan_annotation() {
    let (env, _g) = setup().await;
    let ns = env.namespace("confined").await;
    let admin: Api<Pod> = Api::namespaced(env.client().await, &ns);
    let controller: Api<Pod> = Api::namespaced(
        env.cp
            .client_as(resize_guard_harness::control_plane::Identity::Controller)
            .await
            .unwrap(),
        &ns,
    );
    crate::scenario::create_unbound(&admin, "app").await;
    let patch = |v: serde_json::Value| {
        let api = controller.clone();
        async move {
            api.patch("app", &PatchParams::default(), &Patch::Merge(&v))
                .await
        }
    };
    let refused = |r: Result<Pod, kube::Error>| match r {
        Err(kube::Error::Api(e)) => {
            e.code == 403 && e.message.contains("resize-guard-controller-pod-writes")
        }
        _ => false,
    };
    // The policy reaches kube-apiserver's admission through an informer: wait for its first
    // refusal, then every other answer is the policy's.
    let label = json!({"metadata": {"labels": {"tampered": "yes"}}});
    let deadline = std::time::Instant::now() + T;
    while !refused(patch(label.clone()).await) {
        assert!(
            std::time::Instant::now() < deadline,
            "the controller still changes labels"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (what, body) in [
        (
            "an annotation",
            json!({"metadata": {"annotations": {"other": "x"}}}),
        ),
        ("the spec", json!({"spec": {"activeDeadlineSeconds": 60}})),
        (
            "finalizers",
            json!({"metadata": {"finalizers": ["example.com/hold"]}}),
        ),
    ] {
        let r = patch(body).await;
        assert!(refused(r), "the controller changed {what}");
    }
    let plan = |v: serde_json::Value| json!({"metadata": {"annotations": {"resize-guard.io/preemption": v}}});
    patch(plan(json!("{}"))).await.unwrap();
    patch(plan(serde_json::Value::Null)).await.unwrap();
    admin
        .patch("app", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    let now = admin.get("app").await.unwrap();
    assert_eq!(
        now.metadata
            .labels
            .unwrap()
            .get("tampered")
            .map(String::as_str),
        Some("yes")
    );
    assert!(
        !now.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("resize-guard.io/preemption")
    );
}

#[tokio::test]
async fn a_pdb_protected_pod_is_not_evicted_and_another_victim_is_used() {
    let (env, _g) = setup().await;
    env.cp.start_controller_manager().unwrap();
    let ns = env.namespace("pdb").await;
    let node = env.node("t3-medium", "1930m", "3Gi").await;
    let client = env.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    // Two equally good victims; the younger one (normally preferred) is covered by a PDB.
    run_guaranteed(&pods, "older", &node, "low", "700m", "256Mi").await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let pods_on_node = [
        ("db", "low", "700m", "256Mi"),
        ("app", "high", "250m", "256Mi"),
    ];
    create_all(&pods, &node, &pods_on_node).await.unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    // The real disruption controller (kube-controller-manager) counts the one healthy db pod:
    // minAvailable 1 leaves 0 disruptions allowed.
    let counted = wait_pdb_counted(&pdbs, "db", 1, T).await.unwrap();
    assert_eq!(counted.status.unwrap().disruptions_allowed, Some(0));
    deferred(&pods, env, &ns, "app", "550m").await;
    // Terminating or already gone: the real kubelet finishes a graceful deletion quickly.
    support::wait_preempted(&pods, &["older", "db"], &["older"], T).await;
    wait_pod(&pods, "app", T, |p| {
        allocated_cpu(p).as_deref() == Some("550m")
    })
    .await
    .unwrap();
    // The controller's own account of the plan names the victims; its plan annotation is cleared
    // once it has seen the admission, so by then it has had every chance to take the db pod too.
    let preempting = support::wait_event(env, &ns, "PreemptingForResize").await;
    assert!(
        preempting[0].1.contains(&format!("{ns}/older"))
            && !preempting[0].1.contains(&format!("{ns}/db")),
        "{preempting:?}"
    );
    wait_pod(&pods, "app", T, |p| !support::has_plan(p))
        .await
        .unwrap();
    assert!(
        support::preempted(&pods, &["db"]).await.is_empty(),
        "the PDB-protected pod stays"
    );
}

/// KEP-5836's over-preemption example: H (high) grows 1000m→2000m on a 4-CPU node while M (mid,
/// `preemptionPolicy: Never`) is itself Deferred 1000m→2000m; three 500m low pods. The kubelet
/// needs one low pod gone for H; upstream's alpha scheduler counts M at its desired size and
/// preempts all three (`tests/e2e/upstream/alpha_preemption.rs` runs the same scenario there).
#[tokio::test]
async fn kep_5836_example_takes_one_victim() {
    let (env, _g) = setup().await;
    // M asks first (Deferred, 500m short); H asks next.
    let (ns, _node, pods) = env.kep_5836("kep5836").await;
    // H admitted: the kubelet retries pending resizes by priority when l2 goes
    // (allocation_manager.go sortPendingResizes).
    if let Err(e) = wait_pod(&pods, "h", T, |p| allocated_cpu(p).as_deref() == Some("2")).await {
        let ev = env
            .kubectl()
            .run([
                "get",
                "events",
                "-n",
                &ns,
                "-o",
                "custom-columns=OBJ:.involvedObject.name,REASON:.reason,MSG:.message",
            ])
            .await
            .unwrap();
        panic!("{e}\n{}", ev.stdout);
    }
    // resize-guard is done with H: its one-victim plan, recorded after the eviction and before
    // the PreemptingForResize Event, is cleared once the resize is admitted. M never preempts
    // (`preemptionPolicy: Never`) and says so.
    support::wait_event(env, &ns, "PreemptingForResize").await;
    wait_pod(&pods, "h", T, |p| !support::has_plan(p))
        .await
        .unwrap();
    let failed = support::wait_event(env, &ns, "ResizePreemptionFailed").await;
    assert!(
        failed
            .iter()
            .any(|e| e.0 == "m" && e.1.contains("preemptionPolicy: Never")),
        "{failed:?}"
    );
    let gone = support::preempted(&pods, &["l0", "l1", "l2", "m"]).await;
    eprintln!("resize-guard victims for the KEP-5836 example: {gone:?}");
    assert_eq!(gone, ["l2"], "exactly one victim, the youngest low pod");
    let m = pods.get("m").await.unwrap();
    assert_eq!(
        resize_pending(&m).map(|r| r.0).as_deref(),
        Some("Deferred"),
        "M still waits"
    );
}

// `feasibility.revertInfeasible` has no end-to-end test on v1.37. It reverts a resize the kubelet
// marked Infeasible, and a v1.37.2 kubelet marks Infeasible only in `podResizesAdmitHandler.Admit`
// (`pkg/kubelet/allocation/handlers.go`, with `IsInPlacePodVerticalScalingAllowed` /
// `IsInPlacePodLevelResourcesVerticalScalingAllowed` in `features_linux.go`), never for capacity
// (an over-allocatable resize stays Deferred:
// `a_deferred_resize_that_can_never_fit_preempts_nothing`). None of its cases can be produced
// honestly on a hollow node and then reverted:
// - `InPlacePodVerticalScaling` off: the gate is GA and locked on
//   (`pkg/features/kube_features.go`).
// - swap (`disallowResizeForSwappableContainers`): needs `memorySwap.swapBehavior: LimitedSwap`,
//   cgroup v2 and a swap controller (`kuberuntime_container_linux.go GetContainerSwapBehavior`);
//   the hollow node sets no swap behaviour.
// - static CPU/Memory Manager with a Guaranteed pod: the policy comes from
//   `containerManager.GetNodeConfig()`, which kubemark's stub container manager answers with an
//   empty `NodeConfig` (`pkg/kubelet/cm/container_manager_stub.go`).
// - pod-level resources with the kubelet's `InPlacePodLevelResourcesVerticalScaling` off, and
//   memory-backed `emptyDir` size limits with `InPlacePodVerticalScalingMemoryBackedVolumes` off:
//   the API server's `NodeDeclaredFeatureValidator` refuses such a resize unless the node declares
//   the feature, which it does only with the gate on (`component-helpers/nodedeclaredfeatures/
//   features/inplacepodresize`). A kubelet restarted with the gate off after the resize was stored
//   would mark it Infeasible, but the revert is itself a pod-level / volume resize the API server
//   then refuses for the same reason, and the controller reverts container resources only. The
//   decision is unit-tested
//   (`decision::tests::infeasible_resizes_are_reverted_to_actual_resources_when_policy_asks`).

/// A Deferred resize larger than the node's allocatable is never preempted for, though a
/// strictly-lower-priority pod sits on the node. On v1.37 the API server refuses such a resize
/// (403 `NodeCapacity`), so it reaches a kubelet only when allocatable shrinks after the resize was
/// stored — here the kubelet is restarted with a larger system reservation on the same work
/// directory (its checkpoints kept), as an administrator would. The v1.37 kubelet keeps it
/// Deferred for ever (`handlers.go` has no capacity check; the predicate's `OutOfcpu` becomes
/// Deferred, `status_manager.go`), and resize-guard says it preempts nothing.
#[tokio::test]
async fn a_deferred_resize_that_can_never_fit_preempts_nothing() {
    let (env, _g) = setup().await;
    let ns = env.namespace("never-fits").await;
    let cfg = HollowNodeConfig::with_allocatable(&env.unique("shrinks"), "1930m", "3Gi").unwrap();
    let mut node = HollowNode::start(&env.cp, &cfg).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    run_guaranteed(&pods, "filler", node.name(), "low", "500m", "256Mi").await;
    run_guaranteed(&pods, "app", node.name(), "high", "250m", "256Mi").await;
    run_guaranteed(&pods, "nudge", node.name(), "low", "10m", "16Mi").await;

    // The restarted kubelet admits with the Node object it has cached (kubelet_nodecache.go
    // getCachedNode), so if it looks at the resize at start it may set Deferred before its own
    // status update shows the smaller allocatable; a controller looking in that moment would see
    // 1930m and plan to preempt the filler. The namespace is kept from the controller until the
    // Node shows the new allocatable, so that what is tested is its decision on the cluster as it
    // then is.
    set_excluded(env, &ns, true).await;

    // Stored while the kubelet is down: the API server checks 1500m against the Node's 1930m.
    node.stop_kubelet();
    env.resize_cpu(&ns, "app", "1500m").await;
    // Back with 1000m reserved on its 2 cores: allocatable 1000m, below the pod's 1500m.
    node.restart(&env.cp, &cfg.clone().reserved("1000m", "0"))
        .await
        .unwrap();
    // A kubelet parks the resizes it finds at start until its pod sources are ready and looks at
    // them again 30 s later (allocation_manager.go retryPendingResizes, initialRetryDelay); a pod
    // removed from the node makes it retry at once (kubelet.go HandlePodRemoves).
    pods.delete("nudge", &Default::default()).await.unwrap();
    let want = "Node didn't have enough resource: cpu, requested: 1500, used: 500, capacity: 1000";
    let app = wait_pod(&pods, "app", T, |p| {
        resize_pending(p).is_some_and(|(_, m)| m == want)
    })
    .await
    .unwrap();
    let (reason, message) = resize_pending(&app).unwrap();
    assert_eq!(
        reason, "Deferred",
        "a v1.37 kubelet never marks capacity Infeasible: {message}"
    );

    set_excluded(env, &ns, false).await;
    let failed = support::wait_event(env, &ns, "ResizePreemptionFailed").await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0, "app");
    assert!(
        failed[0].1.contains("cpu 1500m")
            && failed[0].1.contains("allocatable cpu is 1,")
            && failed[0].1.contains("preempts nothing"),
        "{failed:?}"
    );
    assert!(
        support::preempted(&pods, &["filler"]).await.is_empty(),
        "no victim for a resize that can never fit"
    );
    let app = pods.get("app").await.unwrap();
    assert_eq!(
        resize_pending(&app).map(|r| r.0).as_deref(),
        Some("Deferred"),
        "still Deferred, not Infeasible"
    );
    node.remove(env.client().await).await.unwrap();
}
