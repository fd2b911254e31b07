//! What the API server answered to a `pods/resize` request, and how to read it: upstream's
//! refusal classes (the QoS rule alone, any other validation error, a missing node-declared
//! feature, the NodeCapacity check) and resize-guard's own denials (its QoS and Infeasible
//! messages), plus the comparison rule of the fidelity suite.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;

/// Upstream's wording of the QoS rule in `ValidatePodResize`.
pub const QOS_RULE: &str = "Pod QOS Class may not change as a result of resizing";
/// `NodeDeclaredFeatureValidator`'s refusal.
pub const NODE_FEATURES: &str = "pod update requires features ";
/// The start of resize-guard's QoS denial (after `resize-guard: `).
pub const RG_QOS: &str = "resize-guard: this resize would change the pod's QoS class from ";
/// Where resize-guard's QoS denial quotes the other validation errors upstream reports.
pub const RG_ALSO: &str = " Kubernetes also reports: ";
/// The start of resize-guard's Infeasible denial.
pub const RG_INFEASIBLE: &str = "resize-guard: this resize can never fit on node ";

/// The API server's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Accepted (stored, or would have been on dry run).
    Accepted,
    /// Refused.
    Refused {
        /// HTTP status code.
        code: u16,
        /// `Status.reason`.
        reason: String,
        /// `Status.message`, what kubectl prints after `Error from server (…): `.
        message: String,
        /// `Status.details.causes`: (reason, field, message).
        causes: Vec<(String, String, String)>,
        /// `Status.details` `kind` and `name`.
        subject: (String, String),
    },
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Accepted => write!(f, "accepted"),
            Answer::Refused {
                code,
                reason,
                message,
                ..
            } => write!(f, "{code} {reason}: {message}"),
        }
    }
}

/// A refusal's parts, borrowed ([`Answer::refusal`]).
pub struct Refusal<'a> {
    pub code: u16,
    pub reason: &'a str,
    pub message: &'a str,
    pub causes: &'a [(String, String, String)],
    pub subject: &'a (String, String),
}

impl Answer {
    /// The refusal's parts; panics, naming `what`, when the resize was accepted.
    pub fn refusal(&self, what: &str) -> Refusal<'_> {
        match self {
            Answer::Accepted => panic!("{what}: accepted, not refused"),
            Answer::Refused {
                code,
                reason,
                message,
                causes,
                subject,
            } => Refusal {
                code: *code,
                reason,
                message,
                causes,
                subject,
            },
        }
    }

    /// The refusal message, empty when accepted.
    pub fn message(&self) -> &str {
        match self {
            Answer::Accepted => "",
            Answer::Refused { message, .. } => message,
        }
    }

    /// Each validation error as the message prints it (`<field>: <message>`).
    pub fn errors(&self) -> Vec<String> {
        match self {
            Answer::Accepted => Vec::new(),
            Answer::Refused { causes, .. } => causes
                .iter()
                .map(|(_, field, msg)| {
                    if field.is_empty() {
                        msg.clone()
                    } else {
                        format!("{field}: {msg}")
                    }
                })
                .collect(),
        }
    }

    /// The same refusal. kube-apiserver lists several validation errors in an order that
    /// changes from one request to the next (they come from Go map iteration), so a refusal
    /// with causes is compared as its status, its subject and its set of causes.
    pub fn same_refusal(&self, other: &Answer) -> bool {
        let (
            Answer::Refused {
                code: c1,
                reason: r1,
                message: m1,
                causes: k1,
                ..
            },
            Answer::Refused {
                code: c2,
                reason: r2,
                message: m2,
                causes: k2,
                ..
            },
        ) = (self, other)
        else {
            return false;
        };
        if c1 != c2 || r1 != r2 {
            return false;
        }
        if m1 == m2 {
            return true;
        }
        let subject = |m: &str| m.split_once(": ").map(|(s, _)| s.to_owned());
        let sorted = |k: &[(String, String, String)]| {
            let mut k = k.to_vec();
            k.sort();
            k
        };
        !k1.is_empty() && subject(m1) == subject(m2) && sorted(k1) == sorted(k2)
    }
}

