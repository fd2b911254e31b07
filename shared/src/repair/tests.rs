//! QoS repair and culprit naming.

use super::*;
use crate::fixture::{ContainerBuilder, PodBuilder, container};
use k8s_openapi::api::core::v1::Pod;

fn spec(p: &Pod) -> &PodSpec {
    p.spec.as_ref().unwrap()
}

/// The repair of a resize of a Guaranteed `old` to `new` (there must be one).
fn fix(old: &Pod, new: &Pod) -> QosRepair {
    repair(spec(old), QosClass::Guaranteed, spec(new)).unwrap()
}

fn culprits_of(old: &Pod, from: QosClass, new: &Pod, to: QosClass) -> Vec<Culprit> {
    culprits(spec(old), from, spec(new), to)
}

/// Pod `ns/p` with the one container `app`.
fn pod(app: ContainerBuilder) -> Pod {
    PodBuilder::new("ns", "p").container(app).build()
}

fn guaranteed_app() -> ContainerBuilder {
    container("app").guaranteed("250m", "64Mi")
}

fn guaranteed() -> Pod {
    pod(guaranteed_app())
}

/// The Guaranteed pod with only its cpu request changed.
fn requests_only(cpu: &str) -> Pod {
    pod(guaranteed_app().request("cpu", cpu))
}

/// Burstable: cpu request 100m below its 200m limit, memory 1Gi both.
fn burstable() -> Pod {
    pod(container("app")
        .request("cpu", "100m")
        .limit("cpu", "200m")
        .both("memory", "1Gi"))
}

/// The Burstable pod's cpu request raised to its limit: Guaranteed.
fn now_equal() -> Pod {
    pod(container("app").guaranteed("200m", "1Gi"))
}

#[test]
fn requests_only_resize_of_a_guaranteed_pod_moves_the_limit_along() {
    let old = guaranteed();
    let new = requests_only("500m");
    assert_eq!(spec_qos_class(spec(&new)), QosClass::Burstable);
    let fix = fix(&old, &new);
    assert_eq!(fix.changes.len(), 1);
    let c = &fix.changes[0];
    assert_eq!(c.target, Target::Container("app".into()));
    assert_eq!((c.resource, c.field), (ResourceName::Cpu, Field::Limits));
    assert_eq!((c.from.as_deref(), c.to.as_str()), (Some("250m"), "500m"));
    assert_eq!(fix.describe(), "container app: limits.cpu 250m → 500m");
    let mut repaired = spec(&new).clone();
    fix.apply(&mut repaired);
    assert_eq!(spec_qos_class(&repaired), QosClass::Guaranteed);
}

#[test]
fn limits_only_resize_moves_the_request_along() {
    let old = guaranteed();
    let new = pod(guaranteed_app().limit("memory", "128Mi"));
    let fix = fix(&old, &new);
    assert_eq!(fix.changes.len(), 1);
    assert_eq!(fix.changes[0].field, Field::Requests);
    assert_eq!(fix.changes[0].to, "128Mi");
}

#[test]
fn when_both_changed_differently_the_request_wins() {
    let old = guaranteed();
    let new = pod(guaranteed_app().request("cpu", "500m").limit("cpu", "400m"));
    let fix = fix(&old, &new);
    assert_eq!(fix.changes.len(), 1);
    assert_eq!(
        (fix.changes[0].field, fix.changes[0].to.as_str()),
        (Field::Limits, "500m")
    );
}

#[test]
fn repairs_every_container_that_needs_it() {
    let two = |a: ContainerBuilder, b: ContainerBuilder| {
        PodBuilder::new("ns", "p").container(a).container(b).build()
    };
    let g = |name: &str| container(name).guaranteed("250m", "64Mi");
    let old = two(g("a"), g("b"));
    let new = two(
        g("a").request("cpu", "300m"),
        g("b").request("memory", "100Mi"),
    );
    let fix = fix(&old, &new);
    assert_eq!(fix.changes.len(), 2);
}

#[test]
fn pod_level_guaranteed_pods_are_repaired_at_pod_level() {
    let b = || {
        PodBuilder::new("ns", "p")
            .pod_request("cpu", "1")
            .pod_limit("cpu", "1")
            .pod_request("memory", "1Gi")
            .pod_limit("memory", "1Gi")
            .container(container("app"))
    };
    let old = b().build();
    let new = b().pod_request("cpu", "2").build();
    let fix = fix(&old, &new);
    assert_eq!(fix.changes[0].target, Target::Pod);
    assert_eq!(fix.changes[0].to, "2");
}

#[test]
fn no_repair_for_best_effort_or_burstable_pods() {
    let be = pod(container("app"));
    let gaining = pod(container("app").request("cpu", "100m"));
    assert_eq!(
        repair(spec(&be), QosClass::BestEffort, spec(&gaining)),
        None
    );
    assert_eq!(
        repair(spec(&burstable()), QosClass::Burstable, spec(&now_equal())),
        None
    );
}

#[test]
fn culprits_name_the_container_resource_and_values() {
    let old = guaranteed();
    let new = requests_only("500m");
    let c = culprits_of(&old, QosClass::Guaranteed, &new, QosClass::Burstable);
    assert_eq!(c.len(), 1);
    assert_eq!(
        c[0].describe(),
        "container app: cpu request 500m ≠ limit 250m"
    );
}

#[test]
fn culprits_for_burstable_becoming_guaranteed_name_the_changed_values() {
    let (old, new) = (burstable(), now_equal());
    let c = culprits_of(&old, QosClass::Burstable, &new, QosClass::Guaranteed);
    assert_eq!(c.len(), 1);
    assert!(
        c[0].describe().contains("request 200m = limit 200m"),
        "{}",
        c[0].describe()
    );
}

#[test]
fn culprits_for_best_effort_gaining_resources() {
    let old = pod(container("app"));
    let new = pod(container("app").request("memory", "1Gi"));
    let c = culprits_of(&old, QosClass::BestEffort, &new, QosClass::Burstable);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].resource, ResourceName::Memory);
}
