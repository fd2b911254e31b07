//! `ValidatePodSpec`'s resource rules that a resize can break (`validateResourceRequirements`
//! for every container and init container, `validatePodResources` and
//! `validatePodResourceConsistency` for pod-level resources), in
//! `pkg/apis/core/validation/validation.go` order.

use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};

use super::{Errors, nanos};
use crate::resources::ResourceList;
use crate::upstream::aggregate;
use crate::upstream::strategy::{is_hugepages, is_overcommit_allowed, is_pod_level_resource};

/// The resource parts of `ValidatePodSpec` that a resize can break.
pub(super) fn validate_spec_resources(spec: &PodSpec, e: &mut Errors) {
    let paths = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.containers[{i}].resources"), c))
        .chain(
            spec.init_containers
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, c)| (format!("spec.initContainers[{i}].resources"), c)),
        );
    for (path, c) in paths {
        validate_requirements(c.resources.as_ref(), &path, false, e);
    }
    let Some(pod_level) = spec.resources.as_ref() else {
        return;
    };
    validate_requirements(Some(pod_level), "spec.resources", true, e);
    validate_pod_resource_consistency(spec, pod_level, e);
}

/// `validateResourceRequirements` (pod-level: with `validatePodResourceName`).
pub(super) fn validate_requirements(
    r: Option<&ResourceRequirements>,
    path: &str,
    pod_level: bool,
    e: &mut Errors,
) {
    let empty = ResourceList::new();
    let requests = r.and_then(|r| r.requests.as_ref()).unwrap_or(&empty);
    let limits = r.and_then(|r| r.limits.as_ref()).unwrap_or(&empty);
    let mut cpu_or_memory = false;
    let mut hugepages = false;
    for (field, list) in [("limits", limits), ("requests", requests)] {
        for (name, q) in list {
            // Paths are only spelled out for an error: this runs on every admission review.
            let at = || format!("{path}.{field}[{name}]");
            if pod_level && !is_pod_level_resource(name) {
                e.push(
                    at(),
                    format!(
                        "Unsupported value: \"{name}\": supported values: \"cpu\", \"hugepages-\", \"memory\""
                    ),
                );
            }
            if nanos(q) < 0 {
                e.invalid(at(), &q.0, "must be greater than or equal to 0");
            }
            cpu_or_memory |= name == "cpu" || name == "memory";
            hugepages |= is_hugepages(name);
        }
    }
    for (name, request) in requests {
        match limits.get(name) {
            Some(limit) if nanos(request) != nanos(limit) && !is_overcommit_allowed(name) => {
                e.invalid(
                    format!("{path}.requests"),
                    &request.0,
                    format!("must be equal to {name} limit of {}", limit.0),
                );
            }
            Some(limit) if nanos(request) > nanos(limit) => {
                e.invalid(
                    format!("{path}.requests"),
                    &request.0,
                    format!("must be less than or equal to {name} limit of {}", limit.0),
                );
            }
            None if !is_overcommit_allowed(name) => e.push(
                format!("{path}.limits"),
                "Required value: Limit must be set for non overcommitable resources".to_owned(),
            ),
            _ => {}
        }
    }
    if hugepages && !cpu_or_memory {
        e.forbidden(path, "HugePages require cpu or memory");
    }
}

/// `validatePodResourceConsistency`: pod-level requests cover the containers' aggregate,
/// pod-level hugepage limits cover theirs, and no regular container's limit exceeds the
/// pod-level limit (init containers are not checked there).
fn validate_pod_resource_consistency(
    spec: &PodSpec,
    pod_level: &ResourceRequirements,
    e: &mut Errors,
) {
    let empty = ResourceList::new();
    let pod_requests = pod_level.requests.as_ref().unwrap_or(&empty);
    let pod_limits = pod_level.limits.as_ref().unwrap_or(&empty);
    for (name, sum) in aggregate::container_requests_spelled(spec) {
        if let Some(request) = pod_requests.get(&name)
            && sum.0 > nanos(request)
        {
            e.invalid(
                format!("spec.resources.requests[{name}]"),
                &request.0,
                format!(
                    "must be greater than or equal to aggregate container requests of {}",
                    aggregate::spell(sum)
                ),
            );
        }
    }
    for (name, sum) in aggregate::container_limits_spelled(spec) {
        if let Some(limit) = pod_limits.get(&name)
            && is_hugepages(&name)
            && sum.0 > nanos(limit)
        {
            e.invalid(
                format!("spec.resources.limits[{name}]"),
                &limit.0,
                format!(
                    "must be greater than or equal to aggregate container limits of {}",
                    aggregate::spell(sum)
                ),
            );
        }
    }
    for (i, c) in spec.containers.iter().enumerate() {
        for (name, limit) in c
            .resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .into_iter()
            .flatten()
        {
            if let Some(pod_limit) = pod_limits.get(name)
                && nanos(limit) > nanos(pod_limit)
            {
                e.invalid(
                    format!("spec.resources.containers[{i}][{name}].limits"),
                    &limit.0,
                    format!(
                        "must be less than or equal to pod limits of {}",
                        pod_limit.0
                    ),
                );
            }
        }
    }
}
