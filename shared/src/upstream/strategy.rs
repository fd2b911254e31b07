//! What kube-apiserver makes of a `pods/resize` request *after* the mutating webhooks, so that
//! resize-guard's `/mutate` judges the object built-in validation will judge.
//!
//! Upstream order (v1.37.2): the patch is applied and decoded with `SetDefaults_Pod` (a container
//! limit without a request becomes the request too); mutating webhooks run; then
//! `podResizeStrategy.PrepareForUpdate` (`pkg/registry/core/pod/strategy.go`) keeps only the
//! resize-relevant changes (`dropNonResizeUpdates`) and — gate `PodLevelResourcesFixDefaulting`,
//! beta and on in v1.37 — restores pod-level resources a client dropped and runs
//! `DefaultPodLevelResources` (`pkg/api/pod/util.go`). [`prepare_resize`] is that whole step;
//! [`default_pod_level_resources`] is also what the API server did to every stored pod on create
//! (`PrepareForCreate`), so applying it again is harmless.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::resources::ResourceList;
use crate::upstream::aggregate;
use crate::upstream::quantity::parse_nanos;

/// Upstream `resourcehelper.IsSupportedPodLevelResource`: cpu, memory and hugepages.
pub fn is_pod_level_resource(name: &str) -> bool {
    name == "cpu" || name == "memory" || is_hugepages(name)
}

/// Upstream `helper.IsHugePageResourceName`.
pub fn is_hugepages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// Upstream `helper.IsOvercommitAllowed` for the names a pod can carry: native resources
/// (no domain, or a `kubernetes.io/` one) other than hugepages.
pub fn is_overcommit_allowed(name: &str) -> bool {
    let native = match name.split_once('/') {
        None => true,
        Some((domain, _)) => domain == "kubernetes.io" || domain.ends_with(".kubernetes.io"),
    };
    native && !is_hugepages(name)
}

/// The new pod as `ValidatePodResize` will see it: `old` with only the resize-relevant parts of
/// `new` (container and init-container `resources` and `resizePolicy`, pod-level `resources`),
/// request defaulting applied, and pod-level resources defaulted. Its `status` is left empty:
/// upstream keeps the old one, which callers read from `old`.
pub fn prepare_resize(old: &Pod, new: &Pod) -> Pod {
    prepare_resize_on(old, new, None)
}

/// [`prepare_resize`] as Kubernetes minor `minor` prepares it (`None`: the newest). Through v1.35
/// `dropNonResizeUpdates` keeps the old pod-level resources: v1.33–v1.34 have no pod-level resize,
/// and v1.35 keeps the request's only with `InPlacePodLevelResourcesVerticalScaling`, alpha and off
/// there (`pkg/registry/core/pod/strategy.go` of each minor).
pub fn prepare_resize_on(old: &Pod, new: &Pod, minor: Option<u32>) -> Pod {
    let mut out = drop_non_resize_updates(old, new, minor);
    if let Some(spec) = out.spec.as_mut() {
        default_container_requests(spec);
        // v1.37 `PrepareForUpdate` (`PodLevelResourcesFixDefaulting`): "preserve existing PLR for
        // requests from potentially PLR-unaware clients that completely dropped the field", then
        // `DefaultPodLevelResources`; earlier minors do neither on resize.
        if minor.is_none_or(|m| m >= 37) {
            if spec.resources.is_none() {
                spec.resources = old.spec.as_ref().and_then(|s| s.resources.clone());
            }
            default_pod_level_resources(spec);
        }
    }
    out
}

/// `dropNonResizeUpdates`: with a different number of containers the new pod passes as it is
/// (validation refuses it); otherwise everything but resources and resize policies comes from
/// the old pod, and per list a renamed container leaves that list as sent. Pod-level resources
/// come from `new` only from v1.36 (`minor`; `None` is the newest).
fn drop_non_resize_updates(old: &Pod, new: &Pod, minor: Option<u32>) -> Pod {
    let (Some(old_spec), Some(new_spec)) = (old.spec.as_ref(), new.spec.as_ref()) else {
        return new.clone();
    };
    let count = |s: &PodSpec| {
        (
            s.containers.len(),
            s.init_containers.as_ref().map_or(0, Vec::len),
        )
    };
    if count(old_spec) != count(new_spec) {
        return new.clone();
    }
    let mut spec = old_spec.clone();
    if minor.is_none_or(|m| m >= 36) {
        spec.resources = new_spec.resources.clone();
    }
    spec.containers = merge_containers(&new_spec.containers, &old_spec.containers);
    spec.init_containers = new_spec.init_containers.as_ref().map(|new_inits| {
        merge_containers(
            new_inits,
            old_spec.init_containers.as_deref().unwrap_or(&[]),
        )
    });
    // `status` is reset to the old one upstream; callers read it from `old` itself, so the
    // (large) status is not copied here.
    Pod {
        metadata: old.metadata.clone(),
        spec: Some(spec),
        status: None,
    }
}

