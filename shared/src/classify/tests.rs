//! Classification end to end: the field-test walls (ARCHITECTURE.md, "The field test") and every
//! verdict's outcome under each policy knob.

use super::*;
use crate::fixture::{
    INSTALL_NAMESPACE, PodBuilder, container, context, field_app, field_filler, field_node,
    replica_pod, running_pod, set_first_container,
};
use crate::policy::{Mode, OnQosChange};
use crate::verdict::{Outcome, Ruling};

fn app(cpu: &str) -> PodBuilder {
    field_app(cpu)
}

fn filler() -> Pod {
    field_filler().build()
}

/// A pod of `batch`, owned by a ReplicaSet, on `n1`: one Guaranteed container of `cpu` and
/// `memory`, Running since `start`.
fn batch(name: &str, cpu: &str, memory: &str, start: i64) -> PodBuilder {
    replica_pod("batch", name, cpu, memory, start)
}

struct World {
    ledger: NodeLedger,
    budgets: Budgets,
    policy: Policy,
}

impl World {
    fn new(pods: &[Pod]) -> World {
        World {
            ledger: NodeLedger::new(&field_node(), pods),
            budgets: Budgets::default(),
            policy: Policy::default(),
        }
    }
    /// The field-test node with the field test's app at 250m and `others`.
    fn with_app(others: impl IntoIterator<Item = Pod>) -> World {
        World::field(others).1
    }
    /// The field-test node holding only `old`.
    fn alone(old: &Pod) -> World {
        World::new(std::slice::from_ref(old))
    }
    /// The field test's app at 250m on the field-test node with `others`: (the app, the world).
    fn field(others: impl IntoIterator<Item = Pod>) -> (Pod, World) {
        let old = app("250m").build();
        let pods: Vec<Pod> = std::iter::once(old.clone()).chain(others).collect();
        (old, World::new(&pods))
    }
    fn ctx(&self) -> Context<'_> {
        context(Some(&self.ledger), &self.budgets, &self.policy)
    }
    /// The field test's app resized from 250m to `cpu`.
    fn field_resize(&self, cpu: &str) -> Verdict {
        self.classify(&app("250m").build(), &resized(cpu))
    }
    fn classify(&self, old: &Pod, new: &Pod) -> Verdict {
        classify(old, new, &self.ctx())
    }
}

/// The field test: its app resized from 250m to `cpu` beside the filler (the world, the verdict).
fn field_test(cpu: &str) -> (World, Verdict) {
    let w = World::with_app([filler()]);
    let v = w.field_resize(cpu);
    (w, v)
}

/// Fails unless the verdict's message says `part`.
fn says(v: &Verdict, part: &str) {
    let message = v.message();
    assert!(message.contains(part), "{message}");
}

/// The field-test app at 250m with `requests` or `limits` of `resource` set to `q` on its
/// container, the spec alone changed.
fn app_with(field: &str, resource: &str, q: &str) -> Pod {
    let mut new = app("250m").build();
    set_first_container(&mut new, field, resource, q);
    new
}

/// The field app's cpu request raised to 500m, above its 250m limit, judged: a QoS change.
fn request_above_limit() -> Verdict {
    let (old, w) = World::field([]);
    w.classify(&old, &app_with("requests", "cpu", "500m"))
}

fn resized(cpu: &str) -> Pod {
    app("250m").resize("app", "cpu", cpu).build()
}

#[test]
fn field_test_550m_is_deferred_with_the_kubelet_message_and_a_plan() {
    let (w, v) = field_test("550m");
    let Verdict::Deferred(d) = &v else {
        panic!("{v:?}")
    };
    assert_eq!(d.shortfall.cpu, 120);
    assert_eq!(
        d.kubelet_message(),
        "Node didn't have enough resource: cpu, requested: 550, used: 1500, capacity: 1930"
    );
    let plan = d.plan.as_ref().unwrap();
    assert_eq!(plan.victims[0].key.to_string(), "batch/filler");
    let msg = v.message();
    assert!(
        msg.contains("cpu 120m") && msg.contains("will preempt: batch/filler (priority 0)"),
        "{msg}"
    );
    assert_eq!(v.label(), "deferred-preemptible");
    let out = v.outcome(&w.policy);
    assert_eq!(out.action, Ruling::Allow);
    assert_eq!(out.warnings.len(), 1);
}

