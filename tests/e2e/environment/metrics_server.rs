//! End-to-end: upstream metrics-server v0.8.0, registered as `v1beta1.metrics.k8s.io` on the real
//! kube-apiserver, scrapes a hollow node's real kubelet (`/metrics/resource`, webhook-authorized
//! with its ServiceAccount token), and reports exactly the per-container usage the test sets on
//! the node — through the API, through `kubectl top pod`, and in agreement with the kubelet's own
//! check before it lowers a memory limit. No resize-guard component is installed here.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, PostParams};
use resize_guard_harness::control_plane::{ControlPlane, Options};
use resize_guard_harness::hollow_node::{HollowNode, HollowNodeConfig, parse_milli};
use resize_guard_harness::kubectl::Kubectl;
use resize_guard_harness::metrics_server::{
    METRIC_RESOLUTION, MetricsServer, api_service_available, container_usage,
};
use resize_guard_harness::objects::{
    condition, create_running, guaranteed_pod, patch_resize, wait_pod,
};
use resize_guard_harness::replica::host_ip;
use serde_json::json;

const MI: i128 = 1024 * 1024 * 1000;

fn start_cp() -> ControlPlane {
    std::thread::spawn(|| ControlPlane::start(&Options::default()))
        .join()
        .expect("control plane thread")
        .expect("start the real control plane")
}

/// Container `app`'s usage in a PodMetrics: (millicores, milli-bytes).
fn app_usage(m: &serde_json::Value) -> Option<(i128, i128)> {
    let (cpu, memory) = container_usage(m, "app")?;
    Some((parse_milli(&cpu).ok()?, parse_milli(&memory).ok()?))
}

