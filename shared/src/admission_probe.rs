//! The admission probe's protocol, shared by the side that answers it (`webhook/src/review.rs`)
//! and the sides that send it (`controller/src/admission_probe.rs`, and the post-install check
//! that runs the same code).
//!
//! A probe is a server-side dry-run `pods/resize` that changes nothing, sent through the API
//! server by one of resize-guard's own ServiceAccounts ([`PROBERS`]) about a pod in resize-guard's
//! own namespace. The webhook configurations call resize-guard for it (their
//! `probe.resize-guard.io` entry, deploy/base/webhook-configurations.yaml), and the webhook
//! answers it — only it, [`is_probe`] — allowed, with the warning [`note`]. The API server passes
//! that warning back as a `Warning` header, so the sender learns that the call reached a webhook
//! replica; a probe admitted without it was admitted without resize-guard: resizes are failing
//! open (failurePolicy Ignore) or the webhook is not registered.
//!
//! Who may probe is read from `userInfo`, which the API server sets from the authenticated
//! request: no tenant can send a probe, and a tenant's dry run never gets the note back.

/// The ServiceAccounts (of resize-guard's namespace) whose dry-run resizes are probes: the
/// controller's, and the post-install check's (charts/resize-guard/templates/tests/,
/// deploy/post-install-check/).
pub const PROBERS: [&str; 2] = ["resize-guard-controller", "resize-guard-check"];

const PREFIX: &str = "resize-guard: admission probe reached webhook replica ";
const AT: &str = " at /";

/// Whether a `pods/resize` request is a probe: a dry run, by one of [`PROBERS`] of
/// `install_namespace`, about a pod in `install_namespace`.
pub fn is_probe(dry_run: bool, user: &str, namespace: &str, install_namespace: &str) -> bool {
    dry_run
        && namespace == install_namespace
        && PROBERS
            .iter()
            .any(|sa| user == format!("system:serviceaccount:{install_namespace}:{sa}"))
}

/// The warning the webhook answers a probe with: which replica (`replica`) answered it on which
/// stage (`mutate` or `validate`).
pub fn note(replica: &str, stage: &str) -> String {
    format!("{PREFIX}{replica}{AT}{stage}")
}

/// Where a probe arrived, read back from one of the answer's warnings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// The webhook replica that answered (its pod name).
    pub replica: String,
    /// `mutate` or `validate`.
    pub stage: String,
}

/// The [`note`] among `warnings`, if one came back.
pub fn arrival<'a>(warnings: impl IntoIterator<Item = &'a str>) -> Option<Arrival> {
    warnings.into_iter().find_map(|w| {
        let (replica, stage) = w.strip_prefix(PREFIX)?.rsplit_once(AT)?;
        Some(Arrival {
            replica: replica.to_owned(),
            stage: stage.to_owned(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: &str = "resize-guard";

    #[test]
    fn only_a_dry_run_of_a_prober_in_its_own_namespace_is_a_probe() {
        let controller = "system:serviceaccount:resize-guard:resize-guard-controller";
        let check = "system:serviceaccount:resize-guard:resize-guard-check";
        assert!(is_probe(true, controller, NS, NS));
        assert!(is_probe(true, check, NS, NS));
        // A real resize, another namespace's pod, another account, an account of that name in
        // another namespace (a tenant can create one), a user named like the account.
        assert!(!is_probe(false, controller, NS, NS));
        assert!(!is_probe(true, controller, "shop", NS));
        assert!(!is_probe(
            true,
            "system:serviceaccount:resize-guard:resize-guard-webhook",
            NS,
            NS
        ));
        assert!(!is_probe(
            true,
            "system:serviceaccount:shop:resize-guard-controller",
            "shop",
            NS
        ));
        assert!(!is_probe(
            true,
            "system:serviceaccount:shop:resize-guard-controller",
            NS,
            NS
        ));
        assert!(!is_probe(true, "resize-guard-controller", NS, NS));
        assert!(!is_probe(true, "", NS, NS));
        // A renamed install probes from its own namespace only.
        let moved = "system:serviceaccount:platform-rg:resize-guard-controller";
        assert!(is_probe(true, moved, "platform-rg", "platform-rg"));
        assert!(!is_probe(true, moved, "platform-rg", NS));
    }

    #[test]
    fn the_note_reads_back_among_other_warnings() {
        let n = note("resize-guard-webhook-7d9f-abcde", "mutate");
        assert_eq!(
            n,
            "resize-guard: admission probe reached webhook replica resize-guard-webhook-7d9f-abcde at /mutate"
        );
        let warnings = [
            "resize-guard (dry run): mutate decision excluded",
            n.as_str(),
        ];
        assert_eq!(
            arrival(warnings),
            Some(Arrival {
                replica: "resize-guard-webhook-7d9f-abcde".into(),
                stage: "mutate".into()
            })
        );
        assert_eq!(arrival(["resize-guard: something else"]), None);
        assert_eq!(arrival(Vec::<&str>::new()), None);
        // The prefix without a stage is not a note.
        assert_eq!(
            arrival(["resize-guard: admission probe reached webhook replica x"]),
            None
        );
    }
}