#[test]
fn field_test_2430m_is_infeasible_and_denied_with_the_nodes_numbers() {
    let (w, v) = field_test("2430m");
    let Verdict::Infeasible(i) = &v else {
        panic!("{v:?}")
    };
    assert_eq!((i.requested, i.allocatable), (2430, 1930));
    assert_eq!(
        i.kubelet_message(),
        "Node didn't have enough capacity: cpu, requested: 2430, capacity: 1930"
    );
    let Outcome {
        action, decision, ..
    } = v.outcome(&w.policy);
    let Ruling::Deny(msg) = action else { panic!() };
    assert!(
        msg.contains("node n1") && msg.contains("2430m") && msg.contains("1930m"),
        "{msg}"
    );
    assert_eq!(decision, "infeasible");
}

#[test]
fn infeasible_reports_memory_first_like_the_kubelet() {
    let old = app("250m").build();
    let mut new = resized("2430m");
    set_first_container(&mut new, "requests", "memory", "4Gi");
    set_first_container(&mut new, "limits", "memory", "4Gi");
    let w = World::alone(&old);
    let Verdict::Infeasible(i) = w.classify(&old, &new) else {
        panic!()
    };
    assert_eq!(i.resource, ResourceName::Memory);
}

#[test]
fn infeasible_can_be_allowed_with_a_warning_by_policy() {
    let mut w = World::with_app([]);
    w.policy.feasibility.reject_infeasible = false;
    let out = w.field_resize("2430m").outcome(&w.policy);
    assert_eq!(out.action, Ruling::Allow);
    assert_eq!(out.warnings.len(), 1);
}

#[test]
fn a_resize_that_fits_is_allowed_silently() {
    let w = World::with_app([]);
    let v = w.field_resize("550m");
    assert!(matches!(v, Verdict::Fits(_)), "{v:?}");
    let out = v.outcome(&w.policy);
    assert_eq!(out.action, Ruling::Allow);
    assert!(out.warnings.is_empty());
}

#[test]
fn deleting_the_filler_makes_the_deferred_resize_fit() {
    let w = World::with_app([]);
    assert!(matches!(w.field_resize("550m"), Verdict::Fits(_)));
}

#[test]
fn unchanged_values_in_other_spelling_are_no_change() {
    let (old, w) = World::field([]);
    let mut new = app_with("requests", "cpu", "0.25");
    set_first_container(&mut new, "limits", "cpu", "0.25");
    assert_eq!(w.classify(&old, &new), Verdict::NoChange);
}

#[test]
fn qos_change_is_denied_by_default_with_culprits_and_the_fix() {
    let v = request_above_limit();
    let Verdict::QosChange(q) = &v else {
        panic!("{v:?}")
    };
    assert_eq!((q.from, q.to), (QosClass::Guaranteed, QosClass::Burstable));
    assert!(q.repair.is_some());
    let Ruling::Deny(msg) = v.outcome(&Policy::default()).action else {
        panic!()
    };
    assert!(msg.contains("from Guaranteed to Burstable"), "{msg}");
    assert!(
        msg.contains("container app: cpu request 500m ≠ limit 250m"),
        "{msg}"
    );
    assert!(
        msg.contains("Pod QOS Class may not change as a result of resizing"),
        "{msg}"
    );
    assert!(msg.contains("limits.cpu 250m → 500m"), "{msg}");
}

#[test]
fn qos_change_is_repaired_when_policy_says_so() {
    let (old, mut w) = World::field([]);
    let new = app_with("requests", "cpu", "500m");
    w.policy.qos.on_change = OnQosChange::Repair;
    let out = w.classify(&old, &new).outcome(&w.policy);
    let Ruling::Repair(fix) = &out.action else {
        panic!("{out:?}")
    };
    assert_eq!(out.decision, "qos-repaired");
    assert!(out.warnings[0].contains("keep QoS class Guaranteed"));
    // The repaired pod classifies as a plain resize.
    let mut repaired = new.clone();
    fix.apply(repaired.spec.as_mut().unwrap());
    assert!(matches!(w.classify(&old, &repaired), Verdict::Fits(_)));
}

#[test]
fn qos_change_without_a_repair_is_denied_even_in_repair_mode() {
    let old = running_pod("prod", "be", container("app"))
        .qos_status("BestEffort")
        .build();
    let new = PodBuilder::new("prod", "be")
        .node("n1")
        .container(container("app").request("cpu", "100m"))
        .build();
    let mut w = World::alone(&old);
    w.policy.qos.on_change = OnQosChange::Repair;
    let v = w.classify(&old, &new);
    let Ruling::Deny(msg) = v.outcome(&w.policy).action else {
        panic!()
    };
    assert!(msg.contains("BestEffort pod cannot gain"), "{msg}");
}

