//! Do resize-guard's ServiceAccounts have the permissions its programs need, and not more?
//! Asked of the API server's own authorizer with SubjectAccessReviews, one per permission, so
//! the answer covers every binding in the cluster, not only the ones `deploy/` ships. The
//! lists mirror what each program calls (ARCHITECTURE.md, "Names": the webhook reads and records
//! Events; the controller acts) and what each must never be able to do.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube::api::{Api, PostParams};

use resize_guard_policy::policy::{PdbMode, Policy};

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

/// Cluster-wide, any object.
pub(super) const fn any(
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
) -> Permission {
    Permission {
        verb,
        group,
        resource,
        namespaced: false,
        name: None,
    }
}

/// Cluster-scoped, the object `name` only.
const fn one(
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    name: &'static str,
) -> Permission {
    Permission {
        name: Some(name),
        ..any(verb, group, resource)
    }
}

/// In the install namespace: the object `name`, or any (`None`).
pub(super) const fn here(
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    name: Option<&'static str>,
) -> Permission {
    Permission {
        namespaced: true,
        name,
        ..any(verb, group, resource)
    }
}

/// What both programs read: watches of pods, nodes and PDBs (the node ledgers).
const LEDGER_READS: &[Permission] = &[
    any("list", "", "pods"),
    any("watch", "", "pods"),
    any("list", "", "nodes"),
    any("watch", "", "nodes"),
    any("list", "policy", "poddisruptionbudgets"),
    any("watch", "policy", "poddisruptionbudgets"),
];

/// What the webhook calls besides [`LEDGER_READS`]: its policy and its serving Secret by name,
/// and Events.
const WEBHOOK_OWN: &[Permission] = &[
    any("create", "events.k8s.io", "events"),
    any("patch", "events.k8s.io", "events"),
    here("get", "", "configmaps", Some("resize-guard")),
    here("watch", "", "configmaps", Some("resize-guard")),
    here("watch", "", "configmaps", Some("resize-guard-last-good")),
    here("get", "", "secrets", Some("resize-guard-webhook-tls")),
    here("watch", "", "secrets", Some("resize-guard-webhook-tls")),
];

/// What the network-facing webhook must never be able to do.
pub const WEBHOOK_MUST_NOT: &[Permission] = &[
    any("patch", "", "pods"),
    any("delete", "", "pods"),
    any("create", "", "pods/eviction"),
    any("patch", "", "pods/resize"),
    here("get", "", "secrets", Some("resize-guard-ca")),
    here("get", "", "secrets", Some("resize-guard-plan-key")),
    any("list", "", "secrets"),
    here("update", "", "configmaps", Some("resize-guard")),
    here("patch", "", "configmaps", Some("resize-guard-last-good")),
    one(
        "patch",
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        "resize-guard",
    ),
];

/// What the controller calls besides [`LEDGER_READS`].
const CONTROLLER_OWN: &[Permission] = &[
    any("create", "events.k8s.io", "events"),
    any("create", "", "pods/eviction"),
    any("patch", "", "pods"),
    any("patch", "", "pods/status"),
    one(
        "patch",
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        "resize-guard",
    ),
    one(
        "patch",
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "resize-guard",
    ),
    here("get", "", "configmaps", Some("resize-guard")),
    here("watch", "", "configmaps", Some("resize-guard")),
    here("watch", "", "configmaps", Some("resize-guard-last-good")),
    here("patch", "", "configmaps", Some("resize-guard-last-good")),
    here("get", "", "configmaps", Some("resize-guard-brakes")),
    here("patch", "", "configmaps", Some("resize-guard-brakes")),
    here("get", "", "secrets", Some("resize-guard-plan-key")),
    here("get", "", "secrets", Some("resize-guard-ca")),
    here("update", "", "secrets", Some("resize-guard-ca")),
    here("get", "", "secrets", Some("resize-guard-webhook-tls")),
    here("update", "", "secrets", Some("resize-guard-webhook-tls")),
    here("create", "", "secrets", None),
    here(
        "get",
        "coordination.k8s.io",
        "leases",
        Some("resize-guard-controller"),
    ),
    here(
        "update",
        "coordination.k8s.io",
        "leases",
        Some("resize-guard-controller"),
    ),
    here("create", "coordination.k8s.io", "leases", None),
    // The admission probe: a dry-run resize of its own pod (`controller/src/admission_probe.rs`).
    here("patch", "", "pods/resize", None),
];

