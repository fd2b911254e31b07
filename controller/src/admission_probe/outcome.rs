//! What one probe found, from the API server's answer alone: [`classify`] is pure, so every
//! answer kube-apiserver can give is a plain test.

use resize_guard_policy::admission_probe::{Arrival, arrival};
/// The API server's answer to one probe (`resize_guard_policy::dry_run`).
pub use resize_guard_policy::dry_run::Answer;

/// What one probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The API server called resize-guard's webhook, which answered.
    Reached(Arrival),
    /// The API server admitted the resize without resize-guard: the webhook's call failed and
    /// `failurePolicy: Ignore` let it through (fail-open), or no webhook configuration sends it
    /// to resize-guard.
    Bypassed,
    /// No answer to judge by: the request failed, timed out or was refused (RBAC, the pod gone,
    /// a webhook failing closed); the reason.
    Error(String),
}

impl Outcome {
    /// The `result` label of `resize_guard_admission_probe_total`.
    pub fn result(&self) -> &'static str {
        match self {
            Outcome::Reached(_) => "reached",
            Outcome::Bypassed => "bypassed",
            Outcome::Error(_) => "error",
        }
    }
}

/// Every `result` label, so each series exists from the start.
pub const RESULTS: [&str; 3] = ["reached", "bypassed", "error"];

/// Judges an answer: admitted with the webhook's probe note is [`Outcome::Reached`], admitted
/// without it [`Outcome::Bypassed`], anything else an [`Outcome::Error`] naming the code and
/// the message.
pub fn classify(answer: &Answer) -> Outcome {
    if answer.admitted() {
        return match arrival(answer.warnings.iter().map(String::as_str)) {
            Some(a) => Outcome::Reached(a),
            None => Outcome::Bypassed,
        };
    }
    let message = answer.message.as_deref().unwrap_or("").trim();
    let message = if message.is_empty() {
        "no message"
    } else {
        message
    };
    Outcome::Error(format!(
        "the API server answered HTTP {}: {message}",
        answer.code
    ))
}

#[cfg(test)]
mod tests {
    use resize_guard_policy::admission_probe::note;

    use super::*;

    fn answer(code: u16, warnings: &[&str], message: Option<&str>) -> Answer {
        Answer {
            code,
            warnings: warnings.iter().map(|w| (*w).to_owned()).collect(),
            message: message.map(str::to_owned),
        }
    }

    #[test]
    fn admitted_with_the_note_reached_the_webhook() {
        let n = note("resize-guard-webhook-abc", "validate");
        let got = classify(&answer(200, &["some other webhook: hi", &n], None));
        assert_eq!(
            got,
            Outcome::Reached(Arrival {
                replica: "resize-guard-webhook-abc".into(),
                stage: "validate".into()
            })
        );
        assert_eq!(got.result(), "reached");
    }

    #[test]
    fn admitted_without_the_note_bypassed_it() {
        // No warning at all (fail-open, or no configuration), or only others' warnings —
        // resize-guard's dry-run decision note included: only the probe note counts.
        for warnings in [
            &[][..],
            &["resize-guard (dry run): mutate decision excluded"][..],
            &["resize-guard: admission probe reached webhook replica x"][..],
        ] {
            let got = classify(&answer(200, warnings, None));
            assert_eq!(got, Outcome::Bypassed, "{warnings:?}");
            assert_eq!(got.result(), "bypassed");
        }
        assert_eq!(classify(&answer(201, &[], None)), Outcome::Bypassed);
    }

    #[test]
    fn a_refusal_is_an_error_naming_code_and_message() {
        let forbidden = "pods \"c-0\" is forbidden: User \"system:serviceaccount:resize-guard:resize-guard-controller\" cannot patch resource \"pods/resize\"";
        let got = classify(&answer(403, &[], Some(forbidden)));
        assert_eq!(
            got,
            Outcome::Error(format!("the API server answered HTTP 403: {forbidden}"))
        );
        assert_eq!(got.result(), "error");
        // failurePolicy Fail with the webhook down: refused, not bypassed.
        let closed = "Internal error occurred: failed calling webhook \"probe.resize-guard.io\": connection refused";
        assert!(matches!(
            classify(&answer(500, &[], Some(closed))),
            Outcome::Error(m) if m.contains("failed calling webhook")
        ));
        // The note on a refusal does not make it reached.
        let n = note("w", "mutate");
        assert!(matches!(
            classify(&answer(422, &[&n], Some("invalid"))),
            Outcome::Error(_)
        ));
        assert_eq!(
            classify(&answer(404, &[], None)),
            Outcome::Error("the API server answered HTTP 404: no message".into())
        );
    }
}
