//! Each stage's answer: which verdicts each stage acts on, a repair re-judged before it is
//! offered, and the annotations that go with each.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;
use crate::budget::Budgets;
use crate::fixture::{context, field_app, field_node, node, replica_pod};
use crate::ledger::NodeLedger;
use crate::policy::{OnQosChange, Policy};

/// The field test's app at `cpu`.
fn app(cpu: &str) -> Pod {
    field_app(cpu).build()
}

/// `pod` with the first container's `requests.cpu` set to `cpu` (a requests-only resize).
fn requests_only(pod: &Pod, cpu: &str) -> Pod {
    let mut p = pod.clone();
    let r = p.spec.as_mut().unwrap().containers[0]
        .resources
        .get_or_insert_with(Default::default);
    r.requests
        .get_or_insert_with(BTreeMap::new)
        .insert("cpu".into(), Quantity(cpu.into()));
    p
}

/// How `stage` answers the resize from `old`, alone on the field-test node, to `new`.
fn judge(stage: Stage, old: &Pod, new: &Pod, policy: &Policy) -> Admission {
    judge_with(stage, old, new, policy, &crate::usage::Evidence::NotFetched)
}

/// [`judge`] with what is known of the pod's usage.
fn judge_with(
    stage: Stage,
    old: &Pod,
    new: &Pod,
    policy: &Policy,
    usage: &crate::usage::Evidence,
) -> Admission {
    let ledger = NodeLedger::new(&field_node(), std::slice::from_ref(old));
    let budgets = Budgets::default();
    let ctx = context(Some(&ledger), &budgets, policy);
    admit_with(stage, old, new, &ctx, usage)
}

/// The field app's requests-only resize to `cpu`, answered at `/mutate` by a policy that repairs
/// a QoS change instead of denying it.
fn repaired_at_mutate(cpu: &str) -> Admission {
    let old = app("250m");
    let mut policy = Policy::default();
    policy.qos.on_change = OnQosChange::Repair;
    judge(Stage::Mutate, &old, &requests_only(&old, cpu), &policy)
}

#[test]
fn a_qos_change_is_denied_at_mutate_and_only_annotated_at_validate() {
    let old = app("250m");
    let new = requests_only(&old, "400m");
    let policy = Policy::default();
    let m = judge(Stage::Mutate, &old, &new, &policy);
    assert!(m.acts);
    assert!(
        matches!(
            &m.effect,
            Effect::Deny {
                label: "qos-change",
                ..
            }
        ),
        "{m:?}"
    );
    assert_eq!(m.annotations["qos"], "Guaranteed->Burstable");
    assert_eq!(m.annotations["decision"], m.decision);
    let v = judge(Stage::Validate, &old, &new, &policy);
    assert!(!v.acts);
    assert_eq!(v.effect, Effect::Allow);
    assert!(v.warnings.is_empty());
}

#[test]
fn a_repair_is_offered_with_its_description_when_the_repaired_resize_fits() {
    let m = repaired_at_mutate("400m");
    let Effect::Repair { pod, describe } = &m.effect else {
        panic!("{m:?}")
    };
    let limits = pod.spec.as_ref().unwrap().containers[0]
        .resources
        .as_ref()
        .unwrap()
        .limits
        .clone()
        .unwrap();
    assert_eq!(limits["cpu"].0, "400m");
    assert_eq!(m.decision, "qos-repaired");
    assert_eq!(m.annotations["repair"], *describe);
    assert!(m.warnings[0].contains("keep QoS class Guaranteed"), "{m:?}");
}

#[test]
fn a_repair_that_would_not_fit_the_node_is_denied_instead() {
    // Node of 1930m: the repaired 3-CPU resize is larger than allocatable.
    let m = repaired_at_mutate("3");
    assert!(matches!(&m.effect, Effect::Deny { .. }), "{m:?}");
    assert!(
        m.decision.starts_with("qos-repaired-then-"),
        "{}",
        m.decision
    );
    assert!(m.warnings.is_empty());
    assert!(!m.annotations.contains_key("repair"));
}

#[test]
fn a_resize_that_fits_is_allowed_by_both_stages_with_its_label() {
    let old = app("250m");
    let new = app("300m");
    let policy = Policy::default();
    for stage in [Stage::Mutate, Stage::Validate] {
        let a = judge(stage, &old, &new, &policy);
        assert_eq!(a.effect, Effect::Allow, "{stage:?}");
        assert_eq!(a.annotations["decision"], a.decision);
    }
    assert_eq!(Stage::Mutate.name(), "mutate");
    assert_eq!(Stage::Validate.name(), "validate");
}

