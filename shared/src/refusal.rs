//! The shape of a refusal: the HTTP code, `reason`, `details` (name, kind, causes) and message
//! the webhook answers a denied resize with (`webhook/src/review.rs` encodes it as the
//! AdmissionResponse's `status`). kube-apiserver passes a webhook's status on whole and only
//! prefixes its message with `admission webhook "<name>" denied the request: `
//! (k8s.io/apiserver `pkg/admission/plugin/webhook/errors/statuserror.go`, `ToStatusErr`).
//!
//! resize-guard's mutating webhook runs before kube-apiserver's own checks, so whatever it
//! refuses that Kubernetes would refuse too, it refuses *instead of* Kubernetes; it answers in
//! Kubernetes' shape, with upstream's message first and resize-guard's explanation after it
//! (joined by [`THEN`]):
//!
//! | refusal | minors | code, reason | details | message starts |
//! |---|---|---|---|---|
//! | beyond allocatable | v1.36+ | 403 `Forbidden` | kind `pods`, cause `NodeCapacity` | `PodResizeValidator`'s: `pods "<name>" is forbidden: node didn't have enough allocatable resources: …` |
//! | beyond allocatable | v1.33–v1.35 | 403 `Forbidden` | kind `pods`, cause `NodeCapacity` | `pods "<name>" is forbidden: resize-guard: …` (the API server stores it there, the kubelet marks it Infeasible) |
//! | QoS class change | all | 422 `Invalid` | kind `Pod`, cause `FieldValueInvalid` at `spec` (+ any other validation error upstream reports with it), then `resize-guard.io/Explanation` at `spec` | `ValidatePodResize`'s: `Pod "<name>" is invalid: spec: Invalid value: "<class>": Pod QOS Class may not change as a result of resizing` |
//! | resize-guard's own rules | all | 403 `Forbidden` | kind `pods`, a `resize-guard.io/…` cause ([`cause`]) | `resize-guard: …` |//!
//! **Where resize-guard's capacity rule and upstream's can still answer differently.** The rule
//! itself is upstream's on each minor ([`crate::upstream::capacity`]: `PodResizeValidator`'s exact
//! comparison on v1.36+, the kubelet's rounded one on v1.33–v1.35). What differs is what it
//! reads and when it runs:
//! - *The node's allocatable* comes from resize-guard's cluster view, kube-apiserver's from its
//!   own node informer; for a moment after a node's allocatable changes they can disagree.
//!   resize-guard then refuses with the numbers it has (a resize the API server would now
//!   admit), or lets through one the API server then refuses itself, in its own words only.
//! - *A node that reports no allocatable*: resize-guard judges nothing (`Verdict::Skipped`);
//!   on v1.36+ `PodResizeValidator` compares with zero and refuses in its own words.
//! - *A node labelled with another OS than linux*: `PodResizeValidator` answers
//!   `UnsupportedPlatform` before it compares capacity; resize-guard does not read the label,
//!   so a resize also beyond that node's allocatable gets `NodeCapacity` from it instead.
//! - *A resize built-in validation or `NodeDeclaredFeatureValidator` refuses anyway*:
//!   resize-guard steps aside (`Verdict::Invalid`) and upstream's refusal reaches the user as
//!   it is; validation runs before the validating admission plugins, so that is upstream's
//!   order too. A QoS change is refused before capacity for the same reason.

use k8s_openapi::api::core::v1::Pod;

use crate::upstream::capacity::{NODE_CAPACITY, node_capacity_error};
use crate::upstream::validation::Invalidity;
use crate::verdict::{Infeasibility, QosChange};

/// Between upstream's message and resize-guard's explanation.
pub const THEN: &str = ". ";

/// `ValidatePodResize`'s detail for the QoS rule (`pkg/apis/core/validation/validation.go`).
pub const QOS_RULE: &str = "Pod QOS Class may not change as a result of resizing";

