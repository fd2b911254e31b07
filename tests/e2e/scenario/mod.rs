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

/// Creates [`guaranteed_pod`](resize_guard_harness::objects::guaranteed_pod) `name` on `node`
/// (owned by the namespace's Job, as `create_running` makes it) and waits until it runs.
pub async fn run_guaranteed(
    pods: &kube::Api<k8s_openapi::api::core::v1::Pod>,
    name: &str,
    node: &str,
    priority_class: &str,
    cpu: &str,
    memory: &str,
) -> k8s_openapi::api::core::v1::Pod {
    use resize_guard_harness::objects::{create_running, guaranteed_pod};
    let pod = guaranteed_pod(name, node, priority_class, cpu, memory);
    create_running(pods, &pod)
        .await
        .unwrap_or_else(|e| panic!("pod {name} on {node}: {e:#}"))
}

/// Whether pod `name` is terminating (has a deletion timestamp); it must exist.
pub async fn terminating(pods: &kube::Api<k8s_openapi::api::core::v1::Pod>, name: &str) -> bool {
    let pod = pods.get(name).await.unwrap();
    pod.metadata.deletion_timestamp.is_some()
}

/// `kubectl get events` about `ns/pod`, read every 100 ms (10 s at most) until it names every
/// one of `words` (Events arrive after what they report); asserts that it does and returns it.
pub async fn events_saying(
    env: &resize_guard_harness::env::Env,
    ns: &str,
    pod: &str,
    words: &[&str],
) -> String {
    let mut text = String::new();
    for _ in 0..100 {
        text = env.kubectl().events_for(ns, pod).await.unwrap().stdout;
        if words.iter().all(|w| text.contains(w)) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    resize_guard_harness::text::assert_contains_all(&text, words);
    text
}

/// The first line of the metrics exposition `text` that starts with `series` (a name, or a name
/// and its labels), or "" when there is none.
pub fn metric_line(text: &str, series: &str) -> String {
    text.lines()
        .find(|l| l.starts_with(series))
        .unwrap_or_default()
        .to_owned()
}

/// Creates a small Guaranteed pod `name` (low priority, 100m, 64Mi) bound to no node: an object
/// to write to, which never runs.
pub async fn create_unbound(
    pods: &kube::Api<k8s_openapi::api::core::v1::Pod>,
    name: &str,
) -> k8s_openapi::api::core::v1::Pod {
    let pod = resize_guard_harness::objects::guaranteed_pod(name, "", "low", "100m", "64Mi");
    pods.create(&kube::api::PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("pod {name}: {e}"))
}
