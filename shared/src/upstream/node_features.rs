//! Node-declared features a resize needs: v1.37's `NodeDeclaredFeatureValidator` admission
//! plugin (`plugin/pkg/admission/nodedeclaredfeatures/admission.go`) refuses a `pods/resize`
//! whose changes need a feature the pod's node does not list in `status.declaredFeatures`
//! ("pod update requires features … which are not available on node …"). It runs in the
//! validating phase, after built-in validation and before the capacity check and validating
//! webhooks, so `/mutate` must step aside for it rather than call the resize Infeasible or fine.
//!
//! The resize features, in the registry's order (`k8s.io/component-helpers`
//! `nodedeclaredfeatures/features/registry.go`, v0.37.2), and when `InferForUpdate` needs them:
//! - `InPlacePodLevelResourcesVerticalScaling`: pod-level resources differ
//!   (`pod_level_resource_resize.go`, `Semantic.DeepEqual`);
//! - `InPlacePodVerticalScalingInitContainers`: a non-sidecar init container's resources differ
//!   (`nonsidecar_initcontainers_resize.go`; upstream uses `reflect.DeepEqual`, which also sees a
//!   respelled quantity — the webhook only ever sees canonical spellings, so values are compared);
//! - `InPlacePodVerticalScalingMemoryBackedVolumes`: an emptyDir size limit changed — never on
//!   v1.37 with its alpha gate off, as the resize strategy then keeps the old volumes.
//!
//! The plugin only looks when the pod is bound and the update changes its generation.

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::upstream::pod::is_sidecar;
use crate::upstream::validation::same_requirements;

/// Needed by a pod-level resources resize.
pub const POD_LEVEL_RESIZE: &str = "InPlacePodLevelResourcesVerticalScaling";
/// Needed by a resize of a non-sidecar init container.
pub const INIT_CONTAINER_RESIZE: &str = "InPlacePodVerticalScalingInitContainers";

/// What a v1.37.2 kubelet with default feature gates declares: each registered feature whose
/// `Discover` finds its gate on (`ExtendWebSocketsToKubelet`,
/// `RestartAllContainersOnContainerExits` beta; the two resize features beta/GA; the rest alpha and
/// off).
pub const KUBELET_DEFAULTS_V1_37: [&str; 4] = [
    "ExtendWebSocketsToKubelet",
    POD_LEVEL_RESIZE,
    INIT_CONTAINER_RESIZE,
    "RestartAllContainersOnContainerExits",
];

/// `status.declaredFeatures` of a node (absent means none).
pub fn declared(node: &Node) -> Vec<String> {
    node.status
        .as_ref()
        .and_then(|s| s.declared_features.clone())
        .unwrap_or_default()
}

/// The features `old → new` (as prepared by the resize strategy) needs, in upstream's order.
pub fn required(old: &Pod, new: &Pod) -> Vec<&'static str> {
    let (Some(o), Some(n)) = (old.spec.as_ref(), new.spec.as_ref()) else {
        return vec![];
    };
    let mut out = vec![];
    if (o.resources.is_some() || n.resources.is_some())
        && !same_requirements(o.resources.as_ref(), n.resources.as_ref())
    {
        out.push(POD_LEVEL_RESIZE);
    }
    let news = n.init_containers.as_deref().unwrap_or(&[]);
    let init_changed = o
        .init_containers
        .iter()
        .flatten()
        .zip(news)
        .any(|(oc, nc)| {
            !is_sidecar(oc) && !same_requirements(oc.resources.as_ref(), nc.resources.as_ref())
        });
    if init_changed {
        out.push(INIT_CONTAINER_RESIZE);
    }
    out
}

/// The plugin's refusal for `old → new` on a node declaring `declared`, if any: upstream's
/// message without the `pods "name" is forbidden: ` prefix.
pub fn refusal(old: &Pod, new: &Pod, node: &str, declared: &[String]) -> Option<String> {
    let bound = new
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if !bound {
        return None;
    }
    let missing: Vec<&str> = required(old, new)
        .into_iter()
        .filter(|f| !declared.iter().any(|d| d == f))
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "pod update requires features {} which are not available on node {node:?}",
            missing.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{PodBuilder, container};

    fn pod() -> PodBuilder {
        PodBuilder::new("ns", "p")
            .node("n1")
            .container(container("app").guaranteed("100m", "64Mi"))
            .init_container(container("setup").guaranteed("100m", "64Mi"))
            .init_container(container("proxy").guaranteed("100m", "64Mi").sidecar())
    }

    #[test]
    fn init_container_resize_needs_its_feature_and_sidecars_do_not() {
        let old = pod().build();
        let init = pod().resize("setup", "cpu", "200m").build();
        let side = pod().resize("proxy", "cpu", "200m").build();
        assert_eq!(required(&old, &init), vec![INIT_CONTAINER_RESIZE]);
        assert!(required(&old, &side).is_empty());
        assert_eq!(
            refusal(&old, &init, "n1", &[]).as_deref(),
            Some(
                "pod update requires features InPlacePodVerticalScalingInitContainers which are not available on node \"n1\""
            )
        );
        assert_eq!(
            refusal(&old, &init, "n1", &[INIT_CONTAINER_RESIZE.to_owned()]),
            None
        );
    }

    #[test]
    fn pod_level_change_needs_its_feature_and_respelling_does_not() {
        let old = pod().pod_limit("cpu", "1").build();
        let respelled = pod().pod_limit("cpu", "1000m").build();
        let grown = pod().pod_limit("cpu", "2").build();
        assert!(required(&old, &respelled).is_empty());
        assert_eq!(required(&old, &grown), vec![POD_LEVEL_RESIZE]);
    }

    #[test]
    fn unbound_pods_are_not_checked() {
        let old = PodBuilder::new("ns", "p")
            .container(container("app"))
            .init_container(container("setup").guaranteed("100m", "64Mi"))
            .build();
        let new = PodBuilder::new("ns", "p")
            .container(container("app"))
            .init_container(container("setup").guaranteed("200m", "64Mi"))
            .build();
        assert_eq!(refusal(&old, &new, "n1", &[]), None);
    }
}
