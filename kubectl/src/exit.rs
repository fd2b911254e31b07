//! Exit statuses and error messages. Each outcome a script may branch on has its own status
//! ([`Exit`]; `--help` lists them, [`crate::help::MAIN`]), and an error says in one line what
//! went wrong and where: a connection that failed names the API server's URL and the
//! kubeconfig context ([`Target`]); a refusal by the API server is its own message (which names
//! the user for a Forbidden), once, without the client's nesting.

use std::fmt;

/// The exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Done; `what-if`: the resize would be accepted; `check`: every check passed.
    Done,
    /// `what-if`: the API server would refuse the resize.
    Refused,
    /// A usage error: clap's own (it exits 2 itself), or an argument only the plugin can check.
    Usage,
    /// The cluster could not be reached (kubeconfig, connection, TLS, timeout) or answered an
    /// error.
    Cluster,
    /// `check`: at least one check failed.
    CheckFailed,
}

impl Exit {
    /// The process exit status.
    pub fn code(self) -> i32 {
        match self {
            Exit::Done => 0,
            Exit::Refused => 1,
            Exit::Usage => 2,
            Exit::Cluster => 3,
            Exit::CheckFailed => 4,
        }
    }
}

/// An argument clap cannot check (a pod name, a quantity, a container the pod lacks).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// Marks `e` as a usage error, keeping its message.
pub fn usage(e: anyhow::Error) -> anyhow::Error {
    anyhow::Error::new(Usage(format!("{e:#}")))
}

/// Where the plugin talks to: for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The API server's URL.
    pub server: String,
    /// The kubeconfig context (empty when the kubeconfig has none).
    pub context: String,
    /// The kubeconfig user.
    pub user: String,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the API server {}", self.server)?;
        if !self.context.is_empty() {
            write!(f, " (context {}", self.context)?;
            if !self.user.is_empty() {
                write!(f, ", user {}", self.user)?;
            }
            write!(f, ")")?;
        }
        Ok(())
    }
}

/// What a client error says in one line: the API server's own message for an answer (a
/// Forbidden names the user and the verb), else the error and its innermost reason.
pub fn said(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        kube::Error::Api(status) => format!("{} (HTTP {})", status.reason, status.code),
        other => innermost(other),
    }
}

/// The exit status for `e` and its one-line message (without the `error: ` prefix). `target`
/// is where the plugin was talking to, once known.
pub fn report(e: &anyhow::Error, target: Option<&Target>) -> (Exit, String) {
    if e.chain().any(|c| c.is::<Usage>()) {
        return (Exit::Usage, format!("{e:#}"));
    }
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let Some(k) = cause.downcast_ref::<kube::Error>() else {
            parts.push(cause.to_string());
            continue;
        };
        return (Exit::Cluster, kube_message(k, &parts, target));
    }
    (Exit::Cluster, parts.join(": "))
}

/// A client error's message: the API server's own words for an answer, or where the request
/// could not go and the innermost reason for a transport failure.
fn kube_message(k: &kube::Error, doing: &[String], target: Option<&Target>) -> String {
    let doing = if doing.is_empty() {
        String::new()
    } else {
        format!("{}: ", doing.join(": "))
    };
    match k {
        kube::Error::Api(status) => {
            let said = if status.message.is_empty() {
                format!("{} (HTTP {})", status.reason, status.code)
            } else {
                status.message.clone()
            };
            match (status.code, target) {
                // Who was refused, and by which cluster: the answer to "which identity did I use?".
                (401 | 403, Some(t)) => format!("{doing}{said} ({t})"),
                _ => format!("{doing}{said}"),
            }
        }
        other => {
            let why = innermost(other);
            match target {
                Some(t) => format!("cannot reach {t}: {why} ({})", doing.trim_end_matches(": ")),
                None => format!("{doing}{why}"),
            }
        }
    }
}

/// The distinct messages of `e`'s sources after the first (which only names the client
/// layer: `HyperError: …`, `ServiceError: …`), joined; else `e` itself.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut causes: Vec<String> = Vec::new();
    let mut next = e.source();
    while let Some(c) = next {
        let text = c.to_string();
        // Layers often repeat their source's text in their own.
        if let Some(last) = causes.last_mut()
            && last.ends_with(&text)
        {
            *last = last
                .trim_end_matches(&text)
                .trim_end_matches([':', ' '])
                .to_owned();
        }
        causes.push(text);
        next = c.source();
    }
    causes.retain(|c| !c.is_empty());
    if causes.is_empty() {
        e.to_string()
    } else {
        causes.join(": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    fn target() -> Target {
        Target {
            server: "https://10.0.0.1:6443".into(),
            context: "prod".into(),
            user: "jane".into(),
        }
    }

    /// How `error`, met while `doing`, is reported against [`target`].
    fn reported(error: anyhow::Error, doing: &str) -> (Exit, String) {
        let e = Err::<(), _>(error).context(doing.to_owned()).unwrap_err();
        report(&e, Some(&target()))
    }

    #[test]
    fn each_outcome_has_its_own_status() {
        let codes = [
            Exit::Done,
            Exit::Refused,
            Exit::Usage,
            Exit::Cluster,
            Exit::CheckFailed,
        ]
        .map(Exit::code);
        assert_eq!(codes, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_usage_error_keeps_its_message_and_exits_2() {
        let e = usage(anyhow::anyhow!("\"a/b\" is not a pod name"));
        assert_eq!(
            reported(e, "explain"),
            (Exit::Usage, "explain: \"a/b\" is not a pod name".into())
        );
    }

    #[test]
    fn a_forbidden_answer_names_the_cluster_and_user_once() {
        let status = kube::core::Status::failure(
            "pods is forbidden: User \"nobody\" cannot list resource \"pods\"",
            "Forbidden",
        )
        .with_code(403);
        assert_eq!(
            reported(kube::Error::Api(Box::new(status)).into(), "listing pods"),
            (
                Exit::Cluster,
                "listing pods: pods is forbidden: User \"nobody\" cannot list resource \"pods\" \
                 (the API server https://10.0.0.1:6443 (context prod, user jane))"
                    .into()
            )
        );
    }

    #[test]
    fn an_answer_is_said_in_the_api_servers_words() {
        let status = kube::core::Status::failure("nodes is forbidden: User \"u\"", "Forbidden")
            .with_code(403);
        assert_eq!(
            said(&kube::Error::Api(Box::new(status))),
            "nodes is forbidden: User \"u\""
        );
    }

    #[test]
    fn a_failed_connection_names_the_server_and_context() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let e = kube::Error::Service(Box::new(io));
        assert_eq!(
            reported(e.into(), "reading pod shop/web-0"),
            (
                Exit::Cluster,
                "cannot reach the API server https://10.0.0.1:6443 (context prod, user jane): \
                 Connection refused (reading pod shop/web-0)"
                    .into()
            )
        );
    }
}
