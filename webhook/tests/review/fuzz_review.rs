//! Fuzzes the admission adapter, `review::review(stage, body, cluster)`, at both stages:
//! arbitrary bytes, mutations of `fuzz/corpus/review/` (byte-level, and JSON-level: any node
//! replaced by another value — deep nesting, huge numbers, odd strings — or removed), and
//! structurally valid AdmissionReviews whose pods are arbitrary: any containers, init and
//! ephemeral containers, requests and limits (odd quantities too), resize policies, pod-level
//! resources, priorities, statuses, resize conditions, on a cluster of arbitrary nodes, pods,
//! PodDisruptionBudgets and policy.
//!
//! Invariants: `review` never panics; it returns `Ok` for every structurally valid review and a
//! non-empty error otherwise; an `Ok` response serializes, echoes the request's uid, agrees with
//! `Reviewed::allowed`, explains a denial, keeps audit annotations and Event notes within their
//! limits, records no Event for a dry run; a JSON patch comes only from `/mutate`, touches only
//! `/spec`, applies cleanly to the request's object, and the patched pod no longer changes the
//! QoS class.
//!
//! Runs for `RESIZE_GUARD_FUZZ_SECONDS` (default 10; each execution reviews one input at both
//! stages): `make fuzz` runs it longer, or `RESIZE_GUARD_FUZZ_SECONDS=300 cargo test -p
//! resize-guard-webhook --test review -- fuzz_review:: --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{
    Container, ContainerResizePolicy, ContainerStatus, EphemeralContainer, Node, Pod, PodCondition,
    PodOS, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use proptest::sample::Index;
use resize_guard_cluster::FixedCluster;
use resize_guard_cluster::lean::LeanPod;
use resize_guard_fuzz::{self as harness, Case, Fuzz};
use resize_guard_policy::budget::Budgets;
use resize_guard_policy::fixture::{
    PodBuilder, container, context, field_app, field_filler, field_node, node,
};
use resize_guard_policy::policy::{
    FeasibilityPolicy, Mode, NamespacePolicy, OnQosChange, PdbMode, Policy, PreemptionPolicy,
    ProtectedSelector, QosPolicy,
};
use resize_guard_policy::upstream::node_features::KUBELET_DEFAULTS_V1_37;
use resize_guard_policy::upstream::selector::Selector;
use resize_guard_policy::{Verdict, classify};
use resize_guard_webhook::review::{Stage, review};
use serde_json::{Value, json};

/// JSON tokens and the field names and values of a review, for the byte-level mutator.
const DICTIONARY: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "null",
    "true",
    "false",
    "0",
    "-0",
    "1e999",
    "-1",
    "18446744073709551616",
    "0.5",
    "\"\"",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"\\\"",
    "\u{feff}",
    "\"apiVersion\"",
    "\"admission.k8s.io/v1\"",
    "\"request\"",
    "\"uid\"",
    "\"resource\"",
    "\"pods\"",
    "\"subResource\"",
    "\"resize\"",
    "\"operation\"",
    "\"UPDATE\"",
    "\"object\"",
    "\"oldObject\"",
    "\"dryRun\"",
    "\"spec\"",
    "\"containers\"",
    "\"resources\"",
    "\"requests\"",
    "\"limits\"",
    "\"cpu\"",
    "\"memory\"",
    "\"250m\"",
    "\"1e308\"",
    "\"9223372036854775807Ei\"",
    "\"status\"",
    "\"nodeName\"",
    "\"priority\"",
    "\"conditions\"",
    "\"PodResizePending\"",
    "\"Deferred\"",
    "\"Infeasible\"",
    "[[[[[[[[[[[[[[[[",
    "{\"a\":{\"a\":{\"a\":",
];

/// Keys a JSON-level mutation renames a member to.
const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "request",
    "uid",
    "resource",
    "group",
    "subResource",
    "operation",
    "object",
    "oldObject",
    "dryRun",
    "metadata",
    "name",
    "namespace",
    "spec",
    "containers",
    "initContainers",
    "resources",
    "requests",
    "limits",
    "cpu",
    "memory",
    "status",
    "nodeName",
    "priority",
    "restartPolicy",
    "conditions",
    "containerStatuses",
    "allocatedResources",
    "qosClass",
    "generation",
    "observedGeneration",
    "response",
    "patch",
];

