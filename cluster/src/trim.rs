//! What the caches keep of each object: exactly the fields resize-guard reads, nothing else.
//!
//! A stored Pod is mostly what no decision looks at — `managedFields`, the
//! `kubectl.kubernetes.io/last-applied-configuration` copy of the manifest, env, probes, volumes,
//! images, IPs, ready conditions. The PodDisruptionBudget and ConfigMap watches run every object
//! through these functions ([`kube::runtime::WatchStreamExt::modify`]) before anything is indexed
//! or stored; pods and nodes are decoded straight into their trimmed form ([`crate::lean`]), and
//! `trim_pod`/`trim_node` are the specification the lean decoder is held to (`trim/lossless.rs`
//! compares the two, written independently on purpose). Trimming is a whitelist: a field added to
//! the API later is dropped until someone adds it here, to the lean decoder and to
//! `trim/lossless.rs`, which checks every decision is the same on trimmed and untrimmed pods.
//!
//! | object | kept | read by |
//! |---|---|---|
//! | metadata | name, namespace, uid, resourceVersion, generation, labels, annotations (without last-applied), deletionTimestamp, ownerReferences, creationTimestamp | reflector keys, `PodKey`, selectors and PDBs, mirror pods, the controller's plan annotation, `is_deferred_now` |
//! | containers, init containers | name, resources, resizePolicy, restartPolicy | requests, QoS, sidecars, resize validation |
//! | ephemeral containers | name | `DefaultPodLevelResources` (only whether there are any) |
//! | pod spec | resources, overhead, priority, preemptionPolicy, nodeName, os, terminationGracePeriodSeconds | requests, victims, validation (Windows), the controller's eviction grace |
//! | pod status | phase, qosClass, startTime, resize conditions (`PodResizePending`, `PodResizeInProgress`), resources, allocatedResources | ledger, QoS, pending queue |
//! | container statuses | name, ready, restartCount, resources, allocatedResources, state.running | kubelet accounting, `isPodResizeRequestSupported`, the controller's revert |
//! | node | name, uid, resourceVersion, the `resize-guard.io/preemption` label, creationTimestamp, spec.podPreemptionPolicy, status.allocatable, status.declaredFeatures | `NodeLedger` (the ledger cache keys on resourceVersion), node features |
//! | PodDisruptionBudget | everything but managedFields and last-applied | `Budgets` |
//!
//! Required string fields of a container status (`image`, `imageID`) are emptied, not absent.

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStatus, EphemeralContainer, Node, NodeSpec, NodeStatus,
    Pod, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use resize_guard_policy::ledger::PREEMPTION_LABEL;
use resize_guard_policy::upstream::pod::{RESIZE_IN_PROGRESS, RESIZE_PENDING};

/// The annotation `kubectl apply` keeps a copy of the whole manifest in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Keeps only what resize-guard reads of a pod (see the module table).
pub fn trim_pod(pod: &mut Pod) {
    trim_meta(&mut pod.metadata);
    pod.spec = pod.spec.take().map(trim_pod_spec);
    pod.status = pod.status.take().map(trim_pod_status);
}

/// Keeps only what [`resize_guard_policy::ledger::NodeLedger`] reads of a node. Of its labels
/// (a cloud node carries ~20: topology, instance type, OS, pools; ~30% of the view's memory at
/// 5,000 nodes) only the preemption opt-out is read.
pub fn trim_node(node: &mut Node) {
    trim_meta(&mut node.metadata);
    node.metadata.labels = node
        .metadata
        .labels
        .take()
        .map(|mut l| {
            l.retain(|k, _| k == PREEMPTION_LABEL);
            l
        })
        .filter(|l| !l.is_empty());
    node.metadata.annotations = None;
    node.metadata.owner_references = None;
    node.spec = node.spec.take().map(|s| NodeSpec {
        pod_preemption_policy: s.pod_preemption_policy,
        ..Default::default()
    });
    node.status = node.status.take().map(|s| NodeStatus {
        allocatable: s.allocatable,
        declared_features: s.declared_features,
        ..Default::default()
    });
}

/// Drops the bookkeeping of a PodDisruptionBudget (small objects, read whole by `Budgets`).
pub fn trim_pdb(pdb: &mut PodDisruptionBudget) {
    pdb.metadata.managed_fields = None;
    drop_last_applied(&mut pdb.metadata);
}

