//! The QoS table of upstream `qos_test.go`, plus the resize-specific edge cases.

use super::*;
use crate::fixture::{ContainerBuilder, PodBuilder, container};

fn class(b: PodBuilder) -> QosClass {
    qos_class(&b.build())
}

fn pod() -> PodBuilder {
    PodBuilder::new("ns", "p")
}

/// The pod of the one container `c`.
fn one(c: ContainerBuilder) -> PodBuilder {
    pod().container(c)
}

/// Containers `a` and `b` whose `resource` requests and limits cross: `a` requests `low` under a
/// limit of `high`, `b` the other way round; each has its `other` resource's request and limit
/// equal (`(other, a's, b's)`).
fn crossed(resource: &str, (low, high): (&str, &str), other: (&str, &str, &str)) -> PodBuilder {
    let (other, at_a, at_b) = other;
    let one = |name, request, limit, at| {
        container(name)
            .request(resource, request)
            .limit(resource, limit)
            .both(other, at)
    };
    pod()
        .container(one("a", low, high, at_a))
        .container(one("b", high, low, at_b))
}

/// The class of a pod from its containers' and its own requests and limits, a row a case.
#[test]
fn the_class_follows_each_containers_and_the_pods_requests_and_limits() {
    use QosClass::{BestEffort, Burstable, Guaranteed};
    let a = || container("a");
    // The app container of the init-container and pod-level cases.
    let app = || pod().container(a().guaranteed("1", "1Gi"));
    #[rustfmt::skip]
    let cases: Vec<(&str, PodBuilder, QosClass)> = vec![
        ("no resources anywhere is best effort", one(a()), BestEffort),
        ("equal cpu and memory requests and limits is guaranteed",
            one(a().guaranteed("250m", "64Mi")), Guaranteed),
        ("limits only default the requests and are guaranteed",
            one(a().limit("cpu", "1").limit("memory", "1Gi")), Guaranteed),
        ("request below limit is burstable",
            one(a().request("cpu", "100m").limit("cpu", "200m").both("memory", "64Mi")), Burstable),
        ("missing memory limit is burstable", one(a().both("cpu", "1")), Burstable),
        ("requests only is burstable", one(a().request("cpu", "1").request("memory", "1Gi")), Burstable),
        ("one best effort container makes a guaranteed pod burstable",
            app().container(container("b")), Burstable),
        ("equal quantities in different notation are equal",
            one(a().request("cpu", "1").limit("cpu", "1000m").request("memory", "1Gi")
                .limit("memory", "1073741824")), Guaranteed),
        ("other resources do not count",
            one(a().guaranteed("1", "1Gi").request("ephemeral-storage", "1Gi")
                .request("nvidia.com/gpu", "1").limit("nvidia.com/gpu", "1")), Guaranteed),
        ("other resources alone are best effort", one(a().both("ephemeral-storage", "1Gi")), BestEffort),
        ("zero quantities are ignored", one(a().both("cpu", "0").both("memory", "0")), BestEffort),
        ("a burstable init container makes the pod burstable",
            app().init_container(container("init").request("cpu", "100m")), Burstable),
        ("guaranteed init containers keep the pod guaranteed",
            app().init_container(container("init").guaranteed("100m", "10Mi")), Guaranteed),
        ("a best effort sidecar makes the pod burstable",
            app().init_container(container("proxy").sidecar()), Burstable),
        // Upstream compares per-resource sums; per-container equality follows from
        // requests <= limits.
        ("sums compare across containers like upstream",
            one(a().guaranteed("300m", "100Mi")).container(container("b").guaranteed("700m", "100Mi")),
            Guaranteed),
        ("pod level resources override containers",
            one(a().request("cpu", "100m")).pod_request("cpu", "1").pod_limit("cpu", "1")
                .pod_request("memory", "1Gi").pod_limit("memory", "1Gi"), Guaranteed),
        // v1.37 `DefaultPodLevelResources`: memory request from the container (1Gi), memory limit
        // from it too since every container has one — so the pod is Guaranteed.
        ("pod-level Guaranteed with both limits after defaulting",
            app().pod_request("cpu", "1").pod_limit("cpu", "1"), Guaranteed),
        // Without a container memory limit nothing is defaulted and memory stays Burstable.
        ("pod-level Guaranteed needs both limits after defaulting",
            one(a().both("cpu", "1").request("memory", "1Gi")).pod_request("cpu", "1")
                .pod_limit("cpu", "1"), Burstable),
        // Sums would say Guaranteed (1Gi + 256Mi on both sides); upstream says Burstable
        // because b's memory request differs from its limit.
        ("each container and resource is judged on its own",
            crossed("memory", ("256Mi", "1Gi"), ("cpu", "1", "100m")), Burstable),
        ("pod level requests default from limits when containers request nothing",
            one(a()).pod_limit("cpu", "1").pod_limit("memory", "1Gi"), Guaranteed),
        ("pod level requests default from container aggregate",
            one(a().request("cpu", "500m").request("memory", "1Gi")).pod_limit("cpu", "1")
                .pod_limit("memory", "1Gi"), Burstable),
        ("pod level resources without cpu or memory are ignored",
            app().pod_request("hugepages-2Mi", "2Mi"), Guaranteed),
    ];
    for (row, p, want) in cases {
        assert_eq!(class(p), want, "{row}");
    }
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

/// Upstream `TestComputePodQOS` (`pkg/apis/core/v1/helper/qos/qos_test.go`, v1.37.2): the
/// container-level cases, their two-container and init-container variants, and the ephemeral
/// container case. (Its pod-level cases call `ComputePodQOS` on undefaulted pods; the API server
/// never does — `PrepareForCreate` and the resize strategy default first — so resize-guard's
/// pod-level cases above are on defaulted pods.)
#[test]
fn upstream_compute_pod_qos_table() {
    use k8s_openapi::api::core::v1::{Container, EphemeralContainer, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let list = |pairs: &[(&str, &str)]| {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                .collect::<crate::resources::ResourceList>(),
        )
    };
    let rr = |req: &[(&str, &str)], lim: &[(&str, &str)]| ResourceRequirements {
        requests: if req.is_empty() { None } else { list(req) },
        limits: if lim.is_empty() { None } else { list(lim) },
        ..Default::default()
    };
    let cm = |cpu: &'static str, mem: &'static str| vec![("cpu", cpu), ("memory", mem)];
    let guaranteed = rr(
        &[
            ("cpu", "100m"),
            ("memory", "100Mi"),
            ("ephemeral-storage", "10Gi"),
        ],
        &cm("100m", "100Mi"),
    );
    let best_effort = [
        rr(&[], &[]),
        rr(&cm("0", "0"), &[]),
        rr(&cm("0", "0"), &cm("0", "0")),
        rr(&[("ephemeral-storage", "10Gi")], &[]),
        rr(
            &[("ephemeral-storage", "10Gi")],
            &[("ephemeral-storage", "10Gi")],
        ),
    ];
    let burstable = [
        rr(&cm("100m", "100Mi"), &cm("200m", "200Mi")),
        rr(&cm("100m", "100Mi"), &cm("100m", "200Mi")),
        rr(&cm("100m", "100Mi"), &cm("200m", "100Mi")),
        rr(&cm("100m", "100Mi"), &[]),
        rr(&cm("100m", "100Mi"), &[("cpu", "100m")]),
    ];
    let c = |r: &ResourceRequirements| Container {
        name: "c".into(),
        resources: Some(r.clone()),
        ..Default::default()
    };
    let spec = |cs: Vec<Container>, inits: Vec<Container>| PodSpec {
        containers: cs,
        init_containers: (!inits.is_empty()).then_some(inits),
        ..Default::default()
    };
    let mut cases: Vec<(String, PodSpec, QosClass)> = vec![(
        "guaranteed".into(),
        spec(vec![c(&guaranteed)], vec![]),
        QosClass::Guaranteed,
    )];
    for (i, r) in best_effort.iter().enumerate() {
        cases.push((
            format!("best-effort-{i}"),
            spec(vec![c(r)], vec![]),
            QosClass::BestEffort,
        ));
    }
    for (i, r) in burstable.iter().enumerate() {
        cases.push((
            format!("burstable-{i}"),
            spec(vec![c(r)], vec![]),
            QosClass::Burstable,
        ));
    }
    let mut two = vec![
        (
            "2c-guaranteed".to_owned(),
            c(&guaranteed),
            c(&guaranteed),
            QosClass::Guaranteed,
        ),
        (
            "2c-best-effort".to_owned(),
            c(&best_effort[0]),
            c(&best_effort[1]),
            QosClass::BestEffort,
        ),
        (
            "2c-burstable".to_owned(),
            c(&burstable[0]),
            c(&burstable[1]),
            QosClass::Burstable,
        ),
    ];
    let firsts = [&guaranteed, &best_effort[0], &burstable[0]];
    let seconds = [&guaranteed, &best_effort[1], &burstable[1]];
    for (i, a) in firsts.iter().enumerate() {
        for (j, b) in seconds.iter().enumerate() {
            if i != j {
                two.push((format!("2c-mixed-{i}-{j}"), c(a), c(b), QosClass::Burstable));
            }
        }
    }
    for (name, a, b, want) in two {
        cases.push((name.clone(), spec(vec![a.clone(), b.clone()], vec![]), want));
        cases.push((format!("{name}-init"), spec(vec![a], vec![b]), want));
    }
    let mut ephemeral = spec(vec![c(&guaranteed)], vec![]);
    ephemeral.ephemeral_containers = Some(vec![EphemeralContainer {
        name: "ec".into(),
        ..Default::default()
    }]);
    cases.push((
        "guaranteed-ephemeral".into(),
        ephemeral,
        QosClass::Guaranteed,
    ));
    for (name, s, want) in cases {
        assert_eq!(spec_qos_class(&s), want, "{name}");
    }
}

fn class_on(b: PodBuilder, minor: u32) -> QosClass {
    spec_qos_class_on(b.build().spec.as_ref().unwrap(), Some(minor))
}

#[test]
fn v1_33_to_v1_36_sum_across_containers() {
    // Each container is Burstable, but the sums match: the pre-v1.37 ComputePodQOS calls it
    // Guaranteed (every container's limits name cpu and memory, summed requests = summed limits).
    let crossed = || crossed("cpu", ("1", "2"), ("memory", "64Mi", "64Mi"));
    for minor in [33, 34, 35, 36] {
        assert_eq!(
            class_on(crossed(), minor),
            QosClass::Guaranteed,
            "v1.{minor}"
        );
    }
    assert_eq!(class_on(crossed(), 37), QosClass::Burstable);
    assert_eq!(class(crossed()), QosClass::Burstable);
    // A limit missing cpu anywhere is never Guaranteed.
    let partial = pod().container(container("a").both("memory", "64Mi"));
    assert_eq!(class_on(partial, 35), QosClass::Burstable);
}

#[test]
fn before_v1_37_a_present_pod_level_object_decides_even_empty() {
    let with_empty = || {
        let mut p = pod().container(container("a").both("cpu", "100m")).build();
        p.spec.as_mut().unwrap().resources = Some(Default::default());
        p
    };
    let on = |minor| spec_qos_class_on(with_empty().spec.as_ref().unwrap(), Some(minor));
    // v1.34–v1.36: PodLevelResources on and `Resources != nil` → BestEffort from the empty object.
    assert_eq!(on(34), QosClass::BestEffort);
    assert_eq!(on(36), QosClass::BestEffort);
    // v1.33: the gate is off, containers decide; v1.37 needs a set pod-level resource.
    assert_eq!(on(33), QosClass::Burstable);
    assert_eq!(on(37), QosClass::Burstable);
}
