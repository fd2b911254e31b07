//! `PodResizeValidator`'s cases (`plugin/pkg/admission/podresize/admission_test.go`,
//! `TestValidateRequestsWithinAllocatable`, messages copied from its `expectedMsg`), and the
//! v1.33–v1.35 kubelet's rounding.

use super::*;
use crate::fixture::{PodBuilder, container};
use crate::resources::ResourceList;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

fn list(items: &[(&str, &str)]) -> ResourceList {
    items
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
        .collect()
}

fn spec(b: PodBuilder) -> PodSpec {
    b.build().spec.unwrap()
}

/// `validateRequestsWithinAllocatable(pod, allocatable)`'s error, if any.
fn validate(b: PodBuilder, allocatable: &[(&str, &str)]) -> Option<String> {
    let excess = beyond_allocatable(
        pod_requests(&spec(b)),
        Exact::of_list(Some(&list(allocatable))),
    );
    (!excess.is_empty()).then(|| node_capacity_error(&excess))
}

fn pod() -> PodBuilder {
    PodBuilder::new("ns", "p").bare()
}

#[test]
fn upstreams_cases() {
    // "cpu and mem requests within allocatable"
    let fits = pod().container(
        container("c")
            .request("cpu", "100m")
            .request("memory", "100Mi"),
    );
    assert_eq!(
        validate(fits, &[("cpu", "200m"), ("memory", "200Mi")]),
        None
    );
    // "cpu exceeds allocatable"
    let cpu = pod().container(container("c").request("cpu", "500m"));
    assert_eq!(
        validate(cpu, &[("cpu", "200m")]).as_deref(),
        Some(
            "node didn't have enough allocatable resources: cpu, requested: 500, allocatable: 200"
        )
    );
    // "mem exceeds allocatable": 500Mi = 524288000 bytes, 256Mi = 268435456 bytes
    let mem = pod().container(container("c").request("memory", "500Mi"));
    assert_eq!(
        validate(mem, &[("memory", "256Mi")]).as_deref(),
        Some(
            "node didn't have enough allocatable resources: memory, requested: 524288000, allocatable: 268435456"
        )
    );
    // "cpu and mem alone are within allocatable, but overhead causes failure": both exceed,
    // joined by "; ", cpu first.
    let overhead = pod()
        .overhead("cpu", "100m")
        .overhead("memory", "100Mi")
        .container(
            container("c")
                .request("cpu", "150m")
                .request("memory", "150Mi"),
        );
    assert_eq!(
        validate(overhead, &[("cpu", "200m"), ("memory", "200Mi")]).as_deref(),
        Some(
            "node didn't have enough allocatable resources: cpu, requested: 250, allocatable: 200; memory, requested: 262144000, allocatable: 209715200"
        )
    );
    // "pod level resources override container requests and fit"
    let pod_level = pod()
        .pod_request("cpu", "100m")
        .container(container("c").request("cpu", "1000m"));
    assert_eq!(validate(pod_level, &[("cpu", "200m")]), None);
}

#[test]
fn compares_exactly_and_prints_rounded_up() {
    // 965.2m + 964.8m is 1930m exactly: it fits, though each rounds up to 966m and 965m.
    let exact = pod()
        .container(container("a").request("cpu", "965200u"))
        .container(container("b").request("cpu", "964800u"));
    assert_eq!(validate(exact, &[("cpu", "1930m")]), None);
    // 1930.1m > 1930m: refused, printed as MilliValue (rounded up) 1931.
    let over = pod().container(container("a").request("cpu", "1930100u"));
    assert_eq!(
        validate(over, &[("cpu", "1930m")]).as_deref(),
        Some(
            "node didn't have enough allocatable resources: cpu, requested: 1931, allocatable: 1930"
        )
    );
}

#[test]
fn a_missing_allocatable_is_zero() {
    let p = pod().container(container("c").request("memory", "1"));
    assert_eq!(
        validate(p, &[("cpu", "1")]).as_deref(),
        Some("node didn't have enough allocatable resources: memory, requested: 1, allocatable: 0")
    );
}

#[test]
fn the_kubelet_compares_rounded_values() {
    // 1930.1m rounds up to 1931m > 1930m; 1929.9m rounds to 1930m, which fits.
    let alloc = Exact::of_list(Some(&list(&[("cpu", "1930m"), ("memory", "1Gi")])));
    let over = spec(pod().container(container("a").request("cpu", "1930100u")));
    assert_eq!(
        kubelet_beyond(kubelet_requests(&over), alloc),
        [Excess {
            resource: ResourceName::Cpu,
            requested: 1931,
            allocatable: 1930
        }]
    );
    let under = spec(pod().container(container("a").request("cpu", "1929900u")));
    assert!(kubelet_beyond(kubelet_requests(&under), alloc).is_empty());
}

#[test]
fn the_kubelet_adds_overhead_only_to_a_requested_resource() {
    let s = spec(
        pod()
            .overhead("cpu", "100m")
            .overhead("memory", "2Gi")
            .container(container("c").request("cpu", "150m")),
    );
    assert_eq!(
        kubelet_requests(&s),
        Exact {
            cpu: 250_000_000,
            memory: 0
        }
    );
    assert_eq!(pod_requests(&s).memory, 2 * (1 << 30) * 1_000_000_000);
}

#[test]
fn a_request_too_large_to_count_plus_overhead_saturates_instead_of_overflowing() {
    // Found by the review fuzzer: a quantity beyond what i128 nano-units hold reads as the
    // largest amount, and adding the pod's overhead to it overflowed.
    let huge = pod()
        .container(
            container("c")
                .request("cpu", "1e40")
                .request("memory", "1e40"),
        )
        .overhead("cpu", "100m")
        .overhead("memory", "100Mi");
    let requests = pod_requests(&spec(huge.clone()));
    assert_eq!(requests.get(ResourceName::Cpu), i128::MAX);
    assert!(validate(huge.clone(), &[("cpu", "64"), ("memory", "256Gi")]).is_some());
    assert_eq!(
        kubelet_requests(&spec(huge)).get(ResourceName::Memory),
        i128::MAX
    );
}
