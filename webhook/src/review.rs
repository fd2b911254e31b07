//! The admission adapter: decode an `AdmissionReview`, judge the resize with
//! `resize_guard_policy::admission::admit` (which decides everything: the stage's verdict, deny,
//! repair and re-judge, warnings, audit annotations), and encode the answer — allowed or denied,
//! a JSON patch for a QoS repair — plus the Event to record, as a value (the HTTP layer publishes
//! it). Nothing here does I/O, so every bad input is testable in-process; the validating
//! configuration alone still enforces Infeasible and policy denials.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::Pod;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionResponse, AdmissionReview};
use kube::core::response::{StatusCause, StatusDetails, StatusSummary};
use resize_guard_cluster::lean::LeanPod;
use resize_guard_policy::ledger::NodeLedger;
use resize_guard_policy::pod::PodKey;
use resize_guard_runtime::events::NOTE_LIMIT;
use serde::de::IgnoredAny;

use crate::incoming::{Incoming, IncomingRequest};
use resize_guard_policy::Context;
use resize_guard_policy::admission::{Admission, Effect, admit_for, dry_run_note};
use resize_guard_policy::audience::Audience;
use resize_guard_policy::pod::node_name;
use resize_guard_policy::refusal::Refusal;
use resize_guard_policy::usage::Evidence;
use resize_guard_policy::verdict::clip;

pub mod probe;

pub use resize_guard_cluster::Cluster;

pub use resize_guard_policy::admission::Stage;

/// The longest warning the API server passes on whole (longer ones are truncated).
const WARNING_LIMIT: usize = 256;

/// An Event to record on the pod, decided by the review (the programs' one Event type).
pub use resize_guard_runtime::events::{EventIntent, EventReason};

/// A finished review.
#[derive(Debug)]
pub struct Reviewed {
    /// The response body.
    pub review: AdmissionReview<DynamicObject>,
    /// Decision label for metrics and logs.
    pub decision: String,
    /// Whether the request was allowed.
    pub allowed: bool,
    /// The Event to publish, if any (never on dry-run; only about a pod the cluster view knows
    /// with the request's namespace, name, UID and node).
    pub event: Option<EventIntent>,
    /// Why an Event the decision called for is not recorded: the request names a pod the
    /// cluster view does not know (request content is unauthenticated; see [`known_pod`]).
    pub event_withheld: Option<String>,
    /// The AdmissionReview uid.
    pub uid: String,
    /// Who asked what about which pod (`request.namespace`, `name`, `userInfo.username`), for
    /// the log line of a denial; empty for a request not judged.
    pub asked: Asked,
    /// The resize lowers a memory limit and was judged without the pod's usage: read it and
    /// judge again ([`Resize::judge`]).
    pub wants_usage: bool,
    /// Whose `PodMetrics` to read when [`wants_usage`](Self::wants_usage): the pod as the
    /// cluster view holds it (never the request's names alone).
    pub usage_of: Option<PodKey>,
    /// Why the pod's usage was not read for a resize that lowers a memory limit: the request
    /// names a pod the cluster view does not know with that UID on that node, so resize-guard
    /// reads no usage for it (judged as unavailable usage: never a denial by the memory rule).
    pub usage_withheld: Option<String>,
}

/// The request's pod and user, as the API server sent them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Asked {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The requesting user (`userInfo.username`).
    pub user: String,
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
            Self::NotPods(_) => "NotPods",
            Self::NoObjects => "NoObjects",
        }
    }
}

/// Answers one AdmissionReview body without the pod's memory usage (a resize that lowers a
/// memory limit is admitted with a warning that usage was not read; the server reads it:
/// [`decode`] and [`Resize::judge`]).
pub fn review(stage: Stage, body: &[u8], cluster: &dyn Cluster) -> Result<Reviewed, ReviewError> {
    Ok(match decode(stage, body)? {
        Decoded::Answered(reviewed) => *reviewed,
        Decoded::Resize(resize) => resize.judge(cluster, &Evidence::NotFetched),
    })
}

/// A decoded AdmissionReview: already answered (not a resize this webhook judges), or a resize
/// to judge.
#[derive(Debug)]
pub enum Decoded {
    /// The answer.
    Answered(Box<Reviewed>),
    /// A `pods/resize` UPDATE.
    Resize(Box<Resize>),
}

