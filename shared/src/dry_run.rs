//! A server-side dry-run resize as a client sends it itself: a strategic-merge PATCH of a pod's
//! `resize` subresource with `dryRun=All`, and what is read of the API server's answer (its
//! status code, its `Warning` headers' texts, a refusal's message), which kube's typed API
//! drops. The controller's admission probe and the plugin's dry runs send and read it alike;
//! each sends it through its own HTTP client.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

use crate::warning::warning_text;

/// The `Content-Type` of the PATCH: a strategic merge patch, as `kubectl patch` sends.
pub const PATCH_CONTENT_TYPE: &str = "application/strategic-merge-patch+json";

/// The path (and query) of a dry-run resize of pod `namespace/name`, written by
/// `field_manager`. The names are put in as given, not escaped.
pub fn resize_uri(namespace: &str, name: &str, field_manager: &str) -> String {
    format!(
        "/api/v1/namespaces/{namespace}/pods/{name}/resize?dryRun=All&fieldManager={field_manager}"
    )
}

/// The API server's answer to a dry-run resize: its status code, the texts of its `Warning`
/// headers and, when refused, its message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status code.
    pub code: u16,
    /// The `Warning` headers' texts, in order.
    pub warnings: Vec<String>,
    /// The refusal's message (the `Status` message, else the body), when not 2xx.
    pub message: Option<String>,
}

impl Answer {
    /// Reads an answer from its status `code`, its `Warning` header values (a value not in the
    /// `299 - "text"` form is left out) and its `body`.
    pub fn read<'a>(code: u16, warnings: impl IntoIterator<Item = &'a str>, body: &[u8]) -> Self {
        let mut answer = Answer {
            code,
            warnings: warnings.into_iter().filter_map(warning_text).collect(),
            message: None,
        };
        if !answer.admitted() {
            answer.message = Some(
                serde_json::from_slice::<Status>(body)
                    .ok()
                    .and_then(|s| s.message)
                    .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned()),
            );
        }
        answer
    }

    /// Whether the API server admitted the resize (HTTP 2xx).
    pub fn admitted(&self) -> bool {
        (200..300).contains(&self.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_admitted_answer_keeps_its_warnings_and_has_no_message() {
        let a = Answer::read(
            200,
            [r#"299 - "one""#, "not a warning", r#"299 - "two""#],
            b"{}",
        );
        assert_eq!(
            a,
            Answer {
                code: 200,
                warnings: vec!["one".into(), "two".into()],
                message: None,
            }
        );
        assert!(a.admitted());
    }

    #[test]
    fn a_refusal_says_the_status_message_else_the_body() {
        let status = br#"{"kind":"Status","apiVersion":"v1","message":"pods \"p\" is forbidden"}"#;
        let a = Answer::read(403, [], status);
        assert!(!a.admitted());
        assert_eq!(a.message.as_deref(), Some("pods \"p\" is forbidden"));
        let a = Answer::read(502, [], b"bad gateway");
        assert_eq!(a.message.as_deref(), Some("bad gateway"));
    }

    #[test]
    fn the_path_names_the_pod_the_dry_run_and_the_manager() {
        assert_eq!(
            resize_uri("shop", "app-0", "kubectl-resize-guard"),
            "/api/v1/namespaces/shop/pods/app-0/resize?dryRun=All&fieldManager=kubectl-resize-guard"
        );
    }
}