/// The cause types of the refusals resize-guard makes on its own (Kubernetes would let these
/// resizes through): stable, so that clients can tell them apart.
pub mod cause {
    /// The memory rule: a memory limit lowered below what the container uses
    /// (`memory.decrease.belowUsage: reject`).
    pub const MEMORY_BELOW_USAGE: &str = "resize-guard.io/MemoryBelowUsage";
    /// A Deferred resize no preemption can make room for
    /// (`feasibility.rejectStuckDeferred: true`).
    pub const DEFERRED_STUCK: &str = "resize-guard.io/DeferredStuck";
    /// A cpu or memory quantity that is not valid syntax (only a request that did not come
    /// through kube-apiserver, which refuses it while decoding, can carry one).
    pub const INVALID_QUANTITY: &str = "resize-guard.io/InvalidQuantity";
    /// Not a refusal of its own: resize-guard's explanation, the last cause of a refusal in
    /// `ValidatePodResize`'s shape (422 Invalid), after upstream's causes, because kubectl
    /// prints such a refusal's causes and not its message.
    pub const EXPLANATION: &str = "resize-guard.io/Explanation";
}

/// One `metav1.StatusCause`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `reason`: the cause type (`NodeCapacity`, `FieldValueInvalid`, `resize-guard.io/…`).
    pub kind: String,
    /// `message`.
    pub message: String,
    /// `field`.
    pub field: String,
}

/// A refusal, as the `metav1.Status` the webhook answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// HTTP code: 403 or 422.
    pub code: u16,
    /// `reason`: `Forbidden` or `Invalid`.
    pub reason: &'static str,
    /// The whole message (upstream's first where it has one).
    pub message: String,
    /// `details.name`: the pod.
    pub name: String,
    /// `details.kind`: `pods` for a Forbidden (upstream's `NewForbidden` puts the resource
    /// there), `Pod` for an Invalid (`NewInvalid` puts the kind).
    pub kind: &'static str,
    /// `details.causes`.
    pub causes: Vec<Cause>,
}

impl Refusal {
    /// A resize larger than the node's allocatable, refused as Kubernetes refuses it on the
    /// verdict's minor: on v1.36+ exactly `PodResizeValidator`'s answer
    /// (`plugin/pkg/admission/podresize/admission.go`, `resizeValidationError` over
    /// `admission.NewForbidden`), then `explanation`; on v1.33–v1.35, where the API server
    /// would store it, the same code, reason and `NodeCapacity` cause (what a client written
    /// for v1.36+ — the VPA updater, upstream's e2e `pod-resize-scheduler-tests` — recognises
    /// as "larger than the node"), in `NewForbidden`'s form around `explanation` alone.
    pub fn node_capacity(i: &Infeasibility, explanation: &str, name: &str) -> Refusal {
        let error = if i.refused_by_api_server() && !i.beyond.is_empty() {
            format!("{}{THEN}{explanation}", node_capacity_error(&i.beyond))
        } else {
            explanation.to_owned()
        };
        Refusal::forbidden(name, &error, NODE_CAPACITY)
    }

    /// A QoS class change, refused as `ValidatePodResize` refuses it
    /// (`pkg/apis/core/validation/validation.go`: `field.Invalid(specPath,
    /// newPod.Status.QOSClass, …)`, where the status is the stored one, which the resize
    /// strategy keeps; then `errors.NewInvalid` of k8s.io/apimachinery `pkg/api/errors`), with
    /// every other validation error upstream reports with it, then `explanation`.
    pub fn qos(q: &QosChange, explanation: &str, old: &Pod, name: &str) -> Refusal {
        let class = old
            .status
            .as_ref()
            .and_then(|s| s.qos_class.as_deref())
            .unwrap_or_default();
        let qos = Invalidity {
            field: "spec".to_owned(),
            detail: format!("Invalid value: {}: {QOS_RULE}", go_json_string(class)),
        };
        let mut errors: Vec<Invalidity> = Vec::new();
        match &q.also_invalid {
            Some(others) => {
                let at = others.before_qos.min(others.errors.len());
                errors.extend_from_slice(&others.errors[..at]);
                errors.push(qos);
                errors.extend_from_slice(&others.errors[at..]);
            }
            None => errors.push(qos),
        }
        // kubectl prints an Invalid refusal from its causes alone, never its message
        // (`checkErr`, k8s.io/kubectl `pkg/cmd/util/helpers.go`): the explanation follows
        // upstream's causes as one more, of resize-guard's own type, at `spec`.
        let causes = errors
            .iter()
            .map(|e| Cause {
                kind: cause_type(&e.detail).to_owned(),
                message: e.detail.clone(),
                field: e.field.clone(),
            })
            .chain([Cause {
                kind: cause::EXPLANATION.to_owned(),
                message: explanation.to_owned(),
                field: "spec".to_owned(),
            }])
            .collect();
        Refusal {
            code: 422,
            reason: "Invalid",
            message: format!(
                "Pod {} is invalid: {}{THEN}{explanation}",
                go_quote(name),
                aggregate(&errors)
            ),
            name: name.to_owned(),
            kind: "Pod",
            causes,
        }
    }

