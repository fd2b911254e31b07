//! Facts about a pod that every decision needs: identity, priority, lifecycle, criticality and
//! the kubelet's resize conditions.
//!
//! These mirror small upstream helpers (`corev1helpers.PodPriority`, `kubetypes.IsCriticalPod`,
//! `resource.IsPodResizeDeferred`, …) and are kept here so the webhook and the controller read a
//! pod the same way.

use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::quantity::{QuantityError, parse_nanos};

/// Annotation the kubelet puts on mirror pods of static pods (`kubetypes.ConfigMirrorAnnotationKey`).
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// `scheduling.SystemCriticalPriority`: pods at or above it are system-critical.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
/// Condition type the kubelet sets while a resize waits (`v1.PodResizePending`).
pub const RESIZE_PENDING: &str = "PodResizePending";
/// Condition type the kubelet sets while a resize is actuated (`v1.PodResizeInProgress`).
pub const RESIZE_IN_PROGRESS: &str = "PodResizeInProgress";
/// Reason of a resize that may fit later (`v1.PodReasonDeferred`).
pub const REASON_DEFERRED: &str = "Deferred";
/// Reason of a resize that can never fit on this node (`v1.PodReasonInfeasible`).
pub const REASON_INFEASIBLE: &str = "Infeasible";

/// Namespace, name and UID of a pod. Displays as `namespace/name`; serialized with these three
/// field names (the controller records its planned victims this way).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PodKey {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid` (empty for objects not yet stored).
    pub uid: String,
}

