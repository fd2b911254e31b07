//! Nodes and PodDisruptionBudgets as kube-apiserver v1.37 serves them (see `objects.rs`):
//! cloud nodes as their kubelet and the cloud controller write them (labels, annotations,
//! capacity and allocatable, conditions, addresses, nodeInfo, ten images, runtime handlers,
//! declared features, managedFields from four managers), and `policy/v1` budgets with their
//! status as kube-controller-manager writes it.

use resize_guard_lab::scale_pods::status::NODE_CONDITIONS;
use resize_guard_policy::upstream::node_features::KUBELET_DEFAULTS_V1_37;
use serde_json::{Value, json};

use super::objects::{at, fields_v1, hole, managed};
use super::world::{BUSY_SLACK_MILLI, ReplicaSet, World, hex, uid};

/// Holes of a node template (the order of [`holes`]).
const N_NAME: usize = 0;
const N_UID: usize = 1;
const N_RV: usize = 2;
const N_IP: usize = 3;
const N_ZONE: usize = 4;
const N_ZONE_ID: usize = 5;
const N_ALLOC_CPU: usize = 6;
const N_CAP_CPU: usize = 7;
const N_MACHINE: usize = 8;
const N_SYSTEM_UUID: usize = 9;
const N_BOOT: usize = 10;
const N_INSTANCE: usize = 11;

