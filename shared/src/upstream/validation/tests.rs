//! Built-in `pods/resize` validation, case by case, with upstream's wording
//! (`pkg/apis/core/validation/validation.go` and its `TestValidatePodResize`, v1.37.2).

use k8s_openapi::api::core::v1::{
    ContainerResizePolicy, ContainerState, ContainerStateRunning, ResourceRequirements,
};

use super::*;
use crate::fixture::{PodBuilder, container, running_pod};
use crate::resources::ResourceList;
use crate::upstream::strategy::prepare_resize;

fn base() -> PodBuilder {
    PodBuilder::new("ns", "p")
        .node("n1")
        .container(container("app0").guaranteed("1", "256Mi"))
        .container(container("app1").guaranteed("100m", "128Mi"))
        .running(0)
}

fn check(old: &Pod, new: &Pod) -> Result<(), String> {
    validate_resize(old, &prepare_resize(old, new)).map_err(|e| e.to_string())
}

/// Upstream's refusal of [`base`] changed by `edit` (there must be one).
fn refusal_of(edit: impl FnOnce(&mut PodSpec)) -> String {
    let old = base().build();
    check(&old, &with(&old, edit)).unwrap_err()
}

fn with<F: FnOnce(&mut PodSpec)>(pod: &Pod, f: F) -> Pod {
    let mut p = pod.clone();
    f(p.spec.as_mut().unwrap());
    p
}

