//! The small pod helpers of upstream Kubernetes that every decision reads a pod through: its
//! priority, criticality and lifecycle, sidecars, and the kubelet's resize conditions. The
//! webhook and the controller read a pod the same way because both read it here;
//! resize-guard's own facts about a pod (its key, its controller, the controller's stricter
//! "Deferred now") live in `crate::pod`.
//!
//! | item | mirrors |
//! |---|---|
//! | [`priority`] | `corev1helpers.PodPriority` (k8s.io/component-helpers `scheduling/corev1/helpers.go`) |
//! | [`never_preempts`] | `PodEligibleToPreemptOthers`'s `preemptionPolicy: Never` test (`pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go`) |
//! | [`is_terminal`] | `IsPodTerminal` (`pkg/api/v1/pod/util.go`) |
//! | [`is_mirror`], [`is_critical`] | `IsMirrorPod`, `IsCriticalPod` (`pkg/kubelet/types/pod_update.go`) |
//! | [`is_sidecar`], [`all_containers`] | `IsRestartableInitContainer`, `VisitContainers` (`pkg/api/v1/pod/util.go`) |
//! | [`resize_pending`], [`is_resize_deferred`], [`is_resize_infeasible`] | `IsPodResizeDeferred`, `IsPodResizeInfeasible` (k8s.io/component-helpers `resource/helpers.go`) |
//! | the constants | `kubetypes.ConfigMirrorAnnotationKey`, `scheduling.SystemCriticalPriority`, `v1.PodResizePending`, `v1.PodResizeInProgress`, `v1.PodReasonDeferred`, `v1.PodReasonInfeasible` |

use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec, PodStatus};

/// Annotation the kubelet puts on mirror pods of static pods
/// (`kubetypes.ConfigMirrorAnnotationKey`).
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

/// Upstream `podutil.IsPodTerminal`: the pod finished (`Succeeded` or `Failed`), so its
/// resources are released.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Upstream `kubetypes.IsMirrorPod`: the mirror of a static pod, which cannot be resized or
/// evicted through the API.
pub fn is_mirror(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
}

/// Upstream `kubetypes.IsCriticalPod`: static, mirror, or priority at least
/// [`SYSTEM_CRITICAL_PRIORITY`]. The kubelet preempts for these itself (v1.33–v1.37 without the
/// scheduler gate), so resize-guard never acts for them and never takes them as victims.
pub fn is_critical(pod: &Pod) -> bool {
    is_mirror(pod) || priority(pod) >= SYSTEM_CRITICAL_PRIORITY
}

/// Upstream `podutil.IsRestartableInitContainer`: a sidecar, an init container with
/// `restartPolicy: Always`.
pub fn is_sidecar(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// The first `PodResizePending` condition, as upstream `IsPodResizeDeferred` reads it.
pub fn resize_pending(pod: &Pod) -> Option<&PodCondition> {
    pod.status.as_ref().and_then(resize_pending_in)
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

/// The containers `podutil.VisitContainers` visits for `InitContainers | Containers`, regular
/// first (callers only test or sum them, so the order is not upstream's).
pub fn all_containers(spec: &PodSpec) -> impl Iterator<Item = &Container> {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_with_conditions(conds: Vec<PodCondition>) -> Pod {
        Pod {
            status: Some(PodStatus {
                conditions: Some(conds),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn cond(reason: &str) -> PodCondition {
        PodCondition {
            type_: RESIZE_PENDING.into(),
            reason: Some(reason.into()),
            status: "True".into(),
            ..Default::default()
        }
    }

    #[test]
    fn only_the_first_resize_pending_condition_counts_like_upstream() {
        let p = pod_with_conditions(vec![cond("Infeasible"), cond("Deferred")]);
        assert!(is_resize_infeasible(&p));
        assert!(!is_resize_deferred(&p));
        let p = pod_with_conditions(vec![cond("Deferred"), cond("Infeasible")]);
        assert!(is_resize_deferred(&p) && !is_resize_infeasible(&p));
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
