//! May the caller install resize-guard? Asked of the API server's own authorizer with
//! SelfSubjectAccessReviews (the answer covers every binding and authorizer, as `kubectl auth
//! can-i` does), for:
//!
//! - every kind `deploy/base` creates ([`INSTALL_KINDS`]): `get`, `create` and `patch` — what
//!   `kubectl apply` (client- or server-side) and `helm install` send;
//! - the grants of its Roles and ClusterRoles ([`GRANTS`]): RBAC refuses a role or binding that
//!   grants more than its author holds, unless the author may `escalate` (roles) and `bind`
//!   (bindings); so either those, or every grant held.
//!
//! Both lists mirror `deploy/base`; the tests below read `deploy/base` and fail when they drift.

use futures::future::join_all;
use k8s_openapi::api::authorization::v1::{SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};

use super::rbac::{self, Permission, decide};
use crate::connection::Connection;

/// A kind `deploy/base` creates: kind, API group, resource, namespaced.
pub type Kind = (&'static str, &'static str, &'static str, bool);

/// The API group of RBAC's kinds.
const RBAC: &str = "rbac.authorization.k8s.io";
/// The API group of admission's kinds.
const ADMISSION: &str = "admissionregistration.k8s.io";

/// Every kind `deploy/base` creates.
pub const INSTALL_KINDS: &[Kind] = &[
    ("Namespace", "", "namespaces", false),
    (
        "PriorityClass",
        "scheduling.k8s.io",
        "priorityclasses",
        false,
    ),
    ("ClusterRole", RBAC, "clusterroles", false),
    ("ClusterRoleBinding", RBAC, "clusterrolebindings", false),
    (
        "ValidatingAdmissionPolicy",
        ADMISSION,
        "validatingadmissionpolicies",
        false,
    ),
    (
        "ValidatingAdmissionPolicyBinding",
        ADMISSION,
        "validatingadmissionpolicybindings",
        false,
    ),
    (
        "MutatingWebhookConfiguration",
        ADMISSION,
        "mutatingwebhookconfigurations",
        false,
    ),
    ("ServiceAccount", "", "serviceaccounts", true),
    ("Role", RBAC, "roles", true),
    ("RoleBinding", RBAC, "rolebindings", true),
    ("ConfigMap", "", "configmaps", true),
    ("Service", "", "services", true),
    ("Deployment", "apps", "deployments", true),
    (
        "PodDisruptionBudget",
        "policy",
        "poddisruptionbudgets",
        true,
    ),
    (
        "NetworkPolicy",
        "networking.k8s.io",
        "networkpolicies",
        true,
    ),
];

/// The verbs installing and upgrading send for each kind.
pub const INSTALL_VERBS: [&str; 3] = ["get", "create", "patch"];

/// A list of a rule's resources, verbs or object names.
pub type List = &'static [&'static str];

/// A grant of `deploy/base`'s roles, with the object names it is limited to (none: any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The API group.
    pub group: &'static str,
    /// The resources.
    pub resources: List,
    /// The verbs.
    pub verbs: List,
    /// The object names (empty: any).
    pub names: List,
    /// In the install namespace (a Role), else cluster-wide (a ClusterRole).
    pub namespaced: bool,
}

const fn cluster(group: &'static str, resources: List, verbs: List, names: List) -> Grant {
    Grant {
        group,
        resources,
        verbs,
        names,
        namespaced: false,
    }
}

const fn here(group: &'static str, resources: List, verbs: List, names: List) -> Grant {
    Grant {
        namespaced: true,
        ..cluster(group, resources, verbs, names)
    }
}

const READ: &[&str] = &["get", "list", "watch"];
const WEBHOOK_CONFIGS: &[&str] = &[
    "mutatingwebhookconfigurations",
    "validatingwebhookconfigurations",
];

/// The rules of the Roles and ClusterRoles in `deploy/base/rbac-webhook.yaml` and
/// `deploy/base/rbac-controller.yaml`, both programs'.
pub const GRANTS: &[Grant] = &[
    // Both ClusterRoles.
    cluster("", &["pods", "nodes"], READ, &[]),
    cluster("policy", &["poddisruptionbudgets"], &["list", "watch"], &[]),
    cluster("events.k8s.io", &["events"], &["create", "patch"], &[]),
    // The webhook's.
    cluster("metrics.k8s.io", &["pods"], &["get"], &[]),
    // The controller's.
    cluster("", &["pods/eviction"], &["create"], &[]),
    cluster("", &["pods", "pods/status"], &["patch"], &[]),
    cluster(
        ADMISSION,
        WEBHOOK_CONFIGS,
        &["get", "list", "watch", "patch"],
        &["resize-guard"],
    ),
    // The webhook's Role.
    here(
        "",
        &["configmaps"],
        READ,
        &["resize-guard", "resize-guard-last-good"],
    ),
    here("", &["secrets"], READ, &["resize-guard-webhook-tls"]),
    // The controller's Role.
    here(
        "",
        &["configmaps"],
        &["get", "list", "watch", "patch"],
        &["resize-guard-last-good"],
    ),
    here(
        "",
        &["secrets"],
        &["get", "list", "watch", "update", "patch"],
        &[
            "resize-guard-ca",
            "resize-guard-webhook-tls",
            "resize-guard-plan-key",
        ],
    ),
    here("", &["secrets", "configmaps"], &["create"], &[]),
    here(
        "",
        &["configmaps"],
        &["get", "patch"],
        &["resize-guard-brakes"],
    ),
    here(
        "coordination.k8s.io",
        &["leases"],
        &["get", "update", "patch"],
        &["resize-guard-controller"],
    ),
    here("coordination.k8s.io", &["leases"], &["create"], &[]),
    // The admission probe's dry-run resize of the controller's own pod (a ValidatingAdmissionPolicy
    // refuses it anything but a dry run).
    here("", &["pods/resize"], &["patch"], &[]),
];