fn set(list: &mut Option<ResourceList>, k: &str, v: &str) {
    list.get_or_insert_with(Default::default).insert(
        k.to_owned(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity(v.to_owned()),
    );
}

/// Where [`change`] sets quantities: a container, an init container or the pod-level object.
#[derive(Clone, Copy)]
enum At {
    Container(usize),
    Init(usize),
    Pod,
}

/// `pod` with `requests` and `limits` (resource, quantity) set at `at`, created if missing.
fn change(pod: &Pod, at: At, requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Pod {
    with(pod, |s| {
        let r = match at {
            At::Container(i) => &mut s.containers[i].resources,
            At::Init(i) => &mut s.init_containers.as_mut().unwrap()[i].resources,
            At::Pod => &mut s.resources,
        }
        .get_or_insert_with(Default::default);
        for (k, v) in requests {
            set(&mut r.requests, k, v);
        }
        for (k, v) in limits {
            set(&mut r.limits, k, v);
        }
    })
}

#[test]
fn an_empty_pod_level_object_the_old_pod_lacks_is_another_change() {
    let refusal = refusal_of(|s| s.resources = Some(ResourceRequirements::default()));
    assert_eq!(
        refusal,
        "spec: Forbidden: only cpu and memory resources are mutable"
    );
}

#[test]
fn a_qos_change_keeps_upstream_from_its_closing_comparison() {
    // `ValidatePodResize` reaches its closing `Semantic.DeepEqual` only while `allErrs` is
    // empty, and the QoS error comes first: a Guaranteed pod made Burstable together with an
    // empty pod-level object gets the QoS error alone (seen on kube-apiserver v1.37.2).
    let old = base().build();
    let mut new = change(
        &old,
        At::Container(1),
        &[("cpu", "200m")],
        &[("cpu", "400m")],
    );
    if let Some(s) = new.spec.as_mut() {
        s.resources = Some(ResourceRequirements::default());
    }
    assert_eq!(check(&old, &new), Ok(()));
}

#[test]
fn a_resize_of_one_container_is_judged_as_upstream_judges_it() {
    let old = base().build();
    #[allow(clippy::type_complexity)]
    let cases: [(&str, &[(&str, &str)], &[(&str, &str)], Result<(), &str>); 2] = [
        (
            "a plain resize",
            &[("cpu", "200m")],
            &[("cpu", "200m")],
            Ok(()),
        ),
        // Per-container QoS stays Burstable; only upstream's error remains.
        (
            "a request above its limit",
            &[("memory", "1Gi")],
            &[("memory", "256Mi")],
            Err(
                "spec.containers[1].resources.requests: Invalid value: \"1Gi\": must be less than or equal to memory limit of 256Mi",
            ),
        ),
    ];
    for (row, requests, limits, want) in cases {
        let new = change(&old, At::Container(1), requests, limits);
        assert_eq!(check(&old, &new), want.map_err(str::to_owned), "{row}");
    }
}

#[test]
fn removing_a_limit_or_request_is_forbidden() {
    let refusal = refusal_of(|s| {
        let limits = s.containers[0]
            .resources
            .as_mut()
            .and_then(|r| r.limits.as_mut());
        limits.unwrap().remove("memory");
    });
    // The request stays (defaulting only fills missing requests), so the limit is what is gone.
    assert_eq!(
        refusal,
        "spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed"
    );
}

#[test]
fn other_resources_and_resize_policies_are_immutable() {
    let old = base().build();
    let new = change(&old, At::Container(0), &[("ephemeral-storage", "1Gi")], &[]);
    assert_eq!(
        check(&old, &new).unwrap_err(),
        "spec: Forbidden: only cpu and memory resources are mutable"
    );
    let new = with(&old, |s| {
        s.containers[0].resize_policy = Some(vec![ContainerResizePolicy {
            resource_name: "cpu".into(),
            restart_policy: "RestartContainer".into(),
        }]);
    });
    assert!(check(&old, &new).is_err());
}

#[test]
fn containers_cannot_be_added_or_renamed() {
    assert_eq!(
        refusal_of(|s| s.containers.push(container("x").build())),
        "spec.containers: Forbidden: containers may not be added or removed on resize"
    );
    assert_eq!(
        refusal_of(|s| s.containers[1].name = "other".into()),
        "spec.containers[1].name: Forbidden: containers may not be renamed or reordered on resize"
    );
}

#[test]
fn pod_level_rules() {
    let old = PodBuilder::new("ns", "p")
        .node("n1")
        .container(
            container("app")
                .request("cpu", "200m")
                .request("memory", "64Mi")
                .limit("cpu", "400m"),
        )
        .pod_request("cpu", "500m")
        .pod_limit("cpu", "1")
        .build();
    // Pod-level request below the containers' aggregate.
    let below = change(
        &old,
        At::Container(0),
        &[("cpu", "600m")],
        &[("cpu", "600m")],
    );
    assert_eq!(
        check(&old, &below).unwrap_err(),
        "spec.resources.requests[cpu]: Invalid value: \"500m\": must be greater than or equal to aggregate container requests of 600m"
    );
    // A container limit above the pod-level limit.
    let above = change(&old, At::Container(0), &[], &[("cpu", "2")]);
    assert_eq!(
        check(&old, &above).unwrap_err(),
        "spec.resources.containers[0][cpu].limits: Invalid value: \"2\": must be less than or equal to pod limits of 1"
    );
    // Several errors are listed together, as `ToAggregate` prints them.
    let both = change(&old, At::Container(0), &[("cpu", "3")], &[("cpu", "2")]);
    let msg = check(&old, &both).unwrap_err();
    assert!(msg.starts_with('[') && msg.ends_with(']'), "{msg}");
    assert!(
        msg.contains("must be less than or equal to cpu limit of 2"),
        "{msg}"
    );
    assert!(
        msg.contains("must be greater than or equal to aggregate container requests of 3"),
        "{msg}"
    );
    // Pod-level: only cpu and memory may change; nothing may be removed.
    let other = change(&old, At::Pod, &[], &[("hugepages-2Mi", "2Mi")]);
    assert!(check(&old, &other).is_err());
    // With every container limited, a dropped pod-level limit is defaulted back (to
    // max(request, containers' limits)) before validation; without that it is a removal.
    let removed = with(&old, |s| {
        s.resources.as_mut().unwrap().limits = None;
    });
    assert_eq!(check(&old, &removed), Ok(()));
    let unlimited = with(&old, |s| {
        s.containers[0].resources.as_mut().unwrap().limits = None;
    });
    let removed = with(&unlimited, |s| {
        s.resources.as_mut().unwrap().limits = None;
    });
    assert_eq!(
        check(&unlimited, &removed).unwrap_err(),
        "spec.resources.limits: Forbidden: pod-level resource limits cannot be removed"
    );
}

#[test]
fn static_windows_and_status_less_pods_cannot_be_resized() {
    let mirror = base()
        .annotation(crate::upstream::pod::MIRROR_ANNOTATION, "x")
        .build();
    assert_eq!(
        check(&mirror, &mirror).unwrap_err(),
        "[]: Forbidden: static pods cannot be resized"
    );
    let mut old = base().build();
    let status = old.status.as_mut().unwrap();
    let cs = &mut status.container_statuses.as_mut().unwrap()[0];
    cs.resources = None;
    cs.state = Some(ContainerState {
        running: Some(ContainerStateRunning::default()),
        ..Default::default()
    });
    assert_eq!(
        check(&old, &old).unwrap_err(),
        "spec: Forbidden: Pod running on node without support for resize"
    );
}

#[test]
fn non_overcommittable_resources_need_equal_request_and_limit() {
    let r = ResourceRequirements {
        requests: Some(
            [(
                "example.com/gpu".to_owned(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()),
            )]
            .into(),
        ),
        ..Default::default()
    };
    let mut e = Errors::default();
    validate_requirements(Some(&r), "x", false, &mut e);
    assert_eq!(
        e.result(false).unwrap_err().to_string(),
        "x.limits: Required value: Limit must be set for non overcommitable resources"
    );
}

#[test]
fn non_sidecar_init_containers_with_restart_policy_cannot_be_resized() {
    let small = |name| container(name).guaranteed("100m", "64Mi");
    let mut old = PodBuilder::new("ns", "p")
        .container(small("app"))
        .init_container(small("setup"))
        .build();
    old.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0].resize_policy =
        Some(vec![ContainerResizePolicy {
            resource_name: "cpu".into(),
            restart_policy: "RestartContainer".into(),
        }]);
    let new = change(&old, At::Init(0), &[("cpu", "200m")], &[("cpu", "200m")]);
    assert_eq!(
        check(&old, &new).unwrap_err(),
        "spec.initContainers[0]: Forbidden: non-sidecar init containers with a resize policy of RestartContainer cannot be resized"
    );
}

fn check_on(old: &Pod, new: &Pod, minor: u32) -> Result<(), String> {
    validate_resize_on(old, &prepare_resize(old, new), Some(minor)).map_err(|e| e.to_string())
}

fn memory_limit(pod: &Pod, limit: &str) -> Pod {
    change(pod, At::Container(1), &[], &[("memory", limit)])
}

#[test]
fn v1_33_refuses_lowering_or_adding_a_memory_limit_without_restart() {
    // v1.33.13 validateContainerResize; the rule is gone from v1.34.
    let old = base().build();
    let lower = memory_limit(&old, "64Mi");
    let lowered_requests = change(&lower, At::Container(1), &[("memory", "64Mi")], &[]);
    assert_eq!(
        check_on(&old, &lowered_requests, 33).unwrap_err(),
        "spec.containers[1].resources.limits[memory]: Forbidden: memory limits cannot be decreased unless resizePolicy is RestartContainer"
    );
    for minor in [34, 35, 36, 37] {
        assert_eq!(
            check_on(&old, &lowered_requests, minor),
            Ok(()),
            "v1.{minor}"
        );
    }
    // Raising is fine; so is lowering with RestartContainer.
    assert_eq!(check_on(&old, &memory_limit(&old, "256Mi"), 33), Ok(()));
    let mut restart = old.clone();
    restart.spec.as_mut().unwrap().containers[1].resize_policy =
        Some(vec![ContainerResizePolicy {
            resource_name: "memory".into(),
            restart_policy: "RestartContainer".into(),
        }]);
    let lowered = with(&lowered_requests, |s| {
        s.containers[1].resize_policy = restart.spec.as_ref().unwrap().containers[1]
            .resize_policy
            .clone();
    });
    assert_eq!(check_on(&restart, &lowered, 33), Ok(()));

    // Adding a limit lowers it from unlimited.
    let app = container("app").request("cpu", "100m");
    let unlimited = running_pod("ns", "p", app.request("memory", "64Mi")).build();
    let added = change(&unlimited, At::Container(0), &[], &[("memory", "128Mi")]);
    assert_eq!(
        check_on(&unlimited, &added, 33).unwrap_err(),
        "spec.containers[0].resources.limits[memory]: Forbidden: memory limits cannot be added unless resizePolicy is RestartContainer"
    );
    assert_eq!(check_on(&unlimited, &added, 34), Ok(()));
}

#[test]
fn pod_level_resources_per_minor() {
    let old = running_pod("ns", "p", container("app").guaranteed("100m", "64Mi")).build();
    let old = change(&old, At::Pod, &[("cpu", "200m")], &[("cpu", "200m")]);
    let new = change(&old, At::Pod, &[("cpu", "300m")], &[("cpu", "300m")]);
    for minor in [33, 34] {
        let e = validate_resize_on(&old, &prepare_resize(&old, &new), Some(minor)).unwrap_err();
        assert!(e.alone, "v1.{minor} returns it alone");
        assert_eq!(
            e.to_string(),
            "[]: Forbidden: pods with pod-level resources cannot be resized"
        );
    }
    assert_eq!(
        check_on(&old, &new, 35).unwrap_err(),
        "[]: Forbidden: resize of pods with pod-level resources is forbidden when InPlacePodLevelResourcesVerticalScalingEnabled feature gate is disabled"
    );
    assert_eq!(check_on(&old, &new, 36), Ok(()));
    assert_eq!(check_on(&old, &new, 37), Ok(()));
}

#[test]
fn init_containers_before_v1_36_only_resize_sidecars() {
    let old = PodBuilder::new("ns", "p")
        .node("n1")
        .container(container("app").guaranteed("100m", "64Mi"))
        .init_container(container("setup").guaranteed("100m", "64Mi"))
        .init_container(container("proxy").guaranteed("100m", "64Mi").sidecar())
        .running(0)
        .build();
    let cpu = |i: usize, v: &str| change(&old, At::Init(i), &[("cpu", v)], &[("cpu", v)]);
    // A non-sidecar init container: immutable through v1.35 (SidecarContainers branch of
    // ValidatePodResize), resizable from v1.36 (InPlacePodVerticalScalingInitContainers, beta).
    for minor in [33, 34, 35] {
        assert_eq!(
            check_on(&old, &cpu(0, "200m"), minor).unwrap_err(),
            "spec: Forbidden: resources for non-sidecar init containers are immutable",
            "v1.{minor}"
        );
        assert_eq!(check_on(&old, &cpu(1, "200m"), minor), Ok(()), "v1.{minor}");
    }
    assert_eq!(check_on(&old, &cpu(0, "200m"), 36), Ok(()));
    // A sidecar's other resources, worded per minor.
    let storage = change(&old, At::Init(1), &[("ephemeral-storage", "1Gi")], &[]);
    assert_eq!(
        check_on(&old, &storage, 35).unwrap_err(),
        "spec: Forbidden: only cpu and memory resources for sidecar containers are mutable"
    );
    assert_eq!(
        check_on(&old, &storage, 37).unwrap_err(),
        "spec.initContainers[1]: Forbidden: only cpu and memory resources for init or sidecar containers are mutable"
    );
}

#[test]
fn before_v1_35_a_list_the_old_container_lacks_is_not_compared() {
    // v1.33–v1.34 dropCPUMemoryResourcesFromContainer: `if oldResourceList == nil { return nil }`.
    let old = running_pod("ns", "p", container("app")).build();
    let new = change(&old, At::Container(0), &[("ephemeral-storage", "1Gi")], &[]);
    assert_eq!(check_on(&old, &new, 34), Ok(()));
    assert_eq!(
        check_on(&old, &new, 35).unwrap_err(),
        "spec: Forbidden: only cpu and memory resources are mutable"
    );
}
