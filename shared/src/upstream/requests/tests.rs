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

#[test]
fn sums_regular_containers() {
    let p = pod()
        .container(
            container("a")
                .request("cpu", "100m")
                .request("memory", "10Mi"),
        )
        .container(
            container("b")
                .request("cpu", "200m")
                .request("memory", "20Mi"),
        );
    assert_eq!(desired(p), Resources::new(300, 30 * MI));
}

#[test]
fn largest_init_container_wins_when_bigger_than_the_sum() {
    let p = pod()
        .container(container("a").request("cpu", "100m"))
        .init_container(container("i1").request("cpu", "500m"))
        .init_container(container("i2").request("cpu", "300m"));
    assert_eq!(desired(p).cpu, 500);
}

#[test]
fn sidecars_add_to_the_sum_and_to_later_init_containers() {
    // KEP-753: sidecar 100m started before init 300m -> init phase needs 400m; steady state
    // needs app 200m + sidecar 100m = 300m. The pod requests the max, 400m.
    let p = pod()
        .container(container("app").request("cpu", "200m"))
        .init_container(container("sidecar").request("cpu", "100m").sidecar())
        .init_container(container("init").request("cpu", "300m"));
    assert_eq!(desired(p).cpu, 400);
}

#[test]
fn sidecars_started_after_an_init_container_do_not_add_to_it() {
    let p = pod()
        .container(container("app").request("cpu", "200m"))
        .init_container(container("init").request("cpu", "250m"))
        .init_container(container("sidecar").request("cpu", "100m").sidecar());
    // init alone: 250m; steady: 300m.
    assert_eq!(desired(p).cpu, 300);
}

#[test]
fn overhead_is_added() {
    let p = pod()
        .container(container("a").request("cpu", "100m"))
        .overhead("cpu", "50m")
        .overhead("memory", "5Mi");
    assert_eq!(desired(p), Resources::new(150, 5 * MI));
}

#[test]
fn pod_level_requests_override_only_the_resources_they_set() {
    let p = pod()
        .pod_request("cpu", "1")
        .container(
            container("a")
                .request("cpu", "100m")
                .request("memory", "10Mi"),
        )
        .overhead("cpu", "10m");
    assert_eq!(desired(p), Resources::new(1010, 10 * MI));
}

#[test]
fn limits_alone_are_not_requests_here() {
    // The API server defaults requests from limits before anything reads them; this function
    // reads what is stored.
    let p = pod().container(container("a").limit("cpu", "1"));
    assert_eq!(desired(p).cpu, 0);
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
fn scheduler_counts_the_desired_growth() {
    assert_eq!(req(&resized_pod(), Accounting::Scheduler).cpu, 550);
}

#[test]
fn kubelet_counts_other_pods_at_their_allocation_only() {
    assert_eq!(req(&resized_pod(), Accounting::Admitted).cpu, 250);
}

#[test]
fn kubelet_counts_the_resizing_pod_at_its_desired_spec() {
    assert_eq!(req(&resized_pod(), Accounting::Resizing).cpu, 550);
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
    let p = PodBuilder::new("ns", "p")
        .container(container("c").guaranteed("250m", "64Mi"))
        .running(0)
        .resize("c", "cpu", "2430m")
        .resize_pending(REASON_INFEASIBLE, "Node didn't have enough capacity")
        .build();
    assert_eq!(req(&p, Accounting::Scheduler).cpu, 250);
    let deferred = PodBuilder::new("ns", "p")
        .container(container("c").guaranteed("250m", "64Mi"))
        .running(0)
        .resize("c", "cpu", "550m")
        .resize_pending(REASON_DEFERRED, "Node didn't have enough resource")
        .build();
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