const COMMON_QUANTITIES: &[&str] = &[
    "0", "1", "2", "100m", "250m", "400m", "500m", "550m", "1500m", "2430m", "64Mi", "128Mi",
    "256Mi", "512Mi", "1Gi", "3Gi",
];
const ODD_QUANTITIES: &[&str] = &[
    "1e308",
    "-1",
    "-0",
    "0.000000001m",
    "9223372036854775807Ei",
    "",
    "abc",
    "1.5.5",
    "+1",
    ".5",
    "1e-9",
    "170141183460469231731687303715884105727",
    " 1",
    "１",
    "8Ei",
    "-9223372036854775808",
    "1.000000000000000000000000000000000000",
];
const RESOURCES: &[&str] = &[
    "cpu",
    "cpu",
    "cpu",
    "memory",
    "memory",
    "memory",
    "ephemeral-storage",
    "nvidia.com/gpu",
    "hugepages-2Mi",
];
const NAMESPACES: &[&str] = &[
    "prod",
    "prod",
    "prod",
    "batch",
    "batch",
    "kube-system",
    "resize-guard",
    "",
];
const POD_NAMES: &[&str] = &["app", "filler", "web-1", ""];
const CONTAINER_NAMES: &[&str] = &["app", "app", "side", "init", "c", ""];
const NODES: &[&str] = &["n1", "n1", "n1", "n2", "ghost", ""];
const LABEL_KEYS: &[&str] = &["app", "tier", "resize-guard.io/protected"];
const LABEL_VALUES: &[&str] = &["db", "web", "true", ""];

/// The cluster a review is judged against.
#[derive(Debug, Clone)]
struct World {
    policy: Policy,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    pdbs: Vec<PodDisruptionBudget>,
}

#[derive(Debug, Clone, Default)]
struct Expect {
    /// `None`: the field test's cluster under the default policy.
    world: Option<Box<World>>,
    /// A structurally valid review: must be answered (`Ok`) at both stages.
    valid: bool,
}

/// The field test: node n1 (1930m, 3Gi), a 250m Guaranteed high-priority app and a 1500m
/// low-priority filler (as in `router.rs`).
fn field_test(policy: Policy) -> World {
    World {
        policy,
        nodes: vec![field_node()],
        pods: vec![
            field_app("250m").build(),
            field_filler().priority(100).label("app", "batch").build(),
        ],
        pdbs: vec![],
    }
}

fn quantity() -> BoxedStrategy<String> {
    prop_oneof![
        6 => prop::sample::select(COMMON_QUANTITIES).prop_map(str::to_owned),
        2 => (0..4000u32).prop_map(|m| format!("{m}m")),
        2 => (0..8192u32).prop_map(|m| format!("{m}Mi")),
        1 => prop::sample::select(ODD_QUANTITIES).prop_map(str::to_owned),
    ]
    .boxed()
}

fn list() -> impl Strategy<Value = BTreeMap<String, Quantity>> {
    prop::collection::btree_map(
        prop::sample::select(RESOURCES).prop_map(str::to_owned),
        quantity().prop_map(Quantity),
        0..4,
    )
}

fn requirements() -> impl Strategy<Value = ResourceRequirements> {
    (
        prop::option::weighted(0.8, list()),
        prop::option::weighted(0.6, list()),
    )
        .prop_map(|(requests, limits)| ResourceRequirements {
            requests,
            limits,
            ..Default::default()
        })
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(
        prop::sample::select(LABEL_KEYS).prop_map(str::to_owned),
        prop::sample::select(LABEL_VALUES).prop_map(str::to_owned),
        0..3,
    )
}

fn container_gen() -> impl Strategy<Value = Container> {
    let resize_policy = (
        prop::sample::select(&["cpu", "memory", "gpu"][..]),
        prop::sample::select(&["NotRequired", "RestartContainer", "Sometimes"][..]),
    )
        .prop_map(|(r, p)| ContainerResizePolicy {
            resource_name: r.to_owned(),
            restart_policy: p.to_owned(),
        });
    (
        prop::sample::select(CONTAINER_NAMES),
        prop::option::weighted(0.9, requirements()),
        prop::option::weighted(
            0.3,
            prop::sample::select(&["Always", "Always", "Never", "OnFailure", ""][..]),
        ),
        prop::option::weighted(0.3, prop::collection::vec(resize_policy, 0..3)),
    )
        .prop_map(|(name, resources, restart, resize_policy)| Container {
            name: name.to_owned(),
            image: Some("registry.example/app:1".to_owned()),
            resources,
            restart_policy: restart.map(str::to_owned),
            resize_policy,
            ..Default::default()
        })
}

fn priority() -> impl Strategy<Value = i32> {
    prop_oneof![
        4 => prop::sample::select(&[0, 100, 1000, 2_000_000_000, 2_000_001_000, -5][..]),
        1 => any::<i32>(),
    ]
}

