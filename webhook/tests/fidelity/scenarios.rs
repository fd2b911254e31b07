//! The named disagreement classes of the issue "Agree with the API server on every resize":
//! one pod and one resize each, on a 32-cpu node that declares a v1.37.2 kubelet's features or
//! on one that declares none.

use serde_json::{Value, json};

/// Which node a scenario's pod is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// Declares what a v1.37.2 kubelet declares.
    Default,
    /// Declares nothing (`status.declaredFeatures` empty), like a kubelet older than v1.36.
    NoFeatures,
}

/// A named scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Key the tests look it up by (also the pod's name).
    pub key: &'static str,
    /// The node.
    pub node: NodeKind,
    /// `spec` of the pod, without `nodeName`.
    pub spec: Value,
    /// The strategic-merge resize.
    pub patch: Value,
}

/// Allocatable of the scenarios' nodes.
pub const NODE: (&str, &str) = ("32", "64Gi");

fn app(name: &str, resources: Value) -> Value {
    json!({"name": name, "image": "registry.example/app:1", "resources": resources})
}

/// Every named scenario.
pub fn all() -> Vec<Scenario> {
    vec![
        // (a) Pod-level requests are defaulted; the new container memory limit makes the
        // defaulted pod-level memory limit appear: Burstable → Guaranteed upstream.
        Scenario {
            key: "pod-level-defaulting",
            node: NodeKind::Default,
            spec: json!({
                "containers": [app("app", json!({"requests": {"cpu": "500m", "memory": "128Mi"}, "limits": {"cpu": "500m"}}))],
                "resources": {"limits": {"cpu": "500m"}},
            }),
            patch: json!({"spec": {"containers": [{"name": "app", "resources": {"limits": {"memory": "128Mi"}}}]}}),
        },
        // (b) QoS per container and per resource: the pod stays Burstable, but app1's request
        // is above its limit.
        Scenario {
            key: "per-container-qos",
            node: NodeKind::Default,
            spec: json!({
                "containers": [
                    app("app0", json!({"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}})),
                    app("app1", json!({"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "100m", "memory": "128Mi"}})),
                ],
            }),
            patch: json!({"spec": {"containers": [{"name": "app1", "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "256Mi"}}}]}}),
        },
        // (c) Invalid resizes that are also larger than the node.
        Scenario {
            key: "huge-request-above-limit",
            node: NodeKind::Default,
            spec: json!({
                "containers": [app("app", json!({"requests": {"cpu": "500m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}))],
            }),
            patch: json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "200"}}}]}}),
        },
        Scenario {
            key: "pod-request-below-aggregate",
            node: NodeKind::Default,
            spec: json!({
                "containers": [app("app", json!({"requests": {"cpu": "500m", "memory": "128Mi"}}))],
                "resources": {"requests": {"cpu": "1", "memory": "256Mi"}},
            }),
            patch: json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "200"}}}]}}),
        },
        Scenario {
            key: "container-limit-above-pod-limit",
            node: NodeKind::Default,
            spec: json!({
                "containers": [app("app", json!({"requests": {"cpu": "500m", "memory": "128Mi"}, "limits": {"cpu": "1"}}))],
                "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
            }),
            patch: json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "100"}, "limits": {"cpu": "200"}}}]}}),
        },
        // (d) A plain init container resized: needs the node to declare
        // InPlacePodVerticalScalingInitContainers.
        Scenario {
            key: "init-on-node-without-features",
            node: NodeKind::NoFeatures,
            spec: init_pod(),
            patch: init_patch(),
        },
        Scenario {
            key: "init-on-default-node",
            node: NodeKind::Default,
            spec: init_pod(),
            patch: init_patch(),
        },
        // Found by the generated cases (seed 2619885852446479584, cases #1469 and #514).
        // Pod-level resources, spelled with a fraction, added to a Guaranteed pod whose
        // RuntimeClass has overhead: upstream accepts it and the pod stays Guaranteed.
        Scenario {
            key: "pod-level-added-with-overhead",
            node: NodeKind::Default,
            spec: json!({
                "runtimeClassName": "fidelity-overhead",
                "containers": [app("app", json!({"requests": {"cpu": "500m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}}))],
            }),
            patch: json!({"spec": {"resources": {"requests": {"cpu": "1", "memory": "0.25Gi"}, "limits": {"cpu": "1", "memory": "0.25Gi"}}}}),
        },
        // An empty pod-level `resources` object appears (the patch only deletes a key that is
        // not there) next to a resize past the node: upstream's validation refuses the empty
        // object before any capacity check.
        Scenario {
            key: "empty-pod-level-resources",
            node: NodeKind::Default,
            spec: json!({
                "containers": [app("app", json!({"requests": {"cpu": "1", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}))],
            }),
            patch: json!({"spec": {
                "containers": [{"name": "app", "resources": {"requests": {"cpu": "200"}, "limits": {"cpu": "200"}}}],
                "resources": {"requests": {"cpu": null}},
            }}),
        },
    ]
}

fn init_pod() -> Value {
    let g = |cpu: &str| json!({"requests": {"cpu": cpu, "memory": "64Mi"}, "limits": {"cpu": cpu, "memory": "64Mi"}});
    json!({
        "initContainers": [app("init", g("100m"))],
        "containers": [app("app", g("250m"))],
    })
}

fn init_patch() -> Value {
    json!({"spec": {"initContainers": [{"name": "init", "resources": {"requests": {"cpu": "200m"}, "limits": {"cpu": "200m"}}}]}})
}
