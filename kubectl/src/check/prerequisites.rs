//! `check --pre`: before `kubectl apply -k deploy/` (or `helm install`), what can be known from
//! here. Checked: the API server answers from this machine and runs a Kubernetes resize-guard
//! supports, serving `pods/resize`; the caller may create what `deploy/base` creates and grant
//! what its roles grant ([`super::install_rights`]); Ready Linux nodes exist for the programs'
//! pods (`nodeSelector: kubernetes.io/os: linux`, two webhook replicas spread across nodes); and
//! whether resize-guard is installed already (then applying is an upgrade, and the release it
//! runs is shown).
//!
//! Not checked, and said so in the report's notes: whether the API server can open connections
//! to the webhook's pods on port 10250. That path runs from the control plane to the pod network,
//! which nothing on this machine can exercise before a pod listens there; after installing,
//! `check --wait` proves it with a dry-run resize through the webhook (its admission check).

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

use super::install_rights::{self, ESCALATION, INSTALL_KINDS, INSTALL_VERBS};
use super::rbac::Permission;
use super::{Line, Mode, Report, fail, kubernetes, line, release};
use crate::connection::Connection;
use crate::exit::said;
use crate::facts::list_pages;
use crate::table::Mark;
use crate::versions;

/// What the report says it could not check.
pub const NOT_CHECKED: &str = "not checked from here: whether the API server can reach the \
    webhook's pods on port 10250 (a control-plane firewall, as on GKE private clusters, may allow \
    only some ports to the nodes); after installing, `kubectl resize-guard check --wait` proves \
    it with a dry-run resize through the webhook";

/// Every pre-install check; an error when the cluster cannot be reached at all.
pub async fn run(conn: &Connection) -> anyhow::Result<Report> {
    let mut out = vec![kubernetes::version(conn).await?];
    out.push(line(
        "kubernetes",
        Mark::Ok,
        format!("the API server {} answers from here", conn.target.server),
    ));
    out.push(resize_served(conn).await);
    out.push(install_line(conn).await);
    out.push(grant_line(conn).await);
    out.push(nodes_line(conn).await);
    let (installed, versions) = existing(conn).await;
    out.push(installed);
    if let Some(v) = &versions {
        out.extend(release::lines(v));
    }
    Ok(Report::new(
        Mode::PreInstall,
        out,
        vec![NOT_CHECKED.to_owned()],
        versions,
    ))
}

/// Does the API server serve `pods/resize`? (A minor that should can have it turned off.)
async fn resize_served(conn: &Connection) -> Line {
    const S: &str = "kubernetes";
    match conn.client.list_core_api_resources("v1").await {
        Ok(list) if list.resources.iter().any(|r| r.name == "pods/resize") => {
            line(S, Mark::Ok, "the API server serves pods/resize")
        }
        Ok(_) => fail(
            S,
            "the API server does not serve pods/resize: in-place resize is off",
            "enable the InPlacePodVerticalScaling feature gate on kube-apiserver and the kubelets",
        ),
        Err(e) => line(
            S,
            Mark::Warn,
            format!("cannot list the API server's core resources: {}", said(&e)),
        ),
    }
}

