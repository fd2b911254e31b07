//! Do resize-guard's ServiceAccounts have the permissions its programs need, and not more?
//! Asked of the API server's own authorizer with SubjectAccessReviews, one per permission, so
//! the answer covers every binding in the cluster, not only the ones `deploy/` ships. The
//! lists mirror what each program calls (ARCHITECTURE.md §7: the webhook reads and records Events; the
//! controller acts) and what each must never be able to do.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use crate::connection::Connection;

/// One permission: verb, API group, resource (with subresource), namespace-scoped or not, and
/// an object name when RBAC grants it by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission {
    /// The verb.
    pub verb: &'static str,
    /// The API group (`""` is core).
    pub group: &'static str,
    /// `resource` or `resource/subresource`.
    pub resource: &'static str,
    /// In the install namespace (else cluster-wide).
    pub namespaced: bool,
    /// The object name, when granted by name.
    pub name: Option<&'static str>,
}

const fn p(
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    namespaced: bool,
    name: Option<&'static str>,
) -> Permission {
    Permission {
        verb,
        group,
        resource,
        namespaced,
        name,
    }
}

/// What both programs read: watches of pods, nodes and PDBs (the node ledgers).
const LEDGER_READS: &[Permission] = &[
    p("list", "", "pods", false, None),
    p("watch", "", "pods", false, None),
    p("list", "", "nodes", false, None),
    p("watch", "", "nodes", false, None),
    p("list", "policy", "poddisruptionbudgets", false, None),
    p("watch", "policy", "poddisruptionbudgets", false, None),
];

/// What the webhook calls besides [`LEDGER_READS`]: its policy and its serving Secret by name,
/// and Events.
const WEBHOOK_OWN: &[Permission] = &[
    p("create", "events.k8s.io", "events", false, None),
    p("patch", "events.k8s.io", "events", false, None),
    p("get", "", "configmaps", true, Some("resize-guard")),
    p("watch", "", "configmaps", true, Some("resize-guard")),
    p(
        "watch",
        "",
        "configmaps",
        true,
        Some("resize-guard-last-good"),
    ),
    p("get", "", "secrets", true, Some("resize-guard-webhook-tls")),
    p(
        "watch",
        "",
        "secrets",
        true,
        Some("resize-guard-webhook-tls"),
    ),
];

/// What the network-facing webhook must never be able to do.
pub const WEBHOOK_MUST_NOT: &[Permission] = &[
    p("patch", "", "pods", false, None),
    p("delete", "", "pods", false, None),
    p("create", "", "pods/eviction", false, None),
    p("patch", "", "pods/resize", false, None),
    p("get", "", "secrets", true, Some("resize-guard-ca")),
    p("get", "", "secrets", true, Some("resize-guard-plan-key")),
    p("list", "", "secrets", false, None),
    p("update", "", "configmaps", true, Some("resize-guard")),
    p(
        "patch",
        "",
        "configmaps",
        true,
        Some("resize-guard-last-good"),
    ),
    p(
        "patch",
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        false,
        Some("resize-guard"),
    ),
];

/// What the controller calls besides [`LEDGER_READS`].
const CONTROLLER_OWN: &[Permission] = &[
    p("create", "events.k8s.io", "events", false, None),
    p("create", "", "pods/eviction", false, None),
    p("patch", "", "pods", false, None),
    p("delete", "", "pods", false, None),
    p("patch", "", "pods/status", false, None),
    p("patch", "", "pods/resize", false, None),
    p(
        "patch",
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        false,
        Some("resize-guard"),
    ),
    p(
        "patch",
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        false,
        Some("resize-guard"),
    ),
    p("get", "", "configmaps", true, Some("resize-guard")),
    p("watch", "", "configmaps", true, Some("resize-guard")),
    p(
        "watch",
        "",
        "configmaps",
        true,
        Some("resize-guard-last-good"),
    ),
    p(
        "patch",
        "",
        "configmaps",
        true,
        Some("resize-guard-last-good"),
    ),
    p("get", "", "secrets", true, Some("resize-guard-plan-key")),
    p("get", "", "secrets", true, Some("resize-guard-ca")),
    p("update", "", "secrets", true, Some("resize-guard-ca")),
    p("get", "", "secrets", true, Some("resize-guard-webhook-tls")),
    p(
        "update",
        "",
        "secrets",
        true,
        Some("resize-guard-webhook-tls"),
    ),
    p("create", "", "secrets", true, None),
    p(
        "get",
        "coordination.k8s.io",
        "leases",
        true,
        Some("resize-guard-controller"),
    ),
    p(
        "update",
        "coordination.k8s.io",
        "leases",
        true,
        Some("resize-guard-controller"),
    ),
    p("create", "coordination.k8s.io", "leases", true, None),
];

