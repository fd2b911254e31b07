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

/// `(cpu, memory)` of a resource list, "" for unset.
type Pair = (&'static str, &'static str);
/// A container: its name, requests and limits.
type Ctr = (&'static str, Pair, Pair);
/// An init container, and whether it is a sidecar (`restartPolicy: Always`).
type Init = (Ctr, bool);
/// A case: what it shows, the containers and init containers, the pod-level requests and
/// limits, then the pod-level requests and limits defaulting gives.
type Case = (
    &'static str,
    &'static [Ctr],
    &'static [Init],
    [Pair; 2],
    [Pair; 2],
);

/// Unset.
const NO: Pair = ("", "");
/// The usual container resources of the upstream table.
const STD: Pair = ("100m", "128Mi");
/// Two containers with both requests and limits of [`STD`].
const TWO: &[Ctr] = &[("c1", STD, STD), ("c2", STD, STD)];

/// Upstream's table in its words, a row a case.
#[rustfmt::skip]
const DEFAULT_CASES: [Case; 10] = [
    ("nil resources struct", TWO, &[], [NO, NO], [NO, NO]),
    ("memory request set, container limits set for CPU",
        &[("c1", STD, ("100m", "")), ("c2", ("200m", "128Mi"), ("200m", ""))], &[],
        [("", "256Mi"), NO], [("300m", "256Mi"), ("300m", "")]),
    ("memory request set, containers have CPU reqs (5m, 6m) and limits (9m, 10m)",
        &[("c1", ("5m", ""), ("9m", "")), ("c2", ("6m", ""), ("10m", ""))], &[],
        [("", "256Mi"), NO], [("11m", "256Mi"), ("19m", "")]),
    ("limits defaulted from container limits when requests set",
        TWO, &[], [("200m", "256Mi"), NO], [("200m", "256Mi"), ("200m", "256Mi")]),
    ("limits not defaulted when container missing limits",
        &[("c1", STD, STD), ("c2", STD, NO)], &[], [("200m", "256Mi"), NO], [("200m", "256Mi"), NO]),
    ("pod memory limit set, CPU limit defaulted from containers",
        &[("c1", STD, STD), ("c2", ("80m", "128Mi"), STD)], &[],
        [("", "256Mi"), ("", "256Mi")], [("180m", "256Mi"), ("200m", "256Mi")]),
    ("sidecar container with limits included in defaulting",
        &[("c1", STD, STD)], &[(("sidecar", ("50m", "64Mi"), ("50m", "64Mi")), true)],
        [("150m", "192Mi"), NO], [("150m", "192Mi"), ("150m", "192Mi")]),
    ("init container missing limits - no limit defaulting",
        &[("c1", STD, STD)], &[(("init", ("50m", "64Mi"), NO), false)],
        [("200m", "256Mi"), NO], [("200m", "256Mi"), NO]),
    ("limit raised to pod request when aggr limit less than request",
        &[("c1", STD, STD)], &[], [("500m", "512Mi"), NO], [("500m", "512Mi"), ("500m", "512Mi")]),
    ("pod requests defaulted from container requests when limits set",
        &[("c1", ("50m", "64Mi"), NO), ("c2", ("50m", "64Mi"), NO)], &[],
        [NO, ("500m", "512Mi")], [("100m", "128Mi"), ("500m", "512Mi")]),
];

/// The pod of a case: its containers, its init containers, its pod-level requests and limits.
fn case_pod(containers: &[Ctr], inits: &[Init], [req, lim]: [Pair; 2]) -> PodBuilder {
    let mut b = PodBuilder::new("ns", "p");
    for &(name, r, l) in containers {
        b = b.container(c(name, r, l));
    }
    for &((name, r, l), sidecar) in inits {
        let init = c(name, r, l);
        b = b.init_container(if sidecar { init.sidecar() } else { init });
    }
    for (resource, r, l) in [("cpu", req.0, lim.0), ("memory", req.1, lim.1)] {
        if !r.is_empty() {
            b = b.pod_request(resource, r);
        }
        if !l.is_empty() {
            b = b.pod_limit(resource, l);
        }
    }
    b
}

#[test]
fn upstream_apply_pod_level_resource_defaults_table() {
    for (name, containers, inits, pod_level, [(rc, rm), (lc, lm)]) in DEFAULT_CASES {
        let (req, lim) = defaulted(case_pod(containers, inits, pod_level));
        assert_eq!(req, list(rc, rm), "{name}: requests");
        assert_eq!(lim, list(lc, lm), "{name}: limits");
    }
}

#[test]
fn pod_level_requests_default_from_limits_when_no_container_requests() {
    let (req, lim) = defaulted(case_pod(&[("c1", NO, NO)], &[], [NO, ("1", "")]));
    assert_eq!(req, list("1", ""));
    assert_eq!(lim, list("1", ""));
}

#[test]
fn an_ephemeral_container_stops_pod_level_limit_defaulting() {
    let mut s = case_pod(TWO, &[], [("200m", ""), NO]).build().spec.unwrap();
    s.ephemeral_containers = Some(vec![Default::default()]);
    default_pod_level_resources(&mut s);
    assert!(s.resources.unwrap().limits.is_none());
}

#[test]
fn prepare_resize_keeps_only_resources_and_defaults_pod_level_limits() {
    // Issue case 1: adding the container's memory limit lets the pod-level memory limit be
    // defaulted, which makes the pod Guaranteed.
    let old = case_pod(
        &[("app", ("500m", "128Mi"), ("500m", ""))],
        &[],
        [NO, ("500m", "")],
    )
    .label("a", "b")
    .build();
    let mut old_stored = old.clone();
    default_pod_level_resources(old_stored.spec.as_mut().unwrap());
    let mut new = case_pod(
        &[("app", ("500m", "128Mi"), ("500m", "128Mi"))],
        &[],
        [NO, ("500m", "")],
    )
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
    let old = case_pod(&[("app", ("100m", "64Mi"), NO)], &[], [("200m", ""), NO]).build();
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
