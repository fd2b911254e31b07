//! The set-ups the suites share: the real webhook or controller started on a suite's control
//! plane as its ServiceAccount, and the scenarios several suites play.

pub mod controller;
pub mod webhook;

/// The path of the shipped program `name` (`resize-guard-webhook`, `resize-guard-controller`,
/// `kubectl-resize_guard`): the binary `cargo test --workspace` built beside this test binary
/// (each product crate's own CLI tests make cargo build it), or from `RESIZE_GUARD_BIN_DIR`.
pub fn program(name: &str) -> String {
    match resize_guard_harness::installed::bin(name) {
        Ok(path) => path.display().to_string(),
        Err(e) => panic!("{e:#}"),
    }
}

/// A hollow node (2 CPUs, 4Gi) serving its kubelet API, whose containers' usage the test sets
/// (`HollowNode::set_usage`), and metrics-server scraping it: (node name, node, metrics-server).
pub async fn metered_node(
    env: &resize_guard_harness::env::Env,
    prefix: &str,
) -> (
    String,
    resize_guard_harness::hollow_node::HollowNode,
    resize_guard_harness::metrics_server::MetricsServer,
) {
    use resize_guard_harness::hollow_node::{HollowNode, HollowNodeConfig};
    let name = env.unique(prefix);
    let config = HollowNodeConfig::new(&name, 2, "4Gi").kubelet_api();
    let node = HollowNode::start(&env.cp, &config).await.unwrap();
    let metrics = resize_guard_harness::metrics_server::MetricsServer::start(&env.cp)
        .await
        .unwrap();
    (name, node, metrics)
}

/// The message of the `PodResizePending` condition the kubelet sets when it defers the field
/// test's resize of `app` to 550m (550 + 1500 > 1930; kubernetes
/// `pkg/kubelet/lifecycle/predicate.go`, `InsufficientResourceError.Error`).
pub const FIELD_TEST_DEFERRED: &str =
    "Node didn't have enough resource: cpu, requested: 550, used: 1500, capacity: 1930";

/// Waits (30 s) until the field test's `app` has a pending resize and asserts the kubelet holds
/// it Deferred with [`FIELD_TEST_DEFERRED`]; returns the pod.
pub async fn wait_field_test_deferred(
    pods: &kube::Api<k8s_openapi::api::core::v1::Pod>,
) -> k8s_openapi::api::core::v1::Pod {
    use resize_guard_harness::objects::{resize_pending, wait_pod};
    let p = wait_pod(pods, "app", std::time::Duration::from_secs(30), |p| {
        resize_pending(p).is_some()
    })
    .await
    .unwrap();
    assert_eq!(
        resize_pending(&p).unwrap(),
        ("Deferred".to_owned(), FIELD_TEST_DEFERRED.to_owned()),
        "the kubelet's condition"
    );
    p
}