#[test]
fn qos_is_checked_before_feasibility() {
    let (old, w) = World::field([]);
    let new = app_with("requests", "cpu", "5");
    assert!(matches!(w.classify(&old, &new), Verdict::QosChange(_)));
}

#[test]
fn stuck_deferred_is_warned_or_denied_by_policy() {
    let old = app("250m").never_preempt().build();
    let mut w = World::new(&[old.clone(), filler()]);
    let new = app("250m")
        .never_preempt()
        .resize("app", "cpu", "550m")
        .build();
    let v = w.classify(&old, &new);
    assert_eq!(v.label(), "deferred-stuck");
    says(&v, "this resize will wait");
    says(&v, "preemptionPolicy: Never");
    assert_eq!(v.outcome(&w.policy).action, Ruling::Allow);
    w.policy.feasibility.reject_stuck_deferred = true;
    assert!(matches!(v.outcome(&w.policy).action, Ruling::Deny(_)));
}

#[test]
fn deferred_awaiting_termination_says_so() {
    let leaving = batch("leaving", "1500m", "256Mi", 5).terminating().build();
    let w = World::with_app([leaving]);
    let v = w.field_resize("550m");
    assert_eq!(v.label(), "deferred-awaiting-termination");
    says(&v, "terminating pods batch/leaving");
}

#[test]
fn audit_mode_never_denies_but_says_what_it_would_do() {
    let mut w = World::with_app([filler()]);
    w.policy.mode = Mode::Audit;
    let out = w.field_resize("2430m").outcome(&w.policy);
    assert_eq!(out.action, Ruling::Allow);
    assert_eq!(out.decision, "would-deny:infeasible");
    assert!(out.warnings[0].starts_with("resize-guard (audit mode) would deny"));
    assert!(
        out.warnings[0].contains("cpu 2430m exceeds node n1 allocatable 1930m"),
        "{}",
        out.warnings[0]
    );
}

#[test]
fn excluded_namespaces_and_the_install_namespace_are_skipped() {
    let w = World::new(&[]);
    for ns in ["kube-system", INSTALL_NAMESPACE] {
        let old = PodBuilder::new(ns, "x")
            .node("n1")
            .container(container("c").guaranteed("1", "1Gi"))
            .build();
        let new = PodBuilder::new(ns, "x")
            .node("n1")
            .container(container("c").guaranteed("9", "1Gi"))
            .build();
        assert!(
            matches!(w.classify(&old, &new), Verdict::Skipped(_)),
            "{ns}"
        );
    }
}

#[test]
fn unbound_pods_and_unknown_nodes_are_skipped() {
    let policy = Policy::default();
    let budgets = Budgets::default();
    let ctx = context(None, &budgets, &policy);
    let old = app("250m").build();
    let v = classify(&old, &resized("550m"), &ctx);
    assert!(
        matches!(&v, Verdict::Skipped(why) if why.contains("n1")),
        "{v:?}"
    );
}

#[test]
fn a_node_without_allocatable_is_not_judged_infeasible_nor_preempted_on() {
    let old = app("250m").build();
    let pods = [old.clone(), filler()];
    for (what, strip) in [
        ("status.allocatable", None),
        ("allocatable memory", Some("memory")),
    ] {
        let mut n = field_node();
        let status = n.status.as_mut().unwrap();
        match strip {
            None => status.allocatable = None,
            Some(key) => {
                status.allocatable.as_mut().unwrap().remove(key);
            }
        }
        let w = World {
            ledger: NodeLedger::new(&n, &pods),
            ..World::new(&pods)
        };
        // Far too big for any real node and, against a zero allocatable, for this one: still no
        // Infeasible (nor a Deferred plan) while the node has not said what it holds.
        for cpu in ["550m", "2430m"] {
            let v = w.field_resize(cpu);
            let Verdict::Skipped(why) = &v else {
                panic!("{what}, {cpu}: {v:?}")
            };
            assert_eq!(
                why,
                &format!(
                    "node n1 reports no {what}, so whether the resize fits is unknown; the kubelet decides"
                )
            );
            assert_eq!(v.outcome(&w.policy).action, Ruling::Allow);
            let deferred = app("250m").resize("app", "cpu", cpu).build();
            assert!(matches!(assess(&deferred, &w.ctx()), Verdict::Skipped(_)));
        }
    }
    // The same node with its allocatable: judged as ever.
    let w = World::new(&pods);
    assert!(matches!(w.field_resize("2430m"), Verdict::Infeasible(_)));
}

