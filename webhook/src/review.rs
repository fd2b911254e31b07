//! The admission adapter: decode an `AdmissionReview`, judge the resize with
//! `resize_guard_policy::admission::admit` (which decides everything: the stage's verdict, deny,
//! repair and re-judge, warnings, audit annotations), and encode the answer — allowed or denied,
//! a JSON patch for a QoS repair — plus the Event to record, as a value (the HTTP layer publishes
//! it). Nothing here does I/O, so every bad input is testable in-process; the validating
//! configuration alone still enforces Infeasible and policy denials.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::Pod;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use resize_guard_policy::Context;
use resize_guard_policy::admission::{Admission, Effect, admit};
use resize_guard_policy::pod::node_name;
use resize_guard_policy::verdict::clip;

pub use resize_guard_cluster::{Cluster, FixedCluster};

pub use resize_guard_policy::admission::Stage;

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

/// A body that is not an AdmissionReview this webhook can answer.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// Not JSON, or not an AdmissionReview.
    #[error("malformed AdmissionReview: {0}")]
    Malformed(String),
    /// An AdmissionReview version other than `admission.k8s.io/v1`.
    #[error("unsupported AdmissionReview apiVersion {0:?}; only admission.k8s.io/v1 is served")]
    Version(String),
}

/// Answers one AdmissionReview body.
pub fn review(stage: Stage, body: &[u8], cluster: &dyn Cluster) -> Result<Reviewed, ReviewError> {
    // A first light pass reads only the routing fields (serde skips the objects without
    // building them); the typed pass then decodes the pods straight from the bytes.
    let envelope: Envelope =
        serde_json::from_slice(body).map_err(|e| ReviewError::Malformed(e.to_string()))?;
    if envelope.api_version != "admission.k8s.io/v1" {
        return Err(ReviewError::Version(envelope.api_version));
    }
    let request = envelope
        .request
        .ok_or_else(|| ReviewError::Malformed("no request".into()))?;
    let uid = request.uid.clone();
    if uid.is_empty() {
        return Err(ReviewError::Malformed("request.uid is missing".into()));
    }
    if let Some(why) = request.not_ours() {
        // Answer anything else with an allow: never block what we do not judge.
        let generic: AdmissionReview<DynamicObject> =
            serde_json::from_slice(body).map_err(|e| ReviewError::Malformed(e.to_string()))?;
        let req: AdmissionRequest<DynamicObject> = generic.try_into().map_err(
            |e: kube::core::admission::ConvertAdmissionReviewError| {
                ReviewError::Malformed(e.to_string())
            },
        )?;
        let mut resp = AdmissionResponse::from(&req);
        resp.warnings = Some(vec![format!("resize-guard only judges pods/resize; {why}")]);
        return Ok(finish(resp, "ignored".to_owned(), None, uid));
    }
    let typed: AdmissionReview<Pod> = serde_json::from_slice(body)
        .map_err(|e| ReviewError::Malformed(format!("request is not a pods/resize review: {e}")))?;
    let req: AdmissionRequest<Pod> =
        typed
            .try_into()
            .map_err(|e: kube::core::admission::ConvertAdmissionReviewError| {
                ReviewError::Malformed(e.to_string())
            })?;
    let (Some(old), Some(new)) = (req.old_object.as_ref(), req.object.as_ref()) else {
        return Err(ReviewError::Malformed(
            "an UPDATE of pods/resize must carry object and oldObject".into(),
        ));
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
    let policy = cluster.policy();
    let budgets = cluster.budgets();
    let ledger = node_name(old).and_then(|n| cluster.ledger(n));
    let ctx = Context {
        ledger: ledger.as_deref(),
        budgets: &budgets,
        policy: &policy,
        install_namespace: cluster.install_namespace(),
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
    if !warnings.is_empty() {
        resp.warnings = Some(warnings);
    }
    resp.audit_annotations = annotations;
    if req.dry_run {
        event = None;
    }
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
        regarding: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        },
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
