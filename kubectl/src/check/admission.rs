//! Does a real request reach resize-guard? A no-op resize of a running pod, sent as a
//! server-side dry run: resize-guard's decision comes back in the answer's warnings/annotations
//! only if the API server could call the webhook.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use resize_guard_policy::policy::Policy;
use serde_json::json;

use super::{Line, fail, line};
use crate::args::CheckArgs;
use crate::connection::Connection;
use crate::dry_run;
use crate::facts::split_name;
use crate::table::Mark;

/// Sends a no-op resize of a running pod as a dry run and looks for resize-guard's decision.
pub async fn probe(conn: &Connection, args: &CheckArgs, policy: &Policy) -> Line {
    const S: &str = "admission";
    let pod = match pick_probe(conn, args, policy).await {
        Ok(Some(p)) => p,
        Ok(None) => {
            return line(
                S,
                Mark::Warn,
                "no running pod outside kube-system and resize-guard's excluded namespaces to send a dry-run resize for (pass --probe-pod NAMESPACE/NAME)",
            );
        }
        Err(e) => {
            return line(
                S,
                Mark::Warn,
                format!("cannot pick a pod to probe with: {e:#}"),
            );
        }
    };
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let containers: Vec<serde_json::Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| json!({"name": c.name, "resources": c.resources.clone().unwrap_or_default()}))
        .collect();
    let patch = json!({"spec": {"containers": containers}});
    match dry_run::resize(&conn.client, &ns, &name, &patch).await {
        Ok(a) if a.reached_resize_guard() => {
            let said = a
                .decisions
                .iter()
                .map(|d| format!("{} decision {}", d.stage, d.decision))
                .collect::<Vec<_>>()
                .join(", ");
            line(
                S,
                Mark::Ok,
                format!("a dry-run resize of pod {ns}/{name} reached resize-guard ({said})"),
            )
        }
        Ok(a) => fail(
            S,
            format!(
                "a dry-run resize of pod {ns}/{name} got no answer from resize-guard (API server: {})",
                if a.accepted {
                    "accepted".to_owned()
                } else {
                    a.message.unwrap_or_default()
                }
            ),
            "the API server could not call the webhook and failurePolicy Ignore let the resize through unjudged: \
             see the checks above, and kube-apiserver's log for 'failed calling webhook'",
        ),
        Err(e) => line(
            S,
            Mark::Warn,
            format!("the dry-run resize of pod {ns}/{name} failed: {e:#}"),
        ),
    }
}

async fn pick_probe(
    conn: &Connection,
    args: &CheckArgs,
    policy: &Policy,
) -> anyhow::Result<Option<Pod>> {
    if let Some(arg) = &args.probe_pod {
        let (ns, name) = split_name(arg)?;
        return crate::facts::pod(conn, ns, name).await.map(Some);
    }
    let pods = Api::<Pod>::all(conn.client.clone())
        .list(
            &ListParams::default()
                .fields("status.phase=Running")
                .limit(500),
        )
        .await?;
    Ok(pods.items.into_iter().find(|p| {
        let ns = p.metadata.namespace.as_deref().unwrap_or_default();
        ns != "kube-system"
            && !policy.excludes_namespace(ns, &conn.install_namespace)
            && p.metadata.deletion_timestamp.is_none()
            && p.spec.as_ref().is_some_and(|s| s.node_name.is_some())
    }))
}
