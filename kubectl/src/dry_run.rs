//! A `pods/resize` PATCH sent as a server-side dry run (`dryRun=All`), answered by the real API
//! server: its built-in validation, admission plugins and webhooks all run, nothing is stored
//! and no Event is recorded (resize-guard's webhooks are `sideEffects: NoneOnDryRun`). The
//! answer keeps what the typed client drops: the `Warning` headers, where resize-guard's
//! warnings and its dry-run decision come back.

use anyhow::Context as _;
use kube::Client;
use resize_guard_policy::admission::parse_dry_run_note;
use resize_guard_policy::dry_run::{self, PATCH_CONTENT_TYPE, resize_uri};
use serde::Serialize;

/// The API server's answer to a dry-run resize.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// Accepted (HTTP 2xx).
    pub accepted: bool,
    /// The HTTP status code.
    pub code: u16,
    /// The refusal message, when refused.
    pub message: Option<String>,
    /// Warnings, in order, without resize-guard's dry-run decision notes.
    pub warnings: Vec<String>,
    /// resize-guard's decisions, per webhook stage that answered.
    pub decisions: Vec<StageDecision>,
}

/// One webhook stage's decision, from its dry-run note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageDecision {
    /// `mutate` or `validate`.
    pub stage: String,
    /// The decision label (its `decision` audit annotation).
    pub decision: String,
}

impl Answer {
    /// Whether a refusal is about the resize itself — validation (400, 422) or admission (403
    /// from a webhook or an admission policy) — and not about the caller or the request: an
    /// authorizer's Forbidden (`User "…" cannot patch resource "pods/resize" …`, the RBAC
    /// authorizer's wording, kubernetes `plugin/pkg/auth/authorizer/rbac/rbac.go`), 401, 404,
    /// 409, 429 or 5xx. Those are errors, not a "no".
    pub fn refused_the_resize(&self) -> bool {
        let message = self.message.as_deref().unwrap_or_default();
        match self.code {
            400 | 422 => true,
            403 => !(message.contains("User \"") && message.contains("\" cannot ")),
            _ => false,
        }
    }

    /// Whether any resize-guard webhook answered (a decision came back, or a denial by it).
    pub fn reached_resize_guard(&self) -> bool {
        !self.decisions.is_empty()
            || self
                .message
                .as_deref()
                .is_some_and(|m| m.contains(".resize-guard.io\" denied the request"))
    }
}

/// PATCHes `patch` (strategic merge) onto pod `namespace/name`'s resize subresource, dry run.
pub async fn resize(
    client: &Client,
    namespace: &str,
    name: &str,
    patch: &serde_json::Value,
) -> anyhow::Result<Answer> {
    let body = serde_json::to_vec(patch).context("encoding the resize patch")?;
    let request = http::Request::patch(resize_uri(namespace, name, "kubectl-resize-guard"))
        .header(http::header::CONTENT_TYPE, PATCH_CONTENT_TYPE)
        .header(http::header::ACCEPT, "application/json")
        .body(kube::client::Body::from(body))
        .context("building the dry-run request")?;
    let response = client
        .send(request)
        .await
        .with_context(|| format!("sending a dry-run resize of pod {namespace}/{name}"))?;
    let (head, body) = response.into_parts();
    let body = body
        .collect_bytes()
        .await
        .context("reading the API server's answer")?;
    let warnings = head.headers.get_all(http::header::WARNING);
    let read = dry_run::Answer::read(
        head.status.as_u16(),
        warnings.iter().filter_map(|v| v.to_str().ok()),
        &body,
    );
    let mut answer = Answer {
        accepted: read.admitted(),
        code: read.code,
        message: read.message,
        warnings: Vec::new(),
        decisions: Vec::new(),
    };
    for w in read.warnings {
        match parse_dry_run_note(&w) {
            Some((stage, decision)) => answer.decisions.push(StageDecision {
                stage: stage.to_owned(),
                decision: decision.to_owned(),
            }),
            None => answer.warnings.push(w),
        }
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_validation_and_admission_refuse_the_resize() {
        let answer = |code: u16, message: &str| Answer {
            accepted: false,
            code,
            message: Some(message.into()),
            warnings: vec![],
            decisions: vec![],
        };
        assert!(
            answer(
                403,
                "admission webhook \"mutate.resize-guard.io\" denied the request: resize-guard: no"
            )
            .refused_the_resize()
        );
        assert!(
            answer(
                422,
                "Pod \"app\" is invalid: spec: Forbidden: pod updates may not change fields"
            )
            .refused_the_resize()
        );
        assert!(!answer(403, "pods \"app\" is forbidden: User \"system:serviceaccount:rg:w\" cannot patch resource \"pods/resize\" in API group \"\" in the namespace \"shop\"").refused_the_resize());
        for code in [401, 404, 409, 429, 500, 503] {
            assert!(!answer(code, "x").refused_the_resize(), "{code}");
        }
    }
}
