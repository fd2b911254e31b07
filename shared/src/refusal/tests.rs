//! Every refusal's shape, per minor, against upstream's own strings: `PodResizeValidator`'s
//! (`plugin/pkg/admission/podresize/admission.go`; `expectedMsg` of its `admission_test.go`),
//! `ValidatePodResize`'s QoS rule rendered by `errors.NewInvalid` (k8s.io/apimachinery v0.37.2),
//! and resize-guard's own cause types.

use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::admission::{Effect, Stage, admit};
use crate::budget::Budgets;
use crate::fixture::{context, field_app, field_node, set_first_container};
use crate::ledger::NodeLedger;
use crate::policy::Policy;

/// The refusal `/mutate` answers the resize `old` → `new` with, alone on the field-test node
/// (1930m, 3Gi), on Kubernetes minor `minor`.
fn refusal(old: &Pod, new: &Pod, minor: Option<u32>) -> Refusal {
    let ledger = NodeLedger::new(&field_node(), std::slice::from_ref(old));
    let budgets = Budgets::default();
    let policy = Policy::default();
    let mut ctx = context(Some(&ledger), &budgets, &policy);
    ctx.minor = minor;
    match admit(Stage::Mutate, old, new, &ctx).effect {
        Effect::Deny { refusal, .. } => refusal,
        other => panic!("not denied: {other:?}"),
    }
}

fn old() -> Pod {
    field_app("250m").build()
}

fn resized(cpu: &str, memory: &str) -> Pod {
    let mut p = old();
    for which in ["requests", "limits"] {
        set_first_container(&mut p, which, "cpu", cpu);
        set_first_container(&mut p, which, "memory", memory);
    }
    p
}

fn node_capacity() -> Vec<Cause> {
    vec![Cause {
        kind: "NodeCapacity".into(),
        message: String::new(),
        field: String::new(),
    }]
}

#[test]
fn beyond_allocatable_on_v1_36_and_later_is_pod_resize_validators_answer_then_ours() {
    for minor in [Some(36), Some(37), None] {
        let r = refusal(&old(), &resized("2430m", "256Mi"), minor);
        assert_eq!((r.code, r.reason, r.kind), (403, "Forbidden", "pods"));
        assert_eq!(r.name, "app");
        assert_eq!(r.causes, node_capacity());
        let v = match minor {
            Some(m) => format!("Kubernetes v1.{m} refuses it itself"),
            None => "Kubernetes v1.36 and later refuse it themselves".to_owned(),
        };
        assert_eq!(
            r.message,
            format!(
                "pods \"app\" is forbidden: node didn't have enough allocatable resources: cpu, requested: 2430, allocatable: 1930. \
                 resize-guard: this resize can never fit on node n1: the pod would request cpu 2430m but the node's allocatable \
                 cpu is 1930m; {v} (PodResizeValidator), and no kubelet would ever apply it. Request at most 1930m cpu for the \
                 whole pod, or move the workload to a larger node."
            )
        );
    }
}

#[test]
fn both_resources_are_listed_cpu_first_in_upstreams_units() {
    let r = refusal(&old(), &resized("2430m", "4Gi"), Some(37));
    assert!(
        r.message.starts_with(
            "pods \"app\" is forbidden: node didn't have enough allocatable resources: cpu, requested: 2430, allocatable: 1930; memory, requested: 4294967296, allocatable: 3221225472. resize-guard: "
        ),
        "{}",
        r.message
    );
    assert!(
        r.message.contains("the pod would request cpu 2430m but the node's allocatable cpu is 1930m, and memory 4Gi but the node's allocatable memory is 3Gi")
            && r.message.contains("Request at most 1930m cpu and 3Gi memory for the whole pod"),
        "{}",
        r.message
    );
}

#[test]
fn beyond_allocatable_before_v1_36_keeps_the_shape_and_says_what_the_kubelet_does() {
    for minor in [33, 34, 35] {
        let r = refusal(&old(), &resized("2430m", "256Mi"), Some(minor));
        assert_eq!((r.code, r.reason, r.kind), (403, "Forbidden", "pods"));
        assert_eq!(r.causes, node_capacity());
        assert_eq!(
            r.message,
            format!(
                "pods \"app\" is forbidden: resize-guard: this resize can never fit on node n1: the pod would request cpu 2430m \
                 but the node's allocatable cpu is 1930m; Kubernetes v1.{minor} would store it and the kubelet would mark it \
                 Infeasible (\"Node didn't have enough capacity: cpu, requested: 2430, capacity: 1930\") and never apply it, \
                 leaving spec and status apart. Request at most 1930m cpu for the whole pod, or move the workload to a larger node."
            )
        );
        assert!(
            !r.message.contains("allocatable resources"),
            "not upstream's words on v1.{minor}"
        );
    }
}