fn trim_meta(meta: &mut ObjectMeta) {
    let mut kept = ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        uid: meta.uid.take(),
        resource_version: meta.resource_version.take(),
        generation: meta.generation.take(),
        labels: meta.labels.take(),
        annotations: meta.annotations.take(),
        deletion_timestamp: meta.deletion_timestamp.take(),
        owner_references: meta.owner_references.take(),
        creation_timestamp: meta.creation_timestamp.take(),
        ..Default::default()
    };
    drop_last_applied(&mut kept);
    *meta = kept;
}

fn drop_last_applied(meta: &mut ObjectMeta) {
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(LAST_APPLIED);
        if a.is_empty() {
            meta.annotations = None;
        }
    }
}

fn trim_pod_spec(s: PodSpec) -> PodSpec {
    PodSpec {
        containers: s.containers.into_iter().map(trim_container).collect(),
        init_containers: trim_each(s.init_containers, trim_container),
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

/// Each of an optional list trimmed by `trim`.
fn trim_each<T>(list: Option<Vec<T>>, trim: fn(T) -> T) -> Option<Vec<T>> {
    list.map(|v| v.into_iter().map(trim).collect())
}

fn trim_container(c: Container) -> Container {
    Container {
        name: c.name,
        resources: c.resources,
        resize_policy: c.resize_policy,
        restart_policy: c.restart_policy,
        ..Default::default()
    }
}

fn trim_pod_status(s: PodStatus) -> PodStatus {
    let resize = |c: &PodCondition| c.type_ == RESIZE_PENDING || c.type_ == RESIZE_IN_PROGRESS;
    PodStatus {
        phase: s.phase,
        qos_class: s.qos_class,
        start_time: s.start_time,
        conditions: s
            .conditions
            .map(|v| v.into_iter().filter(resize).collect::<Vec<_>>())
            .filter(|v| !v.is_empty()),
        container_statuses: trim_each(s.container_statuses, trim_container_status),
        init_container_statuses: trim_each(s.init_container_statuses, trim_container_status),
        resources: s.resources,
        allocated_resources: s.allocated_resources,
        ..Default::default()
    }
}

fn trim_container_status(s: ContainerStatus) -> ContainerStatus {
    ContainerStatus {
        name: s.name,
        image: String::new(),
        image_id: String::new(),
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

#[cfg(test)]
mod lossless;

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    #[test]
    fn drops_managed_fields_and_the_last_applied_copy_but_keeps_other_annotations() {
        let mut pod = Pod::default();
        pod.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        pod.metadata.annotations = Some(
            [
                (LAST_APPLIED.to_owned(), "{...}".to_owned()),
                ("kubernetes.io/config.mirror".to_owned(), "x".to_owned()),
            ]
            .into(),
        );
        trim_pod(&mut pod);
        assert!(pod.metadata.managed_fields.is_none());
        let a = pod.metadata.annotations.unwrap();
        assert_eq!(a.len(), 1);
        assert!(a.contains_key("kubernetes.io/config.mirror"));
    }

    #[test]
    fn an_annotation_map_left_empty_becomes_absent() {
        let mut pod = Pod::default();
        pod.metadata.annotations = Some([(LAST_APPLIED.to_owned(), "{}".to_owned())].into());
        trim_pod(&mut pod);
        assert_eq!(pod.metadata.annotations, None);
    }

    #[test]
    fn keeps_only_the_resize_conditions() {
        let cond = |t: &str| PodCondition {
            type_: t.to_owned(),
            status: "True".to_owned(),
            ..Default::default()
        };
        let mut pod = Pod {
            status: Some(PodStatus {
                conditions: Some(vec![
                    cond("Ready"),
                    cond(RESIZE_PENDING),
                    cond("PodScheduled"),
                    cond(RESIZE_IN_PROGRESS),
                ]),
                ..Default::default()
            }),
            ..Default::default()
        };
        trim_pod(&mut pod);
        let kept: Vec<String> = pod
            .status
            .unwrap()
            .conditions
            .unwrap()
            .into_iter()
            .map(|c| c.type_)
            .collect();
        assert_eq!(kept, [RESIZE_PENDING, RESIZE_IN_PROGRESS]);
    }
}
