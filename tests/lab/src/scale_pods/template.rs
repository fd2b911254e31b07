//! The Deployment-shaped pod of [`super`]: its template (an application container and a
//! log-shipping sidecar with env, probes, ports, security contexts and three volumes) and the
//! `kubectl.kubernetes.io/last-applied-configuration` copy of the Deployment it came from.

use serde_json::{Value, json};

use super::REPLICAS;

/// The app container's requests and limits (cpu, memory).
pub(super) const APP_REQUESTS: (&str, &str) = ("250m", "256Mi");
/// The app container's limits.
pub(super) const APP_LIMITS: (&str, &str) = ("1", "512Mi");
/// The sidecar's requests.
pub(super) const SIDECAR_REQUESTS: (&str, &str) = ("20m", "32Mi");
/// The sidecar's limits.
pub(super) const SIDECAR_LIMITS: (&str, &str) = ("100m", "64Mi");
/// The sidecar's image (tag and digest).
pub(super) const SIDECAR_IMAGE: &str = "registry.example.com/platform/fluent-bit:3.2.4@sha256:9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c";
/// The digest of every app image.
pub(super) const APP_DIGEST: &str =
    "sha256:3b5c1e0a9f7d2c4b6e8a0f1d3c5b7a9e2f4d6c8b0a1e3f5d7c9b2a4e6f8d0c1b";

/// The app container's image in namespace `ns`.
pub(super) fn app_image(app: &str, ns: &str) -> String {
    format!("registry.example.com/{ns}/{app}:1.42.3@{APP_DIGEST}")
}

/// The name of the projected ServiceAccount token volume.
pub(super) const TOKEN_VOLUME: &str = "kube-api-access-7x2kq";

/// The env of Deployment `app`'s application container in namespace `ns`: the downward API,
/// a Secret, plain values (the realistic pod's, shared with `benches/scale/pod.rs`).
pub fn app_env(app: &str, ns: &str) -> Value {
    let fields = |path: &str| json!({"fieldRef": {"apiVersion": "v1", "fieldPath": path}});
    json!([
        {"name": "POD_NAME", "valueFrom": fields("metadata.name")},
        {"name": "POD_NAMESPACE", "valueFrom": fields("metadata.namespace")},
        {"name": "POD_IP", "valueFrom": fields("status.podIP")},
        {"name": "NODE_NAME", "valueFrom": fields("spec.nodeName")},
        {"name": "GOMAXPROCS", "valueFrom": {"resourceFieldRef": {"containerName": "app", "resource": "limits.cpu", "divisor": "1"}}},
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": format!("{app}-db"), "key": "password"}}},
        {"name": "DB_HOST", "value": format!("postgres-primary.{ns}.svc.cluster.local")},
        {"name": "LOG_LEVEL", "value": "info"},
        {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector.observability.svc.cluster.local:4317"},
        {"name": "FEATURE_FLAGS", "value": "checkout-v2=true,recommendations=false,async-invoices=true,new-pricing=false"},
    ])
}

/// The env of Deployment `app`'s log-shipping sidecar.
pub fn log_shipper_env(app: &str) -> Value {
    let fields = |path: &str| json!({"fieldRef": {"apiVersion": "v1", "fieldPath": path}});
    json!([
        {"name": "POD_NAME", "valueFrom": fields("metadata.name")},
        {"name": "POD_NAMESPACE", "valueFrom": fields("metadata.namespace")},
        {"name": "NODE_NAME", "valueFrom": fields("spec.nodeName")},
        {"name": "APP_NAME", "value": app},
        {"name": "FLUENT_BIT_HTTP_PORT", "value": "2020"},
        {"name": "LOKI_URL", "value": "http://loki-gateway.observability.svc.cluster.local/loki/api/v1/push"},
        {"name": "LOG_PATH", "value": "/var/log/app/*.log"},
        {"name": "BUFFER_SIZE", "value": "5MB"},
        {"name": "FLUSH_INTERVAL", "value": "5"},
        {"name": "TENANT_ID", "valueFrom": {"configMapKeyRef": {"name": "logging", "key": "tenant"}}},
    ])
}

/// The pod template of Deployment `app`: an application container and a log-shipping sidecar.
pub(super) fn pod_template(app: &str, hash: &str, ns: &str) -> Value {
    let (app_env, sidecar_env) = (app_env(app, ns), log_shipper_env(app));
    let (mounts_app, mounts_sidecar) = (app_mounts(), sidecar_mounts());
    let secure = json!({
        "runAsNonRoot": true, "runAsUser": 10001, "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    });
    json!({
        "metadata": {"labels": {
            "app": app, "pod-template-hash": hash,
            "app.kubernetes.io/name": app, "app.kubernetes.io/instance": format!("{app}-prod"),
            "app.kubernetes.io/version": "1.42.3", "app.kubernetes.io/component": "backend",
            "team": ns,
        }},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": app_image(app, ns),
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/app/server"],
                    "args": ["--port=8080", "--metrics-port=9090", "--config=/etc/app/config.yaml", "--log-format=json"],
                    "ports": [
                        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                        {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
                    ],
                    "env": app_env,
                    "resources": {
                        "requests": {"cpu": APP_REQUESTS.0, "memory": APP_REQUESTS.1},
                        "limits": {"cpu": APP_LIMITS.0, "memory": APP_LIMITS.1},
                    },
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                        "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 2, "failureThreshold": 3},
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": "http", "scheme": "HTTP"},
                        "periodSeconds": 5, "timeoutSeconds": 2, "successThreshold": 1, "failureThreshold": 3},
                    "startupProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                        "periodSeconds": 2, "failureThreshold": 30},
                    "volumeMounts": mounts_app,
                    "securityContext": secure,
                },
                {
                    "name": "log-shipper",
                    "image": SIDECAR_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "args": ["--config=/fluent-bit/etc/fluent-bit.yaml", "--http", "--port=2020"],
                    "ports": [{"name": "shipper-http", "containerPort": 2020, "protocol": "TCP"}],
                    "env": sidecar_env,
                    "resources": {
                        "requests": {"cpu": SIDECAR_REQUESTS.0, "memory": SIDECAR_REQUESTS.1},
                        "limits": {"cpu": SIDECAR_LIMITS.0, "memory": SIDECAR_LIMITS.1},
                    },
                    "livenessProbe": {"httpGet": {"path": "/", "port": 2020, "scheme": "HTTP"},
                        "periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3},
                    "readinessProbe": {"httpGet": {"path": "/api/v1/health", "port": 2020, "scheme": "HTTP"},
                        "periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3},
                    "volumeMounts": mounts_sidecar,
                    "securityContext": secure,
                },
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": format!("{app}-config"), "defaultMode": 420}},
                {"name": "logs", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": TOKEN_VOLUME, "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                ]}},
            ],
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "securityContext": {"fsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100,
                "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"},
            }]}},
        },
    })
}

