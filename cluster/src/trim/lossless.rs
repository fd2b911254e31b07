//! Trimming loses nothing resize-guard reads: for varied pods (the policy crate's builders plus
//! noise — env, probes, ports, volumes, images, managedFields, big annotations, extra conditions
//! and statuses), every fact the webhook and the controller compute from a cached pod is the
//! same on the trimmed and the untrimmed pod, and so are node ledgers built from trimmed nodes;
//! and decoding a pod or a node lean (what the watches and the webhook do) gives exactly the
//! trimmed object.

mod cases;

use std::collections::BTreeMap;

use cases::{add_noise, build, pod_case};
use k8s_openapi::api::core::v1::{
    ContainerImage, EphemeralContainer, Node, NodeCondition, NodePodPreemptionPolicy, Pod,
    ResourceRequirements, Taint,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::runtime::reflector::ObjectRef;
use proptest::prelude::*;
use resize_guard_policy::admission::{Admission, Effect, Stage, admit_with};
use resize_guard_policy::budget::Budgets;
use resize_guard_policy::fixture::{PodBuilder, container, context, node, pdb};
use resize_guard_policy::ledger::{LedgerEntry, NodeLedger, PREEMPTION_LABEL, counts_on};
use resize_guard_policy::pod::{self, PodKey};
use resize_guard_policy::policy::Policy;
use resize_guard_policy::upstream;
use resize_guard_policy::upstream::pending::PendingResize;
use resize_guard_policy::upstream::qos::{current_qos_class, qos_class};
use resize_guard_policy::upstream::requests::{Accounting, pod_requests};
use resize_guard_policy::usage::Evidence;
use resize_guard_policy::{assess, classify};

use crate::index::PodIndex;
use crate::lean::{LeanNode, LeanPod};
use crate::trim::{LAST_APPLIED, trim_node, trim_pod};

fn trimmed(p: &Pod) -> Pod {
    let mut t = p.clone();
    trim_pod(&mut t);
    t
}

/// What the controller reads of a cached pod besides the policy crate's functions.
fn controller_reads(p: &Pod) -> String {
    let spec = p.spec.as_ref();
    let status = p.status.as_ref();
    let mut annotations = p.metadata.annotations.clone().unwrap_or_default();
    annotations.remove(LAST_APPLIED);
    format!(
        "{:?}",
        (
            (
                ObjectRef::from_obj(p),
                &p.metadata.generation,
                &p.metadata.deletion_timestamp,
                &p.metadata.owner_references,
                &p.metadata.resource_version,
                annotations,
                &p.metadata.labels,
            ),
            spec.and_then(|s| s.termination_grace_period_seconds),
            spec.map(|s| {
                s.containers
                    .iter()
                    .map(|c| (&c.name, &c.resources))
                    .collect::<Vec<_>>()
            }),
            upstream::pod::resize_pending(p).map(|c| (&c.message, &c.reason, &c.status)),
            status.map(|s| {
                s.container_statuses
                    .iter()
                    .chain(&s.init_container_statuses)
                    .flatten()
                    .map(|c| (&c.name, &c.resources, c.restart_count, c.ready))
                    .collect::<Vec<_>>()
            }),
        )
    )
}

/// Every fact computed from one pod alone.
fn pod_facts(p: &Pod) -> Vec<(&'static str, String)> {
    let accountings = [
        Accounting::Desired,
        Accounting::Scheduler,
        Accounting::Resizing,
        Accounting::Admitted,
    ];
    vec![
        ("ledger entry", format!("{:?}", LedgerEntry::new(p))),
        ("qos", format!("{:?}", (qos_class(p), current_qos_class(p)))),
        (
            "requests",
            format!("{:?}", accountings.map(|a| pod_requests(p, a)).to_vec()),
        ),
        ("pending", format!("{:?}", PendingResize::of(p))),
        (
            "pod facts",
            format!(
                "{:?}",
                (
                    (
                        PodKey::of(p),
                        upstream::pod::priority(p),
                        upstream::pod::never_preempts(p),
                        pod::node_name(p),
                        pod::is_terminating(p),
                        upstream::pod::is_terminal(p),
                        upstream::pod::is_mirror(p),
                        upstream::pod::is_critical(p),
                    ),
                    (
                        pod::start_time(p),
                        upstream::pod::resize_pending(p),
                        upstream::pod::is_resize_infeasible(p),
                        upstream::pod::is_resize_deferred(p),
                        pod::is_deferred_now(p),
                        pod::validate_quantities(p).map_err(|e| e.to_string()),
                        counts_on(p, "n1"),
                    ),
                )
            ),
        ),
        ("controller reads", controller_reads(p)),
    ]
}

fn neighbours() -> Vec<Pod> {
    let mut out = Vec::new();
    for (i, (prio, cpu, app)) in [
        (0, "1", 1),
        (50, "1500m", 2),
        (100, "500m", 1),
        (500, "2", 3),
    ]
    .into_iter()
    .enumerate()
    {
        let mut p = PodBuilder::new("batch", &format!("neighbour-{i}"))
            .node("n1")
            .priority(prio)
            .label("app", &format!("app-{app}"))
            .container(container("c0").guaranteed(cpu, "1Gi"))
            .running(i as i64)
            .build();
        add_noise(&mut p, 0xA5A5 + i as u64);
        out.push(p);
    }
    out
}

fn pdbs() -> Vec<PodDisruptionBudget> {
    vec![pdb("batch", "app-1", ("app", "app-1"), 0)]
}

fn policies() -> Vec<Policy> {
    vec![
        Policy::default(),
        Policy::from_yaml(
            "mode: enforce\nqos:\n  onChange: repair\npreemption:\n  enabled: true\n  pdb: bestEffort\n  protectedSelector: \"app in (app-3)\"\n",
        )
        .unwrap(),
    ]
}

/// A node with noise besides what the ledger reads; opted out of resize preemption by our label
/// (1) or by the v1.37 alpha field (2).
fn noisy_node(opt_out: u8) -> Node {
    let mut n = node("n1", "6", "12Gi");
    n.metadata.resource_version = Some("77".into());
    n.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
    n.metadata.annotations = Some([("node.alpha.kubernetes.io/ttl".into(), "0".into())].into());
    let labels = n.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert("kubernetes.io/hostname".into(), "n1".into());
    if opt_out == 1 {
        labels.insert(PREEMPTION_LABEL.into(), "disabled".into());
    }
    let spec = n.spec.as_mut().unwrap();
    if opt_out == 2 {
        spec.pod_preemption_policy = Some(NodePodPreemptionPolicy {
            disable_resize_preemption: Some(vec!["autoscaler.example/resize".into()]),
        });
    }
    spec.taints = Some(vec![Taint {
        key: "dedicated".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }]);
    spec.provider_id = Some("aws:///eu-west-1a/i-0abc".into());
    let status = n.status.as_mut().unwrap();
    status.declared_features = Some(vec!["InPlacePodVerticalScalingInitContainers".into()]);
    status.images = Some(vec![ContainerImage {
        names: Some(vec!["registry.example.com/app@sha256:1".into()]),
        size_bytes: Some(123_456_789),
    }]);
    status.conditions = Some(vec![NodeCondition {
        type_: "Ready".into(),
        status: "True".into(),
        ..Default::default()
    }]);
    n
}

/// The ledger of n1 as the view builds it: a [`PodIndex`] fed the (trimmed or not) pods.
fn view_ledger(pods: &[Pod], n: &Node) -> NodeLedger {
    let mut idx = PodIndex::default();
    for p in pods {
        idx.apply(p);
    }
    (*idx.ledger(n)).clone()
}

/// `p` with `edit` applied to its first container's resources (when it has any).
fn edited(p: &Pod, edit: impl FnOnce(&mut ResourceRequirements)) -> Pod {
    let mut new = p.clone();
    if let Some(r) = new
        .spec
        .as_mut()
        .and_then(|s| s.containers.first_mut())
        .and_then(|c| c.resources.as_mut())
    {
        edit(r);
    }
    new
}

/// The first container's cpu, where it is set, to 2500m.
fn resized(p: &Pod) -> Pod {
    edited(p, |r| {
        for list in [r.requests.as_mut(), r.limits.as_mut()]
            .into_iter()
            .flatten()
        {
            if list.contains_key("cpu") {
                list.insert("cpu".into(), Quantity("2500m".into()));
            }
        }
    })
}

/// The first container without limits: a QoS class change for a Guaranteed pod (a repair).
fn limits_dropped(p: &Pod) -> Pod {
    edited(p, |r| r.limits = None)
}

/// An admission as text: annotations in order, a repaired pod as its trimmed self (the patch is
/// the difference between the request's pod and it, in the fields trimming keeps).
fn admission(mut a: Admission) -> String {
    if let Effect::Repair { pod, .. } = &mut a.effect {
        trim_pod(pod);
    }
    let annotations: BTreeMap<_, _> = std::mem::take(&mut a.annotations).into_iter().collect();
    format!("{a:?} {annotations:?}")
}

/// Every decision that involves the cluster: assess (controller), classify with the cached pod
/// as the old one, under each policy, with ledgers from trimmed or untrimmed pods and node.
fn decisions(p: &Pod, trim: bool) -> Vec<String> {
    let prepare = |p: &Pod| if trim { trimmed(p) } else { p.clone() };
    let mut pods: Vec<Pod> = neighbours().iter().map(prepare).collect();
    let me = prepare(p);
    pods.push(me.clone());
    let budgets = Budgets::new(&pdbs());
    let new = resized(p);
    let mut out = Vec::new();
    for opt_out in [0, 1, 2] {
        let mut n = noisy_node(opt_out);
        if trim {
            let lean: LeanNode = serde_json::from_slice(&serde_json::to_vec(&n).unwrap()).unwrap();
            trim_node(&mut n);
            assert_eq!(lean.0, n, "decoding the node lean differs from trimming it");
        }
        let ledger = view_ledger(&pods, &n);
        out.push(format!("{ledger:?}"));
        for policy in policies() {
            let ctx = context(Some(&ledger), &budgets, &policy);
            out.push(format!("{:?}", assess(&me, &ctx)));
            out.push(format!("{:?}", classify(&me, &new, &ctx)));
            // The webhook judges both pods of a review decoded lean.
            for new in [resized(p), limits_dropped(p)] {
                let new = prepare(&new);
                for stage in [Stage::Mutate, Stage::Validate] {
                    out.push(admission(admit_with(
                        stage,
                        &me,
                        &new,
                        &ctx,
                        &Evidence::NotFetched,
                    )));
                }
            }
        }
    }
    out
}

fn check(p: &Pod) {
    let t = trimmed(p);
    let lean: LeanPod = serde_json::from_slice(&serde_json::to_vec(p).unwrap()).unwrap();
    assert_eq!(lean.0, t, "decoding the pod lean differs from trimming it");
    for ((what, full), (_, cut)) in pod_facts(p).into_iter().zip(pod_facts(&t)) {
        assert_eq!(full, cut, "{what} differs after trimming");
    }
    let (full, cut) = (decisions(p, false), decisions(p, true));
    assert_eq!(full.len(), cut.len());
    for (f, c) in full.iter().zip(&cut) {
        assert_eq!(f, c, "a decision differs after trimming");
    }
    assert!(t.metadata.managed_fields.is_none());
    assert!(
        !t.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(LAST_APPLIED))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn trimmed_pods_give_the_same_facts_and_decisions(case in pod_case()) {
        check(&build(&case, "subject"));
    }
}

fn realistic() -> Pod {
    serde_json::from_str(include_str!("lossless/deployment-pod.json")).unwrap()
}

#[test]
fn a_realistic_deployment_pod_gives_the_same_facts_and_decisions() {
    let mut p = realistic();
    check(&p);
    // The same pod as `kubectl apply` creates it, with the manifest copied into an annotation.
    let manifest = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": p.metadata.name, "namespace": p.metadata.namespace, "labels": p.metadata.labels,
    }, "spec": p.spec});
    p.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(LAST_APPLIED.into(), manifest.to_string());
    check(&p);
}

