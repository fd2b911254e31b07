//! Upstream `PodRequests` cases (`helpers_test.go`) and the kubelet's accounting views.

use super::*;
use crate::fixture::{PodBuilder, container};
use crate::upstream::pod::{REASON_DEFERRED, REASON_INFEASIBLE};

fn req(p: &Pod, a: Accounting) -> Resources {
    pod_requests(p, a)
}

const MI: i64 = 1 << 20;

fn pod() -> PodBuilder {
    PodBuilder::new("ns", "p")
}

/// What the built pod requests as its spec asks ([`Accounting::Desired`]).
fn desired(b: PodBuilder) -> Resources {
    pod_requests(&b.build(), Accounting::Desired)
}

/// What a pod's spec asks for ([`Accounting::Desired`]), a row a case.
#[test]
fn what_the_spec_asks_is_summed_as_upstream_sums_it() {
    let cases: Vec<(&str, PodBuilder, Resources)> = vec![
        (
            "sums regular containers",
            pod()
                .container(
                    container("a")
                        .request("cpu", "100m")
                        .request("memory", "10Mi"),
                )
                .container(
                    container("b")
                        .request("cpu", "200m")
                        .request("memory", "20Mi"),
                ),
            Resources::new(300, 30 * MI),
        ),
        (
            "largest init container wins when bigger than the sum",
            pod()
                .container(container("a").request("cpu", "100m"))
                .init_container(container("i1").request("cpu", "500m"))
                .init_container(container("i2").request("cpu", "300m")),
            Resources::new(500, 0),
        ),
        // KEP-753: sidecar 100m started before init 300m -> init phase needs 400m; steady state
        // needs app 200m + sidecar 100m = 300m. The pod requests the max, 400m.
        (
            "sidecars add to the sum and to later init containers",
            pod()
                .container(container("app").request("cpu", "200m"))
                .init_container(container("sidecar").request("cpu", "100m").sidecar())
                .init_container(container("init").request("cpu", "300m")),
            Resources::new(400, 0),
        ),
        // init alone: 250m; steady: 300m.
        (
            "sidecars started after an init container do not add to it",
            pod()
                .container(container("app").request("cpu", "200m"))
                .init_container(container("init").request("cpu", "250m"))
                .init_container(container("sidecar").request("cpu", "100m").sidecar()),
            Resources::new(300, 0),
        ),
        (
            "overhead is added",
            pod()
                .container(container("a").request("cpu", "100m"))
                .overhead("cpu", "50m")
                .overhead("memory", "5Mi"),
            Resources::new(150, 5 * MI),
        ),
        (
            "pod level requests override only the resources they set",
            pod()
                .pod_request("cpu", "1")
                .container(
                    container("a")
                        .request("cpu", "100m")
                        .request("memory", "10Mi"),
                )
                .overhead("cpu", "10m"),
            Resources::new(1010, 10 * MI),
        ),
        // The API server defaults requests from limits before anything reads them; this function
        // reads what is stored.
        (
            "limits alone are not requests here",
            pod().container(container("a").limit("cpu", "1")),
            Resources::new(0, 0),
        ),
    ];
    for (row, p, want) in cases {
        assert_eq!(desired(p), want, "{row}");
    }
}

fn resized_pod() -> Pod {
    // Running at 250m, spec now asks 550m, kubelet has not admitted it.
    PodBuilder::new("ns", "p")
        .container(container("c").guaranteed("250m", "64Mi"))
        .running(0)
        .resize("c", "cpu", "550m")
        .build()
}

#[test]
fn a_growth_not_yet_admitted_counts_as_each_view_counts_it() {
    for (view, cpu) in [
        // The scheduler counts the desired growth.
        (Accounting::Scheduler, 550),
        // The kubelet counts other pods at their allocation only…
        (Accounting::Admitted, 250),
        // …and the resizing pod at its desired spec.
        (Accounting::Resizing, 550),
    ] {
        assert_eq!(req(&resized_pod(), view).cpu, cpu, "{view:?}");
    }
}

#[test]
fn shrinking_pod_still_counts_its_actual_until_actuated() {
    let p = PodBuilder::new("ns", "p")
        .container(container("c").guaranteed("500m", "64Mi"))
        .running(0)
        .resize("c", "cpu", "100m")
        .build();
    assert_eq!(req(&p, Accounting::Resizing).cpu, 500);
    assert_eq!(req(&p, Accounting::Scheduler).cpu, 500);
    assert_eq!(req(&p, Accounting::Desired).cpu, 100);
}

#[test]
fn scheduler_ignores_the_desired_spec_of_an_infeasible_resize() {
    let pending = |to: &str, reason: &str, message: &str| {
        PodBuilder::new("ns", "p")
            .container(container("c").guaranteed("250m", "64Mi"))
            .running(0)
            .resize("c", "cpu", to)
            .resize_pending(reason, message)
            .build()
    };
    let infeasible = pending(
        "2430m",
        REASON_INFEASIBLE,
        "Node didn't have enough capacity",
    );
    assert_eq!(req(&infeasible, Accounting::Scheduler).cpu, 250);
    let deferred = pending("550m", REASON_DEFERRED, "Node didn't have enough resource");
    assert_eq!(req(&deferred, Accounting::Scheduler).cpu, 550);
}

#[test]
fn admitted_view_uses_allocated_resources_when_the_runtime_lags() {
    // Allocated 400m (kubelet admitted), runtime still reports 250m.
    let mut p = resized_pod();
    let cs = &mut p
        .status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()[0];
    cs.allocated_resources
        .as_mut()
        .unwrap()
        .insert("cpu".into(), Quantity("400m".into()));
    assert_eq!(req(&p, Accounting::Admitted).cpu, 400);
    assert_eq!(req(&p, Accounting::Resizing).cpu, 550);
}

#[test]
fn pending_pod_without_statuses_counts_its_spec() {
    let p = PodBuilder::new("ns", "p")
        .container(container("c").request("cpu", "300m"))
        .build();
    for a in [
        Accounting::Desired,
        Accounting::Scheduler,
        Accounting::Resizing,
        Accounting::Admitted,
    ] {
        assert_eq!(req(&p, a).cpu, 300, "{a:?}");
    }
}

#[test]
fn pod_level_status_is_used_for_pod_level_requests() {
    let p = PodBuilder::new("ns", "p")
        .pod_request("cpu", "1")
        .pod_limit("cpu", "1")
        .container(container("c"))
        .running(0)
        .build();
    let mut grown = p.clone();
    grown
        .spec
        .as_mut()
        .unwrap()
        .resources
        .as_mut()
        .unwrap()
        .requests
        .as_mut()
        .unwrap()
        .insert("cpu".into(), Quantity("2".into()));
    assert_eq!(req(&grown, Accounting::Admitted).cpu, 1000);
    assert_eq!(req(&grown, Accounting::Resizing).cpu, 2000);
}

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
