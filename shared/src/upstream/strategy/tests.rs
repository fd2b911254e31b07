//! `DefaultPodLevelResources` cases from upstream's `TestApplyPodLevelResourceDefaults`
//! (`pkg/registry/core/pod/strategy_test.go`, v1.37.2, gates on), and `PrepareForUpdate`'s
//! handling of what a resize request may and may not change.

use k8s_openapi::api::core::v1::PodSpec;

use super::*;
use crate::fixture::{ContainerBuilder, PodBuilder, container};
use crate::upstream::aggregate::{Amounts, amounts};
use crate::upstream::quantity::parse_nanos;

/// `newContainer(name, requests, limits)` with `getResourceList(cpu, memory)` ("" = unset).
fn c(name: &str, req: (&str, &str), lim: (&str, &str)) -> ContainerBuilder {
    let mut b = container(name);
    for (k, v) in [("cpu", req.0), ("memory", req.1)] {
        if !v.is_empty() {
            b = b.request(k, v);
        }
    }
    for (k, v) in [("cpu", lim.0), ("memory", lim.1)] {
        if !v.is_empty() {
            b = b.limit(k, v);
        }
    }
    b
}

fn list(cpu: &str, memory: &str) -> Option<Amounts> {
    let mut out = Amounts::new();
    for (k, v) in [("cpu", cpu), ("memory", memory)] {
        if !v.is_empty() {
            out.insert(k.to_owned(), parse_nanos(v).unwrap());
        }
    }
    (!out.is_empty()).then_some(out)
}

fn spec(containers: Vec<ContainerBuilder>, inits: Vec<ContainerBuilder>) -> PodBuilder {
    let mut b = PodBuilder::new("ns", "p");
    for x in containers {
        b = b.container(x);
    }
    for x in inits {
        b = b.init_container(x);
    }
    b
}

fn defaulted(b: PodBuilder) -> (Option<Amounts>, Option<Amounts>) {
    let mut s: PodSpec = b.build().spec.unwrap();
    default_pod_level_resources(&mut s);
    let r = s.resources.unwrap_or_default();
    let some = |l: Option<&crate::resources::ResourceList>| {
        let a = amounts(l);
        (!a.is_empty()).then_some(a)
    };
    (some(r.requests.as_ref()), some(r.limits.as_ref()))
}

#[test]
fn upstream_apply_pod_level_resource_defaults_table() {
    let two = || {
        vec![
            c("c1", ("100m", "128Mi"), ("100m", "128Mi")),
            c("c2", ("100m", "128Mi"), ("100m", "128Mi")),
        ]
    };
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, PodBuilder, (&str, &str), (&str, &str))> = vec![
        (
            "nil resources struct",
            spec(two(), vec![]),
            ("", ""),
            ("", ""),
        ),
        (
            "memory request set, container limits set for CPU",
            spec(
                vec![
                    c("c1", ("100m", "128Mi"), ("100m", "")),
                    c("c2", ("200m", "128Mi"), ("200m", "")),
                ],
                vec![],
            )
            .pod_request("memory", "256Mi"),
            ("300m", "256Mi"),
            ("300m", ""),
        ),
        (
            "memory request set, containers have CPU reqs (5m, 6m) and limits (9m, 10m)",
            spec(
                vec![
                    c("c1", ("5m", ""), ("9m", "")),
                    c("c2", ("6m", ""), ("10m", "")),
                ],
                vec![],
            )
            .pod_request("memory", "256Mi"),
            ("11m", "256Mi"),
            ("19m", ""),
        ),
        (
            "limits defaulted from container limits when requests set",
            spec(two(), vec![])
                .pod_request("cpu", "200m")
                .pod_request("memory", "256Mi"),
            ("200m", "256Mi"),
            ("200m", "256Mi"),
        ),
        (
            "limits not defaulted when container missing limits",
            spec(
                vec![
                    c("c1", ("100m", "128Mi"), ("100m", "128Mi")),
                    c("c2", ("100m", "128Mi"), ("", "")),
                ],
                vec![],
            )
            .pod_request("cpu", "200m")
            .pod_request("memory", "256Mi"),
            ("200m", "256Mi"),
            ("", ""),
        ),
        (
            "pod memory limit set, CPU limit defaulted from containers",
            spec(
                vec![
                    c("c1", ("100m", "128Mi"), ("100m", "128Mi")),
                    c("c2", ("80m", "128Mi"), ("100m", "128Mi")),
                ],
                vec![],
            )
            .pod_request("memory", "256Mi")
            .pod_limit("memory", "256Mi"),
            ("180m", "256Mi"),
            ("200m", "256Mi"),
        ),
        (
            "sidecar container with limits included in defaulting",
            spec(
                vec![c("c1", ("100m", "128Mi"), ("100m", "128Mi"))],
                vec![c("sidecar", ("50m", "64Mi"), ("50m", "64Mi")).sidecar()],
            )
            .pod_request("cpu", "150m")
            .pod_request("memory", "192Mi"),
            ("150m", "192Mi"),
            ("150m", "192Mi"),
        ),
        (
            "init container missing limits - no limit defaulting",
            spec(
                vec![c("c1", ("100m", "128Mi"), ("100m", "128Mi"))],
                vec![c("init", ("50m", "64Mi"), ("", ""))],
            )
            .pod_request("cpu", "200m")
            .pod_request("memory", "256Mi"),
            ("200m", "256Mi"),
            ("", ""),
        ),
        (
            "limit raised to pod request when aggr limit less than request",
            spec(vec![c("c1", ("100m", "128Mi"), ("100m", "128Mi"))], vec![])
                .pod_request("cpu", "500m")
                .pod_request("memory", "512Mi"),
            ("500m", "512Mi"),
            ("500m", "512Mi"),
        ),
        (
            "pod requests defaulted from container requests when limits set",
            spec(
                vec![
                    c("c1", ("50m", "64Mi"), ("", "")),
                    c("c2", ("50m", "64Mi"), ("", "")),
                ],
                vec![],
            )
            .pod_limit("cpu", "500m")
            .pod_limit("memory", "512Mi"),
            ("100m", "128Mi"),
            ("500m", "512Mi"),
        ),
    ];
    for (name, pod, (rc, rm), (lc, lm)) in cases {
        let (req, lim) = defaulted(pod);
        assert_eq!(req, list(rc, rm), "{name}: requests");
        assert_eq!(lim, list(lc, lm), "{name}: limits");
    }
}

