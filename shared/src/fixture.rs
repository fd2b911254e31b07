//! Builders for pods and nodes shaped like the ones the API server stores.
//!
//! Used by this crate's tests and benchmarks, and by the other crates' tests and benchmarks, so
//! every suite builds the same realistic objects (running pods carry `allocatedResources` and
//! `resources` in their container statuses, as the kubelet writes them). Test-only: compiled for
//! this crate's unit tests and behind the `testing` feature, which other crates enable from their
//! dev-dependencies only, so no release build carries it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Node, NodeSpec, NodeStatus, Pod, PodCondition, PodSpec, PodStatus,
    ResourceRequirements,
};
use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::jiff::Timestamp;

use crate::budget::Budgets;
use crate::classify::Context;
use crate::ledger::{LedgerEntry, NodeLedger};
use crate::pod::PodKey;
use crate::policy::Policy;
use crate::resources::ResourceList;
use crate::upstream::pod::{RESIZE_PENDING, is_sidecar};
use crate::upstream::requests::{Accounting, pod_requests};

/// The key of pod `namespace/name`, its UID made from both.
pub fn pod_key(namespace: &str, name: &str) -> PodKey {
    PodKey {
        namespace: namespace.into(),
        name: name.into(),
        uid: format!("uid-{namespace}-{name}"),
    }
}

/// `ns/name` on `node_name`, one Guaranteed container `c` of `cpu` and 64Mi, Running since 0.
pub fn running(name: &str, node_name: &str, cpu: &str) -> PodBuilder {
    PodBuilder::new("ns", name)
        .node(node_name)
        .container(container("c").guaranteed(cpu, "64Mi"))
        .running(0)
}

/// `namespace/name` on `n1` with the one container `c`, Running since 0.
pub fn running_pod(namespace: &str, name: &str, c: ContainerBuilder) -> PodBuilder {
    PodBuilder::new(namespace, name)
        .node("n1")
        .container(c)
        .running(0)
}

/// `namespace/name` on `n1`, owned by a ReplicaSet (something recreates it, so it may be a
/// victim), one Guaranteed container `c` of `cpu` and `memory`, Running since `start`.
pub fn replica_pod(namespace: &str, name: &str, cpu: &str, memory: &str, start: i64) -> PodBuilder {
    PodBuilder::new(namespace, name)
        .node("n1")
        .owned_by("ReplicaSet")
        .container(container("c").guaranteed(cpu, memory))
        .running(start)
}

/// Sets `field` (`requests` or `limits`) of `resource` to `q` on the pod's first container, as
/// a client editing a stored pod would. A pod without a container is left as it is.
pub fn set_first_container(pod: &mut Pod, field: &str, resource: &str, q: &str) {
    let Some(c) = pod.spec.as_mut().and_then(|s| s.containers.first_mut()) else {
        return;
    };
    let r = c.resources.get_or_insert_with(Default::default);
    let list = match field {
        "requests" => &mut r.requests,
        "limits" => &mut r.limits,
        other => panic!("{other}: a container's resources have requests and limits"),
    };
    list.get_or_insert_with(BTreeMap::new)
        .insert(resource.into(), Quantity(q.into()));
}

/// PodDisruptionBudget `namespace/name` selecting the pods labelled `key=value`, with
/// `disruptionsAllowed: allowed` in its status.
pub fn pdb(
    namespace: &str,
    name: &str,
    (key, value): (&str, &str),
    allowed: i32,
) -> PodDisruptionBudget {
    let mut p = PodDisruptionBudget::default();
    p.metadata.namespace = Some(namespace.into());
    p.metadata.name = Some(name.into());
    p.spec = Some(PodDisruptionBudgetSpec {
        selector: Some(LabelSelector {
            match_labels: Some([(key.to_owned(), value.to_owned())].into()),
            ..Default::default()
        }),
        ..Default::default()
    });
    p.status = Some(PodDisruptionBudgetStatus {
        disruptions_allowed: Some(allowed),
        ..Default::default()
    });
    p
}

/// The namespace resize-guard is installed in, in every test and benchmark.
pub const INSTALL_NAMESPACE: &str = "resize-guard";