#[test]
fn invalid_quantities_are_denied_not_panicked_on() {
    let (old, w) = World::field([]);
    let new = app_with("requests", "cpu", "lots");
    let v = w.classify(&old, &new);
    assert!(matches!(v, Verdict::Denied(_)));
    assert!(v.message().contains("lots"));
}

#[test]
fn assess_judges_a_stored_deferred_pod_like_the_controller_sees_it() {
    let stored = resized("550m");
    let w = World::new(&[stored.clone(), filler()]);
    let v = assess(&stored, &w.ctx());
    let Verdict::Deferred(d) = v else { panic!() };
    assert_eq!(d.plan.unwrap().victims.len(), 1);
}

#[test]
fn a_shrink_always_fits() {
    let old = app("400m").build();
    let w = World::new(&[old.clone(), filler()]);
    let new = app("400m").resize("app", "cpu", "300m").build();
    assert!(matches!(w.classify(&old, &new), Verdict::Fits(_)));
}

use crate::upstream::qos::QosClass;

#[test]
fn warnings_fit_the_api_servers_256_character_limit() {
    let mut pods = vec![app("250m").build()];
    for i in 0..20 {
        pods.push(
            PodBuilder::new(
                "a-rather-long-namespace-name",
                &format!("a-rather-long-victim-pod-name-{i}"),
            )
            .node("n1")
            .owned_by("ReplicaSet")
            .container(container("c").guaranteed("80m", "64Mi"))
            .running(i)
            .build(),
        );
    }
    let mut w = World::new(&pods);
    w.policy.preemption.max_victims_per_resize = 20;
    let v = w.classify(&pods[0], &resized("1900m"));
    assert_eq!(v.label(), "deferred-preemptible");
    for warning in v.outcome(&w.policy).warnings {
        assert!(warning.len() <= 256, "{} bytes: {warning}", warning.len());
        assert!(
            warning.contains("and ") && warning.contains(" more"),
            "{warning}"
        );
    }
    assert_eq!(crate::verdict::clip("ééé", 5), "é…");
}

/// Issue "agree with the API server", class 1: pod-level limits defaulted on resize.
#[test]
fn pod_level_limit_defaulting_turns_the_pod_guaranteed() {
    let stored = |memory_limit: bool| {
        let mut c = container("app")
            .request("cpu", "500m")
            .request("memory", "128Mi")
            .limit("cpu", "500m");
        if memory_limit {
            c = c.limit("memory", "128Mi");
        }
        let mut pod = PodBuilder::new("prod", "app")
            .node("n1")
            .container(c)
            .pod_limit("cpu", "500m")
            .running(0)
            .build();
        // What the API server stored on create (`PrepareForCreate` defaulting).
        crate::upstream::strategy::default_pod_level_resources(pod.spec.as_mut().unwrap());
        pod
    };
    let old = stored(false);
    assert_eq!(crate::upstream::qos::qos_class(&old), QosClass::Burstable);
    let mut new = stored(false);
    set_first_container(&mut new, "limits", "memory", "128Mi");
    let w = World::alone(&old);
    let v = w.classify(&old, &new);
    let Verdict::QosChange(q) = &v else {
        panic!("{v:?}")
    };
    assert_eq!((q.from, q.to), (QosClass::Burstable, QosClass::Guaranteed));
    assert!(q.also_invalid.is_none());
}

/// Class 2: QoS is judged per container; a request above its limit is upstream's error alone.
#[test]
fn request_above_limit_is_left_to_the_api_server() {
    let pod = |app1: crate::fixture::ContainerBuilder| {
        PodBuilder::new("prod", "app")
            .node("n1")
            .container(
                container("app0")
                    .both("cpu", "1")
                    .request("memory", "256Mi")
                    .limit("memory", "1Gi"),
            )
            .container(app1)
            .running(0)
            .qos_status("Burstable")
            .build()
    };
    let old = pod(container("app1").guaranteed("100m", "128Mi"));
    let new = pod(container("app1")
        .both("cpu", "100m")
        .request("memory", "1Gi")
        .limit("memory", "256Mi"));
    let w = World::alone(&old);
    let v = w.classify(&old, &new);
    let Verdict::Invalid(why) = &v else {
        panic!("{v:?}")
    };
    assert!(
        why.contains("must be less than or equal to memory limit"),
        "{why}"
    );
    assert_eq!(v.outcome(&w.policy).action, Ruling::Allow);
}

