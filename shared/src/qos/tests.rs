//! The QoS table of upstream `qos_test.go`, plus the resize-specific edge cases.

use super::*;
use crate::fixture::{PodBuilder, container};

fn class(b: PodBuilder) -> QosClass {
    qos_class(&b.build())
}

fn pod() -> PodBuilder {
    PodBuilder::new("ns", "p")
}

#[test]
fn no_resources_anywhere_is_best_effort() {
    assert_eq!(class(pod().container(container("a"))), QosClass::BestEffort);
}

#[test]
fn equal_cpu_and_memory_requests_and_limits_is_guaranteed() {
    let p = pod().container(container("a").guaranteed("250m", "64Mi"));
    assert_eq!(class(p), QosClass::Guaranteed);
}

#[test]
fn limits_only_default_the_requests_and_are_guaranteed() {
    let p = pod().container(container("a").limit("cpu", "1").limit("memory", "1Gi"));
    assert_eq!(class(p), QosClass::Guaranteed);
}

#[test]
fn request_below_limit_is_burstable() {
    let p = pod().container(
        container("a")
            .request("cpu", "100m")
            .limit("cpu", "200m")
            .both("memory", "64Mi"),
    );
    assert_eq!(class(p), QosClass::Burstable);
}

#[test]
fn missing_memory_limit_is_burstable() {
    let p = pod().container(container("a").both("cpu", "1"));
    assert_eq!(class(p), QosClass::Burstable);
}

#[test]
fn requests_only_is_burstable() {
    let p = pod().container(container("a").request("cpu", "1").request("memory", "1Gi"));
    assert_eq!(class(p), QosClass::Burstable);
}

#[test]
fn one_best_effort_container_makes_a_guaranteed_pod_burstable() {
    let p = pod()
        .container(container("a").guaranteed("1", "1Gi"))
        .container(container("b"));
    assert_eq!(class(p), QosClass::Burstable);
}

#[test]
fn equal_quantities_in_different_notation_are_equal() {
    let p = pod().container(
        container("a")
            .request("cpu", "1")
            .limit("cpu", "1000m")
            .request("memory", "1Gi")
            .limit("memory", "1073741824"),
    );
    assert_eq!(class(p), QosClass::Guaranteed);
}

#[test]
fn other_resources_do_not_count() {
    let p = pod().container(
        container("a")
            .guaranteed("1", "1Gi")
            .request("ephemeral-storage", "1Gi")
            .request("nvidia.com/gpu", "1")
            .limit("nvidia.com/gpu", "1"),
    );
    assert_eq!(class(p), QosClass::Guaranteed);
    let p = pod().container(container("a").both("ephemeral-storage", "1Gi"));
    assert_eq!(class(p), QosClass::BestEffort);
}

#[test]
fn zero_quantities_are_ignored() {
    let p = pod().container(container("a").both("cpu", "0").both("memory", "0"));
    assert_eq!(class(p), QosClass::BestEffort);
}

#[test]
fn init_containers_count_including_ordinary_ones() {
    let p = pod()
        .container(container("a").guaranteed("1", "1Gi"))
        .init_container(container("init").request("cpu", "100m"));
    assert_eq!(class(p), QosClass::Burstable);
    let p = pod()
        .container(container("a").guaranteed("1", "1Gi"))
        .init_container(container("init").guaranteed("100m", "10Mi"));
    assert_eq!(class(p), QosClass::Guaranteed);
}

#[test]
fn a_best_effort_sidecar_makes_the_pod_burstable() {
    let p = pod()
        .container(container("a").guaranteed("1", "1Gi"))
        .init_container(container("proxy").sidecar());
    assert_eq!(class(p), QosClass::Burstable);
}

#[test]
fn sums_compare_across_containers_like_upstream() {
    // Upstream compares per-resource sums; per-container equality follows from requests <= limits.
    let p = pod()
        .container(container("a").guaranteed("300m", "100Mi"))
        .container(container("b").guaranteed("700m", "100Mi"));
    assert_eq!(class(p), QosClass::Guaranteed);
}

