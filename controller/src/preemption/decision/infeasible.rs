//! Resizes no victim can help: an Infeasible resize reverted to the pod's actual resources when
//! the policy asks ([`revert_infeasible`]), and a Deferred resize larger than the node's
//! allocatable, for which nothing is preempted ([`never_fits`]).

use k8s_openapi::api::core::v1::Pod;
use resize_guard_policy::policy::Policy;
use resize_guard_policy::upstream::pod::{REASON_INFEASIBLE, resize_pending};
use resize_guard_policy::verdict::Infeasibility;

use super::{Decision, FAILED_RETRY};

/// The revert decision for a pod the kubelet marked Infeasible for its current generation, when
/// the policy asks for it and the actual resources of every container are known.
///
/// Which kubelets mark Infeasible: v1.33–v1.35 for a resize larger than allocatable
/// ("Node didn't have enough capacity: …"); v1.36+ no longer do (see [`never_fits`]), and a
/// v1.37 kubelet marks Infeasible only in `podResizesAdmitHandler.Admit`
/// (`pkg/kubelet/allocation/handlers.go`): the locked-on `InPlacePodVerticalScaling` gate off,
/// swap-enabled containers, pod-level resources with its kubelet gate off, memory-backed
/// `emptyDir` size limits, or a Guaranteed pod's cpu/memory under the static CPU/Memory Manager.
///
/// Never in a namespace the policy leaves alone, nor in `kube-system` or the install namespace
/// ([`Policy::may_revert_in`]): `namespaces.exclude` means resize-guard writes nothing there.
pub(super) fn revert_infeasible(
    pod: &Pod,
    policy: &Policy,
    install_namespace: &str,
    generation: i64,
) -> Option<Decision> {
    if !policy.feasibility.revert_infeasible || policy.is_audit() {
        return None;
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    if !policy.may_revert_in(namespace, install_namespace) {
        return None;
    }
    let cond = resize_pending(pod)?;
    let current = cond.observed_generation.is_none_or(|g| g == generation);
    if cond.reason.as_deref() != Some(REASON_INFEASIBLE) || cond.status != "True" || !current {
        return None;
    }
    let spec = pod.spec.as_ref()?;
    let status = pod.status.as_ref()?;
    let actual =
        |name: &str, statuses: Option<&Vec<k8s_openapi::api::core::v1::ContainerStatus>>| {
            statuses?
                .iter()
                .find(|s| s.name == name)
                .and_then(|s| s.resources.clone())
        };
    let mut containers = Vec::new();
    for c in &spec.containers {
        let r = actual(&c.name, status.container_statuses.as_ref())?;
        containers.push(serde_json::json!({"name": c.name, "resources": r}));
    }
    let mut inits = Vec::new();
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| resize_guard_policy::upstream::pod::is_sidecar(c))
    {
        if let Some(r) = actual(&c.name, status.init_container_statuses.as_ref()) {
            inits.push(serde_json::json!({"name": c.name, "resources": r}));
        }
    }
    let mut patch = serde_json::json!({"spec": {"containers": containers}});
    if !inits.is_empty() {
        patch["spec"]["initContainers"] = serde_json::Value::Array(inits);
    }
    Some(Decision::Revert {
        patch,
        note: format!(
            "resize-guard reverted an Infeasible resize to the pod's actual resources (feasibility.revertInfeasible); the kubelet said: {}",
            cond.message.as_deref().unwrap_or("Infeasible")
        ),
    })
}

/// A Deferred resize larger than the node's allocatable: no victim can make room, so nothing is
/// preempted. v1.36+ API servers refuse such a resize (`NodeCapacity`), but one stored before the
/// node's allocatable shrank (a kubelet restarted with a larger reservation or on a smaller
/// machine) reaches a v1.37 kubelet, which keeps it Deferred for ever: its resize admission
/// (`pkg/kubelet/allocation/handlers.go`, `podResizesAdmitHandler.Admit`) has no capacity check,
/// so the predicate's `OutOfcpu`/`OutOfmemory` becomes Deferred like any full node.
pub(super) fn never_fits(pod: &Pod, i: &Infeasibility) -> Decision {
    let kubelet = resize_pending(pod)
        .and_then(|c| c.message.clone())
        .unwrap_or_else(|| "Deferred".to_owned());
    Decision::Failed {
        reason: "NeverFits",
        note: format!(
            "cannot make room on node {node} ({kubelet}): the pod would request {res} {req} but the \
             node's allocatable {res} is {cap}, so no preemption can make this resize fit; \
             resize-guard preempts nothing. Resize to at most {cap} {res}, or move the workload to a \
             larger node.",
            node = i.node,
            res = i.resource,
            req = i.resource.format(i.requested),
            cap = i.resource.format(i.allocatable),
        ),
        after: FAILED_RETRY,
    }
}