#[test]
fn pod_level_requests_default_from_limits_when_no_container_requests() {
    let (req, lim) =
        defaulted(spec(vec![c("c1", ("", ""), ("", ""))], vec![]).pod_limit("cpu", "1"));
    assert_eq!(req, list("1", ""));
    assert_eq!(lim, list("1", ""));
}

#[test]
fn an_ephemeral_container_stops_pod_level_limit_defaulting() {
    let mut s = spec(two_limited(), vec![])
        .pod_request("cpu", "200m")
        .build()
        .spec
        .unwrap();
    s.ephemeral_containers = Some(vec![Default::default()]);
    default_pod_level_resources(&mut s);
    assert!(s.resources.unwrap().limits.is_none());
}

fn two_limited() -> Vec<ContainerBuilder> {
    vec![
        c("c1", ("100m", "128Mi"), ("100m", "128Mi")),
        c("c2", ("100m", "128Mi"), ("100m", "128Mi")),
    ]
}

#[test]
fn prepare_resize_keeps_only_resources_and_defaults_pod_level_limits() {
    // Issue case 1: adding the container's memory limit lets the pod-level memory limit be
    // defaulted, which makes the pod Guaranteed.
    let old = spec(vec![c("app", ("500m", "128Mi"), ("500m", ""))], vec![])
        .pod_limit("cpu", "500m")
        .label("a", "b")
        .build();
    let mut old_stored = old.clone();
    default_pod_level_resources(old_stored.spec.as_mut().unwrap());
    let mut new = spec(vec![c("app", ("500m", "128Mi"), ("500m", "128Mi"))], vec![])
        .pod_limit("cpu", "500m")
        .build();
    new.spec.as_mut().unwrap().node_name = Some("elsewhere".into());
    let got = prepare_resize(&old_stored, &new);
    let s = got.spec.unwrap();
    assert_eq!(s.node_name, None, "non-resize changes are dropped");
    assert_eq!(got.metadata.labels, old.metadata.labels);
    let r = s.resources.as_ref();
    let (req, lim) = (
        amounts(r.and_then(|r| r.requests.as_ref())),
        amounts(r.and_then(|r| r.limits.as_ref())),
    );
    assert_eq!(Some(req), list("500m", "128Mi"));
    assert_eq!(Some(lim), list("500m", "128Mi"));
}

#[test]
fn prepare_resize_restores_pod_level_resources_a_client_dropped() {
    let old = spec(vec![c("app", ("100m", "64Mi"), ("", ""))], vec![])
        .pod_request("cpu", "200m")
        .build();
    let mut new = old.clone();
    new.spec.as_mut().unwrap().resources = None;
    let got = prepare_resize(&old, &new);
    assert!(got.spec.unwrap().resources.is_some());
}

#[test]
fn overcommit_and_pod_level_names_follow_upstream_helpers() {
    assert!(is_overcommit_allowed("cpu") && is_overcommit_allowed("ephemeral-storage"));
    assert!(!is_overcommit_allowed("hugepages-2Mi"));
    assert!(!is_overcommit_allowed("example.com/gpu"));
    assert!(is_pod_level_resource("hugepages-1Gi") && !is_pod_level_resource("ephemeral-storage"));
}

#[test]
fn the_requests_pod_level_resources_count_only_from_v1_36() {
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let with_pod_cpu = |cpu: &str| {
        let mut p = PodBuilder::new("ns", "p")
            .container(container("app").guaranteed("100m", "64Mi"))
            .build();
        p.spec.as_mut().unwrap().resources = Some(ResourceRequirements {
            requests: Some([("cpu".to_owned(), Quantity(cpu.to_owned()))].into()),
            ..Default::default()
        });
        p
    };
    let (old, new) = (with_pod_cpu("200m"), with_pod_cpu("300m"));
    let pod_cpu = |minor| {
        prepare_resize_on(&old, &new, minor)
            .spec
            .unwrap()
            .resources
            .unwrap()
            .requests
            .unwrap()["cpu"]
            .0
            .clone()
    };
    // v1.33–v1.35 dropNonResizeUpdates keep the stored pod-level resources.
    assert_eq!(pod_cpu(Some(35)), "200m");
    assert_eq!(pod_cpu(Some(36)), "300m");
    assert_eq!(pod_cpu(None), "300m");
}