/// `kubectl auth can-i`'s words for a list of permissions, the verbs on one object together
/// (`get, create, patch namespaces cluster-wide`).
fn describe(perms: &[Permission], namespace: &str) -> String {
    let mut groups: Vec<(Vec<&str>, String)> = Vec::new();
    for p in perms {
        let full = p.describe(namespace);
        let object = full[p.verb.len()..].trim_start().to_owned();
        match groups.iter_mut().find(|(_, o)| *o == object) {
            Some((verbs, _)) => verbs.push(p.verb),
            None => groups.push((vec![p.verb], object)),
        }
    }
    groups
        .iter()
        .map(|(verbs, object)| format!("{} {object}", verbs.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// May the caller get, create and patch every kind `deploy/base` creates?
async fn install_line(conn: &Connection) -> Line {
    const S: &str = "permissions";
    let ns = &conn.install_namespace;
    match install_rights::lacking(conn, &install_rights::install_permissions()).await {
        Ok(lacking) if lacking.is_empty() => line(
            S,
            Mark::Ok,
            format!(
                "you may {} the {} kinds deploy/ creates (cluster-wide, and in namespace {ns})",
                INSTALL_VERBS.join(", "),
                INSTALL_KINDS.len()
            ),
        ),
        Ok(lacking) => fail(
            S,
            format!("you may not {}", describe(&lacking, ns)),
            "install as a cluster administrator, or have one grant these (kubectl auth can-i \
             <verb> <resource> shows each)",
        ),
        Err(e) => unanswered(S, "do", &e),
    }
}

/// May the caller write `deploy/base`'s roles and bindings? RBAC lets it when it may escalate
/// and bind, or holds every grant itself.
async fn grant_line(conn: &Connection) -> Line {
    const S: &str = "permissions";
    let ns = &conn.install_namespace;
    let outcome = async {
        if install_rights::lacking(conn, &ESCALATION).await?.is_empty() {
            return Ok((None, 0));
        }
        let grants = install_rights::granted();
        let lacking = install_rights::lacking(conn, &grants).await?;
        Ok::<_, kube::Error>((Some(lacking), grants.len()))
    }
    .await;
    match outcome {
        Ok((None, _)) => line(
            S,
            Mark::Ok,
            "you may escalate and bind roles and clusterroles, so you may grant the programs \
             their permissions",
        ),
        Ok((Some(lacking), n)) if lacking.is_empty() => line(
            S,
            Mark::Ok,
            format!(
                "you hold each of the {n} permissions deploy/'s roles grant, so you may grant them"
            ),
        ),
        Ok((Some(lacking), n)) => fail(
            S,
            format!(
                "the API server will refuse deploy/'s roles and bindings: you may not escalate and \
                 bind roles, and lack {} of the {n} permissions they grant: {}",
                lacking.len(),
                describe(&lacking, ns)
            ),
            "install as a cluster administrator, or have one grant you escalate and bind on \
             roles and clusterroles",
        ),
        Err(e) => unanswered(S, "grant", &e),
    }
}

/// The warning when the API server could not be asked what the caller may `what`.
fn unanswered(section: &'static str, what: &str, e: &kube::Error) -> Line {
    let text = format!(
        "cannot ask the API server what you may {what} (SelfSubjectAccessReview): {}",
        said(e)
    );
    line(section, Mark::Warn, text)
}

/// Are there Ready, schedulable Linux nodes for the programs' pods?
async fn nodes_line(conn: &Connection) -> Line {
    const S: &str = "nodes";
    let nodes = list_pages(
        &Api::<Node>::all(conn.client.clone()),
        ListParams::default().labels("kubernetes.io/os=linux"),
        |_| true,
    )
    .await;
    match nodes {
        Ok(nodes) => nodes_verdict(&nodes),
        Err(e) => line(S, Mark::Warn, format!("cannot list nodes: {}", said(&e))),
    }
}

/// The verdict on `nodes` (the Linux ones).
fn nodes_verdict(nodes: &[Node]) -> Line {
    const S: &str = "nodes";
    let ready = nodes
        .iter()
        .filter(|n| {
            let schedulable = !n
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false);
            let is_ready = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            schedulable && is_ready
        })
        .count();
    match ready {
        0 => fail(
            S,
            format!(
                "no Ready, schedulable Linux node ({} Linux node(s) in all): resize-guard's pods \
                 (nodeSelector kubernetes.io/os: linux) would not run",
                nodes.len()
            ),
            "kubectl get nodes -l kubernetes.io/os=linux",
        ),
        1 => line(
            S,
            Mark::Warn,
            "1 Ready, schedulable Linux node: the webhook's two replicas cannot spread across \
             nodes, so that node going down stops resize-guard",
        ),
        n => line(
            S,
            Mark::Ok,
            format!(
                "{n} Ready, schedulable Linux nodes for resize-guard's pods (the webhook's two \
                 replicas spread across them)"
            ),
        ),
    }
}

/// Whether resize-guard is installed already, and which release runs.
async fn existing(conn: &Connection) -> (Line, Option<versions::Versions>) {
    const S: &str = "install";
    let client = conn.client.clone();
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get_opt("resize-guard")
        .await
        .map(|c| c.is_some());
    let validating = Api::<ValidatingWebhookConfiguration>::all(client)
        .get_opt("resize-guard")
        .await
        .map(|c| c.is_some());
    match (mutating, validating) {
        (Ok(false), Ok(false)) => (
            line(
                S,
                Mark::Ok,
                "resize-guard is not installed yet (no webhook configuration named resize-guard)",
            ),
            None,
        ),
        (Ok(m), Ok(_)) => {
            let kind = if m {
                "MutatingWebhookConfiguration"
            } else {
                "ValidatingWebhookConfiguration"
            };
            (
                line(
                    S,
                    Mark::Warn,
                    format!(
                        "resize-guard is installed already ({kind} resize-guard): applying \
                         deploy/ again upgrades it in place"
                    ),
                ),
                Some(versions::read(conn).await),
            )
        }
        (Err(e), _) | (_, Err(e)) => (
            line(
                S,
                Mark::Warn,
                format!(
                    "cannot tell whether resize-guard is installed already: {}",
                    said(&e)
                ),
            ),
            None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

    fn node(ready: &str, unschedulable: bool) -> Node {
        Node {
            spec: Some(NodeSpec {
                unschedulable: Some(unschedulable),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_verbs_on_one_object_are_said_together() {
        let perms = install_rights::install_permissions();
        let said = describe(&perms[..6], "rg");
        assert_eq!(
            said,
            "get, create, patch namespaces cluster-wide; get, create, patch \
             priorityclasses.scheduling.k8s.io cluster-wide"
        );
    }

    #[test]
    fn only_ready_schedulable_nodes_count() {
        let l = nodes_verdict(&[node("False", false), node("True", true)]);
        assert_eq!(l.mark, Mark::Fail);
        assert!(l.text.contains("(2 Linux node(s) in all)"), "{}", l.text);
        assert_eq!(nodes_verdict(&[node("True", false)]).mark, Mark::Warn);
        let l = nodes_verdict(&[
            node("True", false),
            node("True", false),
            node("Unknown", false),
        ]);
        assert_eq!(l.mark, Mark::Ok);
        assert!(l.text.starts_with("2 Ready"), "{}", l.text);
    }
}