#[test]
fn the_kubelet_names_memory_first() {
    let r = refusal(&old(), &resized("2430m", "4Gi"), Some(35));
    assert!(
        r.message.contains("(\"Node didn't have enough capacity: memory, requested: 4294967296, capacity: 3221225472\")"),
        "{}",
        r.message
    );
}

/// What upstream answers for the QoS rule alone: `errors.NewInvalid(Pod, name,
/// [field.Invalid(spec, "Guaranteed", QOS_RULE)])` (the same text the fidelity suite records
/// from a real kube-apiserver without resize-guard).
const UPSTREAM_QOS: &str = "Pod \"app\" is invalid: spec: Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing";

#[test]
fn a_qos_change_is_validations_answer_then_ours_on_every_minor() {
    // Limits raised, requests kept: Guaranteed → Burstable and nothing else invalid.
    let mut new = old();
    set_first_container(&mut new, "limits", "cpu", "500m");
    for minor in [Some(33), Some(34), Some(35), Some(36), Some(37), None] {
        let r = refusal(&old(), &new, minor);
        assert_eq!((r.code, r.reason, r.kind), (422, "Invalid", "Pod"));
        assert_eq!(r.name, "app");
        assert_eq!(
            r.causes[0],
            Cause {
                kind: "FieldValueInvalid".into(),
                message: "Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing".into(),
                field: "spec".into(),
            }
        );
        assert_eq!(r.causes.len(), 2);
        assert_eq!(r.causes[1].kind, "resize-guard.io/Explanation");
        assert_eq!(r.causes[1].field, "spec");
        assert!(
            r.message.ends_with(&r.causes[1].message)
                && r.causes[1]
                    .message
                    .starts_with("resize-guard: this resize would change"),
            "{r:?}"
        );
        assert!(
            r.message.starts_with(&format!(
                "{UPSTREAM_QOS}. resize-guard: this resize would change the pod's QoS class from Guaranteed to Burstable"
            )),
            "{}",
            r.message
        );
    }
}

#[test]
fn a_qos_change_with_other_errors_lists_them_all_in_validations_order() {
    // A request raised above its limit: `validatePodMetadataAndSpec` reports it before the QoS
    // rule; `ToAggregate` prints both in brackets.
    let mut new = old();
    set_first_container(&mut new, "requests", "cpu", "500m");
    let r = refusal(&old(), &new, Some(37));
    let limit = "Invalid value: \"500m\": must be less than or equal to cpu limit of 250m";
    let qos = "Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing";
    assert_eq!(
        r.causes[..2],
        [
            Cause {
                kind: "FieldValueInvalid".into(),
                message: limit.into(),
                field: "spec.containers[0].resources.requests".into(),
            },
            Cause {
                kind: "FieldValueInvalid".into(),
                message: qos.into(),
                field: "spec".into(),
            },
        ]
    );
    assert_eq!(r.causes[2].kind, cause::EXPLANATION);
    assert!(
        r.message.starts_with(&format!(
            "Pod \"app\" is invalid: [spec.containers[0].resources.requests: {limit}, spec: {qos}]. resize-guard: "
        )),
        "{}",
        r.message
    );
}

#[test]
fn the_aggregate_drops_repeated_errors_but_the_causes_keep_them() {
    let e = |f: &str, d: &str| Invalidity {
        field: f.into(),
        detail: d.into(),
    };
    let errors = [
        e(
            "spec",
            "Forbidden: only cpu and memory resources are mutable",
        ),
        e(
            "spec",
            "Forbidden: only cpu and memory resources are mutable",
        ),
    ];
    assert_eq!(
        aggregate(&errors),
        "spec: Forbidden: only cpu and memory resources are mutable"
    );
    assert_eq!(cause_type(&errors[0].detail), "FieldValueForbidden");
    assert_eq!(cause_type("Required value: x"), "FieldValueRequired");
    assert_eq!(
        cause_type("Unsupported value: \"x\""),
        "FieldValueNotSupported"
    );
}

#[test]
fn go_renders_strings_as_upstream_does() {
    assert_eq!(go_json_string("Guaranteed"), "\"Guaranteed\"");
    assert_eq!(go_json_string("<a&b>"), "\"\\u003ca\\u0026b\\u003e\"");
    assert_eq!(go_quote("a\"b"), "\"a\\\"b\"");
}

#[test]
fn resize_guards_own_refusals_carry_their_own_cause_types() {
    let r = Refusal::own(
        cause::DEFERRED_STUCK,
        "resize-guard: node n1 is short",
        "app",
    );
    assert_eq!((r.code, r.reason, r.kind), (403, "Forbidden", "pods"));
    assert_eq!(r.message, "resize-guard: node n1 is short");
    assert_eq!(r.causes[0].kind, "resize-guard.io/DeferredStuck");
    for c in [
        cause::MEMORY_BELOW_USAGE,
        cause::DEFERRED_STUCK,
        cause::INVALID_QUANTITY,
        cause::EXPLANATION,
    ] {
        assert!(c.starts_with("resize-guard.io/"), "{c}");
    }
}