/// A `pods/resize` UPDATE to judge.
#[derive(Debug)]
pub struct Resize {
    stage: Stage,
    old: Pod,
    new: Pod,
    dry_run: bool,
    uid: String,
    asked: Asked,
}

impl Resize {
    /// The pod's namespace and name, as the API server sent them.
    pub fn asked(&self) -> &Asked {
        &self.asked
    }

    /// Judges it with what is known of the pod's usage ([`Reviewed::wants_usage`] says when
    /// reading it would change the answer).
    pub fn judge(&self, cluster: &dyn Cluster, usage: &Evidence) -> Reviewed {
        let mut reviewed = judge(self, cluster, usage);
        reviewed.asked = self.asked.clone();
        reviewed
    }
}

/// Decodes one AdmissionReview body.
///
/// One streaming pass ([`crate::incoming`]) decodes the routing fields and both pods, each lean
/// ([`resize_guard_cluster::lean`]: only the fields a decision reads, as the cluster view keeps
/// them; `managedFields`, the last-applied copy, env and probes, most of a real pod's bytes,
/// are skipped unread). Only when that fails does a second pass, which skips the objects, tell
/// a request this webhook does not judge (allowed with a warning) from a malformed one (an
/// error).
pub fn decode(stage: Stage, body: &[u8]) -> Result<Decoded, ReviewError> {
    let typed_error = match serde_json::from_slice::<Incoming<LeanPod>>(body) {
        Ok(incoming) => return route(stage, incoming),
        Err(e) => e,
    };
    let envelope: Incoming<IgnoredAny> =
        serde_json::from_slice(body).map_err(ReviewError::NotJson)?;
    let request = routed(envelope)?;
    match request.not_ours() {
        Some(why) => Ok(Decoded::Answered(Box::new(ignored(request.uid, &why)))),
        None => Err(ReviewError::NotPods(typed_error)),
    }
}

/// The request of a v1 review with a uid.
fn routed<O>(incoming: Incoming<O>) -> Result<IncomingRequest<O>, ReviewError> {
    if incoming.api_version != "admission.k8s.io/v1" {
        return Err(ReviewError::Version(incoming.api_version));
    }
    let request = incoming.request.ok_or(ReviewError::NoRequest)?;
    if request.uid.is_empty() {
        return Err(ReviewError::NoUid);
    }
    Ok(request)
}

fn route(stage: Stage, incoming: Incoming<LeanPod>) -> Result<Decoded, ReviewError> {
    let request = routed(incoming)?;
    if let Some(why) = request.not_ours() {
        return Ok(Decoded::Answered(Box::new(ignored(request.uid, &why))));
    }
    let (Some(old), Some(new)) = (request.old_object, request.object) else {
        return Err(ReviewError::NoObjects);
    };
    Ok(Decoded::Resize(Box::new(Resize {
        stage,
        old: old.0,
        new: new.0,
        dry_run: request.dry_run.unwrap_or(false),
        uid: request.uid,
        asked: Asked {
            namespace: request.namespace,
            pod: request.name,
            user: request.user_info.username,
        },
    })))
}

/// Anything but a `pods/resize` UPDATE is allowed: never block what we do not judge.
fn ignored(uid: String, why: &str) -> Reviewed {
    let mut resp = response(&uid);
    resp.warnings = Some(vec![format!("resize-guard only judges pods/resize; {why}")]);
    finish(resp, "ignored".to_owned(), None, uid)
}

/// An allowing response to the review `uid` (what `AdmissionResponse::from(&request)` gives,
/// without a decoded `AdmissionRequest`).
fn response(uid: &str) -> AdmissionResponse {
    let mut resp = AdmissionResponse::invalid("");
    resp.uid = uid.to_owned();
    resp.allowed = true;
    resp.result = Default::default();
    resp
}

