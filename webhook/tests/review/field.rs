//! The field-test world both targets start from: node n1 (1930m, 3Gi, a t3.medium), a 250m
//! Guaranteed high-priority app and a 1500m low-priority filler beside it.

use k8s_openapi::api::core::v1::{Node, Pod};
use resize_guard_policy::fixture::{PodBuilder, container, node};

/// The node both pods run on.
pub fn n1() -> Node {
    node("n1", "1930m", "3Gi")
}

/// prod/app: 250m Guaranteed, priority 1000, the pod that resizes.
pub fn app() -> Pod {
    PodBuilder::new("prod", "app")
        .node("n1")
        .priority(1000)
        .container(container("app").guaranteed("250m", "256Mi"))
        .running(0)
        .qos_status("Guaranteed")
        .build()
}

/// batch/filler: 1500m Guaranteed, priority 100, owned by a ReplicaSet (a possible victim); a
/// builder, for a target that labels it.
pub fn filler() -> PodBuilder {
    PodBuilder::new("batch", "filler")
        .owned_by("ReplicaSet")
        .node("n1")
        .priority(100)
        .container(container("work").guaranteed("1500m", "256Mi"))
        .running(5)
}
