//! What the simulated kubelet writes to the API: node registration, pod status patches
//! (strategic merge on `pods/status`, so other writers' conditions such as `DisruptionTarget`
//! survive) and kubelet-style core/v1 Events (`ResizeStarted`, `ResizeCompleted`,
//! `ResizeDeferred`, `ResizeInfeasible`).

use k8s_openapi::api::core::v1::{Event, EventSource, Node, ObjectReference, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::NodeConfig;
use super::admission::status_of;

/// Creates (or updates) a node and reports it Ready with its capacity and declared features.
pub async fn register_node(client: &kube::Client, cfg: &NodeConfig) -> kube::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut labels = serde_json::Map::new();
    labels.insert("kubernetes.io/hostname".into(), json!(cfg.name));
    labels.insert("kubernetes.io/os".into(), json!("linux"));
    labels.insert("kubernetes.io/arch".into(), json!("amd64"));
    for (k, v) in &cfg.labels {
        labels.insert(k.clone(), json!(v));
    }
    let mut node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": cfg.name, "labels": labels},
        "spec": {},
    });
    if let Some(owners) = &cfg.disable_resize_preemption {
        node["spec"]["podPreemptionPolicy"] = json!({"disableResizePreemption": owners});
    }
    let node: Node = serde_json::from_value(node).map_err(kube::Error::SerdeError)?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {
            nodes
                .patch(&cfg.name, &PatchParams::default(), &Patch::Merge(&node))
                .await?;
        }
        Err(e) => return Err(e),
    }
    let now = Timestamp::now().to_string();
    let resources = json!({"cpu": cfg.cpu, "memory": cfg.memory, "pods": cfg.pods.to_string(), "ephemeral-storage": "100Gi"});
    let status = json!({"status": {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "simulated kubelet is posting ready status",
             "lastHeartbeatTime": now, "lastTransitionTime": now},
            {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "", "lastHeartbeatTime": now, "lastTransitionTime": now},
            {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure", "message": "", "lastHeartbeatTime": now, "lastTransitionTime": now},
            {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID", "message": "", "lastHeartbeatTime": now, "lastTransitionTime": now},
        ],
        "declaredFeatures": cfg.declared_features(),
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": cfg.name}],
        "nodeInfo": {
            "machineID": "sim", "systemUUID": "sim", "bootID": "sim", "kernelVersion": "6.1.0",
            "osImage": "resize-guard simulated kubelet", "containerRuntimeVersion": "sim://1.0",
            "kubeletVersion": "v1.37.2", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"
        },
    }});
    nodes
        .patch_status(&cfg.name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

fn container_statuses(allocated: &PodSpec, restart_counts: &[(String, i32)]) -> (Value, Value) {
    let status = status_of(allocated);
    let started = Timestamp::now().to_string();
    let render = |list: &Option<Vec<k8s_openapi::api::core::v1::ContainerStatus>>,
                  spec: &[k8s_openapi::api::core::v1::Container]| {
        let items: Vec<Value> = list
            .iter()
            .flatten()
            .map(|cs| {
                let image = spec
                    .iter()
                    .find(|c| c.name == cs.name)
                    .and_then(|c| c.image.clone())
                    .unwrap_or_else(|| "registry.example/app:1".into());
                let restarts = restart_counts
                    .iter()
                    .find(|(n, _)| *n == cs.name)
                    .map_or(0, |(_, r)| *r);
                json!({
                    "name": cs.name,
                    "image": image,
                    "imageID": format!("sim://{image}"),
                    "containerID": format!("sim://{}", cs.name),
                    "ready": true,
                    "started": true,
                    "restartCount": restarts,
                    "state": {"running": {"startedAt": started}},
                    "allocatedResources": cs.allocated_resources,
                    "resources": cs.resources,
                })
            })
            .collect();
        Value::Array(items)
    };
    let sidecars: Vec<_> = allocated
        .init_containers
        .iter()
        .flatten()
        .cloned()
        .collect();
    (
        render(&status.container_statuses, &allocated.containers),
        render(&status.init_container_statuses, &sidecars),
    )
}

/// The status of a freshly started pod: Running, Ready, containers allocated at their spec.
pub fn startup_patch(pod: &Pod, allocated: &PodSpec) -> Value {
    let now = Timestamp::now().to_string();
    let (containers, inits) = container_statuses(allocated, &[]);
    let cond = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": now});
    let mut status = json!({
        "phase": "Running",
        "startTime": now,
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": "127.0.0.2",
        "podIPs": [{"ip": "127.0.0.2"}],
        "conditions": [cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"), cond("ContainersReady"), cond("PodScheduled")],
        "containerStatuses": containers,
        "observedGeneration": pod.metadata.generation,
    });
    if inits.as_array().is_some_and(|a| !a.is_empty()) {
        status["initContainerStatuses"] = inits;
    }
    if let Some(r) = &allocated.resources {
        status["resources"] = json!(r);
        status["allocatedResources"] = json!(r.requests);
    }
    json!({"status": status})
}

/// Rejection of a new pod that does not fit (phase Failed, reason `OutOfcpu`).
pub fn rejected_patch(reason: &str, message: &str) -> Value {
    json!({"status": {"phase": "Failed", "reason": reason, "message": message}})
}

/// `PodResizePending` with reason and message for the pod's current generation.
pub fn pending_patch(pod: &Pod, reason: &str, message: &str, since: Timestamp) -> Value {
    json!({"status": {
        "conditions": [{
            "type": "PodResizePending", "status": "True", "reason": reason, "message": message,
            "observedGeneration": pod.metadata.generation, "lastTransitionTime": since.to_string(),
        }],
        "observedGeneration": pod.metadata.generation,
    }})
}

/// The resize was allocated: new allocation in the container statuses, `PodResizePending` gone,
/// `PodResizeInProgress` set until actuation completes.
pub fn admitted_patch(pod: &Pod, allocated: &PodSpec, restart_counts: &[(String, i32)]) -> Value {
    let (containers, inits) = container_statuses(allocated, restart_counts);
    let mut status = json!({
        "conditions": [
            {"type": "PodResizePending", "$patch": "delete"},
            {"type": "PodResizeInProgress", "status": "True", "observedGeneration": pod.metadata.generation,
             "lastTransitionTime": Timestamp::now().to_string()},
        ],
        "containerStatuses": containers,
        "observedGeneration": pod.metadata.generation,
    });
    if inits.as_array().is_some_and(|a| !a.is_empty()) {
        status["initContainerStatuses"] = inits;
    }
    if let Some(r) = &allocated.resources {
        status["resources"] = json!(r);
        status["allocatedResources"] = json!(r.requests);
    }
    json!({"status": status})
}

/// Actuation finished: `PodResizeInProgress` removed.
pub fn completed_patch() -> Value {
    json!({"status": {"conditions": [{"type": "PodResizeInProgress", "$patch": "delete"}]}})
}

/// `PodResizePending` removed (the resize was reverted to the allocation).
pub fn cleared_patch() -> Value {
    json!({"status": {"conditions": [{"type": "PodResizePending", "$patch": "delete"}]}})
}

/// Summary of a resize for event messages: `{"containers":[{"name":…,"resources":…}],"generation":N}`.
pub fn resize_summary(pod: &Pod) -> String {
    let containers: Vec<Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| json!({"name": c.name, "resources": c.resources}))
        .collect();
    json!({"containers": containers, "generation": pod.metadata.generation}).to_string()
}

/// Emits a kubelet-style Event on a pod.
pub async fn event(
    client: &kube::Client,
    pod: &Pod,
    node: &str,
    type_: &str,
    reason: &str,
    message: String,
) {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let now = Timestamp::now();
    let ev = Event {
        metadata: kube::api::ObjectMeta {
            generate_name: Some(format!(
                "{}.",
                pod.metadata.name.as_deref().unwrap_or("pod")
            )),
            namespace: Some(ns.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: pod.metadata.name.clone(),
            namespace: Some(ns.clone()),
            uid: pod.metadata.uid.clone(),
            resource_version: pod.metadata.resource_version.clone(),
            ..Default::default()
        },
        reason: Some(reason.into()),
        message: Some(message),
        type_: Some(type_.into()),
        source: Some(EventSource {
            component: Some("kubelet".into()),
            host: Some(node.into()),
        }),
        reporting_component: Some("kubelet".into()),
        reporting_instance: Some(node.into()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: None::<MicroTime>,
        count: Some(1),
        ..Default::default()
    };
    let api: Api<Event> = Api::namespaced(client.clone(), &ns);
    if let Err(e) = api.create(&PostParams::default(), &ev).await {
        tracing::warn!(error = %e, reason, "simulated kubelet could not record event");
    }
}
