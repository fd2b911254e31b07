//! What a kubelet would write for the generated objects, for benchmarks only: a Node as a kubelet
//! registers it (the create carries its status: capacity, allocatable, conditions, addresses,
//! nodeInfo, images) and a Deployment pod's status once its containers run (phase `Running`,
//! the five pod conditions, IPs, `startTime`, `qosClass`, and per container `allocatedResources`,
//! `resources`, `ready`, `state.running`, mounts and user).
//!
//! The values are what an `m5.4xlarge` EKS worker with containerd reports. Nothing here runs a
//! kubelet: the tests never write kubelet-owned status (they run hollow nodes instead); these
//! objects exist so a benchmark can hold tens of thousands of running pods on a thousand nodes.

use serde_json::{Value, json};

use super::template::{
    APP_DIGEST, APP_LIMITS, APP_REQUESTS, SIDECAR_IMAGE, SIDECAR_LIMITS, SIDECAR_REQUESTS,
    app_image, app_mounts, sidecar_mounts,
};

/// The instance type every generated node claims (16 vCPU, 64 GiB).
pub const INSTANCE_TYPE: &str = "m5.4xlarge";
/// Capacity cpu of a generated node.
pub const NODE_CPU: &str = "16";
/// Allocatable cpu of a generated node (EKS reserves 110m on 16 cores).
pub const NODE_ALLOCATABLE_CPU: &str = "15890m";
/// Pod capacity of a generated node.
pub const NODE_PODS: u32 = 110;

