//! Pods as kube-apiserver v1.37 serves them, with holes (see `objects.rs`).
//!
//! The shape follows `tests/lab/src/bin/rss.rs`'s Deployment pod (two containers with env,
//! probes, ports, security contexts, volumes, owner reference, a ~3.5 kB last-applied copy),
//! plus one in three with a native sidecar init container, a priority class, `spec.nodeName`, a
//! Running status as the kubelet writes it (conditions, IPs, container statuses with
//! `allocatedResources` and `resources`), and managedFields from kube-controller-manager, one
//! server-side apply manager and the kubelet (status) — and the resize's manager on pods with a
//! pending resize, whose `PodResizePending` condition says Deferred.

use resize_guard_lab::scale_pods::template::{app_env, log_shipper_env};
use serde_json::{Value, json};

use super::objects::{at, field_set, fields_v1, hole, managed};
use super::world::{
    CLASSES, LOG_SHIPPER_CPU_MILLI, PENDING_GROWTH_MILLI, PodPlace, ReplicaSet, SIDECAR_CPU_MILLI,
    World, hex, uid,
};

/// Holes of a pod template (the order of [`holes`]).
const P_NAME: usize = 0;
const P_UID: usize = 1;
const P_RV: usize = 2;
const P_NODE: usize = 3;
const P_HOST_IP: usize = 4;
const P_POD_IP: usize = 5;
const P_TOKEN: usize = 6;
const P_CID_APP: usize = 7;
const P_CID_LOG: usize = 8;
const P_CID_SIDECAR: usize = 9;

/// What fills the holes of pod `place`, in hole order.
pub fn holes(world: &World, place: PodPlace) -> [String; 10] {
    let (i, rs) = (place.index, world.replica_set(place.rs));
    let seed = i as u64;
    [
        world.pod_name(rs, i),
        uid(1, i),
        (100_000_000 + world.nodes as u64 + i as u64 * 3).to_string(),
        world.node_name(place.node),
        world.node_ip(place.node),
        world.pod_ip(i),
        hex(seed ^ 0x70, 5).replace(|c: char| c.is_ascii_digit(), "x"),
        hex(seed ^ 0xa1, 64),
        hex(seed ^ 0xb2, 64),
        hex(seed ^ 0xc3, 64),
    ]
}

fn probe(path: &str, port: Value, period: u32, timeout: u32, failures: u32) -> Value {
    json!({"httpGet": {"path": path, "port": port, "scheme": "HTTP"}, "timeoutSeconds": timeout,
        "periodSeconds": period, "successThreshold": 1, "failureThreshold": failures})
}

fn quantities(cpu_milli: u64, mem_mib: u64) -> Value {
    let cpu = if cpu_milli.is_multiple_of(1000) {
        (cpu_milli / 1000).to_string()
    } else {
        format!("{cpu_milli}m")
    };
    let mem = if mem_mib.is_multiple_of(1024) {
        format!("{}Gi", mem_mib / 1024)
    } else {
        format!("{mem_mib}Mi")
    };
    json!({"cpu": cpu, "memory": mem})
}

/// The app container's resources: `cpu_milli` requested.
fn app_resources(rs: &ReplicaSet, cpu_milli: u64) -> Value {
    json!({"requests": quantities(cpu_milli, rs.mem_mib), "limits": quantities(2000, rs.mem_mib * 2)})
}

fn shipper_resources() -> Value {
    json!({"requests": quantities(LOG_SHIPPER_CPU_MILLI, 32), "limits": quantities(100, 64)})
}

fn sidecar_resources() -> Value {
    json!({"requests": quantities(SIDECAR_CPU_MILLI, 64), "limits": {"memory": "256Mi"}})
}

fn token() -> String {
    format!("kube-api-access-{}", hole(P_TOKEN))
}

