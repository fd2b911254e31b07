//! The admission adapter: decode an `AdmissionReview`, judge the resize with
//! `resize_guard_policy::admission::admit` (which decides everything: the stage's verdict, deny,
//! repair and re-judge, warnings, audit annotations), and encode the answer — allowed or denied,
//! a JSON patch for a QoS repair — plus the Event to record, as a value (the HTTP layer publishes
//! it). Nothing here does I/O, so every bad input is testable in-process; the validating
//! configuration alone still enforces Infeasible and policy denials.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::core::DynamicObject;
use kube::core::admission::{
    AdmissionRequest, AdmissionResponse, AdmissionReview, ConvertAdmissionReviewError,
};
use resize_guard_policy::Context;
use resize_guard_policy::admission::{Admission, Effect, admit, dry_run_note};
use resize_guard_policy::pod::node_name;
use resize_guard_policy::verdict::clip;

pub use resize_guard_cluster::Cluster;

pub use resize_guard_policy::admission::Stage;

/// The longest warning the API server passes on whole (longer ones are truncated).
const WARNING_LIMIT: usize = 256;

/// An Event to record on the pod, decided by the review.
#[derive(Debug, Clone, PartialEq)]
pub struct EventIntent {
    /// The pod.
    pub regarding: ObjectReference,
    /// `Warning` or `Normal`.
    pub warning: bool,
    /// `ResizeRejected` or `ResizeRepaired`.
    pub reason: &'static str,
    /// What was judged (the decision label): keeps different denials of one pod apart when
    /// Events are aggregated into series.
    pub action: String,
    /// The human message.
    pub note: String,
}

/// A finished review.
#[derive(Debug)]
pub struct Reviewed {
    /// The response body.
    pub review: AdmissionReview<DynamicObject>,
    /// Decision label for metrics and logs.
    pub decision: String,
    /// Whether the request was allowed.
    pub allowed: bool,
    /// The Event to publish, if any (never on dry-run).
    pub event: Option<EventIntent>,
    /// The AdmissionReview uid.
    pub uid: String,
}

/// A body that is not an AdmissionReview this webhook can answer (HTTP 400), one variant per
/// check that failed. `Display` names the check; a decoding error is the
/// [`source`](std::error::Error::source), so print the chain
/// ([`resize_guard_runtime::error_chain`]) to show each cause once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReviewError {
    /// The body is not JSON, or its routing fields (`apiVersion`, `request`) have the wrong
    /// shape.
    #[error("malformed AdmissionReview: not a JSON AdmissionReview")]
    NotJson(#[source] serde_json::Error),
    /// An AdmissionReview version other than `admission.k8s.io/v1`.
    #[error("unsupported AdmissionReview apiVersion {0:?}; only admission.k8s.io/v1 is served")]
    Version(String),
    /// No `request`.
    #[error("malformed AdmissionReview: no request")]
    NoRequest,
    /// An empty `request.uid` (the response could not be matched to it).
    #[error("malformed AdmissionReview: request.uid is missing")]
    NoUid,
    /// A request this webhook does not judge, which does not decode as an AdmissionReview.
    #[error("malformed AdmissionReview: the request does not decode")]
    Undecodable(#[source] serde_json::Error),
    /// A `pods/resize` UPDATE whose objects do not decode as pods.
    #[error("malformed AdmissionReview: request is not a pods/resize review")]
    NotPods(#[source] serde_json::Error),
    /// A `pods/resize` UPDATE without `object` or `oldObject`.
    #[error("malformed AdmissionReview: an UPDATE of pods/resize must carry object and oldObject")]
    NoObjects,
}

impl ReviewError {
    /// A short, stable tag for logs.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotJson(_) => "NotJson",
            Self::Version(_) => "UnsupportedVersion",
            Self::NoRequest => "NoRequest",
            Self::NoUid => "NoUid",
            Self::Undecodable(_) => "Undecodable",
            Self::NotPods(_) => "NotPods",
            Self::NoObjects => "NoObjects",
        }
    }
}

