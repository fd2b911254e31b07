//! A node's wire shape: the fields [`crate::trim::trim_node`] keeps (of its labels only the
//! preemption opt-out), everything else — images, conditions, addresses — skipped.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodePodPreemptionPolicy, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use resize_guard_policy::ledger::PREEMPTION_LABEL;
use serde::Deserialize;

use super::meta::WireObject;

pub(super) type WireNode = WireObject<Node, WireSpec, WireStatus>;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireSpec {
    pod_preemption_policy: Option<NodePodPreemptionPolicy>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireStatus {
    allocatable: Option<BTreeMap<String, Quantity>>,
    declared_features: Option<Vec<String>>,
}

impl From<WireNode> for Node {
    fn from(n: WireNode) -> Self {
        let mut metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta =
            n.metadata.into();
        metadata.labels = metadata
            .labels
            .take()
            .map(|mut l| {
                l.retain(|k, _| k == PREEMPTION_LABEL);
                l
            })
            .filter(|l| !l.is_empty());
        metadata.annotations = None;
        metadata.owner_references = None;
        Node {
            metadata,
            spec: n.spec.map(|s| NodeSpec {
                pod_preemption_policy: s.pod_preemption_policy,
                ..Default::default()
            }),
            status: n.status.map(|s| NodeStatus {
                allocatable: s.allocatable,
                declared_features: s.declared_features,
                ..Default::default()
            }),
        }
    }
}