/// Encodes [`admit_for`]'s answer as an AdmissionResponse (a repair as a JSON patch), with the
/// Event to record (none on dry run). An admission probe is answered first, unjudged
/// ([`probe`]).
///
/// The request body is unauthenticated content, so what the answer reveals is bounded by what
/// the cluster view vouches for ([`known_pod`], a lookup in the view's pods of that node, no
/// API call): other pods are named only to the pod's own namespace ([`Audience`]), and usage is
/// read, and judged, only for a pod the view knows by UID on the named node — else the memory
/// rule judges without it ([`Reviewed::usage_withheld`]) and the answer carries no usage.
fn judge(resize: &Resize, cluster: &dyn Cluster, usage: &Evidence) -> Reviewed {
    if let Some(answer) = probe::answer(resize, cluster.install_namespace()) {
        return answer;
    }
    let Resize {
        stage,
        old,
        new,
        dry_run,
        uid,
        asked,
    } = resize;
    let (stage, dry_run, uid) = (*stage, *dry_run, uid.clone());
    let Some(policy) = cluster.policy() else {
        return no_policy(cluster, uid);
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
    let target = known_pod(ledger.as_deref(), new);
    let vouched = vouched(&target, asked);
    // The request's namespace sees its own pods by name; a request about a pod the view does
    // not vouch for sees none.
    let audience = match &vouched {
        Ok(_) => Audience::Namespace(&asked.namespace),
        Err(_) => Audience::Unknown,
    };
    let withheld = |why: &String| Evidence::Unavailable(format!("usage not read: {why}"));
    let usage = match (&vouched, usage) {
        (Err(why), Evidence::Measured(_)) => withheld(why),
        _ => usage.clone(),
    };
    let mut admission = admit_for(stage, old, new, &ctx, &usage, audience);
    let mut usage_withheld = None;
    if let (Err(why), true) = (&vouched, admission.wants_usage) {
        admission = admit_for(stage, old, new, &ctx, &withheld(why), audience);
        usage_withheld = Some(why.clone());
    }
    let Admission {
        effect,
        decision,
        mut warnings,
        mut annotations,
        acts: _,
        wants_usage,
    } = admission;
    let mut resp = response(&uid);
    let mut event = None;
    match effect {
        Effect::Allow => {}
        Effect::Deny { refusal, label } => {
            event = Some(intent(
                &target,
                EventReason::ResizeRejected,
                label,
                &refusal.message,
            ));
            resp = deny(resp, refusal);
        }
        Effect::Repair { pod, .. } => {
            let encoded = encode_repair(&resp, new, &pod);
            match encoded {
                Ok(r) => {
                    resp = r;
                    let note = warnings.join("; ");
                    event = Some(intent(
                        &target,
                        EventReason::ResizeRepaired,
                        "qos-repair",
                        &note,
                    ));
                }
                Err(why) => {
                    annotations.remove("repair");
                    warnings.push(why);
                }
            }
        }
    }
    if dry_run {
        // Audit annotations never reach the client: say the decision (what-if, check).
        warnings.push(dry_run_note(stage, &decision));
        event = None;
    }
    if !warnings.is_empty() {
        resp.warnings = Some(warnings);
    }
    resp.audit_annotations = annotations;
    let (event, event_withheld) = match event {
        Some(Ok(e)) => (Some(e), None),
        Some(Err(why)) => (None, Some(why)),
        None => (None, None),
    };
    let mut reviewed = finish(resp, decision, event, uid);
    reviewed.event_withheld = event_withheld;
    reviewed.wants_usage = wants_usage;
    reviewed.usage_of = vouched.ok().filter(|_| wants_usage);
    reviewed.usage_withheld = usage_withheld;
    reviewed
}

/// `resp`, denied with `refusal` as its `status`: code, reason, message and details (name,
/// kind, causes), which kube-apiserver passes on whole (`ToStatusErr`, k8s.io/apiserver
/// `pkg/admission/plugin/webhook/errors/statuserror.go`, only prefixes the message with
/// `admission webhook "<name>" denied the request: `).
fn deny(resp: AdmissionResponse, refusal: Refusal) -> AdmissionResponse {
    let Refusal {
        code,
        reason,
        message,
        name,
        kind,
        causes,
    } = refusal;
    let mut resp = resp.deny(message);
    resp.result.status = Some(StatusSummary::Failure);
    resp.result.code = code;
    resp.result.reason = reason.to_owned();
    resp.result.details = Some(StatusDetails {
        name,
        group: String::new(),
        kind: kind.to_owned(),
        uid: String::new(),
        causes: causes
            .into_iter()
            .map(|c| StatusCause {
                reason: c.kind,
                message: c.message,
                field: c.field,
            })
            .collect(),
        retry_after_seconds: 0,
    });
    resp
}

/// No policy in force: allowed with a warning and an audit annotation saying why.
fn no_policy(cluster: &dyn Cluster, uid: String) -> Reviewed {
    // Fail safe: no policy read and parsed, so nothing is denied or repaired. Allowed with
    // a warning and an audit annotation saying why, never under the defaults by omission.
    let why = cluster.no_policy_reason();
    let mut resp = response(&uid);
    resp.warnings = Some(vec![clip(
        &format!("resize-guard judged nothing: {why}"),
        WARNING_LIMIT,
    )]);
    resp.audit_annotations = [
        ("decision".to_owned(), "no-policy".to_owned()),
        ("reason".to_owned(), clip(&why, 1024)),
    ]
    .into();
    finish(resp, "no-policy".to_owned(), None, uid)
}

/// `resp` with the JSON patch that turns `new` into the repaired `pod`, or why it cannot carry one.
fn encode_repair(
    resp: &AdmissionResponse,
    new: &Pod,
    pod: &Pod,
) -> Result<AdmissionResponse, String> {
    json_patch_between(new, pod)
        .map_err(|e| format!("resize-guard could not compute its repair: {e}"))
        .and_then(|patch| {
            resp.clone()
                .with_patch(patch)
                .map_err(|e| format!("resize-guard could not encode its repair: {e}"))
        })
}

/// The pod an Event may be recorded on: the one the cluster view holds on the request's node
/// with the request's UID, namespace and name; else why none.
///
/// The request body is unauthenticated content (anyone who reaches the port can send one), so
/// an Event is never addressed from it alone: that would let a sender write Events into any
/// namespace about any name. The reference is built from the view's entry, not the request.
pub fn known_pod(ledger: Option<&NodeLedger>, pod: &Pod) -> Result<ObjectReference, String> {
    let claimed = PodKey::of(pod);
    let Some(ledger) = ledger else {
        return Err(format!(
            "pod {claimed}: its node is not in the cluster view"
        ));
    };
    let known = ledger
        .entry(&claimed.uid)
        .filter(|e| !claimed.uid.is_empty() && e.key == claimed)
        .ok_or_else(|| {
            format!(
                "pod {claimed} (uid {:?}) is not in the cluster view on node {}",
                claimed.uid, ledger.node
            )
        })?;
    Ok(ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        namespace: Some(known.key.namespace.clone()),
        name: Some(known.key.name.clone()),
        uid: Some(known.key.uid.clone()),
        ..ObjectReference::default()
    })
}

