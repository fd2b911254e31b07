//! The simulated kubelet's admission decisions, as pure functions: new pods
//! (`lifecycle/predicate.go` resource fit) and resizes (`allocation_manager.go`, decision table of
//! upstream-resize.md §2.1), plus the retry order of pending resizes (`sortPendingResizes`, §2.6).
//!
//! Accounting follows §2.2: other pods count at their *allocated* resources (the checkpoint, which
//! this simulator also actuates at once, so allocated = actual); the resizing pod counts at
//! `max(desired, allocated)` per container; terminating pods count until they are gone. The
//! request formula itself is upstream `PodRequests`, shared with the policy crate.

use std::cmp::Ordering;

use k8s_openapi::api::core::v1::{ContainerStatus, PodSpec, PodStatus};
use k8s_openapi::jiff::Timestamp;
use resize_guard_policy::classify::resources_changed;
use resize_guard_policy::qos::{QosClass, spec_qos_class};
use resize_guard_policy::quantity::ResourceName;
use resize_guard_policy::requests::{Accounting, spec_requests};
use resize_guard_policy::resources::Resources;

/// What the kubelet does with a resize.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResizeDecision {
    /// Desired equals allocated: nothing pending.
    Unchanged,
    /// Larger than the node: `PodResizePending` reason `Infeasible` with this message.
    Infeasible(String),
    /// Does not fit now: `PodResizePending` reason `Deferred` with this message.
    Deferred(String),
    /// Allocate and actuate.
    Admit,
}

/// The request of a pod as allocated (the checkpointed spec).
pub fn held(allocated: &PodSpec) -> Resources {
    spec_requests(allocated, None, Accounting::Desired)
}

/// `InsufficientResourceError.Error()` for the first resource that does not fit, cpu first as
/// `noderesources.fitsRequest` checks them.
pub fn insufficient(request: Resources, used: Resources, capacity: Resources) -> Option<String> {
    ResourceName::ALL
        .into_iter()
        .find(|&n| request.get(n) > capacity.get(n) - used.get(n))
        .map(|n| {
            format!(
                "Node didn't have enough resource: {n}, requested: {}, used: {}, capacity: {}",
                request.get(n),
                used.get(n),
                capacity.get(n)
            )
        })
}

/// Admission of a new pod: `None` if it fits, else the rejection reason (`OutOfcpu`) and message.
pub fn admit_new(spec: &PodSpec, used: Resources, capacity: Resources) -> Option<(String, String)> {
    let request = spec_requests(spec, None, Accounting::Desired);
    let message = insufficient(request, used, capacity)?;
    let resource = ResourceName::ALL
        .into_iter()
        .find(|&n| request.get(n) > capacity.get(n) - used.get(n))
        .unwrap_or(ResourceName::Cpu);
    Some((
        format!("OutOf{resource}"),
        format!("Pod was rejected: {message}"),
    ))
}

/// The resize decision for a pod whose desired spec is `desired` and allocation `allocated`,
/// on a node with `capacity` where the other active pods hold `used`.
pub fn decide_resize(
    desired: &PodSpec,
    allocated: &PodSpec,
    used: Resources,
    capacity: Resources,
) -> ResizeDecision {
    if !resources_changed(allocated, desired) {
        return ResizeDecision::Unchanged;
    }
    let total = spec_requests(desired, None, Accounting::Desired);
    // allocation_manager: memory is reported first when both exceed capacity.
    for n in [ResourceName::Memory, ResourceName::Cpu] {
        if total.get(n) > capacity.get(n) {
            return ResizeDecision::Infeasible(format!(
                "Node didn't have enough capacity: {n}, requested: {}, capacity: {}",
                total.get(n),
                capacity.get(n)
            ));
        }
    }
    let request = spec_requests(desired, Some(&status_of(allocated)), Accounting::Resizing);
    match insufficient(request, used, capacity) {
        Some(message) => ResizeDecision::Deferred(message),
        None => ResizeDecision::Admit,
    }
}

/// The container statuses this simulator reports for an allocation (allocated = actual).
pub fn status_of(allocated: &PodSpec) -> PodStatus {
    let statuses = |cs: &[k8s_openapi::api::core::v1::Container]| -> Vec<ContainerStatus> {
        cs.iter()
            .map(|c| ContainerStatus {
                name: c.name.clone(),
                allocated_resources: c.resources.as_ref().and_then(|r| r.requests.clone()),
                resources: c.resources.clone(),
                ..Default::default()
            })
            .collect()
    };
    PodStatus {
        container_statuses: Some(statuses(&allocated.containers)),
        init_container_statuses: allocated.init_containers.as_deref().map(statuses),
        allocated_resources: allocated
            .resources
            .as_ref()
            .and_then(|r| r.requests.clone()),
        resources: allocated.resources.clone(),
        ..Default::default()
    }
}

