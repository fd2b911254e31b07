//! Pods and waits the end-to-end suites share: pods shaped like the field test's, bound straight
//! to a (hollow) node, and polling waits that fail with the last state seen.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use kube::api::{Api, PostParams};
use serde_json::json;

/// A Guaranteed pod (`requests = limits`) bound to `node` with a PriorityClass.
pub fn guaranteed_pod(
    name: &str,
    node: &str,
    priority_class: &str,
    cpu: &str,
    memory: &str,
) -> Pod {
    pod_json(
        name,
        node,
        priority_class,
        json!({
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu, "memory": memory},
        }),
    )
}

/// A Burstable pod (requests only) bound to `node`.
pub fn burstable_pod(name: &str, node: &str, priority_class: &str, cpu: &str, memory: &str) -> Pod {
    pod_json(
        name,
        node,
        priority_class,
        json!({"requests": {"cpu": cpu, "memory": memory}}),
    )
}

fn pod_json(name: &str, node: &str, priority_class: &str, resources: serde_json::Value) -> Pod {
    let mut spec = json!({
        "containers": [{"name": "app", "image": "registry.example/app:1", "resources": resources}],
        "terminationGracePeriodSeconds": 30,
    });
    if !node.is_empty() {
        spec["nodeName"] = json!(node);
    }
    if !priority_class.is_empty() {
        spec["priorityClassName"] = json!(priority_class);
    }
    let value = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": spec,
    });
    serde_json::from_value(value).unwrap_or_default()
}

/// Creates a pod and waits until its node's kubelet reports it Running.
pub async fn create_running(api: &Api<Pod>, pod: &Pod) -> anyhow::Result<Pod> {
    let created = api.create(&PostParams::default(), pod).await?;
    let name = created.metadata.name.clone().unwrap_or_default();
    wait_pod(api, &name, Duration::from_secs(30), |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await
}

/// Polls a pod until `ready` holds; the error carries the last state seen.
pub async fn wait_pod(
    api: &Api<Pod>,
    name: &str,
    timeout: Duration,
    ready: impl Fn(&Pod) -> bool,
) -> anyhow::Result<Pod> {
    let deadline = Instant::now() + timeout;
    let mut last = None;
    while Instant::now() < deadline {
        match api.get_opt(name).await? {
            Some(p) if ready(&p) => return Ok(p),
            other => last = other,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!(
        "pod {name}: condition not reached after {timeout:?}; last status: {}",
        last.and_then(|p| serde_json::to_string_pretty(&p.status).ok())
            .unwrap_or_else(|| "(gone)".into())
    )
}

/// Polls until the pod no longer exists.
pub async fn wait_gone(api: &Api<Pod>, name: &str, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if api.get_opt(name).await?.is_none() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("pod {name} still exists after {timeout:?}")
}

/// The first `PodResizePending` condition, read here rather than through the policy crate so
/// that the tests' view of what the kubelet wrote shares no code with what they test.
pub fn resize_pending_condition(p: &Pod) -> Option<&PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodResizePending")
}

/// The first `PodResizePending` condition's (reason, message).
pub fn resize_pending(p: &Pod) -> Option<(String, String)> {
    let c = resize_pending_condition(p)?;
    Some((
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

/// The allocated request of `resource` of container `app`, as the kubelet reports it.
pub fn allocated(p: &Pod, resource: &str) -> Option<String> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == "app")?
        .allocated_resources
        .as_ref()?
        .get(resource)
        .map(|q| q.0.clone())
}

/// The allocated cpu request of container `app`.
pub fn allocated_cpu(p: &Pod) -> Option<String> {
    allocated(p, "cpu")
}

/// Restart count of container `app`.
pub fn restart_count(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == "app"))
        .map_or(-1, |c| c.restart_count)
}

/// A resize patch for container `app` setting cpu requests and limits to `cpu`.
pub fn cpu_resize(cpu: &str) -> String {
    json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}})
        .to_string()
}

/// The hollow node's annotation for how long a pod's containers take to exit once stopped
/// (`tests/control-plane/cmd/hollow-node/stop.go`; at most the grace period).
pub const STOP_AFTER_ANNOTATION: &str = "hollow-node.resize-guard.io/stop-after";

/// `pod` whose containers take `after` (a Go duration such as `1500ms`) to exit when stopped.
pub fn stopping_after(mut pod: Pod, after: &str) -> Pod {
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(STOP_AFTER_ANNOTATION.to_owned(), after.to_owned());
    pod
}

/// `pod` with a label added.
pub fn labelled(mut pod: Pod, key: &str, value: &str) -> Pod {
    pod.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(key.to_owned(), value.to_owned());
    pod
}