/// Sends `patch` to `pods/<name>/resize` (strategic merge, like `kubectl patch`), on dry run
/// unless `dry_run` is false. Transport errors are retried; a webhook the API server could not
/// reach is retried twice, then reported as the answer it is.
pub async fn resize(api: &Api<Pod>, name: &str, patch: &Value, dry_run: bool) -> Answer {
    let params = if dry_run {
        PatchParams::default().dry_run()
    } else {
        PatchParams::default()
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let answer = match api
            .patch_subresource("resize", name, &params, &Patch::Strategic(patch))
            .await
        {
            Ok(_) => Answer::Accepted,
            Err(kube::Error::Api(s)) => Answer::Refused {
                code: s.code,
                reason: s.reason.clone(),
                message: s.message.clone(),
                causes: s
                    .details
                    .iter()
                    .flat_map(|d| d.causes.iter())
                    .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
                    .collect(),
                subject: s
                    .details
                    .as_ref()
                    .map(|d| (d.kind.clone(), d.name.clone()))
                    .unwrap_or_default(),
            },
            Err(e) if attempt < 5 => {
                eprintln!("resize {name}: {e}; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                continue;
            }
            Err(e) => panic!("resize {name}: {e}"),
        };
        if attempt < 3 && answer.message().contains("failed calling webhook") {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            continue;
        }
        return answer;
    }
}

/// Why upstream (no webhook) refused, or that it accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// Accepted.
    Accepted,
    /// Refused by `ValidatePodResize` for the QoS rule and nothing else; `from` is the class
    /// upstream quotes (the pod's current one).
    QosOnly {
        /// The class in `Invalid value: "<from>"`.
        from: String,
    },
    /// Refused by validation for the QoS rule together with other errors (`others`, each as
    /// `<field>: <message>`); `from` as in [`Upstream::QosOnly`].
    QosAndInvalid {
        /// The class in `Invalid value: "<from>"`.
        from: String,
        /// The other errors.
        others: Vec<String>,
    },
    /// Refused by validation for anything but the QoS rule.
    InvalidSpec,
    /// Refused by `NodeDeclaredFeatureValidator`.
    NodeFeatures,
    /// Refused by `PodResizeValidator` with cause `NodeCapacity`: (resource, requested,
    /// allocatable) as upstream prints them (millicores, bytes).
    Capacity(Vec<(String, u128, u128)>),
    /// Any other refusal.
    Other,
}

impl Upstream {
    /// The row of the summary table.
    pub fn class(&self) -> &'static str {
        match self {
            Upstream::Accepted => "accepted",
            Upstream::QosOnly { .. } => "qos-only",
            Upstream::QosAndInvalid { .. } => "qos+invalid",
            Upstream::InvalidSpec => "invalid-spec",
            Upstream::NodeFeatures => "node-features",
            Upstream::Capacity(_) => "capacity",
            Upstream::Other => "other",
        }
    }

    /// Every row, in table order.
    pub const CLASSES: [&'static str; 7] = [
        "accepted",
        "qos-only",
        "qos+invalid",
        "invalid-spec",
        "node-features",
        "capacity",
        "other",
    ];
}

/// Reads an answer given without resize-guard installed.
pub fn upstream(answer: &Answer) -> Upstream {
    let Answer::Refused {
        code,
        reason,
        message,
        causes,
        ..
    } = answer
    else {
        return Upstream::Accepted;
    };
    if *code == 422 && reason == "Invalid" {
        let is_qos =
            |(_, field, msg): &(String, String, String)| field == "spec" && msg.ends_with(QOS_RULE);
        let Some(from) = causes
            .iter()
            .find(|c| is_qos(c))
            .and_then(|(_, _, m)| quoted(m))
        else {
            return Upstream::InvalidSpec;
        };
        let others: Vec<String> = answer
            .errors()
            .into_iter()
            .filter(|e| !e.ends_with(QOS_RULE))
            .collect();
        return if others.is_empty() {
            Upstream::QosOnly { from }
        } else {
            Upstream::QosAndInvalid { from, others }
        };
    }
    if *code == 403 && message.contains(NODE_FEATURES) {
        return Upstream::NodeFeatures;
    }
    if *code == 403 && causes.iter().any(|(r, _, _)| r == "NodeCapacity") {
        return Upstream::Capacity(capacity_numbers(message));
    }
    Upstream::Other
}