/// A resize waiting for room, with what `sortPendingResizes` orders on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingResize {
    /// Pod UID.
    pub uid: String,
    /// Some container's cpu or memory request grows.
    pub increases: bool,
    /// `spec.priority`.
    pub priority: i32,
    /// QoS class Guaranteed.
    pub guaranteed: bool,
    /// `lastTransitionTime` of its `PodResizePending` condition.
    pub since: Option<Timestamp>,
}

impl PendingResize {
    /// Describes a pending resize.
    pub fn new(
        uid: &str,
        desired: &PodSpec,
        allocated: &PodSpec,
        since: Option<Timestamp>,
    ) -> Self {
        let increases = ResourceName::ALL.into_iter().any(|n| {
            spec_requests(desired, None, Accounting::Desired).get(n)
                > spec_requests(allocated, None, Accounting::Desired).get(n)
        });
        PendingResize {
            uid: uid.to_owned(),
            increases,
            priority: desired.priority.unwrap_or(0),
            guaranteed: spec_qos_class(desired) == QosClass::Guaranteed,
            since,
        }
    }
}

/// `sortPendingResizes`: non-increasing first, then higher priority, then Guaranteed, then the
/// longest waiting.
pub fn retry_order(a: &PendingResize, b: &PendingResize) -> Ordering {
    a.increases
        .cmp(&b.increases)
        .then(b.priority.cmp(&a.priority))
        .then(b.guaranteed.cmp(&a.guaranteed))
        .then_with(|| match (a.since, b.since) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
        .then_with(|| a.uid.cmp(&b.uid))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use resize_guard_policy::fixture::{PodBuilder, container};

    fn spec(cpu: &str) -> PodSpec {
        PodBuilder::new("ns", "p")
            .container(container("c").guaranteed(cpu, "64Mi"))
            .build()
            .spec
            .unwrap()
    }

    const NODE: Resources = Resources::new(1930, 4 << 30);

    #[test]
    fn field_test_resize_is_deferred_with_the_kubelet_message() {
        let d = decide_resize(
            &spec("550m"),
            &spec("250m"),
            Resources::new(1500, 64 << 20),
            NODE,
        );
        assert_eq!(
            d,
            ResizeDecision::Deferred(
                "Node didn't have enough resource: cpu, requested: 550, used: 1500, capacity: 1930"
                    .into()
            )
        );
    }

    #[test]
    fn larger_than_allocatable_is_infeasible() {
        let d = decide_resize(&spec("2430m"), &spec("250m"), Resources::ZERO, NODE);
        assert_eq!(
            d,
            ResizeDecision::Infeasible(
                "Node didn't have enough capacity: cpu, requested: 2430, capacity: 1930".into()
            )
        );
    }

    #[test]
    fn room_means_admit_and_no_change_means_unchanged() {
        assert_eq!(
            decide_resize(&spec("550m"), &spec("250m"), Resources::new(1000, 0), NODE),
            ResizeDecision::Admit
        );
        assert_eq!(
            decide_resize(&spec("250m"), &spec("250m"), Resources::ZERO, NODE),
            ResizeDecision::Unchanged
        );
    }

    #[test]
    fn new_pods_that_do_not_fit_are_rejected_out_of_cpu() {
        let (reason, msg) = admit_new(&spec("1"), Resources::new(1500, 0), NODE).unwrap();
        assert_eq!(reason, "OutOfcpu");
        assert!(msg.starts_with("Pod was rejected: Node didn't have enough resource: cpu"));
        assert!(admit_new(&spec("400m"), Resources::new(1500, 0), NODE).is_none());
    }

    #[test]
    fn retry_order_matches_sort_pending_resizes() {
        let p = |uid: &str, increases, priority, guaranteed, since: i64| PendingResize {
            uid: uid.into(),
            increases,
            priority,
            guaranteed,
            since: Timestamp::from_second(since).ok(),
        };
        let mut v = [
            p("late-low", true, 0, true, 9),
            p("shrink", false, 0, false, 9),
            p("high", true, 10, false, 9),
            p("early-low", true, 0, true, 1),
            p("burstable", true, 0, false, 0),
        ];
        v.sort_by(retry_order);
        let order: Vec<&str> = v.iter().map(|x| x.uid.as_str()).collect();
        assert_eq!(
            order,
            ["shrink", "high", "early-low", "late-low", "burstable"]
        );
    }
}
