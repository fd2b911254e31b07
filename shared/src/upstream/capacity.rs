//! Whether a resized pod can ever fit on its node, exactly as upstream decides it on each minor:
//!
//! - v1.36+: kube-apiserver's `PodResizeValidator` admission plugin refuses the resize
//!   (`plugin/pkg/admission/podresize/admission.go`, `validateRequestsWithinAllocatable`):
//!   `resource.PodRequests(pod, PodResourcesOptions{})` (component-helpers
//!   `resource/helpers.go`: containers and sidecars, or the init-container peak, then pod-level
//!   requests override, then `spec.overhead` added) is compared with `node.status.allocatable`
//!   by `Quantity.Cmp`, i.e. exactly ([`beyond_allocatable`]); the error lists cpu first (in
//!   millicores, `MilliValue`), then memory (in bytes, `Value`), joined by `"; "`
//!   ([`node_capacity_error`]), and carries the cause `NodeCapacity` ([`NODE_CAPACITY`]).
//! - v1.33–v1.35: the API server stores it and the kubelet marks it Infeasible
//!   (`handlePodResourcesResize`, v1.34–v1.35 `pkg/kubelet/allocation/allocation_manager.go`;
//!   `canResizePod`, v1.33 `pkg/kubelet/kubelet.go`): `GetResourceRequest`
//!   (`pkg/api/v1/resource/helpers.go`: pod-level requests instead of the containers' when set,
//!   overhead added only to a non-zero total, then rounded up to millicores and bytes) is
//!   compared with the node's allocatable rounded the same way ([`kubelet_beyond`]); it names
//!   one resource, memory first.

use std::fmt;

use k8s_openapi::api::core::v1::PodSpec;

use crate::resources::ResourceList;
use crate::upstream::aggregate::{Amounts, amounts, container_requests};
use crate::upstream::quantity::{ResourceName, milli_of_nanos, units_of_nanos};

/// The cause type `PodResizeValidator` gives its refusal (`ReasonNodeCapacity`,
/// `plugin/pkg/admission/podresize/admission.go`).
pub const NODE_CAPACITY: &str = "NodeCapacity";

/// cpu and memory in nano-units, exact (as `Quantity` compares them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exact {
    /// cpu, in nano-cores.
    pub cpu: i128,
    /// memory, in nano-bytes.
    pub memory: i128,
}

impl Exact {
    /// A resource list's cpu and memory (`ResourceList.Cpu()` / `Memory()`: zero when absent).
    pub fn of_list(list: Option<&ResourceList>) -> Exact {
        Exact::of_amounts(&amounts(list))
    }

    fn of_amounts(a: &Amounts) -> Exact {
        let get = |k: &str| a.get(k).copied().unwrap_or(0);
        Exact {
            cpu: get("cpu"),
            memory: get("memory"),
        }
    }

    fn get(self, name: ResourceName) -> i128 {
        match name {
            ResourceName::Cpu => self.cpu,
            ResourceName::Memory => self.memory,
        }
    }
}

/// `Quantity.MilliValue()` for cpu, `Value()` for memory: the units upstream prints and the
/// kubelet compares.
fn rounded(name: ResourceName, nanos: i128) -> i64 {
    match name {
        ResourceName::Cpu => milli_of_nanos(nanos),
        ResourceName::Memory => units_of_nanos(nanos),
    }
}

/// One resource a pod requests more of than its node's allocatable, in upstream's units
/// (millicores for cpu, bytes for memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Excess {
    /// cpu or memory.
    pub resource: ResourceName,
    /// The pod's request.
    pub requested: i64,
    /// The node's allocatable.
    pub allocatable: i64,
}

impl fmt::Display for Excess {
    /// As `validateRequestsWithinAllocatable` prints one: `cpu, requested: 2430, allocatable:
    /// 1930`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, requested: {}, allocatable: {}",
            self.resource, self.requested, self.allocatable
        )
    }
}

