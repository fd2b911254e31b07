//! The per-container rules of a resize, as `pkg/apis/core/validation/validation.go`'s
//! `ValidatePodResize` applies them: `validatePodResizeContainerOrdering`,
//! `validateContainerResize` (with v1.33's memory-limit rule), the init-container rules of each
//! minor, and `dropCPUMemoryResourcesFromContainer` + `Semantic.DeepEqual` (only cpu and memory
//! changed).

use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{Errors, nanos};
use crate::resources::ResourceList;
use crate::upstream::aggregate::amounts;
use crate::upstream::pod::is_sidecar;

/// `validatePodResizeContainerOrdering`.
pub(super) fn validate_container_order(old: &PodSpec, new: &PodSpec, e: &mut Errors) {
    if old.containers.len() != new.containers.len() {
        e.forbidden(
            "spec.containers",
            "containers may not be added or removed on resize",
        );
    } else {
        for (i, (o, n)) in old.containers.iter().zip(&new.containers).enumerate() {
            if o.name != n.name {
                e.forbidden(
                    format!("spec.containers[{i}].name"),
                    "containers may not be renamed or reordered on resize",
                );
            }
        }
    }
    let (olds, news) = (
        old.init_containers.as_deref().unwrap_or(&[]),
        new.init_containers.as_deref().unwrap_or(&[]),
    );
    if olds.len() != news.len() {
        e.forbidden(
            "spec.initContainers",
            "initContainers may not be added or removed on resize",
        );
    } else {
        for (i, (o, n)) in olds.iter().zip(news).enumerate() {
            if o.name != n.name {
                e.forbidden(
                    format!("spec.initContainers[{i}].name"),
                    "initContainers may not be renamed or reordered on resize",
                );
            }
        }
    }
}

/// `validateContainerResize`: requests and limits cannot be removed.
pub(super) fn validate_container_resize(
    old: &Container,
    new: &Container,
    path: &str,
    minor: u32,
    e: &mut Errors,
) {
    fn list(c: &Container, limits: bool) -> Option<&ResourceList> {
        c.resources.as_ref().and_then(|r| {
            if limits {
                r.limits.as_ref()
            } else {
                r.requests.as_ref()
            }
        })
    }
    if removed(list(new, false), list(old, false)) {
        e.forbidden(
            format!("{path}.requests"),
            "resource requests cannot be removed",
        );
    }
    if removed(list(new, true), list(old, true)) {
        e.forbidden(
            format!("{path}.limits"),
            "resource limits cannot be removed",
        );
    }
    if minor <= 33 {
        memory_limit_decrease_v1_33(old, new, path, e);
    }
}

/// v1.33 `validateContainerResize`: "memory limits may not be decreased if resize policy is
/// NotRequired" (the first memory entry of the new container's `resizePolicy`; none means
/// NotRequired), and adding a limit counts as lowering it from unlimited.
fn memory_limit_decrease_v1_33(old: &Container, new: &Container, path: &str, e: &mut Errors) {
    let policy = new
        .resize_policy
        .iter()
        .flatten()
        .find(|p| p.resource_name == "memory")
        .map(|p| p.restart_policy.as_str());
    if !matches!(policy, None | Some("") | Some("NotRequired")) {
        return;
    }
    let limit = |c: &Container| {
        c.resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get("memory"))
            .map(nanos)
    };
    match (limit(new), limit(old)) {
        (Some(n), Some(o)) if n < o => e.forbidden(
            format!("{path}.limits[memory]"),
            "memory limits cannot be decreased unless resizePolicy is RestartContainer",
        ),
        (Some(_), None) => e.forbidden(
            format!("{path}.limits[memory]"),
            "memory limits cannot be added unless resizePolicy is RestartContainer",
        ),
        _ => {}
    }
}

/// `resourcesRemoved`.
pub(super) fn removed(new: Option<&ResourceList>, old: Option<&ResourceList>) -> bool {
    let (new_len, old_len) = (new.map_or(0, |l| l.len()), old.map_or(0, |l| l.len()));
    old_len > new_len
        || old
            .into_iter()
            .flatten()
            .any(|(k, _)| !new.is_some_and(|n| n.contains_key(k)))
}

