//! The named disagreement classes of the issue "Agree with the API server on every resize":
//! one pod and one resize each, on a 32-cpu hollow node (upstream's v1.37.2 kubelet) with
//! default feature gates, or on one whose kubelet runs with
//! `InPlacePodLevelResourcesVerticalScaling` off and so does not declare it.

use serde_json::{Value, json};

/// Which node a scenario's pod is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// A v1.37.2 kubelet with default feature gates: declares what it declares.
    Default,
    /// A v1.37.2 kubelet with `InPlacePodLevelResourcesVerticalScaling=false` (beta, so it can
    /// be turned off): `status.declaredFeatures` lacks it.
    NoPodLevelResize,
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
        // (d) A pod-level resize needs the node to declare InPlacePodLevelResourcesVerticalScaling
        // (NodeDeclaredFeatureValidator); a v1.37 kubelet declares it unless its gate is off.
        //
        // The init-container variant (a plain init container resized on a node that does not
        // declare InPlacePodVerticalScalingInitContainers) cannot happen against a v1.37
        // kubelet: that gate is GA with LockToDefault in v1.37
        // (pkg/features/kube_features.go, `InPlacePodVerticalScalingInitContainers`:
        // `{Version: "1.37", Default: true, PreRelease: GA, LockToDefault: true}`), so every
        // v1.37 kubelet declares it and refuses to start with it off. Only version skew produces
        // it: a v1.36 kubelet with the (then beta) gate off, or a v1.35 one, which declares no
        // features at all (NodeDeclaredFeatures alpha, off).
        Scenario {
            key: "pod-level-on-node-without-feature",
            node: NodeKind::NoPodLevelResize,
            spec: pod_level_pod(),
            patch: pod_level_patch(),
        },
        Scenario {
            key: "pod-level-on-default-node",
            node: NodeKind::Default,
            spec: pod_level_pod(),
            patch: pod_level_patch(),
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
        // Larger than the node (32 cpu, 64Gi): refused by `PodResizeValidator` on v1.36+
        // (cpu alone, then cpu and memory, joined by "; "), stored on v1.33–v1.35.
        Scenario {
            key: "beyond-allocatable",
            node: NodeKind::Default,
            spec: guaranteed_pod(),
            patch: json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "40"}, "limits": {"cpu": "40"}}}]}}),
        },
        Scenario {
            key: "beyond-allocatable-both",
            node: NodeKind::Default,
            spec: guaranteed_pod(),
            patch: json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "40", "memory": "100Gi"}, "limits": {"cpu": "40", "memory": "100Gi"}}}]}}),
        },
        // Pod-level `hugepages-2Mi` added, no cpu or memory value changed: upstream refuses it
        // ("only cpu and memory resources are mutable at pod-level",
        // `validatePodLevelResourcesResize`); resize-guard's decision is `invalid`, not
        // `no-change`.
        Scenario {
            key: "pod-level-hugepages-added",
            node: NodeKind::Default,
            spec: pod_level_pod(),
            patch: json!({"spec": {"resources": {"requests": {"hugepages-2Mi": "2Mi"}, "limits": {"hugepages-2Mi": "2Mi"}}}}),
        },
        // The QoS rule alone: a Guaranteed pod's cpu limit raised, its request kept.
        Scenario {
            key: "qos-only",
            node: NodeKind::Default,
            spec: guaranteed_pod(),
            patch: json!({"spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "1"}}}]}}),
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

/// A Guaranteed pod of one container, 500m and 128Mi.
fn guaranteed_pod() -> Value {
    json!({
        "containers": [app("app", json!({"requests": {"cpu": "500m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}}))],
    })
}

/// A Guaranteed pod with pod-level requests = limits.
fn pod_level_pod() -> Value {
    let g = |cpu: &str, memory: &str| json!({"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}});
    json!({
        "containers": [app("app", g("250m", "64Mi"))],
        "resources": g("500m", "128Mi"),
    })
}

/// The pod-level cpu grows; the pod stays Guaranteed.
fn pod_level_patch() -> Value {
    json!({"spec": {"resources": {"requests": {"cpu": "600m"}, "limits": {"cpu": "600m"}}}})
}