fn condition() -> impl Strategy<Value = PodCondition> {
    (
        prop::sample::select(&["PodResizePending", "PodResizeInProgress", "Ready"][..]),
        prop::sample::select(&["True", "True", "False", "Unknown"][..]),
        prop::option::of(prop::sample::select(
            &["Deferred", "Infeasible", "Error", ""][..],
        )),
        prop::option::of(prop::sample::select(
            &[
                "Node didn't have enough capacity: cpu, requested: 2430, capacity: 1930",
                "",
                "é",
            ][..],
        )),
        prop::option::of(-1..4i64),
    )
        .prop_map(|(t, s, reason, message, generation)| PodCondition {
            type_: t.to_owned(),
            status: s.to_owned(),
            reason: reason.map(str::to_owned),
            message: message.map(str::to_owned),
            observed_generation: generation,
            ..Default::default()
        })
}

/// What the kubelet reports for a container: admitted as specified, or `drift`.
fn container_status(c: &Container, drift: Option<&ResourceRequirements>) -> ContainerStatus {
    let resources = drift.cloned().or_else(|| c.resources.clone());
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        ready: true,
        started: Some(true),
        allocated_resources: resources.as_ref().and_then(|r| r.requests.clone()),
        resources,
        ..Default::default()
    }
}

type Meta = (
    &'static str,
    &'static str,
    Option<i64>,
    Option<BTreeMap<String, String>>,
    u8,
);
type Spec = (
    Vec<Container>,
    Option<Vec<Container>>,
    Option<Container>,
    Option<&'static str>,
    Option<i32>,
    Option<&'static str>,
    Option<ResourceRequirements>,
    Option<BTreeMap<String, Quantity>>,
    Option<&'static str>,
);
type Status = (
    &'static str,
    Option<&'static str>,
    Option<i64>,
    u8,
    Vec<ResourceRequirements>,
    Vec<PodCondition>,
);

fn pod_gen() -> impl Strategy<Value = Pod> {
    let meta = (
        prop::sample::select(NAMESPACES),
        prop::sample::select(POD_NAMES),
        prop::option::weighted(0.9, -1..4i64),
        prop::option::of(labels()),
        any::<u8>(),
    );
    let spec = (
        prop::collection::vec(container_gen(), 0..4),
        prop::option::weighted(0.3, prop::collection::vec(container_gen(), 0..3)),
        prop::option::weighted(0.05, container_gen()),
        prop::option::weighted(0.9, prop::sample::select(NODES)),
        prop::option::weighted(0.8, priority()),
        prop::option::weighted(
            0.2,
            prop::sample::select(&["Never", "PreemptLowerPriority", "x"][..]),
        ),
        prop::option::weighted(0.2, requirements()),
        prop::option::weighted(0.1, list()),
        prop::option::weighted(0.1, prop::sample::select(&["linux", "windows"][..])),
    );
    let status = prop::option::weighted(
        0.85,
        (
            prop::sample::select(&["Running", "Running", "Pending", "Succeeded", "Failed", ""][..]),
            prop::option::of(prop::sample::select(
                &["Guaranteed", "Burstable", "BestEffort", "Platinum"][..],
            )),
            prop::option::of(0..100i64),
            0..4u8,
            prop::collection::vec(requirements(), 4),
            prop::collection::vec(condition(), 0..3),
        ),
    );
    (meta, spec, status).prop_map(build_pod)
}

fn build_pod((meta, spec, status): (Meta, Spec, Option<Status>)) -> Pod {
    let (namespace, name, generation, labels, flags) = meta;
    let (containers, init, ephemeral, node, priority, preemption, pod_level, overhead, os) = spec;
    let mut pod = Pod::default();
    pod.metadata.namespace = Some(namespace.to_owned());
    pod.metadata.name = Some(name.to_owned());
    pod.metadata.uid = Some(format!("{namespace}-{name}"));
    pod.metadata.generation = generation;
    pod.metadata.labels = labels;
    // Now and then a static pod's mirror, or a terminating pod.
    if flags % 16 == 1 {
        pod.metadata.annotations =
            Some([("kubernetes.io/config.mirror".to_owned(), "x".to_owned())].into());
    }
    if flags % 16 == 2 {
        pod.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    }
    let spec = PodSpec {
        containers,
        init_containers: init,
        ephemeral_containers: ephemeral.map(|c| {
            vec![EphemeralContainer {
                name: format!("debug-{}", c.name),
                resources: c.resources,
                ..Default::default()
            }]
        }),
        node_name: node.map(str::to_owned),
        priority,
        preemption_policy: preemption.map(str::to_owned),
        resources: pod_level,
        overhead,
        os: os.map(|name| PodOS {
            name: name.to_owned(),
        }),
        ..Default::default()
    };
    if let Some((phase, qos, start, mode, drift, conditions)) = status {
        let statuses = |cs: &[Container]| -> Vec<ContainerStatus> {
            cs.iter()
                .enumerate()
                .map(|(i, c)| match mode {
                    2 => container_status(c, drift.get(i % drift.len())),
                    3 => ContainerStatus {
                        name: format!("{}-ghost", c.name),
                        ..container_status(c, None)
                    },
                    _ => container_status(c, None),
                })
                .collect()
        };
        let sidecars: Vec<Container> = spec
            .init_containers
            .iter()
            .flatten()
            .filter(|c| c.restart_policy.as_deref() == Some("Always"))
            .cloned()
            .collect();
        pod.status = Some(PodStatus {
            phase: (!phase.is_empty()).then(|| phase.to_owned()),
            qos_class: qos.map(str::to_owned),
            start_time: start.and_then(|s| Timestamp::from_second(s).ok().map(Time)),
            container_statuses: (mode != 0).then(|| statuses(&spec.containers)),
            init_container_statuses: (mode != 0 && !sidecars.is_empty())
                .then(|| statuses(&sidecars)),
            resources: (mode == 1).then(|| spec.resources.clone()).flatten(),
            allocated_resources: (mode == 1)
                .then(|| spec.resources.as_ref().and_then(|r| r.requests.clone()))
                .flatten(),
            conditions: (!conditions.is_empty()).then_some(conditions),
            ..Default::default()
        });
    }
    pod.spec = Some(spec);
    pod
}