/// `dropCPUMemoryResourcesFromContainer` + `Semantic.DeepEqual`: nothing but cpu and memory
/// values changed (the strategy already reset every other field except `resizePolicy`).
pub(super) fn only_cpu_memory_changed(old: &Container, new: &Container, minor: u32) -> bool {
    let (o, n) = (old.resources.as_ref(), new.resources.as_ref());
    let no_claims: &[k8s_openapi::api::core::v1::ResourceClaim] = &[];
    let old_claims = o.and_then(|r| r.claims.as_deref()).unwrap_or(no_claims);
    let new_claims = n.and_then(|r| r.claims.as_deref()).unwrap_or(no_claims);
    // v1.33–v1.34 `dropCPUMemoryResourcesFromContainer` drops a whole list the old container
    // lacks (`if oldResourceList == nil { return nil }`), so anything added there passes, and
    // keeps no claims, so an old container with claims never compares equal.
    let legacy = minor <= 34;
    let same_list = |old: Option<&ResourceList>, new: Option<&ResourceList>| {
        if legacy {
            same_others_v1_33(old, new)
        } else {
            same_others(old, new)
        }
    };
    let claims_ok = if legacy {
        old_claims.is_empty()
    } else {
        old_claims == new_claims
    };
    same_list(
        o.and_then(|r| r.requests.as_ref()),
        n.and_then(|r| r.requests.as_ref()),
    ) && same_list(
        o.and_then(|r| r.limits.as_ref()),
        n.and_then(|r| r.limits.as_ref()),
    ) && claims_ok
        && old.resize_policy.as_deref().unwrap_or(&[])
            == new.resize_policy.as_deref().unwrap_or(&[])
}

/// [`same_others`] as v1.33–v1.34 compare: a list the old container lacks (unset or empty, as
/// stored) is never compared.
fn same_others_v1_33(old: Option<&ResourceList>, new: Option<&ResourceList>) -> bool {
    old.is_none_or(|l| l.is_empty()) || same_others(old, new)
}

/// The entries other than cpu and memory are the same, by value.
fn same_others(a: Option<&ResourceList>, b: Option<&ResourceList>) -> bool {
    fn others(l: Option<&ResourceList>) -> impl Iterator<Item = (&String, &Quantity)> {
        l.into_iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != "cpu" && k.as_str() != "memory")
    }
    others(a).count() == others(b).count()
        && others(a).all(|(k, q)| {
            b.and_then(|b| b.get(k))
                .is_some_and(|other| nanos(q) == nanos(other))
        })
}

/// Semantic equality of two requirements (values, not spellings).
pub fn same_requirements(
    a: Option<&ResourceRequirements>,
    b: Option<&ResourceRequirements>,
) -> bool {
    let parts = |r: Option<&ResourceRequirements>| {
        (
            amounts(r.and_then(|r| r.requests.as_ref())),
            amounts(r.and_then(|r| r.limits.as_ref())),
            r.and_then(|r| r.claims.clone()).unwrap_or_default(),
        )
    };
    parts(a) == parts(b)
}

/// The init-container rules of `ValidatePodResize` after the per-container ones: v1.33–v1.35
/// let sidecars change cpu and memory and other init containers nothing; v1.36+ let every init
/// container change cpu and memory, but not a non-sidecar with a RestartContainer policy.
pub(super) fn validate_init_container_changes(
    olds: &[Container],
    news: &[Container],
    minor: u32,
    e: &mut Errors,
) {
    for (i, (o, n)) in olds.iter().zip(news).enumerate() {
        if minor <= 35 {
            // v1.33–v1.35: sidecars may change cpu and memory; other init containers nothing.
            if is_sidecar(n) {
                if !only_cpu_memory_changed(o, n, minor) {
                    e.forbidden(
                        "spec",
                        "only cpu and memory resources for sidecar containers are mutable",
                    );
                }
            } else if !same_requirements(o.resources.as_ref(), n.resources.as_ref())
                || o.resize_policy != n.resize_policy
            {
                e.forbidden(
                    "spec",
                    "resources for non-sidecar init containers are immutable",
                );
            }
            continue;
        }
        let path = format!("spec.initContainers[{i}]");
        if !only_cpu_memory_changed(o, n, minor) {
            e.forbidden(
                path.clone(),
                "only cpu and memory resources for init or sidecar containers are mutable",
            );
        }
        let restarts = n
            .resize_policy
            .iter()
            .flatten()
            .any(|p| p.restart_policy == "RestartContainer");
        if !is_sidecar(n)
            && restarts
            && !same_requirements(o.resources.as_ref(), n.resources.as_ref())
        {
            e.forbidden(
                path,
                "non-sidecar init containers with a resize policy of RestartContainer cannot be resized",
            );
        }
    }
}