/// `Invalid value: "X": …` → `X`.
fn quoted(msg: &str) -> Option<String> {
    let rest = msg.split_once("Invalid value: \"")?.1;
    Some(rest.split_once('"')?.0.to_owned())
}

/// `node didn't have enough allocatable resources: cpu, requested: 2430, allocatable: 1930; …`.
fn capacity_numbers(message: &str) -> Vec<(String, u128, u128)> {
    let Some((_, list)) = message.split_once("node didn't have enough allocatable resources: ")
    else {
        return Vec::new();
    };
    list.split("; ")
        .filter_map(|item| {
            let mut parts = item.split(", ");
            let res = parts.next()?.to_owned();
            let requested = parts.next()?.strip_prefix("requested: ")?.parse().ok()?;
            let allocatable = parts.next()?.strip_prefix("allocatable: ")?.parse().ok()?;
            Some((res, requested, allocatable))
        })
        .collect()
}

/// A denial by resize-guard's own rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// Its QoS denial, with the classes it names.
    Qos {
        /// From.
        from: String,
        /// To.
        to: String,
    },
    /// Its Infeasible denial, with the kubelet numbers it quotes if any:
    /// (resource, requested, capacity).
    Infeasible(Option<(String, u128, u128)>),
}

/// What kube-apiserver puts between the webhook's name and its message (`ToStatusErr`,
/// k8s.io/apiserver `pkg/admission/plugin/webhook/errors/statuserror.go`).
pub const DENIED: &str = ".resize-guard.io\" denied the request: ";

/// resize-guard's explanation after upstream's message (`resize_guard_policy::refusal::THEN`).
pub const THEN: &str = ". resize-guard: ";

/// The cause type of resize-guard's explanation in a 422 Invalid refusal.
pub const EXPLANATION: &str = "resize-guard.io/Explanation";

/// resize-guard's verdict inside a refusal, if the refusal is one of its QoS/Infeasible denials.
pub fn guard(answer: &Answer) -> Option<Guard> {
    let (_, msg) = answer.message().split_once(DENIED)?;
    if let Some((_, rest)) = msg.split_once(RG_QOS) {
        let (from, rest) = rest.split_once(" to ")?;
        let to: String = rest.chars().take_while(|c| c.is_alphanumeric()).collect();
        return Some(Guard::Qos {
            from: from.to_owned(),
            to,
        });
    }
    if msg.contains(RG_INFEASIBLE) {
        let quote = msg
            .split_once("Node didn't have enough capacity: ")
            .and_then(|(_, rest)| {
                let mut parts = rest.split(", ");
                let res = parts.next()?.to_owned();
                let requested = parts.next()?.strip_prefix("requested: ")?.parse().ok()?;
                let capacity: String = parts
                    .next()?
                    .strip_prefix("capacity: ")?
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                Some((res, requested, capacity.parse().ok()?))
            });
        return Some(Guard::Infeasible(quote));
    }
    None
}