/// Class 3: an invalid resize larger than the node is not called Infeasible.
#[test]
fn invalid_resize_is_never_denied_as_infeasible() {
    let cpu = |request, limit| container("app").request("cpu", request).limit("cpu", limit);
    let old = running_pod("prod", "app", cpu("250m", "500m"))
        .qos_status("Burstable")
        .build();
    let new = running_pod("prod", "app", cpu("9", "8")).build();
    let w = World::alone(&old);
    let v = w.classify(&old, &new);
    assert!(matches!(v, Verdict::Invalid(_)), "{v:?}");
    assert_eq!(v.outcome(&w.policy).action, Ruling::Allow);
}

/// Class 4: a node that does not declare init-container resize gets upstream's refusal, not a
/// resize-guard verdict; a node that declares it gets the ordinary one.
#[test]
fn node_declared_features_are_checked_after_qos() {
    let pod = |cpu: &str| {
        PodBuilder::new("prod", "app")
            .node("n1")
            .container(container("app").guaranteed("250m", "256Mi"))
            .init_container(container("setup").guaranteed(cpu, "64Mi"))
            .running(0)
            .qos_status("Guaranteed")
            .build()
    };
    let (old, new) = (pod("100m"), pod("200m"));
    let mut w = World::alone(&old);
    let v = w.classify(&old, &new);
    let Verdict::Invalid(why) = &v else {
        panic!("{v:?}")
    };
    assert_eq!(
        why,
        "pod update requires features InPlacePodVerticalScalingInitContainers which are not available on node \"n1\""
    );
    w.ledger.declared_features =
        vec![crate::upstream::node_features::INIT_CONTAINER_RESIZE.to_owned()];
    assert!(matches!(w.classify(&old, &new), Verdict::Fits(_)));
}

/// VPA `RequestsOnly` on a Guaranteed pod raises a request above its limit: upstream reports
/// both that and the QoS change, so resize-guard explains the QoS change (its wall) and quotes
/// the other error; the repair (limit follows) is valid.
#[test]
fn requests_only_on_guaranteed_is_a_qos_change_that_also_quotes_the_limit_error() {
    let v = request_above_limit();
    let Verdict::QosChange(q) = &v else {
        panic!("{v:?}")
    };
    assert!(q.repair.is_some());
    says(
        &v,
        "Kubernetes also reports: spec.containers[0].resources.requests: Invalid value: \"500m\": must be less than or equal to cpu limit of 250m",
    );
}

/// Static pods: upstream stops at "static pods cannot be resized" without comparing classes.
#[test]
fn static_pods_are_left_to_the_api_server_even_when_qos_changes() {
    let old = app("250m")
        .annotation(crate::upstream::pod::MIRROR_ANNOTATION, "x")
        .build();
    let mut new = old.clone();
    new.spec.as_mut().unwrap().containers[0]
        .resources
        .as_mut()
        .unwrap()
        .limits = None;
    let w = World::alone(&old);
    assert_eq!(
        w.classify(&old, &new),
        Verdict::Invalid("[]: Forbidden: static pods cannot be resized".into())
    );
}