/// A pod as a cluster mostly holds them: bound to n1, running as admitted, one or two
/// Guaranteed or Burstable containers with everyday quantities, maybe a sidecar.
fn running_pod() -> impl Strategy<Value = Pod> {
    let cpu = prop::sample::select(&["100m", "250m", "500m", "1", "1500m"][..]);
    let memory = prop::sample::select(&["64Mi", "256Mi", "1Gi"][..]);
    (
        prop::sample::select(&["prod", "batch", "web"][..]),
        prop::sample::select(&["app", "filler", "web-1", "db-0"][..]),
        prop::sample::select(&[0, 100, 1000, 1_000_000][..]),
        prop::collection::vec((cpu.clone(), memory.clone(), any::<bool>()), 1..3),
        prop::option::weighted(0.2, (cpu, memory)),
        labels(),
        0..100i64,
    )
        .prop_map(
            |(namespace, name, priority, containers, sidecar, labels, start)| {
                let mut b = PodBuilder::new(namespace, name)
                    .node("n1")
                    .priority(priority);
                // The QoS class the API server would record, known by construction (the sidecar
                // is Guaranteed), not computed by the policy crate under test.
                let class = if containers.iter().all(|c| c.2) {
                    "Guaranteed"
                } else {
                    "Burstable"
                };
                for (i, (cpu, memory, guaranteed)) in containers.into_iter().enumerate() {
                    let c = container(&format!("c{i}"));
                    b = b.container(if guaranteed {
                        c.guaranteed(cpu, memory)
                    } else {
                        c.request("cpu", cpu)
                            .request("memory", memory)
                            .limit("cpu", "2")
                    });
                }
                if let Some((cpu, memory)) = sidecar {
                    b = b.init_container(container("proxy").guaranteed(cpu, memory).sidecar());
                }
                for (k, v) in &labels {
                    b = b.label(k, v);
                }
                b.running(start).qos_status(class).build()
            },
        )
}

fn any_pod() -> impl Strategy<Value = Pod> {
    prop_oneof![pod_gen(), running_pod()]
}