/// The app container's volume mounts (name, path, read-only).
pub(super) fn app_mounts() -> Value {
    json!([
        {"name": "config", "mountPath": "/etc/app", "readOnly": true},
        {"name": "logs", "mountPath": "/var/log/app"},
        {"name": TOKEN_VOLUME, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true},
    ])
}

/// The sidecar's volume mounts.
pub(super) fn sidecar_mounts() -> Value {
    json!([
        {"name": "logs", "mountPath": "/var/log/app", "readOnly": true},
        {"name": "config", "mountPath": "/fluent-bit/etc", "subPath": "fluent-bit"},
        {"name": TOKEN_VOLUME, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true},
    ])
}

/// What `kubectl apply` stores: the Deployment's manifest as applied — without what admission
/// adds to its pods (the log-shipping sidecar is injected, the tolerations defaulted) — padded
/// to ~3 KB with a description annotation when shorter.
pub(super) fn last_applied(app: &str, ns: &str, template: &Value) -> String {
    let mut applied = template.clone();
    if let Some(containers) = applied["spec"]["containers"].as_array_mut() {
        containers.retain(|c| c["name"] != "log-shipper");
    }
    if let Some(spec) = applied["spec"].as_object_mut() {
        spec.remove("tolerations");
    }
    let mut manifest = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": app, "namespace": ns, "annotations": {}},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": app}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
            "template": applied,
        },
    });
    let len = manifest.to_string().len();
    const TARGET: usize = 3 * 1024;
    const OVERHEAD: usize = r#""description":"""#.len();
    if len + OVERHEAD < TARGET {
        manifest["metadata"]["annotations"]["description"] =
            json!("x".repeat(TARGET - len - OVERHEAD));
    }
    format!("{manifest}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_applied_copy_is_about_3_kb() {
        let template = pod_template("svc-0001", "abc", "team-01");
        let text = last_applied("svc-0001", "team-01", &template);
        assert!((3000..4000).contains(&text.len()), "{}: {text}", text.len());
    }
}