/// A decision [`Context`] for resize-guard installed in [`INSTALL_NAMESPACE`], judged as the
/// newest Kubernetes minor has it (`minor: None`).
pub fn context<'a>(
    ledger: Option<&'a NodeLedger>,
    budgets: &'a Budgets,
    policy: &'a Policy,
) -> Context<'a> {
    Context {
        ledger,
        budgets,
        policy,
        install_namespace: INSTALL_NAMESPACE,
        minor: None,
    }
}

/// The node as the v1.37 alpha scheduler's preemption sees it (KEP-5836): every pod held at
/// [`Accounting::Scheduler`] (max of desired, allocated and actual), its pending growth counted
/// as held and not raced.
pub fn scheduler_ledger(node: &Node, pods: &[Pod]) -> NodeLedger {
    let mut ledger = NodeLedger::new(node, pods);
    ledger.pods = pods
        .iter()
        .map(|p| LedgerEntry {
            held: pod_requests(p, Accounting::Scheduler),
            pending: None,
            ..LedgerEntry::new(p)
        })
        .collect();
    ledger
}

/// The field test's node (ARCHITECTURE.md, "The field test"): a t3.medium, `n1`, with 1930m
/// cpu and 3Gi allocatable.
pub fn field_node() -> Node {
    node("n1", "1930m", "3Gi")
}

/// The field test's resizing pod: `prod/app` on `n1`, priority 1000, one Guaranteed container
/// `app` of `cpu` and 256Mi, Running since 0 with `qosClass: Guaranteed`.
pub fn field_app(cpu: &str) -> PodBuilder {
    PodBuilder::new("prod", "app")
        .node("n1")
        .priority(1000)
        .container(container("app").guaranteed(cpu, "256Mi"))
        .running(0)
        .qos_status("Guaranteed")
}

/// The field test's filler: `batch/filler` on `n1`, owned by a ReplicaSet, one Guaranteed
/// container `work` of 1500m and 256Mi, Running since 5, priority unset (0).
pub fn field_filler() -> PodBuilder {
    PodBuilder::new("batch", "filler")
        .owned_by("ReplicaSet")
        .node("n1")
        .container(container("work").guaranteed("1500m", "256Mi"))
        .running(5)
}

/// Builds one container's resources.
#[derive(Debug, Clone)]
pub struct ContainerBuilder {
    container: Container,
}

/// Starts a container named `name` with no resources.
pub fn container(name: &str) -> ContainerBuilder {
    ContainerBuilder {
        container: Container {
            name: name.to_owned(),
            image: Some("registry.example/app:1".to_owned()),
            ..Default::default()
        },
    }
}

fn insert(list: &mut Option<ResourceList>, resource: &str, q: &str) {
    list.get_or_insert_with(BTreeMap::new)
        .insert(resource.to_owned(), Quantity(q.to_owned()));
}

fn insert_pair(map: &mut Option<BTreeMap<String, String>>, key: &str, value: &str) {
    map.get_or_insert_with(BTreeMap::new)
        .insert(key.to_owned(), value.to_owned());
}

impl ContainerBuilder {
    fn resources(&mut self) -> &mut ResourceRequirements {
        self.container
            .resources
            .get_or_insert_with(Default::default)
    }

    /// Sets a request.
    pub fn request(mut self, resource: &str, q: &str) -> Self {
        insert(&mut self.resources().requests, resource, q);
        self
    }

    /// Sets a limit.
    pub fn limit(mut self, resource: &str, q: &str) -> Self {
        insert(&mut self.resources().limits, resource, q);
        self
    }

    /// Sets request and limit to the same value.
    pub fn both(self, resource: &str, q: &str) -> Self {
        self.request(resource, q).limit(resource, q)
    }

    /// Guaranteed-shaped: cpu and memory requests equal to limits.
    pub fn guaranteed(self, cpu: &str, memory: &str) -> Self {
        self.both("cpu", cpu).both("memory", memory)
    }

    /// Makes this (init) container a sidecar (`restartPolicy: Always`).
    pub fn sidecar(mut self) -> Self {
        self.container.restart_policy = Some("Always".to_owned());
        self
    }

    /// The container.
    pub fn build(self) -> Container {
        self.container
    }
}

/// Builds a pod.
#[derive(Debug, Clone)]
pub struct PodBuilder {
    pod: Pod,
}