/// The default install calls only `/mutate`: it must say everything `/validate` would.
#[test]
fn the_mutating_stage_alone_warns_of_a_deferred_resize_and_refuses_a_stuck_one_on_request() {
    let old = app("1");
    let new = app("1500m");
    let low = replica_pod("batch", "low", "800m", "256Mi", 0)
        .priority(10)
        .build();
    let ledger = NodeLedger::new(&node("n1", "2", "3Gi"), [&old, &low]);
    let budgets = Budgets::default();
    let judge = |stage, policy: &Policy| {
        admit(stage, &old, &new, &context(Some(&ledger), &budgets, policy))
    };
    let policy = Policy::default();
    let (m, v) = (
        judge(Stage::Mutate, &policy),
        judge(Stage::Validate, &policy),
    );
    assert!(m.acts && v.acts);
    assert_eq!(m, v, "both stages answer a Deferred resize alike");
    assert_eq!(m.effect, Effect::Allow);
    assert_eq!(m.decision, "deferred-preemptible");
    assert_eq!(m.annotations["victims"], "batch/low");
    assert!(m.warnings.iter().any(|w| w.contains("batch/low")), "{m:?}");

    // No strictly-lower-priority pod: stuck, and refused when the policy asks for that.
    let mut stuck = Policy::default();
    stuck.feasibility.reject_stuck_deferred = true;
    stuck.preemption.protected_namespaces.push("batch".into());
    let m = judge(Stage::Mutate, &stuck);
    assert!(
        matches!(&m.effect, Effect::Deny { label, .. } if label.starts_with("deferred")),
        "{m:?}"
    );
}

#[test]
fn a_validation_error_is_left_to_the_api_server_by_both_stages() {
    let old = app("250m");
    let mut new = old.clone();
    new.spec.as_mut().unwrap().containers[0].name = "renamed".into();
    let policy = Policy::default();
    for stage in [Stage::Mutate, Stage::Validate] {
        let a = judge(stage, &old, &new, &policy);
        assert!(!a.acts, "{stage:?}: {a:?}");
        assert_eq!(a.effect, Effect::Allow);
    }
}

#[test]
fn the_dry_run_note_reads_back_as_stage_and_decision() {
    let note = dry_run_note(Stage::Mutate, "deferred-preemptible");
    assert_eq!(
        note,
        "resize-guard (dry run): mutate decision deferred-preemptible"
    );
    assert_eq!(
        parse_dry_run_note(&note),
        Some(("mutate", "deferred-preemptible"))
    );
    assert_eq!(
        parse_dry_run_note("resize-guard: node n lacks cpu 1m"),
        None
    );
}

mod memory {
    //! The memory rule inside a stage's answer: judged after everything else lets the resize
    //! through, on the pod as it will be admitted.

    use std::time::Duration;

    use super::*;
    use crate::policy::{BelowUsage, Mode};
    use crate::usage::{Evidence, PodUsage};

    fn lowered(pod: &Pod, memory: &str) -> Pod {
        let mut p = pod.clone();
        let r = p.spec.as_mut().unwrap().containers[0]
            .resources
            .get_or_insert_with(Default::default);
        for list in [&mut r.requests, &mut r.limits] {
            list.get_or_insert_with(BTreeMap::new)
                .insert("memory".into(), Quantity(memory.into()));
        }
        p
    }

    fn used(mib: i64) -> Evidence {
        Evidence::Measured(PodUsage {
            containers: [("app".to_owned(), mib << 20)].into(),
            age: Duration::from_secs(5),
            window: "10s".into(),
        })
    }

    #[test]
    fn a_lowered_limit_asks_for_usage_and_a_cpu_resize_does_not() {
        let old = app("250m");
        let policy = Policy::default();
        let first = judge(Stage::Mutate, &old, &lowered(&old, "100Mi"), &policy);
        assert!(first.wants_usage, "{first:?}");
        let cpu = judge(Stage::Mutate, &old, &app("300m"), &policy);
        assert!(!cpu.wants_usage && !cpu.annotations.contains_key("memory"));
    }

    #[test]
    fn below_usage_is_denied_with_the_numbers_and_above_is_admitted() {
        let old = app("250m");
        let new = lowered(&old, "100Mi");
        let policy = Policy::default();
        for stage in [Stage::Mutate, Stage::Validate] {
            let a = judge_with(stage, &old, &new, &policy, &used(150));
            let Effect::Deny { refusal, label } = &a.effect else {
                panic!("{a:?}")
            };
            assert_eq!(*label, "memory-below-usage");
            let message = &refusal.message;
            assert!(message.contains("working set 150Mi"), "{message}");
            assert_eq!((refusal.code, refusal.reason), (403, "Forbidden"));
            assert_eq!(
                refusal.causes[0].kind,
                crate::refusal::cause::MEMORY_BELOW_USAGE
            );
            assert_eq!(a.decision, "memory-below-usage");
            assert!(!a.wants_usage);
            assert_eq!(
                a.annotations["memory"],
                "container \"app\" 256Mi->100Mi usage 150Mi needed 165Mi"
            );
        }
        let fine = judge_with(Stage::Mutate, &old, &new, &policy, &used(80));
        assert_eq!(fine.effect, Effect::Allow);
        assert_eq!(fine.decision, "fits");
    }