/// Whether resize-guard's refusal `with` (a [`Guard`]) has Kubernetes' shape, given upstream's
/// answer `without` on minor `minor`: `None` if it does, else why not.
///
/// - refused by `PodResizeValidator` (v1.36+): the same code, reason, details and causes, and
///   the message upstream's word for word, then resize-guard's explanation;
/// - stored upstream (v1.33–v1.35): 403 Forbidden, kind `pods`, the one cause `NodeCapacity`,
///   and `NewForbidden`'s `pods "<name>" is forbidden: ` before the explanation;
/// - refused for the QoS rule: 422 Invalid, the same details, upstream's causes (as a set when
///   upstream reports several, whose order varies) then one `resize-guard.io/Explanation` at
///   `spec`, and the message upstream's word for word (alone) or with upstream's subject
///   (several), then the explanation.
pub fn shape(without: &Answer, with: &Answer, minor: u32) -> Option<String> {
    let Answer::Refused {
        code,
        reason,
        message,
        causes,
        subject,
    } = with
    else {
        return Some("accepted".to_owned());
    };
    let ours = message.split_once(DENIED).map_or("", |(_, m)| m);
    let status = (*code, reason.as_str());
    let bad = |what: &str| Some(format!("resize-guard's refusal {what}: {with}"));
    match (upstream(without), guard(with)) {
        (Upstream::Capacity(_), Some(Guard::Infeasible(_))) => {
            let Answer::Refused {
                message: up,
                causes: up_causes,
                subject: up_subject,
                ..
            } = without
            else {
                return None;
            };
            if status != (403, "Forbidden") {
                bad("is not 403 Forbidden")
            } else if causes != up_causes || subject != up_subject {
                bad(&format!(
                    "has details {subject:?} {causes:?}, upstream's are {up_subject:?} {up_causes:?}"
                ))
            } else if !ours.starts_with(&format!("{up}{THEN}this resize can never fit")) {
                bad(&format!("does not start with upstream's message {up:?}"))
            } else {
                None
            }
        }
        (Upstream::Accepted, Some(Guard::Infeasible(_))) if minor <= 35 => {
            let node_capacity = [("NodeCapacity".to_owned(), String::new(), String::new())];
            if status != (403, "Forbidden") || subject.0 != "pods" || causes[..] != node_capacity {
                bad("is not 403 Forbidden on pods with the one cause NodeCapacity")
            } else if !ours.starts_with(&format!(
                "pods \"{}\" is forbidden: resize-guard: this resize can never fit",
                subject.1
            )) || !ours.contains(&format!("Kubernetes v1.{minor} would store it"))
            {
                bad("is not NewForbidden's form or not true on this minor")
            } else {
                None
            }
        }
        (
            up @ (Upstream::QosOnly { .. } | Upstream::QosAndInvalid { .. }),
            Some(Guard::Qos { .. }),
        ) => {
            let Answer::Refused {
                message: up_message,
                causes: up_causes,
                subject: up_subject,
                ..
            } = without
            else {
                return None;
            };
            let Some((last, theirs)) = causes.split_last() else {
                return bad("has no causes");
            };
            let sorted = |k: &[(String, String, String)]| {
                let mut k = k.to_vec();
                k.sort();
                k
            };
            let lead = match up {
                Upstream::QosOnly { .. } => up_message.clone(),
                _ => up_message
                    .split_once(": ")
                    .map(|(s, _)| format!("{s}: "))
                    .unwrap_or_default(),
            };
            if status != (422, "Invalid") {
                bad("is not 422 Invalid")
            } else if subject != up_subject || sorted(theirs) != sorted(up_causes) {
                bad(&format!(
                    "has details {subject:?} {theirs:?}, upstream's are {up_subject:?} {up_causes:?}"
                ))
            } else if last.0 != EXPLANATION
                || last.1 != "spec"
                || !last.2.starts_with(RG_QOS)
                || !ours.ends_with(&last.2)
            {
                bad(&format!(
                    "does not end with its explanation as a cause: {last:?}"
                ))
            } else if !ours.starts_with(&lead)
                || (matches!(up, Upstream::QosOnly { .. })
                    && !ours.starts_with(&format!("{lead}{THEN}")))
            {
                bad(&format!("does not start with upstream's {lead:?}"))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// How the answer with resize-guard installed relates to upstream's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Both accepted.
    Accepted,
    /// The same refusal, word for word.
    Same,
    /// resize-guard's QoS denial.
    GuardQos,
    /// resize-guard's Infeasible denial.
    GuardInfeasible,
    /// Something else.
    Different,
}

/// The fidelity rule: `None` if the answer with resize-guard (`with`) is allowed given
/// upstream's (`without`) on Kubernetes minor `minor`, else why not. `qos_to` is the class
/// upstream computes for the resized pod, when known.
///
/// v1.33–v1.35 store a resize larger than the node's allocatable (their kubelets mark it
/// Infeasible; no `PodResizeValidator` yet): there resize-guard's Infeasible denial of a resize
/// upstream accepts is the product working (`feasibility.rejectInfeasible`), not a false deny.
pub fn judge(
    without: &Answer,
    with: &Answer,
    qos_to: Option<&str>,
    minor: u32,
) -> (Outcome, Option<String>) {
    let guard = guard(with);
    let outcome = match (&guard, with) {
        (_, Answer::Accepted) if *without == Answer::Accepted => Outcome::Accepted,
        (Some(Guard::Qos { .. }), _) => Outcome::GuardQos,
        (Some(Guard::Infeasible(_)), _) => Outcome::GuardInfeasible,
        _ if with.same_refusal(without) => Outcome::Same,
        _ => Outcome::Different,
    };
    let why = match (upstream(without), outcome) {
        (Upstream::Accepted, Outcome::Accepted) => None,
        (Upstream::Accepted, Outcome::GuardInfeasible) if minor <= 35 => None,
        (Upstream::Accepted, _) => Some("false deny: upstream accepts this resize".to_owned()),
        (Upstream::QosOnly { from }, Outcome::GuardQos) => match guard {
            Some(Guard::Qos { from: f, to: t }) => {
                if f != from {
                    Some(format!("QoS from {f}, upstream says the pod is {from}"))
                } else if let Some(to) = qos_to.filter(|to| *to != t) {
                    Some(format!(
                        "QoS to {t}, upstream computes {to} for the resized pod"
                    ))
                } else if qos_to.is_none() {
                    Some("no upstream QoS class for the resized pod to compare with".to_owned())
                } else {
                    None
                }
            }
            _ => None,
        },
        // Upstream reports the QoS rule among other errors: resize-guard may explain the QoS
        // change (its wall, and what `qos.onChange: repair` fixes) as long as it quotes every
        // other error word for word, as `ToAggregate` lists them.
        (Upstream::QosAndInvalid { from, others }, Outcome::GuardQos) => match guard {
            Some(Guard::Qos { from: f, .. }) if f != from => {
                Some(format!("QoS from {f}, upstream says the pod is {from}"))
            }
            _ => {
                let quoted = with
                    .message()
                    .split_once(RG_ALSO)
                    .map(|(_, rest)| rest.trim_end().trim_end_matches('.').to_owned())
                    .unwrap_or_default();
                let expected_len = others.iter().map(String::len).sum::<usize>()
                    + 2 * (others.len() - 1)
                    + if others.len() > 1 { 2 } else { 0 };
                let missing: Vec<&String> = others
                    .iter()
                    .filter(|o| !quoted.contains(o.as_str()))
                    .collect();
                (!missing.is_empty() || quoted.len() != expected_len).then(|| {
                    format!("resize-guard's QoS denial quotes {quoted:?}, upstream's other errors are {others:?}")
                })
            }
        },
        (Upstream::QosOnly { .. }, _) => Some(
            "upstream refuses for the QoS rule alone; resize-guard's QoS denial expected"
                .to_owned(),
        ),
        // Its numbers are upstream's own message, which `shape` compares word for word.
        (Upstream::Capacity(_), Outcome::GuardInfeasible) => None,
        (_, Outcome::Same) => None,
        (up, outcome) => Some(format!(
            "upstream refuses ({}) and the user must see its message, but {}",
            up.class(),
            match outcome {
                Outcome::GuardQos if without.message().contains(QOS_RULE) => {
                    "resize-guard's QoS denial replaces it (upstream also reports other errors)"
                }
                Outcome::GuardQos => "resize-guard denies for a QoS change upstream does not see",
                Outcome::GuardInfeasible => "resize-guard's Infeasible denial replaces it",
                Outcome::Accepted => "the resize is accepted",
                _ => "a different refusal comes back",
            }
        )),
    };
    let why = why.or_else(|| match outcome {
        Outcome::GuardQos | Outcome::GuardInfeasible => shape(without, with, minor),
        _ => None,
    });
    (outcome, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: u16, reason: &str, message: &str, causes: &[(&str, &str, &str)]) -> Answer {
        let kind = if code == 422 { "Pod" } else { "pods" };
        Answer::Refused {
            code,
            reason: reason.into(),
            message: message.into(),
            causes: causes
                .iter()
                .map(|(a, b, c)| ((*a).into(), (*b).into(), (*c).into()))
                .collect(),
            subject: (kind.into(), "app".into()),
        }
    }

    #[test]
    fn reads_upstreams_refusals() {
        let qos = refused(
            422,
            "Invalid",
            "Pod \"app\" is invalid: spec: Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing",
            &[(
                "FieldValueInvalid",
                "spec",
                "Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing",
            )],
        );
        assert_eq!(
            upstream(&qos),
            Upstream::QosOnly {
                from: "Guaranteed".into()
            }
        );
        let cap = refused(
            403,
            "Forbidden",
            "pods \"app\" is forbidden: node didn't have enough allocatable resources: cpu, requested: 2430, allocatable: 1930; memory, requested: 5, allocatable: 4",
            &[("NodeCapacity", "", "")],
        );
        assert_eq!(
            upstream(&cap),
            Upstream::Capacity(vec![("cpu".into(), 2430, 1930), ("memory".into(), 5, 4)])
        );
        let cap_message = "pods \"app\" is forbidden: node didn't have enough allocatable resources: cpu, requested: 2430, allocatable: 1930; memory, requested: 5, allocatable: 4";
        let rg = refused(
            403,
            "Forbidden",
            &format!(
                "admission webhook \"mutate.resize-guard.io\" denied the request: {cap_message}. resize-guard: this resize can never fit on node n: …"
            ),
            &[("NodeCapacity", "", "")],
        );
        assert_eq!(judge(&cap, &rg, None, 37), (Outcome::GuardInfeasible, None));
        // Its own message or no NodeCapacity cause is not upstream's shape.
        let own_words = refused(
            403,
            "Forbidden",
            "admission webhook \"mutate.resize-guard.io\" denied the request: resize-guard: this resize can never fit on node n: …",
            &[("NodeCapacity", "", "")],
        );
        assert!(judge(&cap, &own_words, None, 37).1.is_some());
        let no_cause = refused(403, "Forbidden", rg.message(), &[]);
        assert!(judge(&cap, &no_cause, None, 37).1.is_some());
        let v135 = refused(
            403,
            "Forbidden",
            "admission webhook \"mutate.resize-guard.io\" denied the request: pods \"app\" is forbidden: resize-guard: this resize can never fit on node n: …; Kubernetes v1.35 would store it and …",
            &[("NodeCapacity", "", "")],
        );
        let explanation = "resize-guard: this resize would change the pod's QoS class from Guaranteed to Burstable, which …";
        let rg_qos = refused(
            422,
            "Invalid",
            &format!(
                "admission webhook \"mutate.resize-guard.io\" denied the request: {}. {explanation}",
                qos.message()
            ),
            &[
                (
                    "FieldValueInvalid",
                    "spec",
                    "Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing",
                ),
                (EXPLANATION, "spec", explanation),
            ],
        );
        let old_qos = refused(
            403,
            "Forbidden",
            &format!(
                "admission webhook \"mutate.resize-guard.io\" denied the request: {explanation}"
            ),
            &[],
        );
        assert!(
            judge(&qos, &old_qos, Some("Burstable"), 37).1.is_some(),
            "403 with resize-guard's words alone"
        );
        assert_eq!(
            judge(&qos, &rg_qos, Some("Burstable"), 37),
            (Outcome::GuardQos, None)
        );
        assert!(judge(&qos, &rg_qos, Some("BestEffort"), 37).1.is_some());
        assert!(
            judge(&cap, &rg_qos, None, 37).1.is_some(),
            "QoS where upstream says capacity"
        );
        assert!(
            judge(&Answer::Accepted, &rg, None, 37).1.is_some(),
            "false deny"
        );
        assert_eq!(
            judge(&Answer::Accepted, &v135, None, 35),
            (Outcome::GuardInfeasible, None),
            "v1.35 stores it: refusing it at admission is the point"
        );
        assert!(
            judge(&Answer::Accepted, &v135, None, 34).1.is_some(),
            "the message must name the minor it is sent on"
        );
        assert_eq!(judge(&cap, &cap.clone(), None, 37), (Outcome::Same, None));
    }

    #[test]
    fn validation_errors_compare_in_any_order() {
        // A 422 Invalid for pod "c" with `FieldValueInvalid` causes (field, detail), in order.
        let invalid = |message: &str, causes: &[(&str, &str)]| {
            let causes: Vec<(&str, &str, &str)> = causes
                .iter()
                .map(|(field, detail)| ("FieldValueInvalid", *field, *detail))
                .collect();
            refused(422, "Invalid", message, &causes)
        };
        let a = invalid(
            "Pod \"c\" is invalid: [a: x, b: y]",
            &[("a", "x"), ("b", "y")],
        );
        let b = invalid(
            "Pod \"c\" is invalid: [b: y, a: x]",
            &[("b", "y"), ("a", "x")],
        );
        let c = invalid("Pod \"c\" is invalid: [a: x]", &[("a", "x")]);
        assert!(a.same_refusal(&b));
        assert!(!a.same_refusal(&c));
        assert_eq!(a.errors(), ["a: x", "b: y"]);
    }
}