    /// A refusal of resize-guard's own ([`cause`]): 403 Forbidden, `message` as it is.
    pub fn own(cause: &'static str, message: &str, name: &str) -> Refusal {
        Refusal {
            code: 403,
            reason: "Forbidden",
            message: message.to_owned(),
            name: name.to_owned(),
            kind: "pods",
            causes: vec![Cause {
                kind: cause.to_owned(),
                message: String::new(),
                field: String::new(),
            }],
        }
    }

    /// `admission.NewForbidden` for a pod (k8s.io/apiserver `pkg/admission/errors.go`;
    /// `errors.NewForbidden` of k8s.io/apimachinery `pkg/api/errors/errors.go`) with one cause.
    fn forbidden(name: &str, error: &str, cause: &'static str) -> Refusal {
        Refusal::own(
            cause,
            &format!("pods {} is forbidden: {error}", go_quote(name)),
            name,
        )
    }
}

/// The name upstream's errors give the pod: the request's (`extractResourceName`,
/// k8s.io/apiserver `pkg/admission/errors.go`: the object's name, `Unknown` without one).
pub fn pod_name(new: &Pod, old: &Pod) -> String {
    [new, old]
        .iter()
        .find_map(|p| p.metadata.name.clone().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| "Unknown".to_owned())
}

/// `field.ErrorList.ToAggregate().Error()` (k8s.io/apimachinery
/// `pkg/util/validation/field/errors.go`, `pkg/util/errors/errors.go`): duplicates dropped,
/// one error bare, several as `[a, b]`.
fn aggregate(errors: &[Invalidity]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        let s = e.to_string();
        if !seen.contains(&s) {
            seen.push(s);
        }
    }
    match seen.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", seen.join(", ")),
    }
}

/// The cause type of a `field.Error` from the words its `ErrorBody` starts with
/// (`ErrorType.String()`, k8s.io/apimachinery `pkg/util/validation/field/errors.go`).
fn cause_type(detail: &str) -> &'static str {
    let head = detail.split(':').next().unwrap_or_default();
    match head {
        "Invalid value" => "FieldValueInvalid",
        "Forbidden" => "FieldValueForbidden",
        "Required value" => "FieldValueRequired",
        "Unsupported value" => "FieldValueNotSupported",
        "Not found" => "FieldValueNotFound",
        "Duplicate value" => "FieldValueDuplicate",
        "Too long" => "FieldValueTooLong",
        "Too many" => "FieldValueTooMany",
        "Too few" => "FieldValueTooFew",
        "Too short" => "FieldValueTooShort",
        _ => "InternalError",
    }
}

/// Go's `%q` of a string (`strconv.Quote`) for the characters a Kubernetes name may hold, with
/// `"` and `\` escaped.
fn go_quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Go's `json.Marshal` of a string: `field.Error` renders a named string type (`PodQOSClass`)
/// that way; it escapes `<`, `>` and `&` where serde_json does not.
fn go_json_string(s: &str) -> String {
    serde_json::to_string(s)
        .unwrap_or_else(|_| go_quote(s))
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

#[cfg(test)]
mod tests;