/// What the controller must never be able to do.
pub const CONTROLLER_MUST_NOT: &[Permission] = &[
    p("list", "", "secrets", false, None),
    p("get", "", "secrets", false, None),
    p("create", "", "pods", false, None),
    p("patch", "", "nodes", false, None),
    p("delete", "", "nodes", false, None),
    p("update", "", "configmaps", true, Some("resize-guard")),
    p(
        "patch",
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        false,
        None,
    ),
    p(
        "create",
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        false,
        None,
    ),
    p("impersonate", "", "serviceaccounts", false, None),
];

/// Everything the webhook calls.
pub fn webhook_needs() -> Vec<Permission> {
    [LEDGER_READS, WEBHOOK_OWN].concat()
}

/// Everything the controller calls.
pub fn controller_needs() -> Vec<Permission> {
    [LEDGER_READS, CONTROLLER_OWN].concat()
}

impl Permission {
    /// `verb group/resource[ name][ in ns]`, as `kubectl auth can-i` reads.
    pub fn describe(&self, namespace: &str) -> String {
        let group = if self.group.is_empty() {
            String::new()
        } else {
            format!(".{}", self.group)
        };
        let (resource, sub) = match self.resource.split_once('/') {
            Some((r, s)) => (r, format!("/{s}")),
            None => (self.resource, String::new()),
        };
        let mut out = format!("{} {resource}{group}{sub}", self.verb);
        if let Some(n) = self.name {
            out.push_str(&format!(" {n}"));
        }
        if self.namespaced {
            out.push_str(&format!(" in {namespace}"));
        } else if self.name.is_none() {
            out.push_str(" cluster-wide");
        }
        out
    }
}

/// Asks whether ServiceAccount `namespace/name` may do `perm`.
pub async fn allowed(conn: &Connection, sa: &str, perm: &Permission) -> Result<bool, kube::Error> {
    let ns = &conn.install_namespace;
    let (resource, subresource) = match perm.resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_owned())),
        None => (perm.resource, None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{ns}:{sa}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(perm.verb.into()),
                group: Some(perm.group.into()),
                resource: Some(resource.into()),
                subresource,
                namespace: perm.namespaced.then(|| ns.clone()),
                name: perm.name.map(str::to_owned),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(conn.client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// The permissions `sa` lacks from `needs` and has from `must_not`.
pub async fn audit(
    conn: &Connection,
    sa: &str,
    needs: &[Permission],
    must_not: &[Permission],
) -> Result<(Vec<Permission>, Vec<Permission>), kube::Error> {
    let mut lacking = Vec::new();
    for perm in needs {
        if !allowed(conn, sa, perm).await? {
            lacking.push(*perm);
        }
    }
    let mut excess = Vec::new();
    for perm in must_not {
        if allowed(conn, sa, perm).await? {
            excess.push(*perm);
        }
    }
    Ok((lacking, excess))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_read_like_kubectl_auth_can_i() {
        assert_eq!(
            WEBHOOK_MUST_NOT[2].describe("resize-guard"),
            "create pods/eviction cluster-wide"
        );
        assert_eq!(
            controller_needs()[24].describe("resize-guard"),
            "get leases.coordination.k8s.io resize-guard-controller in resize-guard"
        );
        for (needs, must_not) in [
            (webhook_needs(), WEBHOOK_MUST_NOT),
            (controller_needs(), CONTROLLER_MUST_NOT),
        ] {
            for n in &needs {
                assert!(!must_not.contains(n), "{n:?} is both needed and forbidden");
            }
        }
    }
}