/// The pod spec of ReplicaSet `rs` as the API server stores it (defaults filled in), with the
/// app container requesting `cpu_milli`.
fn pod_spec(rs: &ReplicaSet, cpu_milli: u64) -> Value {
    let (app, ns) = (rs.app.as_str(), rs.namespace.as_str());
    let token = token();
    let api_mount = json!({"name": token, "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"});
    let secure = json!({
        "capabilities": {"drop": ["ALL"]}, "runAsUser": 10001, "runAsNonRoot": true,
        "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false,
        "seccompProfile": {"type": "RuntimeDefault"},
    });
    let mut app_container = json!({
        "name": "app",
        "image": format!("registry.example.com/{ns}/{app}:1.42.3@sha256:{}", hex(rs.index as u64, 64)),
        "command": ["/app/server"],
        "args": ["--port=8080", "--metrics-port=9090", "--config=/etc/app/config.yaml", "--log-format=json"],
        "ports": [
            {"name": "http", "containerPort": 8080, "protocol": "TCP"},
            {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
        ],
        "env": app_env(app, ns),
        "resources": app_resources(rs, cpu_milli),
        "volumeMounts": [
            {"name": "config", "readOnly": true, "mountPath": "/etc/app"},
            {"name": "logs", "mountPath": "/var/log/app"},
            api_mount,
        ],
        "livenessProbe": probe("/healthz", json!("http"), 10, 2, 3),
        "readinessProbe": probe("/ready", json!("http"), 5, 2, 3),
        "startupProbe": probe("/healthz", json!("http"), 2, 1, 30),
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": secure,
    });
    if rs.index.is_multiple_of(2) {
        app_container["resizePolicy"] = json!([
            {"resourceName": "cpu", "restartPolicy": "NotRequired"},
            {"resourceName": "memory", "restartPolicy": "NotRequired"},
        ]);
    }
    let shipper = json!({
        "name": "log-shipper",
        "image": "registry.example.com/platform/fluent-bit:3.2.4@sha256:9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c",
        "args": ["--config=/fluent-bit/etc/fluent-bit.yaml", "--http", "--port=2020"],
        "ports": [{"name": "shipper-http", "containerPort": 2020, "protocol": "TCP"}],
        "env": log_shipper_env(app),
        "resources": shipper_resources(),
        "volumeMounts": [
            {"name": "logs", "readOnly": true, "mountPath": "/var/log/app"},
            {"name": "config", "mountPath": "/fluent-bit/etc", "subPath": "fluent-bit"},
            api_mount,
        ],
        "livenessProbe": probe("/", json!(2020), 10, 1, 3),
        "readinessProbe": probe("/api/v1/health", json!(2020), 10, 1, 3),
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": secure,
    });
    let (class_name, priority) = CLASSES[rs.class];
    let mut spec = json!({
        "volumes": [
            {"name": "config", "configMap": {"name": format!("{app}-config"), "defaultMode": 420}},
            {"name": "logs", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": token, "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ], "defaultMode": 420}},
        ],
        "containers": [app_container, shipper],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "nodeName": hole(P_NODE),
        "securityContext": {"fsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"},
        }]}},
        "schedulerName": "default-scheduler",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ],
        "priority": priority,
        "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority",
        "topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": app}},
        }],
    });
    if !class_name.is_empty() {
        spec["priorityClassName"] = json!(class_name);
    }
    if rs.sidecar {
        spec["initContainers"] = json!([{
            "name": "mesh-proxy",
            "image": "registry.example.com/platform/mesh-proxy:1.24.2@sha256:5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d",
            "args": ["proxy", "sidecar", "--log-level=warning"],
            "ports": [{"name": "http-envoy-prom", "containerPort": 15090, "protocol": "TCP"}],
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
            "resources": sidecar_resources(),
            "volumeMounts": [{"name": token, "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
            "readinessProbe": probe("/healthz/ready", json!(15021), 15, 3, 4),
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
            "restartPolicy": "Always",
        }]);
    }
    spec
}

/// What admission and defaulting add to a pod's spec, which `kubectl apply` never wrote.
const ADDED_POD_FIELDS: [&str; 11] = [
    "nodeName",
    "priority",
    "preemptionPolicy",
    "tolerations",
    "initContainers",
    "serviceAccount",
    "enableServiceLinks",
    "schedulerName",
    "restartPolicy",
    "dnsPolicy",
    "terminationGracePeriodSeconds",
];

/// What defaulting adds to a container.
const ADDED_CONTAINER_FIELDS: [&str; 4] = [
    "terminationMessagePath",
    "terminationMessagePolicy",
    "imagePullPolicy",
    "startupProbe",
];

/// Removes `fields` from `object` (if it is one).
fn remove_fields(object: &mut Value, fields: &[&str]) {
    if let Some(m) = object.as_object_mut() {
        for f in fields {
            m.remove(*f);
        }
    }
}

/// What `kubectl apply` keeps of the Deployment: its template as written (without what
/// admission and defaulting added), padded to ~3.5 kB.
fn last_applied(rs: &ReplicaSet, labels: &Value, spec: &Value) -> String {
    let mut template = spec.clone();
    let token = json!(token());
    remove_fields(&mut template, &ADDED_POD_FIELDS);
    if let Some(vs) = template["volumes"].as_array_mut() {
        vs.retain(|v| v["name"] != token);
    }
    if let Some(cs) = template["containers"].as_array_mut() {
        cs.retain(|c| c["name"] != "log-shipper");
        for c in cs.iter_mut() {
            remove_fields(c, &ADDED_CONTAINER_FIELDS);
            if let Some(ms) = c["volumeMounts"].as_array_mut() {
                ms.retain(|m| m["name"] != token);
            }
        }
    }
    let mut manifest = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": rs.app, "namespace": rs.namespace, "annotations": {}},
        "spec": {
            "replicas": 30,
            "selector": {"matchLabels": {"app": rs.app}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
            "template": {"metadata": {"labels": labels}, "spec": template},
        },
    });
    let len = manifest.to_string().len();
    const TARGET: usize = 3_500;
    const OVERHEAD: usize = r#""description":"""#.len();
    if len + OVERHEAD < TARGET {
        manifest["metadata"]["annotations"]["description"] =
            json!("x".repeat(TARGET - len - OVERHEAD));
    }
    format!("{manifest}\n")
}