/// The pod the view vouches for: [`known_pod`]'s, when the request (`request.namespace`,
/// `request.name`) names that same pod, as kube-apiserver's always does; else why none.
fn vouched(target: &Result<ObjectReference, String>, asked: &Asked) -> Result<PodKey, String> {
    let known = target.as_ref().map_err(Clone::clone)?;
    let key = PodKey {
        namespace: known.namespace.clone().unwrap_or_default(),
        name: known.name.clone().unwrap_or_default(),
        uid: known.uid.clone().unwrap_or_default(),
    };
    if key.namespace != asked.namespace || key.name != asked.pod {
        return Err(format!(
            "the request names pod {}/{} but its object is pod {key}",
            asked.namespace, asked.pod
        ));
    }
    Ok(key)
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
        event_withheld: None,
        uid,
        asked: Asked::default(),
        wants_usage: false,
        usage_of: None,
        usage_withheld: None,
    }
}

fn intent(
    target: &Result<ObjectReference, String>,
    reason: EventReason,
    action: &str,
    note: &str,
) -> Result<EventIntent, String> {
    Ok(EventIntent {
        regarding: target.clone()?,
        related: None,
        reason,
        action: action.to_owned(),
        // events.k8s.io notes are limited to 1 kB.
        note: clip(note, NOTE_LIMIT),
    })
}

/// RFC 6902 operations that turn `from` into `to`, limited to the pod spec.
fn json_patch_between(from: &Pod, to: &Pod) -> Result<json_patch::Patch, serde_json::Error> {
    let a = serde_json::to_value(from)?;
    let b = serde_json::to_value(to)?;
    Ok(json_patch::diff(&a, &b))
}

#[cfg(test)]
mod tests;