/// Answers one AdmissionReview body.
pub fn review(stage: Stage, body: &[u8], cluster: &dyn Cluster) -> Result<Reviewed, ReviewError> {
    // A first light pass reads only the routing fields (serde skips the objects without
    // building them); the typed pass then decodes the pods straight from the bytes.
    let envelope: Envelope = serde_json::from_slice(body).map_err(ReviewError::NotJson)?;
    if envelope.api_version != "admission.k8s.io/v1" {
        return Err(ReviewError::Version(envelope.api_version));
    }
    let request = envelope.request.ok_or(ReviewError::NoRequest)?;
    let uid = request.uid.clone();
    if uid.is_empty() {
        return Err(ReviewError::NoUid);
    }
    if let Some(why) = request.not_ours() {
        // Answer anything else with an allow: never block what we do not judge.
        let generic: AdmissionReview<DynamicObject> =
            serde_json::from_slice(body).map_err(ReviewError::Undecodable)?;
        // Fails only without a request, which the envelope already ruled out.
        let req: AdmissionRequest<DynamicObject> = generic
            .try_into()
            .map_err(|_: ConvertAdmissionReviewError| ReviewError::NoRequest)?;
        let mut resp = AdmissionResponse::from(&req);
        resp.warnings = Some(vec![format!("resize-guard only judges pods/resize; {why}")]);
        return Ok(finish(resp, "ignored".to_owned(), None, uid));
    }
    let typed: AdmissionReview<Pod> = serde_json::from_slice(body).map_err(ReviewError::NotPods)?;
    let req: AdmissionRequest<Pod> = typed
        .try_into()
        .map_err(|_: ConvertAdmissionReviewError| ReviewError::NoRequest)?;
    let (Some(old), Some(new)) = (req.old_object.as_ref(), req.object.as_ref()) else {
        return Err(ReviewError::NoObjects);
    };
    Ok(judge(stage, &req, old, new, cluster, uid))
}

/// The routing fields of an AdmissionReview.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    #[serde(default)]
    api_version: String,
    request: Option<EnvelopeRequest>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvelopeRequest {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    resource: GroupResource,
    #[serde(default)]
    sub_resource: String,
    #[serde(default)]
    operation: String,
}

#[derive(serde::Deserialize, Default)]
struct GroupResource {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resource: String,
}

impl EnvelopeRequest {
    /// Why this is not a `pods/resize` UPDATE, if it is not.
    fn not_ours(&self) -> Option<String> {
        let r = &self.resource;
        if !r.group.is_empty() || r.resource != "pods" || self.sub_resource != "resize" {
            let group = if r.group.is_empty() {
                String::new()
            } else {
                format!("{}/", r.group)
            };
            return Some(format!(
                "this request is for {group}{}/{}",
                r.resource, self.sub_resource
            ));
        }
        if self.operation != "UPDATE" {
            return Some(format!("operation {} is not a resize", self.operation));
        }
        None
    }
}

/// Encodes [`admit`]'s answer as an AdmissionResponse (a repair as a JSON patch), with the
/// Event to record (none on dry run).
fn judge(
    stage: Stage,
    req: &AdmissionRequest<Pod>,
    old: &Pod,
    new: &Pod,
    cluster: &dyn Cluster,
    uid: String,
) -> Reviewed {
    let Some(policy) = cluster.policy() else {
        // Fail safe: no policy read and parsed, so nothing is denied or repaired. Allowed with
        // a warning and an audit annotation saying why, never under the defaults by omission.
        let why = cluster.no_policy_reason();
        let mut resp = AdmissionResponse::from(req);
        resp.warnings = Some(vec![clip(
            &format!("resize-guard judged nothing: {why}"),
            WARNING_LIMIT,
        )]);
        resp.audit_annotations = [
            ("decision".to_owned(), "no-policy".to_owned()),
            ("reason".to_owned(), clip(&why, 1024)),
        ]
        .into();
        return finish(resp, "no-policy".to_owned(), None, uid);
    };
    let budgets = cluster.budgets();
    let ledger = node_name(old).and_then(|n| cluster.ledger(n));
    let ctx = Context {
        ledger: ledger.as_deref(),
        budgets: &budgets,
        policy: &policy,
        install_namespace: cluster.install_namespace(),
        minor: cluster.kubernetes_minor(),
    };
    let Admission {
        effect,
        decision,
        mut warnings,
        mut annotations,
        acts: _,
    } = admit(stage, old, new, &ctx);
    let mut resp = AdmissionResponse::from(req);
    let mut event = None;
    match effect {
        Effect::Allow => {}
        Effect::Deny { message, label } => {
            resp = resp.deny(&message);
            resp.result.code = 403;
            resp.result.reason = "Forbidden".into();
            event = Some(intent(new, true, "ResizeRejected", label, &message));
        }
        Effect::Repair { pod, .. } => {
            let encoded = json_patch_between(new, &pod)
                .map_err(|e| format!("resize-guard could not compute its repair: {e}"))
                .and_then(|patch| {
                    resp.clone()
                        .with_patch(patch)
                        .map_err(|e| format!("resize-guard could not encode its repair: {e}"))
                });
            match encoded {
                Ok(r) => {
                    resp = r;
                    let note = warnings.join("; ");
                    event = Some(intent(new, false, "ResizeRepaired", "qos-repair", &note));
                }
                Err(why) => {
                    annotations.remove("repair");
                    warnings.push(why);
                }
            }
        }
    }
    if req.dry_run {
        // Audit annotations never reach the client: say the decision (what-if, check).
        warnings.push(dry_run_note(stage, &decision));
        event = None;
    }
    if !warnings.is_empty() {
        resp.warnings = Some(warnings);
    }
    resp.audit_annotations = annotations;
    finish(resp, decision, event, uid)
}