fn container_status(
    name: &str,
    image: &str,
    cid: usize,
    started: &str,
    allocated: &Value,
    mounts: &Value,
) -> Value {
    let repo = image.split(':').next().unwrap_or(image);
    let digest = image.rsplit("sha256:").next().unwrap_or_default();
    let mounts: Vec<Value> = mounts
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let mut m = m.clone();
            if m["readOnly"] == json!(true) {
                m["recursiveReadOnly"] = json!("Disabled");
            }
            if let Some(o) = m.as_object_mut() {
                o.remove("subPath");
            }
            m
        })
        .collect();
    json!({
        "name": name,
        "state": {"running": {"startedAt": started}},
        "lastState": {},
        "ready": true,
        "restartCount": 0,
        "image": image.split('@').next().unwrap_or(image),
        "imageID": format!("{repo}@sha256:{digest}"),
        "containerID": format!("containerd://{}", hole(cid)),
        "started": true,
        "allocatedResources": allocated["requests"],
        "resources": allocated,
        "volumeMounts": mounts,
        "user": {"linux": {"uid": 10001, "gid": 0, "supplementalGroups": [0, 10001]}},
    })
}

/// Pod JSON (a list item: no apiVersion/kind) of ReplicaSet `rs` with holes; `pending`: its
/// app container's cpu request grew by [`PENDING_GROWTH_MILLI`] and the kubelet Deferred it.
pub fn pod_json(rs: &ReplicaSet, pending: bool) -> Value {
    let created = rs.index as u64 * 61;
    let (t_create, t_sched) = (at(created), at(created + 1));
    let (t_init, t_ready) = (at(created + 4), at(created + 9));
    let t_resize = at(created + 86_400);
    let generation = if pending { 2 } else { 1 };
    let labels = json!({
        "app": rs.app, "pod-template-hash": rs.hash,
        "app.kubernetes.io/name": rs.app, "app.kubernetes.io/instance": format!("{}-prod", rs.app),
        "app.kubernetes.io/version": "1.42.3", "app.kubernetes.io/component": "backend",
        "team": rs.namespace,
        "app.kubernetes.io/part-of": "shop", "cost-center": format!("cc-{}", rs.index % 17),
    });
    let desired = rs.cpu_milli + if pending { PENDING_GROWTH_MILLI } else { 0 };
    let spec = pod_spec(rs, desired);
    let allocated_app = app_resources(rs, rs.cpu_milli);
    let last = last_applied(rs, &labels, &spec);

    let cond = |t: &str, time: &str| json!({"type": t, "observedGeneration": generation, "status": "True", "lastProbeTime": null, "lastTransitionTime": time});
    let mut conditions = vec![
        cond("PodReadyToStartContainers", &t_init),
        cond("Initialized", &t_init),
        cond("Ready", &t_ready),
        cond("ContainersReady", &t_ready),
        cond("PodScheduled", &t_sched),
    ];
    if pending {
        let node_cpu = rs.pod_cpu_milli() + 29_000;
        conditions.push(json!({
            "type": "PodResizePending", "observedGeneration": 2, "status": "True",
            "lastProbeTime": null, "lastTransitionTime": t_resize, "reason": "Deferred",
            "message": format!("Node didn't have enough resource: cpu, requested: {desired}, used: {node_cpu}, capacity: {}", node_cpu + 300),
        }));
    }
    let containers = spec["containers"].as_array().cloned().unwrap_or_default();
    let mounts = |i: usize| containers.get(i).map(|c| c["volumeMounts"].clone());
    let image = |i: usize| {
        containers[i]["image"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let mut status = json!({
        "observedGeneration": generation,
        "phase": "Running",
        "conditions": conditions,
        "hostIP": hole(P_HOST_IP),
        "hostIPs": [{"ip": hole(P_HOST_IP)}],
        "podIP": hole(P_POD_IP),
        "podIPs": [{"ip": hole(P_POD_IP)}],
        "startTime": t_sched,
        "containerStatuses": [
            container_status("app", &image(0), P_CID_APP, &t_init, &allocated_app, &mounts(0).unwrap_or_default()),
            container_status("log-shipper", &image(1), P_CID_LOG, &t_init, &shipper_resources(), &mounts(1).unwrap_or_default()),
        ],
        "qosClass": "Burstable",
    });
    if rs.sidecar {
        let init = &spec["initContainers"][0];
        status["initContainerStatuses"] = json!([container_status(
            "mesh-proxy",
            init["image"].as_str().unwrap_or_default(),
            P_CID_SIDECAR,
            &t_init,
            &sidecar_resources(),
            &init["volumeMounts"],
        )]);
    }

    let rs_uid = uid(3, rs.index);
    let owner = json!([{
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs.name(),
        "uid": rs_uid, "controller": true, "blockOwnerDeletion": true,
    }]);
    // kube-controller-manager created the pod from the template: what admission added is not
    // its (the scheduler's nodeName, the priority, the service account token volume).
    let mut created_spec = spec.clone();
    if let Some(s) = created_spec.as_object_mut() {
        for k in ["nodeName", "priority", "preemptionPolicy", "tolerations"] {
            s.remove(k);
        }
    }
    let token = token();
    let strip = |v: &mut Value, field: &str, key: &str| {
        if let Some(a) = v[field].as_array_mut() {
            a.retain(|x| x[key] != json!(token));
        }
    };
    strip(&mut created_spec, "volumes", "name");
    for list in ["containers", "initContainers"] {
        if let Some(cs) = created_spec[list].as_array_mut() {
            for c in cs {
                strip(c, "volumeMounts", "name");
            }
        }
    }
    let kcm = json!({
        "f:metadata": {
            "f:generateName": {},
            "f:labels": fields_v1(&json!({"app": 1, "pod-template-hash": 1, "app.kubernetes.io/name": 1,
                "app.kubernetes.io/instance": 1, "app.kubernetes.io/version": 1,
                "app.kubernetes.io/component": 1, "team": 1})),
            "f:ownerReferences": field_set("ownerReferences", &owner),
        },
        "f:spec": fields_v1(&created_spec),
    });
    let mut kubelet_status = status.clone();
    if let Some(s) = kubelet_status.as_object_mut() {
        s.remove("qosClass");
        for atomic in ["containerStatuses", "initContainerStatuses"] {
            if s.contains_key(atomic) {
                s.insert(atomic.into(), json!(0));
            }
        }
    }
    let applied = json!({"f:metadata": {
        "f:annotations": {"f:kubectl.kubernetes.io/last-applied-configuration": {},
            "f:prometheus.io/path": {}, "f:prometheus.io/port": {}, "f:prometheus.io/scrape": {}},
        "f:labels": {"f:app.kubernetes.io/part-of": {}, "f:cost-center": {}},
    }});
    let mut managed_fields = vec![
        managed("kube-controller-manager", "Update", &t_create, None, kcm),
        managed("argocd-controller", "Apply", &t_create, None, applied),
        managed(
            "kubelet",
            "Update",
            &t_ready,
            Some("status"),
            json!({"f:status": fields_v1(&kubelet_status)}),
        ),
    ];
    if pending {
        managed_fields.push(managed(
            "vpa-updater",
            "Update",
            &t_resize,
            Some("resize"),
            json!({"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {"f:resources": {"f:requests": {"f:cpu": {}}}}}}}),
        ));
    }
    json!({
        "metadata": {
            "name": hole(P_NAME),
            "generateName": format!("{}-", rs.name()),
            "namespace": rs.namespace,
            "uid": hole(P_UID),
            "resourceVersion": hole(P_RV),
            "generation": generation,
            "creationTimestamp": t_create,
            "labels": labels,
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": last,
                "prometheus.io/scrape": "true", "prometheus.io/port": "9090",
                "prometheus.io/path": "/metrics",
            },
            "ownerReferences": owner,
            "managedFields": managed_fields,
        },
        "spec": spec,
        "status": status,
    })
}