impl PodKey {
    /// The key of a pod.
    pub fn of(pod: &Pod) -> Self {
        PodKey {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for PodKey {
    /// `namespace/name`, as `kubectl` and Events name pods.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// `corev1helpers.PodPriority`: `spec.priority`, or 0 when unset.
pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// True when the pod's `preemptionPolicy` is `Never` (upstream `PodEligibleToPreemptOthers`).
pub fn never_preempts(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.preemption_policy.as_deref())
        == Some("Never")
}

/// The node the pod is bound to, if any.
pub fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// True when deletion has started (`metadata.deletionTimestamp` is set).
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// True when the pod finished (`Succeeded` or `Failed`): its resources are released.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// True for the mirror of a static pod: it cannot be resized or evicted through the API.
pub fn is_mirror(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
}

/// Who controls a pod, as far as preemption cares (`metadata.ownerReferences`, the entry with
/// `controller: true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Controller {
    /// No controlling owner: a bare pod, gone for good once preempted.
    None,
    /// A DaemonSet, which recreates the pod on the same node at once.
    DaemonSet,
    /// Anything else (ReplicaSet, StatefulSet, Job, …), which recreates it elsewhere or later.
    #[default]
    Other,
}

/// The pod's controlling owner.
pub fn controller(pod: &Pod) -> Controller {
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    match owner {
        None => Controller::None,
        Some(o) if o.kind == "DaemonSet" && o.api_version.starts_with("apps/") => {
            Controller::DaemonSet
        }
        Some(_) => Controller::Other,
    }
}

/// Upstream `kubetypes.IsCriticalPod`: static, mirror, or priority at least
/// [`SYSTEM_CRITICAL_PRIORITY`]. The kubelet preempts for these itself (v1.33–v1.37 without the
/// scheduler gate), so resize-guard never acts for them and never takes them as victims.
pub fn is_critical(pod: &Pod) -> bool {
    is_mirror(pod) || priority(pod) >= SYSTEM_CRITICAL_PRIORITY
}

/// `status.startTime`, which orders pods of equal priority (older is more important).
pub fn start_time(pod: &Pod) -> Option<&Time> {
    pod.status.as_ref().and_then(|s| s.start_time.as_ref())
}

/// True for a sidecar: an init container with `restartPolicy: Always`.
pub fn is_sidecar(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// The first `PodResizePending` condition, as upstream `IsPodResizeDeferred` reads it.
pub fn resize_pending(pod: &Pod) -> Option<&PodCondition> {
    pod.status.as_ref().and_then(resize_pending_in)
}

/// How long at `now` the `PodResizePending` condition has held, by its `lastTransitionTime` (the
/// kubelet's wall clock): zero without one, or when it lies in the future.
pub fn resize_pending_for(pod: &Pod, now: Timestamp) -> Duration {
    resize_pending(pod)
        .and_then(|c| c.last_transition_time.as_ref())
        .and_then(|since| Duration::try_from(now.duration_since(since.0)).ok())
        .unwrap_or(Duration::ZERO)
}

/// The first `PodResizePending` condition of a status.
pub fn resize_pending_in(status: &PodStatus) -> Option<&PodCondition> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == RESIZE_PENDING)
}

/// Upstream `resource.IsPodResizeInfeasible`: the first `PodResizePending` says `Infeasible`.
pub fn is_resize_infeasible(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(is_infeasible_status)
}

/// [`is_resize_infeasible`] for a status alone.
pub fn is_infeasible_status(status: &PodStatus) -> bool {
    resize_pending_in(status).and_then(|c| c.reason.as_deref()) == Some(REASON_INFEASIBLE)
}

/// Upstream `resource.IsPodResizeDeferred`: the first `PodResizePending` says `Deferred`.
pub fn is_resize_deferred(pod: &Pod) -> bool {
    resize_pending(pod).and_then(|c| c.reason.as_deref()) == Some(REASON_DEFERRED)
}

/// The stricter test the controller acts on (ARCHITECTURE.md §5): the first `PodResizePending` condition
/// is `Deferred` with status `True`, it speaks of the current generation when it carries an
/// `observedGeneration` (older kubelets do not), and the pod is bound to a node.
pub fn is_deferred_now(pod: &Pod) -> bool {
    let Some(cond) = resize_pending(pod) else {
        return false;
    };
    let current = match (cond.observed_generation, pod.metadata.generation) {
        (Some(observed), Some(generation)) => observed == generation,
        _ => true,
    };
    cond.reason.as_deref() == Some(REASON_DEFERRED)
        && cond.status == "True"
        && current
        && node_name(pod).is_some()
        && !is_terminating(pod)
}

/// All regular and init containers of a spec, in spec order (regular first).
pub fn all_containers(spec: &PodSpec) -> impl Iterator<Item = &Container> {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
}

/// Checks every cpu/memory quantity in the pod's spec is valid syntax, naming the first bad one.
pub fn validate_quantities(pod: &Pod) -> Result<(), QuantityError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    let containers = all_containers(spec).filter_map(|c| c.resources.as_ref());
    for req in containers.chain(spec.resources.as_ref()) {
        for list in [req.requests.as_ref(), req.limits.as_ref()]
            .into_iter()
            .flatten()
        {
            for (name, q) in list {
                if name == "cpu" || name == "memory" {
                    parse_nanos(&q.0)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_with_conditions(generation: i64, conds: Vec<PodCondition>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.generation = Some(generation);
        pod.spec = Some(PodSpec {
            node_name: Some("n1".into()),
            ..Default::default()
        });
        pod.status = Some(PodStatus {
            conditions: Some(conds),
            ..Default::default()
        });
        pod
    }

    fn cond(type_: &str, reason: &str, status: &str, observed: Option<i64>) -> PodCondition {
        PodCondition {
            type_: type_.into(),
            reason: Some(reason.into()),
            status: status.into(),
            observed_generation: observed,
            ..Default::default()
        }
    }

    #[test]
    fn deferred_requires_current_generation_true_status_and_a_node() {
        let p = pod_with_conditions(3, vec![cond(RESIZE_PENDING, "Deferred", "True", Some(3))]);
        assert!(is_deferred_now(&p));
        let stale = pod_with_conditions(4, vec![cond(RESIZE_PENDING, "Deferred", "True", Some(3))]);
        assert!(!is_deferred_now(&stale));
        assert!(
            is_resize_deferred(&stale),
            "upstream ignores the generation"
        );
        let false_status =
            pod_with_conditions(3, vec![cond(RESIZE_PENDING, "Deferred", "False", Some(3))]);
        assert!(!is_deferred_now(&false_status));
        let mut unbound = p.clone();
        unbound.spec = Some(PodSpec::default());
        assert!(!is_deferred_now(&unbound));
    }

    #[test]
    fn deferred_without_observed_generation_is_accepted_for_older_kubelets() {
        let p = pod_with_conditions(3, vec![cond(RESIZE_PENDING, "Deferred", "True", None)]);
        assert!(is_deferred_now(&p));
    }

    #[test]
    fn only_the_first_resize_pending_condition_counts_like_upstream() {
        let p = pod_with_conditions(
            1,
            vec![
                cond(RESIZE_PENDING, "Infeasible", "True", Some(1)),
                cond(RESIZE_PENDING, "Deferred", "True", Some(1)),
            ],
        );
        assert!(is_resize_infeasible(&p));
        assert!(!is_resize_deferred(&p));
        assert!(!is_deferred_now(&p));
    }

    #[test]
    fn critical_pods_are_mirror_pods_or_system_priority() {
        let mut p = Pod::default();
        assert!(!is_critical(&p));
        p.spec = Some(PodSpec {
            priority: Some(SYSTEM_CRITICAL_PRIORITY),
            ..Default::default()
        });
        assert!(is_critical(&p));
        let mut m = Pod::default();
        m.metadata.annotations = Some([(MIRROR_ANNOTATION.to_owned(), "x".to_owned())].into());
        assert!(is_critical(&m) && is_mirror(&m));
    }

    #[test]
    fn priority_defaults_to_zero_and_never_policy_is_detected() {
        let mut p = Pod::default();
        assert_eq!(priority(&p), 0);
        assert!(!never_preempts(&p));
        p.spec = Some(PodSpec {
            preemption_policy: Some("Never".into()),
            priority: Some(7),
            ..Default::default()
        });
        assert!(never_preempts(&p));
        assert_eq!(priority(&p), 7);
    }
}
