//! The pod-level resources rules of a resize: `validatePodLevelResourcesResize` (nothing removed,
//! only cpu and memory changed at pod level) and `isPodLevelResourcesSet`, as
//! `pkg/apis/core/validation/validation.go`'s `ValidatePodResize` calls them.

use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};

use super::Errors;
use super::containers::removed;
use crate::resources::ResourceList;
use crate::upstream::aggregate::{Amounts, amounts};

/// `validatePodLevelResourcesResize`, when either side has pod-level resources.
pub(super) fn validate_pod_level_resize(old: &PodSpec, new: &PodSpec, e: &mut Errors) {
    if !pod_level_set(old) && !pod_level_set(new) {
        return;
    }
    let (Some(old_r), new_r) = (old.resources.as_ref(), new.resources.as_ref()) else {
        only_cpu_memory_at_pod_level(None, new.resources.as_ref(), e);
        return;
    };
    let Some(new_r) = new_r else {
        e.forbidden("spec.resources", "pod-level resources cannot be removed");
        return;
    };
    if removed(new_r.requests.as_ref(), old_r.requests.as_ref()) {
        e.forbidden(
            "spec.resources.requests",
            "pod-level resource requests cannot be removed",
        );
    }
    if removed(new_r.limits.as_ref(), old_r.limits.as_ref()) {
        e.forbidden(
            "spec.resources.limits",
            "pod-level resource limits cannot be removed",
        );
    }
    only_cpu_memory_at_pod_level(Some(old_r), Some(new_r), e);
}

fn only_cpu_memory_at_pod_level(
    old: Option<&ResourceRequirements>,
    new: Option<&ResourceRequirements>,
    e: &mut Errors,
) {
    let others = |r: Option<&ResourceRequirements>| {
        (
            non_cpu_memory(r.and_then(|r| r.requests.as_ref())),
            non_cpu_memory(r.and_then(|r| r.limits.as_ref())),
            r.and_then(|r| r.claims.clone()).unwrap_or_default(),
        )
    };
    if others(old) != others(new) {
        e.forbidden(
            "spec",
            "only cpu and memory resources are mutable at pod-level",
        );
    }
}

/// `isPodLevelResourcesSet` as `ValidatePodResize` defines it: any request or limit at all.
pub(super) fn pod_level_set(s: &PodSpec) -> bool {
    s.resources.as_ref().is_some_and(|r| {
        r.requests.as_ref().map_or(0, |l| l.len()) + r.limits.as_ref().map_or(0, |l| l.len()) > 0
    })
}

fn non_cpu_memory(list: Option<&ResourceList>) -> Amounts {
    let mut a = amounts(list);
    a.remove("cpu");
    a.remove("memory");
    a
}