/// Every single permission [`GRANTS`] gives, without repeats.
pub fn granted() -> Vec<Permission> {
    let mut out: Vec<Permission> = Vec::new();
    for g in GRANTS {
        let names: Vec<Option<&'static str>> = if g.names.is_empty() {
            vec![None]
        } else {
            g.names.iter().copied().map(Some).collect()
        };
        for resource in g.resources {
            for verb in g.verbs {
                for name in &names {
                    let p = Permission {
                        verb,
                        group: g.group,
                        resource,
                        namespaced: g.namespaced,
                        name: *name,
                    };
                    if !out.contains(&p) {
                        out.push(p);
                    }
                }
            }
        }
    }
    out
}

/// The permissions installing needs: [`INSTALL_VERBS`] on every [`INSTALL_KINDS`].
pub fn install_permissions() -> Vec<Permission> {
    INSTALL_KINDS
        .iter()
        .flat_map(|&(_, group, resource, namespaced)| {
            INSTALL_VERBS.iter().map(move |verb| Permission {
                verb,
                group,
                resource,
                namespaced,
                name: None,
            })
        })
        .collect()
}

/// What lets the caller write roles granting more than it holds.
pub const ESCALATION: [Permission; 4] = [
    rbac::any("escalate", RBAC, "clusterroles"),
    rbac::here("escalate", RBAC, "roles", None),
    rbac::any("bind", RBAC, "clusterroles"),
    rbac::here("bind", RBAC, "roles", None),
];

/// Asks whether the caller may do `perm` (in `namespace` when it is namespaced).
pub async fn may(conn: &Connection, perm: &Permission) -> Result<bool, kube::Error> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(perm.attributes(&conn.install_namespace)),
            ..Default::default()
        },
        ..Default::default()
    };
    decide(conn, &review, |r| r.status).await
}

/// Of `perms`, those the caller may not do; asked all at once.
pub async fn lacking(
    conn: &Connection,
    perms: &[Permission],
) -> Result<Vec<Permission>, kube::Error> {
    let answers = join_all(perms.iter().map(|p| may(conn, p))).await;
    let mut out = Vec::new();
    for (p, allowed) in perms.iter().zip(answers) {
        if !allowed? {
            out.push(*p);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every document of every file in `deploy/base`.
    fn deploy_base() -> Vec<serde_json::Value> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/base");
        let mut docs = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml")
                && path.file_name().is_some_and(|n| n != "kustomization.yaml")
            {
                let text = std::fs::read_to_string(&path).unwrap();
                for doc in serde_yaml_ng::Deserializer::from_str(&text) {
                    let v: serde_json::Value = serde::Deserialize::deserialize(doc).unwrap();
                    if !v.is_null() {
                        docs.push(v);
                    }
                }
            }
        }
        docs
    }

    #[test]
    fn the_kinds_are_those_deploy_base_creates() {
        let shipped: BTreeSet<String> = deploy_base()
            .iter()
            .map(|d| d["kind"].as_str().unwrap().to_owned())
            .collect();
        let listed: BTreeSet<String> = INSTALL_KINDS.iter().map(|k| k.0.to_owned()).collect();
        assert_eq!(listed, shipped);
        assert_eq!(install_permissions().len(), INSTALL_KINDS.len() * 3);
    }

    #[test]
    fn the_grants_are_those_of_deploy_bases_roles() {
        type Key = (String, String, String, bool, Option<String>);
        let mut shipped: BTreeSet<Key> = BTreeSet::new();
        for d in deploy_base() {
            let namespaced = match d["kind"].as_str() {
                Some("Role") => true,
                Some("ClusterRole") => false,
                _ => continue,
            };
            for rule in d["rules"].as_array().unwrap() {
                let list = |k: &str| -> Vec<String> {
                    rule[k]
                        .as_array()
                        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
                        .unwrap_or_default()
                };
                let names: Vec<Option<String>> = match list("resourceNames") {
                    n if n.is_empty() => vec![None],
                    n => n.into_iter().map(Some).collect(),
                };
                for group in list("apiGroups") {
                    for resource in list("resources") {
                        for verb in list("verbs") {
                            for name in &names {
                                shipped.insert((
                                    verb.clone(),
                                    group.clone(),
                                    resource.clone(),
                                    namespaced,
                                    name.clone(),
                                ));
                            }
                        }
                    }
                }
            }
        }
        let listed: BTreeSet<Key> = granted()
            .iter()
            .map(|p| {
                (
                    p.verb.to_owned(),
                    p.group.to_owned(),
                    p.resource.to_owned(),
                    p.namespaced,
                    p.name.map(str::to_owned),
                )
            })
            .collect();
        assert_eq!(listed, shipped);
        assert_eq!(listed.len(), granted().len(), "granted() repeats none");
    }
}