/// A cloud node as its kubelet and the cloud controller write it, with holes; `busy` nodes are
/// the larger instance type.
pub fn node_json(busy: bool) -> Value {
    let (itype, mem_cap, mem_alloc) = if busy {
        ("m5.8xlarge", "130451304Ki", "127163240Ki")
    } else {
        ("m5.4xlarge", "64744424Ki", "61880100Ki")
    };
    let name = hole(N_NAME);
    let zone = hole(N_ZONE);
    let t0 = at(0);
    let beat = at(9 * 86_400);
    let labels = json!({
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": itype,
        "beta.kubernetes.io/os": "linux",
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
        "eks.amazonaws.com/nodegroup": if busy { "dense-2026010912" } else { "general-2026010912" },
        "eks.amazonaws.com/nodegroup-image": "ami-0a1b2c3d4e5f67890",
        "eks.amazonaws.com/sourceLaunchTemplateId": "lt-0123456789abcdef0",
        "eks.amazonaws.com/sourceLaunchTemplateVersion": "7",
        "failure-domain.beta.kubernetes.io/region": "eu-west-1",
        "failure-domain.beta.kubernetes.io/zone": zone,
        "k8s.io/cloud-provider-aws": "9b1c6d3e0f2a4b5c6d7e8f9a0b1c2d3e",
        "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": itype,
        "topology.ebs.csi.aws.com/zone": zone,
        "topology.k8s.aws/zone-id": hole(N_ZONE_ID),
        "topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": zone,
    });
    let annotations = json!({
        "alpha.kubernetes.io/provided-node-ip": hole(N_IP),
        "csi.volume.kubernetes.io/nodeid": format!("{{\"ebs.csi.aws.com\":\"{}\"}}", hole(N_INSTANCE)),
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    });
    let cond = |t: &str, reason: &str, message: &str, status: &str| {
        json!({"type": t, "status": status, "lastHeartbeatTime": beat, "lastTransitionTime": t0,
            "reason": reason, "message": message})
    };
    let images: Vec<Value> = [
        ("registry.example.com/platform/mesh-proxy", "1.24.2", 98_412_331),
        ("registry.example.com/platform/fluent-bit", "3.2.4", 41_277_015),
        ("602401143452.dkr.ecr.eu-west-1.amazonaws.com/amazon-k8s-cni", "v1.19.2-eksbuild.1", 54_003_417),
        ("602401143452.dkr.ecr.eu-west-1.amazonaws.com/amazon-k8s-cni-init", "v1.19.2-eksbuild.1", 61_914_222),
        ("602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/kube-proxy", "v1.37.2-minimal-eksbuild.1", 37_198_440),
        ("602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/aws-ebs-csi-driver", "v1.41.0", 84_562_101),
        ("602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/csi-node-driver-registrar", "v2.13.0-eks-1-33-1", 14_873_909),
        ("602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/livenessprobe", "v2.15.0-eks-1-33-1", 13_982_174),
        ("quay.io/prometheus/node-exporter", "v1.9.0", 12_101_778),
        ("602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/pause", "3.10", 299_513),
    ]
    .iter()
    .enumerate()
    .map(|(i, (repo, tag, size))| {
        json!({"names": [format!("{repo}@sha256:{}", hex(i as u64 + 900, 64)), format!("{repo}:{tag}")], "sizeBytes": size})
    })
    .collect();
    let status = json!({
        "capacity": {"cpu": hole(N_CAP_CPU), "ephemeral-storage": "104845292Ki", "hugepages-1Gi": "0",
            "hugepages-2Mi": "0", "memory": mem_cap, "pods": "110"},
        "allocatable": {"cpu": hole(N_ALLOC_CPU), "ephemeral-storage": "95551679124", "hugepages-1Gi": "0",
            "hugepages-2Mi": "0", "memory": mem_alloc, "pods": "110"},
        "conditions": NODE_CONDITIONS.map(|(t, status, reason, message)| cond(t, reason, message, status)),
        "addresses": [
            {"type": "InternalIP", "address": hole(N_IP)},
            {"type": "InternalDNS", "address": name},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": hole(N_MACHINE), "systemUUID": hole(N_SYSTEM_UUID), "bootID": hole(N_BOOT),
            "kernelVersion": "6.12.13-47.113.amzn2023.x86_64", "osImage": "Amazon Linux 2023.7.20250414",
            "containerRuntimeVersion": "containerd://2.0.5", "kubeletVersion": "v1.37.2-eks-1a2b3c4",
            "operatingSystem": "linux", "architecture": "amd64", "swap": {},
        },
        "images": images,
        "runtimeHandlers": [
            {"name": "runc", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
            {"name": "", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
        ],
        "features": {"supplementalGroupsPolicy": true},
        "declaredFeatures": KUBELET_DEFAULTS_V1_37,
    });
    let mut kubelet_status = status.clone();
    for atomic in ["images", "runtimeHandlers", "declaredFeatures"] {
        kubelet_status[atomic] = json!(0);
    }
    let spec = json!({"providerID": format!("aws:///{zone}/{}", hole(N_INSTANCE))});
    json!({
        "metadata": {
            "name": name, "uid": hole(N_UID), "resourceVersion": hole(N_RV), "creationTimestamp": t0,
            "labels": labels, "annotations": annotations,
            "managedFields": [
                managed("kubelet", "Update", &t0, None, json!({"f:metadata": {
                    "f:annotations": fields_v1(&json!({"alpha.kubernetes.io/provided-node-ip": 1, "volumes.kubernetes.io/controller-managed-attach-detach": 1})),
                    "f:labels": fields_v1(&labels)}})),
                managed("aws-cloud-controller-manager", "Update", &t0, None, json!({"f:spec": fields_v1(&spec)})),
                managed("kube-controller-manager", "Update", &t0, None,
                    json!({"f:metadata": {"f:annotations": {"f:node.alpha.kubernetes.io/ttl": {}}}})),
                managed("kubelet", "Update", &beat, Some("status"), json!({"f:status": fields_v1(&kubelet_status)})),
            ],
        },
        "spec": spec,
        "status": status,
    })
}

/// PodDisruptionBudget `i` (of ReplicaSet `rs`): `maxUnavailable: 1` over the app's pods.
pub fn pdb_json(world: &World, rs: &ReplicaSet, i: usize) -> Value {
    let pods = world
        .rs_first(rs.index + 1)
        .saturating_sub(world.rs_first(rs.index));
    let allowed = i32::from(rs.pdb == Some(true));
    let t0 = at(rs.index as u64 * 61);
    let spec = json!({"maxUnavailable": 1, "selector": {"matchLabels": {"app": rs.app}}});
    let applied = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": rs.app, "namespace": rs.namespace, "annotations": {}}, "spec": spec});
    let status = json!({
        "observedGeneration": 1, "disruptionsAllowed": allowed, "currentHealthy": pods,
        "desiredHealthy": pods.saturating_sub(1), "expectedPods": pods,
        "conditions": [{"type": "DisruptionAllowed", "status": if allowed > 0 { "True" } else { "False" },
            "observedGeneration": 1, "lastTransitionTime": t0,
            "reason": if allowed > 0 { "SufficientPods" } else { "InsufficientPods" }, "message": ""}],
    });
    let fields = fields_v1(&status);
    json!({
        "metadata": {
            "name": rs.app, "namespace": rs.namespace, "uid": uid(4, i),
            "resourceVersion": (100_000_000 + world.nodes as u64 + world.pods as u64 * 3 + i as u64).to_string(),
            "generation": 1, "creationTimestamp": t0,
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": format!("{applied}\n")},
            "managedFields": [
                managed("kubectl-client-side-apply", "Update", &t0, None, json!({"f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}}, "f:spec": fields_v1(&spec)})),
                managed("kube-controller-manager", "Update", &t0, Some("status"), json!({"f:status": fields})),
            ],
        },
        "spec": spec,
        "status": status,
    })
}

/// What fills the holes of node `n`, in hole order.
pub fn holes(world: &World, n: usize) -> [String; 12] {
    let busy = world.is_busy(n);
    let zone = ["a", "b", "c"][n % 3];
    let (alloc, cap) = if busy {
        // Full: what its pods hold plus a little slack; capacity rounded up to whole cores
        // above the kubelet's reservation.
        let alloc = world.node_cpu_milli(n) + BUSY_SLACK_MILLI;
        (format!("{alloc}m"), (alloc + 90).div_ceil(1000).to_string())
    } else {
        ("15890m".to_owned(), "16".to_owned())
    };
    [
        world.node_name(n),
        uid(2, n),
        (100_000_000 + n as u64).to_string(),
        world.node_ip(n),
        format!("eu-west-1{zone}"),
        format!("euw1-az{}", n % 3 + 1),
        alloc,
        cap,
        hex(n as u64 ^ 0x11, 32),
        format!("ec2{}", &hex(n as u64 ^ 0x22, 29)),
        hex(n as u64 ^ 0x33, 32),
        format!("i-0{}", hex(n as u64 ^ 0x44, 16)),
    ]
}
