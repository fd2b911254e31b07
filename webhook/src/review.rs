//! The admission adapter: decode an `AdmissionReview`, judge the resize with
//! `resize_guard_policy::classify`, and map the verdict to a response — allowed or denied, a JSON
//! patch for a QoS repair, warnings, audit annotations — plus the Event to record, as a value
//! (the HTTP layer publishes it). Nothing here does I/O, so every verdict and every bad input is
//! testable in-process.
//!
//! The two stages see different objects (upstream-resize.md §3.4): `/mutate` runs before the
//! resize strategy and built-in validation, so it is the only place to explain or repair a QoS
//! change and where an Infeasible resize is refused first; `/validate` sees the final object and
//! judges feasibility, Deferred and policy again, so the validating configuration alone still
//! enforces Infeasible and policy denials.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::Pod;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use resize_guard_policy::pod::node_name;
use resize_guard_policy::verdict::clip;
use resize_guard_policy::{Action, Context, Verdict, classify};

pub use resize_guard_cluster::{Cluster, FixedCluster};

/// Which webhook is answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// `/mutate`: before the resize strategy and built-in validation.
    Mutate,
    /// `/validate`: the final object.
    Validate,
}

impl Stage {
    /// `mutate` or `validate`.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Mutate => "mutate",
            Stage::Validate => "validate",
        }
    }
}

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
    let verdict = classify(old, new, &ctx);
    let mut resp = AdmissionResponse::from(req);
    let mut annotations = annotations_for(&verdict);

    // The mutating stage only acts on what the API server would refuse before validation.
    // The validating stage sees what built-in validation already accepted, so a QoS change or
    // validation error it computes can only be an artefact of objects changed after
    // validation (v1.37.2's PodResizeValidator adds RuntimeClass overhead into a pod-level
    // request spelled as a fraction, sharing the quantity: `applyPodLevelResources` in
    // component-helpers/resource) and is never a reason to deny.
    let acts = match stage {
        Stage::Mutate => matches!(
            verdict,
            Verdict::QosChange(_) | Verdict::Infeasible(_) | Verdict::Denied(_)
        ),
        Stage::Validate => !matches!(verdict, Verdict::QosChange(_) | Verdict::Invalid(_)),
    };
    let outcome = verdict.outcome(&policy);
    let mut decision = outcome.decision.clone();
    if !acts {
        annotations.insert("decision".into(), verdict.label().into());
        resp.audit_annotations = annotations;
        return finish(resp, verdict.label().to_owned(), None, uid);
    }
    annotations.insert("decision".into(), outcome.decision.clone());
    let mut event = None;
    let mut warnings = outcome.warnings.clone();
    match outcome.action {
        Action::Allow => {}
        Action::Deny(message) => {
            resp = resp.deny(&message);
            resp.result.code = 403;
            resp.result.reason = "Forbidden".into();
            event = Some(intent(
                new,
                true,
                "ResizeRejected",
                verdict.label(),
                &message,
            ));
        }
        Action::Repair(fix) => {
            let mut repaired = new.clone();
            if let Some(spec) = repaired.spec.as_mut() {
                fix.apply(spec);
            }
            // The repaired resize must itself be acceptable (it may now be Infeasible).
            let again = classify(old, &repaired, &ctx);
            match again.outcome(&policy).action {
                Action::Deny(message) => {
                    decision = format!("qos-repaired-then-{}", again.label());
                    annotations.insert("decision".into(), decision.clone());
                    resp = resp.deny(&message);
                    resp.result.code = 403;
                    resp.result.reason = "Forbidden".into();
                    event = Some(intent(new, true, "ResizeRejected", again.label(), &message));
                    warnings.clear();
                }
                _ => match json_patch_between(new, &repaired) {
                    Ok(patch) => match resp.clone().with_patch(patch) {
                        Ok(r) => {
                            resp = r;
                            annotations.insert("repair".into(), clip(&fix.describe(), 1024));
                            let note = warnings.join("; ");
                            event = Some(intent(new, false, "ResizeRepaired", "qos-repair", &note));
                        }
                        Err(e) => {
                            warnings.push(format!("resize-guard could not encode its repair: {e}"))
                        }
                    },
                    Err(e) => {
                        warnings.push(format!("resize-guard could not compute its repair: {e}"))
                    }
                },
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

/// Audit annotations describing the verdict (keys are prefixed by the API server with the
/// webhook's name, e.g. `validate.resize-guard.io/decision`).
fn annotations_for(verdict: &Verdict) -> HashMap<String, String> {
    let mut a = HashMap::new();
    match verdict {
        Verdict::Deferred(d) => {
            a.insert("shortfall".into(), d.shortfall.to_string());
            match &d.plan {
                Ok(p) if !p.victims.is_empty() => {
                    a.insert("victims".into(), clip(&p.victim_names(20), 1024));
                }
                Ok(p) => {
                    a.insert(
                        "awaiting".into(),
                        clip(
                            &resize_guard_policy::victims::name_list(p.awaiting.iter(), 20),
                            1024,
                        ),
                    );
                }
                Err(why) => {
                    a.insert("no-plan".into(), why.reason().into());
                }
            }
        }
        Verdict::Infeasible(i) => {
            a.insert(
                "infeasible".into(),
                format!(
                    "{} requested {} > allocatable {}",
                    i.resource,
                    i.resource.format(i.requested),
                    i.resource.format(i.allocatable)
                ),
            );
        }
        Verdict::QosChange(q) => {
            a.insert("qos".into(), format!("{}->{}", q.from, q.to));
        }
        Verdict::Invalid(why) => {
            a.insert("invalid".into(), clip(why, 1024));
        }
        _ => {}
    }
    a
}

/// RFC 6902 operations that turn `from` into `to`, limited to the pod spec.
fn json_patch_between(from: &Pod, to: &Pod) -> Result<json_patch::Patch, serde_json::Error> {
    let a = serde_json::to_value(from)?;
    let b = serde_json::to_value(to)?;
    Ok(json_patch::diff(&a, &b))
}