/// `IsSupportedPodLevelResource` (component-helpers `resource/helpers.go`): cpu, memory,
/// hugepages.
fn pod_level_supported(name: &str) -> bool {
    matches!(name, "cpu" | "memory") || name.starts_with("hugepages-")
}

/// Upstream `resource.PodRequests(pod, PodResourcesOptions{})` for cpu and memory, exact:
/// `AggregateContainerRequests`, then the supported pod-level requests replace it
/// (`IsPodLevelRequestsSet`, `applyPodLevelResources`), then `spec.overhead` is added.
pub fn pod_requests(spec: &PodSpec) -> Exact {
    let mut reqs = container_requests(spec);
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref())
        && pod_level.keys().any(|k| pod_level_supported(k))
    {
        for (k, v) in amounts(Some(pod_level)) {
            if pod_level_supported(&k) {
                reqs.insert(k, v);
            }
        }
    }
    // Sums saturate like the amounts themselves (`crate::upstream::quantity`): a request near the
    // largest quantity plus an overhead is not an overflow.
    for (k, v) in amounts(spec.overhead.as_ref()) {
        let total = reqs.entry(k).or_default();
        *total = total.saturating_add(v);
    }
    Exact::of_amounts(&reqs)
}

/// `PodResizeValidator`'s comparison (`validateRequestsWithinAllocatable`): every resource
/// whose exact request is greater than the node's allocatable (`Cmp > 0`), cpu first.
pub fn beyond_allocatable(requested: Exact, allocatable: Exact) -> Vec<Excess> {
    [ResourceName::Cpu, ResourceName::Memory]
        .into_iter()
        .filter(|&name| requested.get(name) > allocatable.get(name))
        .map(|name| Excess {
            resource: name,
            requested: rounded(name, requested.get(name)),
            allocatable: rounded(name, allocatable.get(name)),
        })
        .collect()
}

/// The error `validateRequestsWithinAllocatable` returns for `excess` (what follows
/// `pods "<name>" is forbidden: ` in the API server's answer).
pub fn node_capacity_error(excess: &[Excess]) -> String {
    let items: Vec<String> = excess.iter().map(ToString::to_string).collect();
    format!(
        "node didn't have enough allocatable resources: {}",
        items.join("; ")
    )
}

/// The v1.33–v1.35 kubelet's request of a pod (`GetResourceRequestQuantity`,
/// `pkg/api/v1/resource/helpers.go`): the pod-level requests alone when pod-level resources
/// are set (`IsPodLevelResourcesSet`; `PodLevelResources` is on by default from v1.34), else
/// the containers'; overhead only on a non-zero total.
pub fn kubelet_requests(spec: &PodSpec) -> Exact {
    let pod_level = spec
        .resources
        .as_ref()
        .filter(|r| r.requests.iter().chain(&r.limits).any(|l| !l.is_empty()));
    let mut reqs: Amounts = match pod_level {
        Some(r) => amounts(r.requests.as_ref())
            .into_iter()
            .filter(|(k, _)| pod_level_supported(k))
            .collect(),
        None => container_requests(spec),
    };
    for (k, v) in amounts(spec.overhead.as_ref()) {
        if let Some(total) = reqs.get_mut(&k)
            && *total != 0
        {
            *total = total.saturating_add(v);
        }
    }
    Exact::of_amounts(&reqs)
}

/// The v1.33–v1.35 kubelet's Infeasible check: every resource whose request, rounded up
/// (`GetResourceRequest`), is greater than the allocatable rounded the same way, cpu first
/// (the kubelet's message names only the first of memory, cpu:
/// [`crate::verdict::Infeasibility::kubelet_message`]).
pub fn kubelet_beyond(requested: Exact, allocatable: Exact) -> Vec<Excess> {
    [ResourceName::Cpu, ResourceName::Memory]
        .into_iter()
        .map(|name| Excess {
            resource: name,
            requested: rounded(name, requested.get(name)),
            allocatable: rounded(name, allocatable.get(name)),
        })
        .filter(|e| e.requested > e.allocatable)
        .collect()
}

#[cfg(test)]
mod tests;