/// `dropNonResizeUpdatesForContainers`.
fn merge_containers(new: &[Container], old: &[Container]) -> Vec<Container> {
    if new.iter().zip(old).any(|(n, o)| n.name != o.name) {
        return new.to_vec();
    }
    old.iter()
        .zip(new)
        .map(|(o, n)| Container {
            resources: n.resources.clone(),
            resize_policy: n.resize_policy.clone(),
            ..o.clone()
        })
        .collect()
}

/// `SetDefaults_Pod` (`pkg/apis/core/v1/defaults.go`): in every container and init container, a
/// limit without a request sets the request to the limit.
pub fn default_container_requests(spec: &mut PodSpec) {
    let all = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten());
    for c in all {
        let Some(r) = c.resources.as_mut() else {
            continue;
        };
        let Some(limits) = r.limits.as_ref() else {
            continue;
        };
        let requests = r.requests.get_or_insert_with(Default::default);
        for (k, v) in limits {
            requests.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// `DefaultPodLevelResources` (v1.37 `pkg/api/pod/util.go`), in its order: (1) pod-level
/// hugepage limits from the containers' aggregate; (2) missing pod-level requests from the
/// containers' aggregate requests (overcommittable resources), then from pod-level limits; (3)
/// missing pod-level limits, for resources with a pod-level request where *every* container
/// (init containers and sidecars included) has a limit: max(pod-level request, aggregate
/// container limits). Nothing happens when pod-level resources are absent or empty.
pub fn default_pod_level_resources(spec: &mut PodSpec) {
    let has_any = |r: &ResourceRequirements| {
        r.requests.as_ref().is_some_and(|l| !l.is_empty())
            || r.limits.as_ref().is_some_and(|l| !l.is_empty())
    };
    if !spec.resources.as_ref().is_some_and(has_any) {
        return;
    }
    let container_requests = aggregate::container_requests_spelled(spec);
    let container_limits = aggregate::container_limits_spelled(spec);
    // `aggregateContainerLimits` visits `AllContainers`, ephemeral ones too; those can never
    // carry resources, so a pod with one gets no pod-level limit defaulted.
    let has_ephemeral = spec
        .ephemeral_containers
        .as_ref()
        .is_some_and(|e| !e.is_empty());
    let all_limited = |name: &str| {
        !has_ephemeral
            && crate::upstream::pod::all_containers(spec).all(|c| {
                c.resources
                    .as_ref()
                    .and_then(|r| r.limits.as_ref())
                    .is_some_and(|l| l.contains_key(name))
            })
    };
    let mut limited = Vec::new();
    for name in container_limits.keys() {
        if all_limited(name) {
            limited.push(name.clone());
        }
    }
    let Some(pod_level) = spec.resources.as_mut() else {
        return;
    };
    let had_limits = pod_level.limits.is_some();

    // (1) `defaultHugePagePodLevelLimits`.
    let mut limits = pod_level.limits.take().unwrap_or_default();
    let requests_now = pod_level.requests.clone().unwrap_or_default();
    for (name, amount) in &container_limits {
        if is_hugepages(name) && !requests_now.contains_key(name) && !limits.contains_key(name) {
            limits.insert(name.clone(), Quantity(aggregate::spell(*amount)));
        }
    }
    pod_level.limits = (had_limits || !limits.is_empty()).then_some(limits);

    // (2) `defaultPodLevelRequests`.
    let mut requests = pod_level.requests.take().unwrap_or_default();
    let had_requests = !requests.is_empty();
    for (name, amount) in &container_requests {
        if !requests.contains_key(name)
            && is_pod_level_resource(name)
            && is_overcommit_allowed(name)
        {
            requests.insert(name.clone(), Quantity(aggregate::spell(*amount)));
        }
    }
    for (name, limit) in pod_level.limits.iter().flatten() {
        if !requests.contains_key(name) && is_pod_level_resource(name) {
            requests.insert(name.clone(), limit.clone());
        }
    }
    pod_level.requests = (had_requests || !requests.is_empty()).then_some(requests);

    // (3) `defaultPodLevelLimits`: the aggregate limit, or the request itself when larger.
    let requests = pod_level.requests.clone().unwrap_or_default();
    let had_limits = pod_level.limits.is_some();
    let limits = pod_level.limits.get_or_insert_with(ResourceList::new);
    let mut added = false;
    for (name, request) in &requests {
        if !is_pod_level_resource(name) || limits.contains_key(name) {
            continue;
        }
        if !limited.contains(name) {
            continue;
        }
        let Some(aggregate) = container_limits.get(name) else {
            continue;
        };
        let value = if parse_nanos(&request.0).unwrap_or(0) > aggregate.0 {
            request.clone()
        } else {
            Quantity(aggregate::spell(*aggregate))
        };
        limits.insert(name.clone(), value);
        added = true;
    }
    if !added && !had_limits {
        pod_level.limits = None;
    }
}

#[cfg(test)]
mod tests;