#[test]
fn trimming_a_realistic_pod_keeps_a_small_fraction_of_its_bytes() {
    let size = |p: &Pod| serde_json::to_vec(p).unwrap().len();
    let deployment_pod = realistic();
    let mut applied = realistic();
    let manifest = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": applied.metadata.name, "namespace": applied.metadata.namespace,
            "labels": applied.metadata.labels}, "spec": applied.spec});
    applied
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(LAST_APPLIED.into(), manifest.to_string());
    for (what, p) in [
        ("Deployment pod", deployment_pod),
        ("kubectl-applied pod", applied),
    ] {
        let (before, after) = (size(&p), size(&trimmed(&p)));
        println!(
            "{what}: {before} bytes before trim, {after} after ({:.0}%)",
            100.0 * after as f64 / before as f64
        );
        assert!(after * 4 < before, "{what}: {after} of {before} bytes kept");
    }
}

#[test]
fn trimmed_nodes_keep_only_what_the_ledger_reads() {
    let mut n = noisy_node(2);
    let full = NodeLedger::from_entries(&n, vec![]);
    trim_node(&mut n);
    assert_eq!(
        format!("{full:?}"),
        format!("{:?}", NodeLedger::from_entries(&n, vec![]))
    );
    assert_eq!(
        n.metadata.resource_version.as_deref(),
        Some("77"),
        "the ledger cache key"
    );
    let status = n.status.unwrap();
    assert!(status.images.is_none() && status.conditions.is_none() && status.capacity.is_none());
    assert!(n.metadata.managed_fields.is_none() && n.metadata.annotations.is_none());
}

#[test]
fn ephemeral_containers_still_stop_pod_level_limit_defaulting() {
    // `DefaultPodLevelResources` gives a pod-level cpu limit only when every container has one;
    // an ephemeral container never has one, so its presence keeps this pod Burstable.
    let mut p = PodBuilder::new("web", "debugged")
        .node("n1")
        .pod_request("cpu", "1")
        .pod_request("memory", "1Gi")
        .container(container("c0").guaranteed("1", "1Gi"))
        .running(0)
        .build();
    let plain = qos_class(&p);
    p.spec.as_mut().unwrap().ephemeral_containers = Some(vec![EphemeralContainer {
        name: "debugger".into(),
        image: Some("busybox:1.36".into()),
        ..Default::default()
    }]);
    assert_ne!(qos_class(&p), plain, "the case this test is about");
    assert_eq!(qos_class(&trimmed(&p)), qos_class(&p));
    check(&p);
}