/// One change from the stored pod to the requested one.
#[derive(Debug, Clone)]
enum Edit {
    Resource {
        init: bool,
        at: Index,
        limit: bool,
        resource: &'static str,
        value: Option<String>,
    },
    PodLevel {
        limit: bool,
        resource: &'static str,
        value: Option<String>,
    },
    /// Request and limit of one resource of a regular container, to the same value.
    Both(Index, &'static str, String),
    Generation(i64),
    RenameContainer(Index),
    AddContainer(Box<Container>),
    Priority(Option<i32>),
    DropSpec,
}

fn edit() -> impl Strategy<Value = Edit> {
    let resource =
        || prop::sample::select(&["cpu", "cpu", "memory", "memory", "nvidia.com/gpu"][..]);
    let value = || prop::option::weighted(0.85, quantity());
    let container = (
        any::<bool>(),
        any::<Index>(),
        any::<bool>(),
        resource(),
        value(),
    )
        .prop_map(|(init, at, limit, resource, value)| Edit::Resource {
            init,
            at,
            limit,
            resource,
            value,
        });
    let pod_level =
        (any::<bool>(), resource(), value()).prop_map(|(limit, resource, value)| Edit::PodLevel {
            limit,
            resource,
            value,
        });
    prop_oneof![
        10 => container,
        2 => pod_level,
        6 => (any::<Index>(), prop::sample::select(&["cpu", "memory"][..]), quantity())
            .prop_map(|(at, resource, value)| Edit::Both(at, resource, value)),
        1 => (-1..5i64).prop_map(Edit::Generation),
        1 => any::<Index>().prop_map(Edit::RenameContainer),
        1 => container_gen().prop_map(|c| Edit::AddContainer(Box::new(c))),
        1 => prop::option::of(priority()).prop_map(Edit::Priority),
        1 => Just(Edit::DropSpec),
    ]
}

/// The limits or the requests of `r`.
fn side(r: &mut ResourceRequirements, limit: bool) -> &mut Option<BTreeMap<String, Quantity>> {
    if limit {
        &mut r.limits
    } else {
        &mut r.requests
    }
}

fn set(list: &mut Option<BTreeMap<String, Quantity>>, resource: &str, value: &Option<String>) {
    match value {
        Some(v) => {
            list.get_or_insert_with(BTreeMap::new)
                .insert(resource.to_owned(), Quantity(v.clone()));
        }
        None => {
            if let Some(l) = list.as_mut() {
                l.remove(resource);
            }
        }
    }
}

fn apply(pod: &mut Pod, edit: &Edit) {
    if let Edit::DropSpec = edit {
        pod.spec = None;
        return;
    }
    if let Edit::Generation(g) = edit {
        pod.metadata.generation = Some(*g);
        return;
    }
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    match edit {
        Edit::Resource {
            init,
            at,
            limit,
            resource,
            value,
        } => {
            let cs = if *init {
                spec.init_containers.get_or_insert_with(Vec::new)
            } else {
                &mut spec.containers
            };
            if cs.is_empty() {
                return;
            }
            let i = at.index(cs.len());
            let r = cs[i].resources.get_or_insert_with(Default::default);
            set(side(r, *limit), resource, value);
        }
        Edit::PodLevel {
            limit,
            resource,
            value,
        } => {
            let r = spec.resources.get_or_insert_with(Default::default);
            set(side(r, *limit), resource, value);
        }
        Edit::Both(at, resource, value) if !spec.containers.is_empty() => {
            let i = at.index(spec.containers.len());
            let r = spec.containers[i]
                .resources
                .get_or_insert_with(Default::default);
            let value = Some(value.clone());
            set(&mut r.requests, resource, &value);
            set(&mut r.limits, resource, &value);
        }
        Edit::RenameContainer(at) if !spec.containers.is_empty() => {
            let i = at.index(spec.containers.len());
            spec.containers[i].name.push_str("-renamed");
        }
        Edit::AddContainer(c) => spec.containers.push(c.as_ref().clone()),
        Edit::Priority(p) => spec.priority = *p,
        _ => {}
    }
}

fn policy_gen() -> impl Strategy<Value = Policy> {
    (
        any::<[bool; 7]>(),
        1..6u32,
        prop::sample::select(&["resize-guard.io/protected=true", "", "tier in (db)", "app"][..]),
        prop::collection::vec(
            prop::sample::select(NAMESPACES).prop_map(str::to_owned),
            0..2,
        ),
        prop::collection::vec(
            prop::sample::select(NAMESPACES).prop_map(str::to_owned),
            0..2,
        ),
    )
        .prop_map(|(b, victims, selector, protected, exclude)| {
            let defaults = Policy::default();
            Policy {
                mode: if b[0] { Mode::Audit } else { Mode::Enforce },
                qos: QosPolicy {
                    on_change: if b[1] {
                        OnQosChange::Repair
                    } else {
                        OnQosChange::Reject
                    },
                },
                feasibility: FeasibilityPolicy {
                    reject_infeasible: b[2],
                    reject_stuck_deferred: b[3],
                    ..defaults.feasibility
                },
                preemption: PreemptionPolicy {
                    enabled: b[4],
                    pdb: if b[5] {
                        PdbMode::BestEffort
                    } else {
                        PdbMode::Respect
                    },
                    max_victims_per_resize: victims,
                    protected_selector: ProtectedSelector(Selector::parse(selector).unwrap()),
                    protected_namespaces: protected,
                    ..defaults.preemption
                },
                memory: defaults.memory,
                namespaces: if b[6] {
                    NamespacePolicy { exclude }
                } else {
                    defaults.namespaces
                },
            }
        })
}

fn node_gen(name: &'static str) -> impl Strategy<Value = Node> {
    (
        prop_oneof![
            3 => prop::sample::select(&["1930m", "4", "64", "100m", "0"][..])
                .prop_map(str::to_owned),
            1 => quantity(),
        ],
        prop_oneof![
            3 => prop::sample::select(&["3Gi", "256Gi", "512Mi", "0"][..]).prop_map(str::to_owned),
            1 => quantity(),
        ],
        prop::option::of(prop::sample::subsequence(&KUBELET_DEFAULTS_V1_37[..], 0..4)),
    )
        .prop_map(move |(cpu, memory, features)| {
            let mut n = node(name, &cpu, &memory);
            if let Some(s) = n.status.as_mut() {
                s.declared_features = features.map(|f| f.into_iter().map(str::to_owned).collect());
            }
            n
        })
}

fn pdb_gen() -> impl Strategy<Value = PodDisruptionBudget> {
    (
        prop::sample::select(NAMESPACES),
        prop::option::of(labels()),
        prop::option::of(-1..3i32),
        prop::collection::vec(prop::sample::select(POD_NAMES), 0..2),
    )
        .prop_map(|(namespace, match_labels, allowed, disrupted)| {
            let mut p = PodDisruptionBudget::default();
            p.metadata.namespace = Some(namespace.to_owned());
            p.metadata.name = Some(format!("pdb-{namespace}"));
            p.spec = Some(PodDisruptionBudgetSpec {
                selector: Some(LabelSelector {
                    match_labels,
                    ..Default::default()
                }),
                ..Default::default()
            });
            p.status = Some(PodDisruptionBudgetStatus {
                disruptions_allowed: allowed,
                disrupted_pods: (!disrupted.is_empty()).then(|| {
                    disrupted
                        .into_iter()
                        .map(|n| (n.to_owned(), Time(Timestamp::UNIX_EPOCH)))
                        .collect()
                }),
                ..Default::default()
            });
            p
        })
}

fn world_gen() -> impl Strategy<Value = World> {
    (
        policy_gen(),
        node_gen("n1"),
        prop::option::of(node_gen("n2")),
        prop::collection::vec(any_pod(), 0..6),
        prop::collection::vec(pdb_gen(), 0..3),
    )
        .prop_map(|(policy, n1, n2, pods, pdbs)| World {
            policy,
            nodes: std::iter::once(n1).chain(n2).collect(),
            pods,
            pdbs,
        })
}

/// An AdmissionReview as kube-apiserver sends it (for `pods/resize`, or routed elsewhere).
fn admission_review(
    old: &Pod,
    new: &Pod,
    uid: &str,
    dry_run: bool,
    route: (&str, &str, &str, &str),
) -> Value {
    let (group, resource, sub_resource, operation) = route;
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": "v1", "kind": "Pod"},
            "resource": {"group": group, "version": "v1", "resource": resource},
            "subResource": sub_resource,
            "requestKind": {"group": group, "version": "v1", "kind": "Pod"},
            "requestResource": {"group": group, "version": "v1", "resource": resource},
            "requestSubResource": sub_resource,
            "name": old.metadata.name,
            "namespace": old.metadata.namespace,
            "operation": operation,
            "userInfo": {"username": "admin", "groups": ["system:masters"]},
            "object": new,
            "oldObject": old,
            "dryRun": dry_run,
            "options": {"kind": "PatchOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    })
}

/// Structurally valid reviews of arbitrary pods on an arbitrary cluster.
fn structured() -> impl Strategy<Value = Case<Expect>> {
    let route = prop_oneof![
        9 => Just(("", "pods", "resize", "UPDATE")),
        1 => prop::sample::select(&[
            ("", "pods", "status", "UPDATE"),
            ("", "pods", "", "UPDATE"),
            ("", "pods", "resize", "CREATE"),
            ("apps", "pods", "resize", "UPDATE"),
        ][..]),
    ];
    (
        any_pod(),
        prop::collection::vec(edit(), 0..4),
        world_gen(),
        prop::bool::weighted(0.7),
        prop::sample::select(&["0d9a7f7e-3f0e-4a8e-8b8e-000000000001", "x", "ü-🚀"][..]),
        prop::bool::weighted(0.2),
        route,
    )
        .prop_map(|(old, edits, mut world, include, uid, dry_run, route)| {
            let mut new = old.clone();
            for e in &edits {
                apply(&mut new, e);
            }
            if include {
                world.pods.push(old.clone());
            }
            let review = admission_review(&old, &new, uid, dry_run, route);
            Case {
                bytes: serde_json::to_vec(&review).unwrap(),
                expect: Expect {
                    world: Some(Box::new(world)),
                    valid: true,
                },
            }
        })
}

/// JSON values to put anywhere in a review: scalars of every type, odd strings, arrays nested
/// around serde_json's recursion limit.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        prop::sample::select(COMMON_QUANTITIES).prop_map(Value::from),
        prop::sample::select(ODD_QUANTITIES).prop_map(Value::from),
        prop::sample::select(KEYS).prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
        (100..200usize).prop_map(|depth| {
            (0..depth).fold(Value::from("deep"), |v, _| Value::Array(vec![v]))
        }),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(KEYS).prop_map(str::to_owned),
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[derive(Debug, Clone)]
enum JsonEdit {
    Replace(Index, Value),
    Remove(Index),
    Rename(Index, &'static str),
}

/// JSON pointers of every node of `v`, parents first.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                pointers(x, format!("{at}/{i}"), out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                let k = k.replace('~', "~0").replace('/', "~1");
                pointers(x, format!("{at}/{k}"), out);
            }
        }
        _ => {}
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn apply_json(doc: &mut Value, edit: &JsonEdit) {
    let mut all = Vec::new();
    pointers(doc, String::new(), &mut all);
    let pick = |i: &Index| all[i.index(all.len())].clone();
    match edit {
        JsonEdit::Replace(i, v) => {
            if let Some(slot) = doc.pointer_mut(&pick(i)) {
                *slot = v.clone();
            }
        }
        JsonEdit::Remove(i) | JsonEdit::Rename(i, _) => {
            let p = pick(i);
            let Some((parent, last)) = p.rsplit_once('/') else {
                return;
            };
            let last = unescape(last);
            let removed = match doc.pointer_mut(parent) {
                Some(Value::Object(m)) => m.remove(&last),
                Some(Value::Array(a)) => match last.parse::<usize>() {
                    Ok(i) if i < a.len() && matches!(edit, JsonEdit::Remove(_)) => {
                        Some(a.remove(i))
                    }
                    _ => None,
                },
                _ => None,
            };
            if let (JsonEdit::Rename(_, key), Some(v)) = (edit, removed)
                && let Some(Value::Object(m)) = doc.pointer_mut(parent)
            {
                m.insert((*key).to_owned(), v);
            }
        }
    }
}

/// Corpus reviews edited as JSON (seeds that are not JSON are kept as they are).
fn json_mutated(fuzz: &Fuzz) -> impl Strategy<Value = Vec<u8>> + use<> {
    let seeds: Vec<Vec<u8>> = fuzz.seeds().iter().map(|s| s.bytes.clone()).collect();
    let edit = prop_oneof![
        3 => (any::<Index>(), json_value()).prop_map(|(i, v)| JsonEdit::Replace(i, v)),
        1 => any::<Index>().prop_map(JsonEdit::Remove),
        1 => (any::<Index>(), prop::sample::select(KEYS)).prop_map(|(i, k)| JsonEdit::Rename(i, k)),
    ];
    (
        prop::sample::select(seeds),
        prop::collection::vec(edit, 1..4),
    )
        .prop_map(
            |(seed, edits)| match serde_json::from_slice::<Value>(&seed) {
                Ok(mut doc) => {
                    for e in &edits {
                        apply_json(&mut doc, e);
                    }
                    serde_json::to_vec(&doc).unwrap()
                }
                Err(_) => seed,
            },
        )
}

fn inputs(fuzz: &Fuzz) -> impl Strategy<Value = Case<Expect>> + use<> {
    // Mutated inputs are judged on the field test under one of a few policies.
    let in_field_test = |bytes: BoxedStrategy<Vec<u8>>| {
        (bytes, prop::option::of(policy_gen())).prop_map(|(bytes, policy)| Case {
            bytes,
            expect: Expect {
                world: policy.map(|p| Box::new(field_test(p))),
                valid: false,
            },
        })
    };
    prop_oneof![
        1 => harness::bytes(256).prop_map(Case::raw),
        1 => harness::tokens(DICTIONARY, 32).prop_map(Case::raw),
        2 => in_field_test(fuzz.mutated(DICTIONARY)),
        3 => in_field_test(json_mutated(fuzz).boxed()),
        6 => structured(),
    ]
}

/// The parts of an AdmissionReview the invariants read; `O` is how the objects are read
/// (`IgnoredAny` to skip them).
#[derive(serde::Deserialize)]
#[serde(bound = "O: serde::de::DeserializeOwned + Default")]
struct Body<O = serde::de::IgnoredAny> {
    request: Option<Request<O>>,
}

#[derive(serde::Deserialize)]
#[serde(
    rename_all = "camelCase",
    bound = "O: serde::de::DeserializeOwned + Default"
)]
struct Request<O> {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    dry_run: Option<bool>,
    #[serde(default)]
    object: O,
    #[serde(default)]
    old_object: O,
}

