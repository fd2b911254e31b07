//! A pod's wire shape: the fields [`crate::trim::trim_pod`] keeps, each decoded as
//! k8s-openapi decodes it, everything else skipped.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerResizePolicy, ContainerState, ContainerStateRunning, ContainerStatus,
    EphemeralContainer, Pod, PodCondition, PodOS, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use resize_guard_policy::upstream::pod::{RESIZE_IN_PROGRESS, RESIZE_PENDING};
use serde::Deserialize;

use super::meta::{WireObject, nullable};

/// Resource quantities by name.
type Quantities = BTreeMap<String, Quantity>;

pub(super) type WirePod = WireObject<Pod, WireSpec, WireStatus>;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireSpec {
    #[serde(default, deserialize_with = "nullable")]
    containers: Vec<WireContainer>,
    init_containers: Option<Vec<WireContainer>>,
    ephemeral_containers: Option<Vec<WireNamed>>,
    resources: Option<ResourceRequirements>,
    overhead: Option<Quantities>,
    priority: Option<i32>,
    preemption_policy: Option<String>,
    node_name: Option<String>,
    os: Option<PodOS>,
    termination_grace_period_seconds: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireContainer {
    #[serde(default, deserialize_with = "nullable")]
    name: String,
    resources: Option<ResourceRequirements>,
    resize_policy: Option<Vec<ContainerResizePolicy>>,
    restart_policy: Option<String>,
}

/// An ephemeral container, of which only the name is read.
#[derive(Deserialize)]
struct WireNamed {
    #[serde(default, deserialize_with = "nullable")]
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireStatus {
    phase: Option<String>,
    qos_class: Option<String>,
    start_time: Option<Time>,
    conditions: Option<Vec<PodCondition>>,
    container_statuses: Option<Vec<WireContainerStatus>>,
    init_container_statuses: Option<Vec<WireContainerStatus>>,
    resources: Option<ResourceRequirements>,
    allocated_resources: Option<Quantities>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireContainerStatus {
    #[serde(default, deserialize_with = "nullable")]
    name: String,
    #[serde(default, deserialize_with = "nullable")]
    ready: bool,
    #[serde(default, deserialize_with = "nullable")]
    restart_count: i32,
    resources: Option<ResourceRequirements>,
    allocated_resources: Option<Quantities>,
    state: Option<WireState>,
}

/// A container's state, of which only `running` is read.
#[derive(Deserialize)]
struct WireState {
    running: Option<ContainerStateRunning>,
}

/// Each of an optional list decoded into its k8s-openapi type.
fn each<W, T: From<W>>(list: Option<Vec<W>>) -> Option<Vec<T>> {
    list.map(|v| v.into_iter().map(T::from).collect())
}

impl From<WirePod> for Pod {
    fn from(p: WirePod) -> Self {
        Pod {
            metadata: p.metadata.into(),
            spec: p.spec.map(Into::into),
            status: p.status.map(Into::into),
        }
    }
}

impl From<WireSpec> for PodSpec {
    fn from(s: WireSpec) -> Self {
        PodSpec {
            containers: s.containers.into_iter().map(Into::into).collect(),
            init_containers: each(s.init_containers),
            ephemeral_containers: s.ephemeral_containers.map(|v| {
                v.into_iter()
                    .map(|c| EphemeralContainer {
                        name: c.name,
                        ..Default::default()
                    })
                    .collect()
            }),
            resources: s.resources,
            overhead: s.overhead,
            priority: s.priority,
            preemption_policy: s.preemption_policy,
            node_name: s.node_name,
            os: s.os,
            termination_grace_period_seconds: s.termination_grace_period_seconds,
            ..Default::default()
        }
    }
}

impl From<WireContainer> for Container {
    fn from(c: WireContainer) -> Self {
        Container {
            name: c.name,
            resources: c.resources,
            resize_policy: c.resize_policy,
            restart_policy: c.restart_policy,
            ..Default::default()
        }
    }
}

impl From<WireStatus> for PodStatus {
    fn from(s: WireStatus) -> Self {
        let resize = |c: &PodCondition| c.type_ == RESIZE_PENDING || c.type_ == RESIZE_IN_PROGRESS;
        PodStatus {
            phase: s.phase,
            qos_class: s.qos_class,
            start_time: s.start_time,
            conditions: s
                .conditions
                .map(|v| v.into_iter().filter(resize).collect::<Vec<_>>())
                .filter(|v| !v.is_empty()),
            container_statuses: each(s.container_statuses),
            init_container_statuses: each(s.init_container_statuses),
            resources: s.resources,
            allocated_resources: s.allocated_resources,
            ..Default::default()
        }
    }
}

impl From<WireContainerStatus> for ContainerStatus {
    fn from(s: WireContainerStatus) -> Self {
        ContainerStatus {
            name: s.name,
            ready: s.ready,
            restart_count: s.restart_count,
            resources: s.resources,
            allocated_resources: s.allocated_resources,
            state: s
                .state
                .and_then(|st| st.running)
                .map(|running| ContainerState {
                    running: Some(running),
                    ..Default::default()
                }),
            ..Default::default()
        }
    }
}