/// What the controller must never be able to do.
pub const CONTROLLER_MUST_NOT: &[Permission] = &[
    any("list", "", "secrets"),
    any("get", "", "secrets"),
    any("create", "", "pods"),
    any("patch", "", "nodes"),
    any("delete", "", "nodes"),
    here("update", "", "configmaps", Some("resize-guard")),
    any(
        "patch",
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    ),
    any("create", "rbac.authorization.k8s.io", "clusterrolebindings"),
    any("impersonate", "", "serviceaccounts"),
];

/// Everything the webhook calls.
pub fn webhook_needs() -> Vec<Permission> {
    [LEDGER_READS, WEBHOOK_OWN].concat()
}

/// Victims deleted (`preemption.pdb: bestEffort`): `deploy/components/best-effort-deletes`.
pub const DELETE_PODS: Permission = any("delete", "", "pods");
/// Infeasible resizes reverted (`feasibility.revertInfeasible`):
/// `deploy/components/revert-infeasible`.
pub const RESIZE_PODS: Permission = any("patch", "", "pods/resize");

/// Everything the controller calls under `policy` (the policy in force; `None`: unknown, so
/// only what every policy needs): [`DELETE_PODS`] and [`RESIZE_PODS`] only when it asks for them.
pub fn controller_needs(policy: Option<&Policy>) -> Vec<Permission> {
    let mut needs = [LEDGER_READS, CONTROLLER_OWN].concat();
    if let Some(p) = policy {
        if p.preemption.pdb == PdbMode::BestEffort {
            needs.push(DELETE_PODS);
        }
        if p.feasibility.revert_infeasible {
            needs.push(RESIZE_PODS);
        }
    }
    needs
}

impl Permission {
    /// The permission as an access review asks about it, in `namespace` when namespaced.
    pub fn attributes(&self, namespace: &str) -> ResourceAttributes {
        let (resource, subresource) = match self.resource.split_once('/') {
            Some((r, s)) => (r, Some(s.to_owned())),
            None => (self.resource, None),
        };
        ResourceAttributes {
            verb: Some(self.verb.into()),
            group: Some(self.group.into()),
            resource: Some(resource.into()),
            subresource,
            namespace: self.namespaced.then(|| namespace.to_owned()),
            name: self.name.map(str::to_owned),
            ..Default::default()
        }
    }

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
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{ns}:{sa}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(perm.attributes(ns)),
            ..Default::default()
        },
        ..Default::default()
    };
    decide(conn, &review, |r| r.status).await
}

/// Sends `review` (a SubjectAccessReview or SelfSubjectAccessReview) and reads its `status`:
/// whether the API server's authorizer allows it.
pub async fn decide<K>(
    conn: &Connection,
    review: &K,
    status: impl FnOnce(K) -> Option<SubjectAccessReviewStatus>,
) -> Result<bool, kube::Error>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let answer = Api::<K>::all(conn.client.clone())
        .create(&PostParams::default(), review)
        .await?;
    Ok(status(answer).is_some_and(|s| s.allowed))
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
            controller_needs(None)[24].describe("resize-guard"),
            "get leases.coordination.k8s.io resize-guard-controller in resize-guard"
        );
        for (needs, must_not) in [
            (webhook_needs(), WEBHOOK_MUST_NOT),
            (controller_needs(None), CONTROLLER_MUST_NOT),
        ] {
            for n in &needs {
                assert!(!must_not.contains(n), "{n:?} is both needed and forbidden");
            }
        }
    }

    #[test]
    fn deletes_and_resizes_are_needed_only_when_the_policy_asks() {
        let parse = |doc: &str| Policy::from_yaml(doc).unwrap();
        let base = controller_needs(Some(&parse("mode: enforce\n")));
        assert!(!base.contains(&DELETE_PODS) && !base.contains(&RESIZE_PODS));
        assert_eq!(base, controller_needs(None));
        let deletes = controller_needs(Some(&parse(
            "mode: enforce\npreemption:\n  enabled: true\n  pdb: bestEffort\n",
        )));
        assert!(deletes.contains(&DELETE_PODS) && !deletes.contains(&RESIZE_PODS));
        let reverts = controller_needs(Some(&parse(
            "mode: enforce\nfeasibility:\n  revertInfeasible: true\n",
        )));
        assert!(reverts.contains(&RESIZE_PODS) && !reverts.contains(&DELETE_PODS));
        assert_eq!(
            DELETE_PODS.describe("resize-guard"),
            "delete pods cluster-wide"
        );
    }
}