fn finish(
    resp: AdmissionResponse,
    decision: String,
    event: Option<EventIntent>,
    uid: String,
) -> Reviewed {
    let allowed = resp.allowed;
    Reviewed {
        review: resp.into_review(),
        decision,
        allowed,
        event,
        uid,
    }
}

fn intent(pod: &Pod, warning: bool, reason: &'static str, action: &str, note: &str) -> EventIntent {
    EventIntent {
        regarding: pod.object_ref(&()),
        warning,
        reason,
        action: action.to_owned(),
        // events.k8s.io notes are limited to 1 kB.
        note: clip(note, 1024),
    }
}

/// RFC 6902 operations that turn `from` into `to`, limited to the pod spec.
fn json_patch_between(from: &Pod, to: &Pod) -> Result<json_patch::Patch, serde_json::Error> {
    let a = serde_json::to_value(from)?;
    let b = serde_json::to_value(to)?;
    Ok(json_patch::diff(&a, &b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(body: &[u8]) -> ReviewError {
        let cluster =
            resize_guard_cluster::FixedCluster::new(Default::default(), vec![], vec![], vec![]);
        review(Stage::Validate, body, &cluster).unwrap_err()
    }

    fn resize(request: serde_json::Value) -> Vec<u8> {
        let mut r = serde_json::json!({
            "uid": "u", "operation": "UPDATE", "subResource": "resize",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "userInfo": {}
        });
        if let (Some(r), Some(extra)) = (r.as_object_mut(), request.as_object()) {
            r.extend(extra.clone());
        }
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": r
        }))
        .unwrap()
    }

    #[test]
    fn each_bad_input_is_refused_with_its_own_variant_and_each_cause_once() {
        let e = refused(b"{not json");
        assert!(matches!(e, ReviewError::NotJson(_)), "{e:?}");
        let chain = resize_guard_runtime::error_chain(&e);
        assert_eq!(
            chain.matches("malformed AdmissionReview").count(),
            1,
            "{chain}"
        );
        assert!(chain.contains("line 1"), "the serde error follows: {chain}");

        let e = refused(br#"{"apiVersion": "admission.k8s.io/v1beta1"}"#);
        assert!(matches!(e, ReviewError::Version(ref v) if v == "admission.k8s.io/v1beta1"));
        let e = refused(br#"{"apiVersion": "admission.k8s.io/v1"}"#);
        assert!(matches!(e, ReviewError::NoRequest), "{e:?}");
        assert!(matches!(
            refused(&resize(serde_json::json!({"uid": ""}))),
            ReviewError::NoUid
        ));
        let e = refused(&resize(serde_json::json!({"object": {"spec": 7}})));
        assert!(matches!(e, ReviewError::NotPods(_)), "{e:?}");
        assert_eq!(e.reason(), "NotPods");
        assert!(matches!(
            refused(&resize(
                serde_json::json!({"object": {"metadata": {"name": "p"}}})
            )),
            ReviewError::NoObjects
        ));
    }
}
