//! The text of the API server's `Warning` response headers, which is where admission webhooks'
//! warnings reach a client: the controller's admission probe and the plugin's dry runs read them
//! the same way, as kubectl prints them.

/// The text of one `Warning` header value (RFC 9111 §5.5: `299 - "text"`, the text a quoted
/// string), as the API server writes them (`k8s.io/apiserver/pkg/endpoints/handlers/warning`).
pub fn warning_text(header: &str) -> Option<String> {
    let rest = header.trim();
    let start = rest.find('"')?;
    let quoted = rest[start + 1..].strip_suffix('"').or_else(|| {
        // A warn-date may follow the text: cut at the last quote.
        let end = rest.rfind('"')?;
        (end > start).then(|| &rest[start + 1..end])
    })?;
    let mut out = String::with_capacity(quoted.len());
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_headers_unquote_like_kubectl_prints_them() {
        assert_eq!(
            warning_text(r#"299 - "resize-guard: node n lacks cpu 120m""#).as_deref(),
            Some("resize-guard: node n lacks cpu 120m")
        );
        assert_eq!(
            warning_text(r#"299 - "say \"hi\" \\ bye""#).as_deref(),
            Some(r#"say "hi" \ bye"#)
        );
        assert_eq!(warning_text("299 - no quotes"), None);
        assert_eq!(warning_text("299 - \""), None);
    }
}
