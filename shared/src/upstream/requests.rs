//! What a pod requests from its node: upstream `component-helpers/resource.PodRequests`, in the
//! four views the kubelet, the scheduler and the API server take of it.
//!
//! The formula (KEP-753, `AggregateContainerRequests`): the sum of regular containers and sidecars,
//! or — if larger — each ordinary init container plus the sidecars started before it; then
//! pod-level `spec.resources.requests` override per resource when set, and `spec.overhead` is
//! added. What differs between the views is which number stands for a container:
//!
//! | view | container request | upstream |
//! |---|---|---|
//! | [`Accounting::Desired`] | spec | `GetResourceRequest` (the kubelet's Infeasible check) |
//! | [`Accounting::Scheduler`] | max(spec unless Infeasible, actual, allocated) | `PodRequests{UseStatusResources}` |
//! | [`Accounting::Resizing`] | max(desired, allocated, actual) | kubelet fit check for the resizing pod |
//! | [`Accounting::Admitted`] | max(allocated, actual) | kubelet `getAllocatedPods` for every other pod |

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodSpec, PodStatus};

use crate::resources::{ResourceList, Resources};
use crate::upstream::pod::{is_infeasible_status, is_sidecar};

/// Which view of a pod's requests to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accounting {
    /// The spec alone.
    Desired,
    /// The scheduler and ResourceQuota: the desired spec is ignored while the resize is Infeasible.
    Scheduler,
    /// The kubelet's view of the pod whose resize it is admitting.
    Resizing,
    /// The kubelet's view of the other pods on the node: pending desired growth is ignored.
    Admitted,
}

/// The pod's request in the given view.
pub fn pod_requests(pod: &Pod, accounting: Accounting) -> Resources {
    match pod.spec.as_ref() {
        Some(spec) => spec_requests(spec, pod.status.as_ref(), accounting),
        None => Resources::ZERO,
    }
}

/// The request of a pod made of `spec` and `status` (which may come from different objects: the
/// webhook pairs the new spec with the stored status, which the resize strategy keeps).
pub fn spec_requests(
    spec: &PodSpec,
    status: Option<&PodStatus>,
    accounting: Accounting,
) -> Resources {
    let infeasible = status.is_some_and(is_infeasible_status);
    let view = View {
        accounting,
        infeasible,
    };
    let statuses = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or(&[]);
    let init_statuses = status
        .and_then(|s| s.init_container_statuses.as_deref())
        .unwrap_or(&[]);

    let mut total: Resources = spec
        .containers
        .iter()
        .map(|c| view.container(c, find_status(statuses, &c.name)))
        .sum();

    // Init containers run one at a time, each alongside the sidecars started before it.
    let mut sidecars = Resources::ZERO;
    let mut init_peak = Resources::ZERO;
    for c in spec.init_containers.iter().flatten() {
        let in_use = if is_sidecar(c) {
            let r = view.container(c, find_status(init_statuses, &c.name));
            total += r;
            sidecars += r;
            sidecars
        } else {
            // Upstream only reads status for restartable init containers.
            Resources::from_opt_list(requests_of(c)) + sidecars
        };
        init_peak = init_peak.max(in_use);
    }
    total = total.max(init_peak);

    // Pod-level requests replace the aggregate for each resource they set (KEP-2837).
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        let declared = Resources::from_list(pod_level);
        let status_actual = status
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref());
        let status_allocated = status.and_then(|s| s.allocated_resources.as_ref());
        let effective = view.combine(declared, status_actual, status_allocated);
        for name in crate::upstream::quantity::ResourceName::ALL {
            if pod_level.contains_key(name.key()) {
                total.set(name, effective.get(name));
            }
        }
    }
    total + Resources::from_opt_list(spec.overhead.as_ref())
}

fn find_status<'a>(statuses: &'a [ContainerStatus], name: &str) -> Option<&'a ContainerStatus> {
    statuses.iter().find(|s| s.name == name)
}

fn requests_of(c: &Container) -> Option<&ResourceList> {
    c.resources.as_ref().and_then(|r| r.requests.as_ref())
}

struct View {
    accounting: Accounting,
    infeasible: bool,
}

impl View {
    fn container(&self, c: &Container, status: Option<&ContainerStatus>) -> Resources {
        let spec = Resources::from_opt_list(requests_of(c));
        let Some(cs) = status else {
            return spec;
        };
        let actual = cs.resources.as_ref().and_then(|r| r.requests.as_ref());
        // Upstream `determineContainerReqs` only applies when the runtime reported resources.
        if actual.is_none() && self.accounting != Accounting::Admitted {
            return spec;
        }
        self.combine(spec, actual, cs.allocated_resources.as_ref())
    }

    fn combine(
        &self,
        spec: Resources,
        actual: Option<&ResourceList>,
        allocated: Option<&ResourceList>,
    ) -> Resources {
        let actual_r = Resources::from_opt_list(actual);
        let allocated_r = Resources::from_opt_list(allocated);
        match self.accounting {
            Accounting::Desired => spec,
            Accounting::Scheduler if self.infeasible => actual_r.max(allocated_r),
            Accounting::Scheduler | Accounting::Resizing => spec.max(actual_r).max(allocated_r),
            // The kubelet replaces the spec with its checkpointed allocation; before the kubelet
            // reported one, the allocation is the spec it admitted.
            Accounting::Admitted => match allocated {
                Some(_) => allocated_r.max(actual_r),
                None => spec.max(actual_r),
            },
        }
    }
}

#[cfg(test)]
mod tests;