/// How often each decision label (and `error`, `patch`) came up, for the summary line.
static SEEN: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

fn seen(what: &str) {
    if let Ok(mut m) = SEEN.lock() {
        *m.entry(what.to_owned()).or_default() += 1;
    }
}

fn check(case: Case<Expect>) -> Result<(), TestCaseError> {
    let world = case
        .expect
        .world
        .as_deref()
        .cloned()
        .unwrap_or_else(|| field_test(Policy::default()));
    let policy = world.policy.clone();
    let cluster = FixedCluster::new(world.policy, world.nodes, world.pods, world.pdbs);
    // Read back like `review` reads it: the routing fields only, unknown members skipped
    // (serde_json skips them without a depth limit, so a body can be answered that does not
    // parse as a `Value`).
    let request = serde_json::from_slice::<Body>(&case.bytes)
        .ok()
        .and_then(|b| b.request);
    for stage in [Stage::Mutate, Stage::Validate] {
        let reviewed = match review(stage, &case.bytes, &cluster) {
            Ok(r) => {
                seen(&format!("{}:{}", stage.name(), r.decision));
                r
            }
            Err(e) => {
                seen(&format!("{}:error", stage.name()));
                prop_assert!(
                    !case.expect.valid,
                    "{} refused a valid review: {}",
                    stage.name(),
                    e
                );
                prop_assert!(!e.to_string().is_empty());
                continue;
            }
        };
        let request = request
            .as_ref()
            .ok_or_else(|| TestCaseError::fail("answered a body without a request"))?;
        let uid = request.uid.as_str();
        let response = reviewed
            .review
            .response
            .as_ref()
            .ok_or_else(|| TestCaseError::fail("no response"))?;
        prop_assert!(serde_json::to_vec(&reviewed.review).is_ok());
        prop_assert_eq!(&response.uid, uid);
        prop_assert_eq!(&reviewed.uid, uid);
        prop_assert_eq!(reviewed.allowed, response.allowed);
        if !response.allowed {
            prop_assert!(!response.result.message.is_empty());
        }
        for (key, value) in &response.audit_annotations {
            prop_assert!(
                value.len() <= 1024,
                "annotation {} is {} bytes",
                key,
                value.len()
            );
        }
        if let Some(event) = &reviewed.event {
            prop_assert!(
                event.note.len() <= 1024,
                "note of {} bytes",
                event.note.len()
            );
            prop_assert!(request.dry_run != Some(true), "event on dry run");
        }
        if let Some(patch) = &response.patch {
            prop_assert_eq!(stage, Stage::Mutate, "patch from /validate");
            let patch: json_patch::Patch = serde_json::from_slice(patch)
                .map_err(|e| TestCaseError::fail(format!("patch is not a JSON patch: {e}")))?;
            for op in &patch.0 {
                let path = serde_json::to_value(op).unwrap()["path"].clone();
                prop_assert!(
                    path.as_str().is_some_and(|p| p.starts_with("/spec/")),
                    "patch outside /spec: {:?}",
                    op
                );
            }
            // The object as sent or, when it nests too deep for a `Value`, as decoded.
            let objects = serde_json::from_slice::<Body<Value>>(&case.bytes)
                .or_else(|_| {
                    serde_json::from_slice::<Body<LeanPod>>(&case.bytes).map(|b| Body {
                        request: b.request.map(|r| Request {
                            object: serde_json::to_value(r.object.0).unwrap(),
                            old_object: serde_json::to_value(r.old_object.0).unwrap(),
                            uid: r.uid,
                            dry_run: r.dry_run,
                        }),
                    })
                })
                .ok()
                .and_then(|b| b.request)
                .ok_or_else(|| TestCaseError::fail("a patch for a body without objects"))?;
            let mut object = objects.object;
            json_patch::patch(&mut object, &patch)
                .map_err(|e| TestCaseError::fail(format!("patch does not apply: {e}")))?;
            // Decoded as the webhook decodes pods (lean: a field it does not read may be
            // anything, as in a mutated body).
            let repaired: Pod = serde_json::from_value::<LeanPod>(object)
                .map_err(|e| TestCaseError::fail(format!("patched object is no Pod: {e}")))?
                .0;
            let old: Pod = serde_json::from_value::<LeanPod>(objects.old_object)
                .unwrap()
                .0;
            let budgets = Budgets::default();
            let ctx = context(None, &budgets, &policy);
            seen("mutate:patch-applied");
            let verdict = classify(&old, &repaired, &ctx);
            prop_assert!(
                !matches!(verdict, Verdict::QosChange(_)),
                "the repaired pod still changes the QoS class: {:?}",
                verdict
            );
        }
    }
    Ok(())
}

#[test]
fn review_never_panics_and_answers_every_valid_review() {
    let fuzz = Fuzz::new("review");
    fuzz.run(inputs(&fuzz), check);
    if let Ok(m) = SEEN.lock() {
        let counts: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!("fuzz review: outcomes: {}", counts.join(", "));
    }
}