    #[test]
    fn audit_mode_and_warn_admit_with_a_warning() {
        let old = app("250m");
        let new = lowered(&old, "100Mi");
        let audit = Policy {
            mode: Mode::Audit,
            ..Policy::default()
        };
        let a = judge_with(Stage::Mutate, &old, &new, &audit, &used(150));
        assert_eq!(a.effect, Effect::Allow);
        assert_eq!(a.decision, "would-deny:memory-below-usage");
        assert!(a.warnings[0].contains("(audit mode) would deny"), "{a:?}");
        let mut warn = Policy::default();
        warn.memory.decrease.below_usage = BelowUsage::Warn;
        let w = judge_with(Stage::Mutate, &old, &new, &warn, &used(150));
        assert_eq!(w.effect, Effect::Allow);
        assert_eq!(w.decision, "fits");
        assert!(w.warnings[0].contains("below usage plus headroom"), "{w:?}");
    }

    #[test]
    fn no_metrics_admits_with_a_warning_saying_so() {
        let old = app("250m");
        let new = lowered(&old, "100Mi");
        let down = Evidence::Unavailable("metrics.k8s.io did not answer within 1s".into());
        let a = judge_with(Stage::Mutate, &old, &new, &Policy::default(), &down);
        assert_eq!(a.effect, Effect::Allow);
        assert!(a.warnings[0].contains("within 1s"), "{a:?}");
        assert!(a.annotations["memory"].starts_with("unjudged: "));
    }

    #[test]
    fn a_refusal_for_another_reason_is_not_judged_for_memory() {
        // Infeasible: 3 cpus on a 1930m node; the kubelet would never get to the memory.
        let old = app("250m");
        let mut new = lowered(&old, "100Mi");
        let c = &mut new.spec.as_mut().unwrap().containers[0];
        let r = c.resources.as_mut().unwrap();
        for list in [&mut r.requests, &mut r.limits] {
            list.as_mut()
                .unwrap()
                .insert("cpu".into(), Quantity("3".into()));
        }
        let a = judge_with(Stage::Mutate, &old, &new, &Policy::default(), &used(150));
        assert!(
            matches!(
                a.effect,
                Effect::Deny {
                    label: "infeasible",
                    ..
                }
            ),
            "{a:?}"
        );
        assert!(!a.annotations.contains_key("memory"));
    }
}

/// The field app on `n1` beside `batch/filler` and `prod/cache` (800m each, both lower
/// priority, both owned by a ReplicaSet), resized to 1900m: only preempting both makes room.
fn two_namespace_victims(audience: Audience<'_>) -> (Admission, Verdict) {
    let old = app("250m");
    let new = app("1900m");
    let worker = |namespace, name| replica_pod(namespace, name, "800m", "256Mi", 5).build();
    let (filler, cache) = (worker("batch", "filler"), worker("prod", "cache"));
    let ledger = NodeLedger::new(&field_node(), &[old.clone(), filler, cache]);
    let budgets = Budgets::default();
    let policy = Policy::default();
    let ctx = context(Some(&ledger), &budgets, &policy);
    let admission = admit_for(
        Stage::Mutate,
        &old,
        &new,
        &ctx,
        &crate::usage::Evidence::NotFetched,
        audience,
    );
    (admission, classify(&old, &new, &ctx))
}

#[test]
fn victims_in_other_namespaces_are_counted_not_named_to_the_pods_namespace() {
    let (cluster, verdict) = two_namespace_victims(Audience::Cluster);
    assert_eq!(cluster.decision, "deferred-preemptible");
    let everyone = format!(
        "{} {}",
        cluster.warnings.join(" "),
        cluster.annotations["victims"]
    );
    assert!(
        everyone.contains("batch/filler") && everyone.contains("prod/cache"),
        "{everyone}"
    );

    let (prod, _) = two_namespace_victims(Audience::Namespace("prod"));
    assert_eq!(prod.decision, cluster.decision);
    assert_eq!(
        prod.warnings,
        [
            "resize-guard: node n1 lacks cpu 1570m; the resize will be Deferred; resize-guard will preempt prod/cache and 1 pod in another namespace"
        ],
    );
    assert_eq!(
        prod.annotations["victims"],
        "prod/cache and 1 pod in another namespace"
    );
    let message = verdict.message_for(Audience::Namespace("prod"));
    assert!(
        message.contains("will preempt: prod/cache (priority 0) and 1 pod in another namespace"),
        "{message}"
    );
    for text in prod
        .warnings
        .iter()
        .chain(prod.annotations.values())
        .chain([&message])
    {
        assert!(
            !text.contains("batch") && !text.contains("filler"),
            "{text}"
        );
    }

    let (unknown, _) = two_namespace_victims(Audience::Unknown);
    assert_eq!(unknown.annotations["victims"], "2 pods");
    for text in unknown.warnings.iter().chain(unknown.annotations.values()) {
        assert!(
            !text.contains("prod/cache") && !text.contains("batch/"),
            "{text}"
        );
    }
}