#[tokio::test]
async fn metrics_api_and_kubelet_report_the_usage_set_on_the_hollow_node() {
    let t0 = Instant::now();
    let cp = start_cp();
    let client = cp.client().await.unwrap();
    let diag = |what: &str| format!("{what}\n==== logs ====\n{}", cp.dump_logs());

    // A hollow node serving its kubelet API, advertised in its status.
    let node = HollowNode::start(
        &cp,
        &HollowNodeConfig::new("ms-node", 2, "4Gi").kubelet_api(),
    )
    .await
    .unwrap();
    let port = node.kubelet_port().expect("kubelet API on");
    let status = Api::<Node>::all(client.clone())
        .get("ms-node")
        .await
        .unwrap()
        .status
        .unwrap();
    let internal = status
        .addresses
        .unwrap_or_default()
        .into_iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address);
    assert_eq!(internal, Some(host_ip().unwrap()));
    assert_eq!(
        status
            .daemon_endpoints
            .and_then(|d| d.kubelet_endpoint)
            .map(|e| e.port),
        Some(i32::from(port))
    );
    // The kubelet authenticates (webhook, not anonymous): a request without credentials is
    // refused.
    let mut anonymous = kube::Config::new(
        format!("https://{}:{port}", host_ip().unwrap())
            .parse()
            .unwrap(),
    );
    anonymous.accept_invalid_certs = true;
    let anonymous = kube::Client::try_from(anonymous).unwrap();
    let refused = anonymous
        .request_text(
            http::Request::get("/metrics/resource")
                .body(Vec::new())
                .unwrap(),
        )
        .await;
    assert!(
        refused.is_err() && format!("{refused:?}").contains("401"),
        "an anonymous request to the kubelet must get 401: {refused:?}"
    );
    let kubectl = Kubectl::admin(&cp);

    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "ms"}})).unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ms");
    create_running(
        &pods,
        &guaranteed_pod("app", "ms-node", "", "500m", "512Mi"),
    )
    .await
    .unwrap();

    let set = Instant::now();
    node.set_usage("ms", "app", "app", "150Mi", "200m").unwrap();
    let mut ms = MetricsServer::start(&cp)
        .await
        .unwrap_or_else(|e| panic!("{}", diag(&format!("{e:#}"))));
    eprintln!(
        "metrics-server Available {:?} after set_usage",
        set.elapsed()
    );
    let m = ms
        .wait_for_pod(&cp, "ms", "app", |m| {
            app_usage(m).is_some_and(|(_, mem)| mem == 150 * MI)
        })
        .await
        .unwrap_or_else(|e| panic!("{}", diag(&format!("{e:#}"))));
    eprintln!("150Mi/200m served {:?} after set_usage: {m}", set.elapsed());
    let (cpu, memory) = app_usage(&m).unwrap();
    assert_eq!(memory, 150 * MI, "exact bytes");
    assert!((190..=210).contains(&cpu), "cpu {cpu}m, want about 200m");
    assert_eq!(m["containers"].as_array().map(Vec::len), Some(1));

    // A new value shows within a few resolutions.
    let set = Instant::now();
    node.set_usage("ms", "app", "app", "300Mi", "200m").unwrap();
    let m = ms
        .wait_for_pod(&cp, "ms", "app", |m| {
            app_usage(m).is_some_and(|(_, mem)| mem == 300 * MI)
        })
        .await
        .unwrap_or_else(|e| panic!("{}", diag(&format!("{e:#}"))));
    let took = set.elapsed();
    eprintln!(
        "set_usage 300Mi → PodMetrics 300Mi in {took:?} (resolution {METRIC_RESOLUTION:?}): {m}"
    );
    assert!(took < METRIC_RESOLUTION * 4, "{took:?}");

    // kubectl top reads the same API.
    let top = kubectl.run(["top", "pod", "-n", "ms"]).await.unwrap();
    eprintln!("kubectl top pod -n ms:\n{}", top.stdout);
    assert!(top.success, "{top:?}");
    let line = top
        .stdout
        .lines()
        .find(|l| l.starts_with("app "))
        .unwrap_or_else(|| panic!("no app line: {top:?}"));
    assert!(line.split_whitespace().any(|f| f == "300Mi"), "{line}");

    // The kubelet's own check reads the same usage: lowering the limit below it fails, naming
    // the container.
    patch_resize(
        &pods,
        "app",
        &json!({"spec": {"containers": [{"name": "app",
            "resources": {"requests": {"memory": "256Mi"}, "limits": {"memory": "256Mi"}}}]}}),
    )
    .await
    .unwrap();
    let failed = wait_pod(&pods, "app", Duration::from_secs(60), |p| {
        condition(p, "PodResizeInProgress").is_some_and(|(reason, msg)| {
            reason == "Error"
                && msg.contains("cannot decrease memory limits")
                && msg.contains(r#"container "app" memory limit (268435456) below current usage"#)
        })
    })
    .await
    .unwrap_or_else(|e| panic!("{}", diag(&format!("{e:#}"))));
    eprintln!(
        "kubelet: {:?}",
        condition(&failed, "PodResizeInProgress").unwrap().1
    );

    eprintln!("[{:?}] resize refused by the kubelet", t0.elapsed());
    // Down: the metrics API fails; up again: it serves the pod after two new scrapes.
    ms.stop();
    let stopped = Instant::now();
    let down = loop {
        let (available, why) = api_service_available(&cp).await.unwrap();
        if !available {
            break why;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(60),
            "metrics-server is down, yet the APIService is still Available"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    eprintln!(
        "[{:?}] stopped; APIService unavailable after {:?}: {down}",
        t0.elapsed(),
        stopped.elapsed()
    );
    let restarted = Instant::now();
    ms.restart(&cp).await.unwrap();
    ms.wait_for_pod(&cp, "ms", "app", |m| {
        app_usage(m).is_some_and(|(_, mem)| mem == 300 * MI)
    })
    .await
    .unwrap();
    eprintln!(
        "restart → PodMetrics served again in {:?}",
        restarted.elapsed()
    );
}