#[test]
fn pod_level_resources_override_containers() {
    let p = pod()
        .pod_request("cpu", "1")
        .pod_limit("cpu", "1")
        .pod_request("memory", "1Gi")
        .pod_limit("memory", "1Gi")
        .container(container("a").request("cpu", "100m"));
    assert_eq!(class(p), QosClass::Guaranteed);
}

#[test]
fn pod_level_guaranteed_needs_both_limits_after_defaulting() {
    // v1.37 `DefaultPodLevelResources`: memory request from the container (1Gi), memory limit
    // from it too since every container has one — so the pod is Guaranteed.
    let p = pod()
        .pod_request("cpu", "1")
        .pod_limit("cpu", "1")
        .container(container("a").guaranteed("1", "1Gi"));
    assert_eq!(class(p), QosClass::Guaranteed);
    // Without a container memory limit nothing is defaulted and memory stays Burstable.
    let p = pod()
        .pod_request("cpu", "1")
        .pod_limit("cpu", "1")
        .container(container("a").both("cpu", "1").request("memory", "1Gi"));
    assert_eq!(class(p), QosClass::Burstable);
}

#[test]
fn each_container_and_resource_is_judged_on_its_own() {
    // Issue case 2: sums would say Guaranteed (1Gi + 256Mi on both sides); upstream says
    // Burstable because app1's memory request differs from its limit.
    let p = pod()
        .container(
            container("app0")
                .both("cpu", "1")
                .request("memory", "256Mi")
                .limit("memory", "1Gi"),
        )
        .container(
            container("app1")
                .both("cpu", "100m")
                .request("memory", "1Gi")
                .limit("memory", "256Mi"),
        );
    assert_eq!(class(p), QosClass::Burstable);
    // A BestEffort container next to a Guaranteed one makes the pod Burstable.
    let p = pod()
        .container(container("a").guaranteed("1", "1Gi"))
        .container(container("b"));
    assert_eq!(class(p), QosClass::Burstable);
    // A zero request and limit is BestEffort for that resource.
    let p = pod().container(container("a").both("cpu", "0").both("memory", "0"));
    assert_eq!(class(p), QosClass::BestEffort);
}

#[test]
fn pod_level_requests_default_from_limits_when_containers_request_nothing() {
    let p = pod()
        .pod_limit("cpu", "1")
        .pod_limit("memory", "1Gi")
        .container(container("a"));
    assert_eq!(class(p), QosClass::Guaranteed);
}

#[test]
fn pod_level_requests_default_from_container_aggregate() {
    let p = pod()
        .pod_limit("cpu", "1")
        .pod_limit("memory", "1Gi")
        .container(
            container("a")
                .request("cpu", "500m")
                .request("memory", "1Gi"),
        );
    assert_eq!(class(p), QosClass::Burstable);
}

#[test]
fn pod_level_resources_without_cpu_or_memory_are_ignored() {
    let p = pod()
        .pod_request("hugepages-2Mi", "2Mi")
        .container(container("a").guaranteed("1", "1Gi"));
    assert_eq!(class(p), QosClass::Guaranteed);
}

#[test]
fn stored_status_class_wins_for_the_current_class() {
    let p = pod()
        .container(container("a").guaranteed("1", "1Gi"))
        .qos_status("Burstable")
        .build();
    assert_eq!(current_qos_class(&p), QosClass::Burstable);
    assert_eq!(qos_class(&p), QosClass::Guaranteed);
}

#[test]
fn class_names_round_trip() {
    for c in [
        QosClass::BestEffort,
        QosClass::Burstable,
        QosClass::Guaranteed,
    ] {
        assert_eq!(QosClass::parse(c.as_str()), Some(c));
    }
    assert_eq!(QosClass::parse("Gold"), None);
}