impl PodBuilder {
    /// A pod `namespace/name` with UID `namespace-name`, generation 1 and no containers.
    pub fn new(namespace: &str, name: &str) -> Self {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some(namespace.to_owned());
        pod.metadata.name = Some(name.to_owned());
        pod.metadata.uid = Some(format!("{namespace}-{name}"));
        pod.metadata.generation = Some(1);
        pod.spec = Some(PodSpec::default());
        PodBuilder { pod }
    }

    fn spec(&mut self) -> &mut PodSpec {
        self.pod.spec.get_or_insert_with(Default::default)
    }

    fn status(&mut self) -> &mut PodStatus {
        self.pod.status.get_or_insert_with(Default::default)
    }

    /// Binds the pod to a node.
    pub fn node(mut self, node: &str) -> Self {
        self.spec().node_name = Some(node.to_owned());
        self
    }

    /// Sets `spec.priority`.
    pub fn priority(mut self, priority: i32) -> Self {
        self.spec().priority = Some(priority);
        self
    }

    /// Sets `spec.preemptionPolicy: Never`.
    pub fn never_preempt(mut self) -> Self {
        self.spec().preemption_policy = Some("Never".to_owned());
        self
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        insert_pair(&mut self.pod.metadata.labels, key, value);
        self
    }

    /// Adds an annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        insert_pair(&mut self.pod.metadata.annotations, key, value);
        self
    }

    /// Makes `kind` (an `apps/v1` controller such as `DaemonSet` or `ReplicaSet`) its
    /// controlling owner.
    pub fn owned_by(mut self, kind: &str) -> Self {
        self.pod.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "apps/v1".to_owned(),
                kind: kind.to_owned(),
                name: format!(
                    "{}-owner",
                    self.pod.metadata.name.as_deref().unwrap_or("pod")
                ),
                uid: "owner-uid".to_owned(),
                controller: Some(true),
                ..Default::default()
            },
        ]);
        self
    }

    /// Removes every owner: a bare pod, which nothing would recreate.
    pub fn bare(mut self) -> Self {
        self.pod.metadata.owner_references = None;
        self
    }

    /// Adds a regular container.
    pub fn container(mut self, c: ContainerBuilder) -> Self {
        self.spec().containers.push(c.build());
        self
    }

    /// Adds an init container (a sidecar if built with [`ContainerBuilder::sidecar`]).
    pub fn init_container(mut self, c: ContainerBuilder) -> Self {
        self.spec()
            .init_containers
            .get_or_insert_with(Vec::new)
            .push(c.build());
        self
    }

    /// Sets a pod-level request.
    pub fn pod_request(mut self, resource: &str, q: &str) -> Self {
        let r = self.spec().resources.get_or_insert_with(Default::default);
        insert(&mut r.requests, resource, q);
        self
    }

    /// Sets a pod-level limit.
    pub fn pod_limit(mut self, resource: &str, q: &str) -> Self {
        let r = self.spec().resources.get_or_insert_with(Default::default);
        insert(&mut r.limits, resource, q);
        self
    }

    /// Sets `spec.overhead` for one resource.
    pub fn overhead(mut self, resource: &str, q: &str) -> Self {
        insert(&mut self.spec().overhead, resource, q);
        self
    }

    /// Marks the pod Running as the kubelet reports it after admitting the current spec:
    /// every container's `allocatedResources` and `resources` equal its spec, `startTime` is
    /// `start_seconds` after the epoch, and pod-level status mirrors pod-level resources.
    pub fn running(mut self, start_seconds: i64) -> Self {
        let spec = self.spec().clone();
        let status = self.status();
        status.phase = Some("Running".to_owned());
        status.start_time = Timestamp::from_second(start_seconds).ok().map(Time);
        status.container_statuses = Some(spec.containers.iter().map(admitted_status).collect());
        let sidecars: Vec<ContainerStatus> = spec
            .init_containers
            .iter()
            .flatten()
            .filter(|c| is_sidecar(c))
            .map(admitted_status)
            .collect();
        status.init_container_statuses = (!sidecars.is_empty()).then_some(sidecars);
        if let Some(pod_level) = spec.resources.as_ref() {
            status.resources = Some(pod_level.clone());
            status.allocated_resources = pod_level.requests.clone();
        }
        self
    }

    /// Sets `status.qosClass` (the API server sets it on create).
    pub fn qos_status(mut self, class: &str) -> Self {
        self.status().qos_class = Some(class.to_owned());
        self
    }

    /// Changes a container's spec (request and limit alike) without touching its status, as a
    /// stored `pods/resize` does; bumps the generation.
    pub fn resize(mut self, container_name: &str, resource: &str, q: &str) -> Self {
        let generation = self.pod.metadata.generation.unwrap_or(1) + 1;
        self.pod.metadata.generation = Some(generation);
        let spec = self.spec();
        let all = spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten());
        for c in all.filter(|c| c.name == container_name) {
            let r = c.resources.get_or_insert_with(Default::default);
            insert(&mut r.requests, resource, q);
            if r.limits.as_ref().is_some_and(|l| l.contains_key(resource)) {
                insert(&mut r.limits, resource, q);
            }
        }
        self
    }

    /// Adds the kubelet's `PodResizePending` condition for the current generation.
    pub fn resize_pending(mut self, reason: &str, message: &str) -> Self {
        let generation = self.pod.metadata.generation;
        let cond = PodCondition {
            type_: RESIZE_PENDING.to_owned(),
            status: "True".to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            observed_generation: generation,
            ..Default::default()
        };
        self.status()
            .conditions
            .get_or_insert_with(Vec::new)
            .push(cond);
        self
    }

    /// Sets `metadata.deletionTimestamp`: the pod is terminating.
    pub fn terminating(mut self) -> Self {
        self.pod.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        self
    }

    /// Sets `status.phase`.
    pub fn phase(mut self, phase: &str) -> Self {
        self.status().phase = Some(phase.to_owned());
        self
    }

    /// The pod.
    pub fn build(self) -> Pod {
        self.pod
    }
}