/// A well-mixed 64-bit value of `i` and `salt` (splitmix64), for stable fake identifiers.
fn mix(i: u64, salt: u64) -> u64 {
    let mut z = i
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(salt.wrapping_mul(0xbf58_476d_1ce4_e5b9));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `digits` hex digits derived from `i` and `salt`.
fn hex(i: u64, salt: u64, digits: usize) -> String {
    let mut s = String::with_capacity(digits + 16);
    let mut k = 0;
    while s.len() < digits {
        s.push_str(&format!("{:016x}", mix(i, salt.wrapping_add(k))));
        k += 1;
    }
    s.truncate(digits);
    s
}

/// A UUID-shaped string derived from `i` and `salt`.
fn uuid(i: u64, salt: u64) -> String {
    let h = hex(i, salt, 32);
    format!(
        "{}-{}-4{}-8{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

/// The sidecar image by tag (`SIDECAR_IMAGE` without its digest).
fn sidecar_tagged() -> &'static str {
    SIDECAR_IMAGE
        .split_once('@')
        .map_or(SIDECAR_IMAGE, |(tagged, _)| tagged)
}

/// The sidecar image by digest, as a runtime reports `imageID`.
fn sidecar_by_digest() -> String {
    let (tagged, digest) = SIDECAR_IMAGE.split_once('@').unwrap_or((SIDECAR_IMAGE, ""));
    let repo = tagged.rsplit_once(':').map_or(tagged, |(repo, _)| repo);
    format!("{repo}@{digest}")
}

/// Node `n`'s InternalIP (`10.0.0.0/16`).
pub fn node_ip(n: usize) -> String {
    let k = n + 10;
    format!("10.0.{}.{}", (k / 256) % 256, k % 256)
}

/// The IP of the `slot`-th pod on node `n` (node `n` owns `10.(128 + n/256).(n%256).0/24`).
pub fn pod_ip(n: usize, slot: usize) -> String {
    format!(
        "10.{}.{}.{}",
        128 + (n / 256) % 128,
        n % 256,
        2 + slot % 250
    )
}

/// The conditions a healthy kubelet reports on its Node: (type, status, reason, message), as
/// kubelet v1.37 writes them (kubernetes `pkg/kubelet/nodestatus/setters.go`, `ReadyCondition`
/// and `MemoryPressureCondition`).
pub const NODE_CONDITIONS: [(&str, &str, &str, &str); 4] = [
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    (
        "DiskPressure",
        "False",
        "KubeletHasNoDiskPressure",
        "kubelet has no disk pressure",
    ),
    (
        "PIDPressure",
        "False",
        "KubeletHasSufficientPID",
        "kubelet has sufficient PID available",
    ),
    (
        "Ready",
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
    ),
];

/// The Node object a kubelet registers for node `n` called `name`; `with_status` adds the
/// status the registration carries (without it, only metadata and spec).
pub fn node_json(n: usize, name: &str, with_status: bool, now: &str) -> Value {
    let zone = ["a", "b", "c"][n % 3];
    let ip = node_ip(n);
    let dns = format!("ip-{}.ec2.internal", ip.replace('.', "-"));
    let instance = format!("i-0{}", hex(n as u64, 1, 16));
    let mut node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": INSTANCE_TYPE,
            "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
            "topology.kubernetes.io/region": "us-east-1",
            "topology.kubernetes.io/zone": format!("zone-{}", n % 3),
            "eks.amazonaws.com/nodegroup": format!("workers-{zone}"),
            "eks.amazonaws.com/capacityType": "ON_DEMAND",
        }, "annotations": {
            "alpha.kubernetes.io/provided-node-ip": ip,
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        }},
        "spec": {
            "providerID": format!("aws:///us-east-1{zone}/{instance}"),
            "podCIDR": format!("10.{}.{}.0/24", 128 + (n / 256) % 128, n % 256),
        },
    });
    node["spec"]["podCIDRs"] = json!([node["spec"]["podCIDR"].clone()]);
    if !with_status {
        return node;
    }
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let image = |names: &[&str], size: u64| json!({"names": names, "sizeBytes": size});
    node["status"] = json!({
        "capacity": {
            "cpu": NODE_CPU, "memory": "64453796Ki", "pods": NODE_PODS.to_string(),
            "ephemeral-storage": "104845292Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
        },
        "allocatable": {
            "cpu": NODE_ALLOCATABLE_CPU, "memory": "63436964Ki", "pods": NODE_PODS.to_string(),
            "ephemeral-storage": "95551679124", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
        },
        "conditions": NODE_CONDITIONS.map(|(t, status, reason, message)| condition(t, status, reason, message)),
        "addresses": [
            {"type": "InternalIP", "address": ip},
            {"type": "InternalDNS", "address": dns},
            {"type": "Hostname", "address": dns},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": hex(n as u64, 2, 32),
            "systemUUID": format!("ec2{}", &uuid(n as u64, 3)[3..]),
            "bootID": uuid(n as u64, 4),
            "kernelVersion": "6.1.119-129.201.amzn2023.x86_64",
            "osImage": "Amazon Linux 2023.6.20241212",
            "containerRuntimeVersion": "containerd://1.7.23",
            "kubeletVersion": "v1.37.2",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
        "images": [
            image(&["602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni@sha256:6b1f2a43e3bba7b5f2c2f61e0f7d64e4b8b9f9c3a8e0d1c2b3a4f5e6d7c8b9a0", "602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni:v1.19.2-eksbuild.1"], 46_862_410),
            image(&["602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/kube-proxy@sha256:1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809", "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/kube-proxy:v1.37.2-minimal-eksbuild.1"], 31_514_280),
            image(&["602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-ebs-csi-driver@sha256:0f9e8d7c6b5a49382716f5e4d3c2b1a00f9e8d7c6b5a49382716f5e4d3c2b1a0", "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-ebs-csi-driver:v1.38.1"], 35_702_130),
            image(&["quay.io/prometheus/node-exporter@sha256:4cb2b9019f1c5d5d5c8a9f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e", "quay.io/prometheus/node-exporter:v1.8.2"], 12_144_590),
            image(&[&sidecar_by_digest(), sidecar_tagged()], 41_229_840),
            image(&["602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/pause@sha256:529cf6b1b6e5b76e901abc43aee825badbd93f9c5ee5f1e316d46a83abbce5a2", "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/pause:3.10"], 299_451),
        ],
        "runtimeHandlers": [
            {"name": "", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
            {"name": "runc", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
        ],
        "features": {"supplementalGroupsPolicy": true},
    });
    node
}

/// The status a kubelet writes for a running generated pod `i` (app `app` in `ns`), the
/// `slot`-th pod on node `n`, started at `now`.
pub fn running_pod_status(
    i: usize,
    app: &str,
    ns: &str,
    n: usize,
    slot: usize,
    now: &str,
) -> Value {
    let host = node_ip(n);
    let ip = pod_ip(n, slot);
    let condition = |type_: &str| {
        json!({"type": type_, "status": "True", "lastProbeTime": null, "lastTransitionTime": now,
               "observedGeneration": 1})
    };
    let mounts = |mounts: Value| -> Value {
        let list = mounts.as_array().cloned().unwrap_or_default();
        Value::Array(
            list.into_iter()
                .map(|mut m| {
                    if m["readOnly"] == json!(true) {
                        m["recursiveReadOnly"] = json!("Disabled");
                    }
                    if let Some(o) = m.as_object_mut() {
                        o.remove("subPath");
                    }
                    m
                })
                .collect(),
        )
    };
    let container = |name: &str,
                     image: String,
                     image_id: String,
                     salt: u64,
                     requests: (&str, &str),
                     limits: (&str, &str),
                     volume_mounts: Value| {
        json!({
            "name": name,
            "image": image,
            "imageID": image_id,
            "containerID": format!("containerd://{}", hex(i as u64, salt, 64)),
            "ready": true,
            "started": true,
            "restartCount": 0,
            "state": {"running": {"startedAt": now}},
            "lastState": {},
            "allocatedResources": {"cpu": requests.0, "memory": requests.1},
            "resources": {
                "requests": {"cpu": requests.0, "memory": requests.1},
                "limits": {"cpu": limits.0, "memory": limits.1},
            },
            "volumeMounts": volume_mounts,
            "user": {"linux": {"uid": 10001, "gid": 10001, "supplementalGroups": [10001]}},
        })
    };
    let app_tagged = format!("registry.example.com/{ns}/{app}:1.42.3");
    debug_assert!(app_image(app, ns).starts_with(&app_tagged));
    json!({
        "observedGeneration": 1,
        "phase": "Running",
        "conditions": [
            condition("PodReadyToStartContainers"),
            condition("Initialized"),
            condition("Ready"),
            condition("ContainersReady"),
            condition("PodScheduled"),
        ],
        "hostIP": host,
        "hostIPs": [{"ip": host}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": now,
        "qosClass": "Burstable",
        "containerStatuses": [
            container(
                "app",
                app_tagged,
                format!("registry.example.com/{ns}/{app}@{APP_DIGEST}"),
                11,
                APP_REQUESTS,
                APP_LIMITS,
                mounts(app_mounts()),
            ),
            container(
                "log-shipper",
                sidecar_tagged().to_owned(),
                sidecar_by_digest(),
                12,
                SIDECAR_REQUESTS,
                SIDECAR_LIMITS,
                mounts(sidecar_mounts()),
            ),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_nodes_deserialize_with_their_status() {
        let node: k8s_openapi::api::core::v1::Node =
            serde_json::from_value(node_json(7, "node-007", true, "2025-01-01T00:00:00Z")).unwrap();
        let status = node.status.unwrap();
        assert_eq!(status.allocatable.unwrap()["cpu"].0, NODE_ALLOCATABLE_CPU);
        assert_eq!(status.node_info.unwrap().kubelet_version, "v1.37.2");
        assert!(node_json(7, "node-007", false, "x").get("status").is_none());
    }

    #[test]
    fn running_status_reports_both_containers_ready_with_their_resources() {
        let status: k8s_openapi::api::core::v1::PodStatus = serde_json::from_value(
            running_pod_status(42, "svc-0007", "team-02", 3, 5, "2025-01-01T00:00:00Z"),
        )
        .unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        let cs = status.container_statuses.unwrap();
        assert_eq!(cs.len(), 2);
        assert!(
            cs.iter()
                .all(|c| c.ready && c.state.as_ref().unwrap().running.is_some())
        );
        assert_eq!(cs[0].allocated_resources.as_ref().unwrap()["cpu"].0, "250m");
        assert_eq!(
            cs[0].image_id,
            format!("registry.example.com/team-02/svc-0007@{APP_DIGEST}")
        );
        assert_eq!(
            cs[0].container_id.as_ref().unwrap().len(),
            "containerd://".len() + 64
        );
        assert_eq!(status.pod_ip.as_deref(), Some("10.128.3.7"));
    }
}