/// Pod-level `hugepages-2Mi` added by a resize that changes no cpu or memory value:
/// kube-apiserver refuses it (`validatePodLevelResourcesResize`, v1.36+), so it is Invalid in
/// upstream's words, not NoChange, on every minor; allowed either way (upstream refuses it).
#[test]
fn pod_level_hugepages_added_is_left_to_the_api_server_not_no_change() {
    let pod = |hugepages: bool| {
        let mut b = PodBuilder::new("prod", "app")
            .node("n1")
            .container(container("app").guaranteed("250m", "64Mi"));
        for (resource, q) in [("cpu", "500m"), ("memory", "128Mi")] {
            b = b.pod_request(resource, q).pod_limit(resource, q);
        }
        if hugepages {
            b = b
                .pod_request("hugepages-2Mi", "2Mi")
                .pod_limit("hugepages-2Mi", "2Mi");
        }
        b.running(0).qos_status("Guaranteed").build()
    };
    let (old, new) = (pod(false), pod(true));
    let w = World::alone(&old);
    assert_eq!(
        w.classify(&old, &old),
        Verdict::NoChange,
        "a no-op stays one"
    );
    let v = w.classify(&old, &new);
    assert_eq!(
        v,
        Verdict::Invalid(
            "spec: Forbidden: only cpu and memory resources are mutable at pod-level".into()
        )
    );
    assert_eq!(v.label(), "invalid");
    assert_eq!(v.outcome(&w.policy).action, Ruling::Allow);
    // v1.35: the gate is off; v1.33–v1.34: no pod with pod-level resources is resizable, the
    // no-op included (`ValidatePodResize` of those minors).
    let on = |minor: u32, new: &Pod| {
        let mut ctx = w.ctx();
        ctx.minor = Some(minor);
        classify(&old, new, &ctx)
    };
    let v = on(35, &new);
    assert!(
        matches!(&v, Verdict::Invalid(why) if why.contains("InPlacePodLevelResourcesVerticalScalingEnabled feature gate is disabled")),
        "{v:?}"
    );
    for resize in [&new, &old] {
        assert_eq!(
            on(34, resize),
            Verdict::Invalid(
                "[]: Forbidden: pods with pod-level resources cannot be resized".into()
            )
        );
    }
}

/// Only a `resizePolicy` changed: upstream's `ValidatePodResize` refuses it ("only cpu and
/// memory resources are mutable"), so it is Invalid too, not NoChange.
#[test]
fn a_resize_policy_alone_is_left_to_the_api_server_not_no_change() {
    let (old, w) = World::field([]);
    let mut new = old.clone();
    new.spec.as_mut().unwrap().containers[0].resize_policy =
        Some(vec![k8s_openapi::api::core::v1::ContainerResizePolicy {
            resource_name: "cpu".into(),
            restart_policy: "RestartContainer".into(),
        }]);
    assert_eq!(
        w.classify(&old, &new),
        Verdict::Invalid("spec: Forbidden: only cpu and memory resources are mutable".into())
    );
}

#[test]
fn the_victim_cap_is_stated_with_the_count_a_plan_would_take() {
    let old = app("250m").build();
    let mut pods = vec![old.clone()];
    pods.extend((0..5).map(|i| batch(&format!("small{i}"), "300m", "64Mi", 5 + i).build()));
    let mut w = World::new(&pods);
    w.policy.preemption.max_victims_per_resize = 2;
    let v = w.classify(&old, &app("250m").resize("app", "cpu", "1600m").build());
    assert_eq!(v.label(), "deferred-stuck");
    let warning = &v.outcome(&w.policy).warnings[0];
    assert!(
        warning.ends_with("and wait: preemption needs 4 victims, maxVictimsPerResize is 2"),
        "{warning}"
    );
    assert!(
        v.message()
            .contains("making room takes 4 victims, more than preemption.maxVictimsPerResize (2)"),
        "{}",
        v.message()
    );
}

#[test]
fn a_plan_that_leaves_room_for_a_racing_resize_says_so() {
    // mid (kube-system, never a victim) is Deferred growing 300m -> 700m; app needs 300m ->
    // 900m. On the kubelet's accounting b and c would do, but with one of them gone mid's
    // growth fits first and keeps the room: the plan takes a as well.
    let old = app("300m").build();
    let mid = replica_pod("kube-system", "mid", "300m", "64Mi", 1)
        .priority(500)
        .resize("c", "cpu", "700m")
        .resize_pending("Deferred", "Node didn't have enough resource: cpu")
        .build();
    let low = |name: &str, cpu: &str, start: i64| batch(name, cpu, "64Mi", start).build();
    let w = World::new(&[
        old.clone(),
        mid,
        low("a", "450m", 2),
        low("b", "450m", 3),
        low("c", "400m", 4),
    ]);
    let v = w.classify(&old, &app("300m").resize("app", "cpu", "900m").build());
    let Verdict::Deferred(d) = &v else {
        panic!("{v:?}")
    };
    let plan = d.plan.as_ref().unwrap();
    let victims: Vec<&str> = plan.victims.iter().map(|v| v.key.name.as_str()).collect();
    assert_eq!(victims, ["a", "b", "c"]);
    assert!(
        v.message()
            .contains("it also leaves room for the pending resize of kube-system/mid"),
        "{}",
        v.message()
    );
    assert!(plan.racing.is_empty());
}