fn admitted_status(c: &Container) -> ContainerStatus {
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        image_id: String::new(),
        ready: true,
        restart_count: 0,
        started: Some(true),
        allocated_resources: c.resources.as_ref().and_then(|r| r.requests.clone()),
        resources: c.resources.clone(),
        ..Default::default()
    }
}

/// A Ready node with the given allocatable (and equal capacity) cpu and memory, room for 110 pods.
pub fn node(name: &str, cpu: &str, memory: &str) -> Node {
    let list: ResourceList = [
        ("cpu".to_owned(), Quantity(cpu.to_owned())),
        ("memory".to_owned(), Quantity(memory.to_owned())),
        ("pods".to_owned(), Quantity("110".to_owned())),
    ]
    .into();
    let mut n = Node::default();
    n.metadata.name = Some(name.to_owned());
    n.spec = Some(NodeSpec::default());
    n.status = Some(NodeStatus {
        allocatable: Some(list.clone()),
        capacity: Some(list),
        ..Default::default()
    });
    n
}

/// The benchmark scenario: node `n1` (64 cores, 256Gi) packed with `pods - 1` small pods of
/// mixed priority plus a Guaranteed model server (2 cores + a sidecar) whose resize to 4 cores
/// is Deferred and needs 3 victims. Returns (node, all pods, the server before, after).
pub fn packed_node(pods: usize) -> (Node, Vec<Pod>, Pod, Pod) {
    let server = || {
        PodBuilder::new("prod", "model-server")
            .node("n1")
            .priority(1_000_000)
            .container(container("server").guaranteed("2", "8Gi"))
            .init_container(container("proxy").guaranteed("100m", "128Mi").sidecar())
            .running(0)
            .qos_status("Guaranteed")
    };
    let (old, new) = (
        server().build(),
        server().resize("server", "cpu", "4").build(),
    );
    let mut all = vec![old.clone()];
    for i in 0..pods.saturating_sub(1) {
        all.push(
            PodBuilder::new(
                if i % 3 == 0 { "batch" } else { "web" },
                &format!("pod-{i}"),
            )
            .node("n1")
            .priority((i % 7) as i32 * 1000)
            .label("app", &format!("app-{}", i % 10))
            // Owned, as a Deployment's pods are: bare pods are never victims by default
            // (`preemption.allowBarePodVictims`).
            .owned_by("ReplicaSet")
            .container(container("c").guaranteed("560m", "2Gi"))
            .running(i as i64)
            .build(),
        );
    }
    (node("n1", "64", "256Gi"), all, old, new)
}
