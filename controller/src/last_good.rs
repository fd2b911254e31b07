//! The last good policy, persisted: while it leads, the controller copies each policy that
//! parsed from the policy ConfigMap into the ConfigMap `<policy>-last-good` in the install
//! namespace (server-side apply, fenced like every write), so a restart of either program with
//! a garbled, key-less or deleted policy ConfigMap keeps the last good policy instead of running
//! none (`resize_guard_cluster::policy_source`). Only the controller may write it.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use resize_guard_cluster::ClusterView;
use resize_guard_cluster::policy_source::Origin;
use resize_guard_cluster::view::last_good_name;
use resize_guard_policy::policy::POLICY_KEY;
use serde_json::json;

use crate::lease::fence::Leadership;
use crate::metrics::Metrics;

/// How long to wait before retrying a failed copy.
const RETRY: Duration = Duration::from_secs(10);

/// Where the copy goes.
#[derive(Debug, Clone)]
pub struct LastGood {
    /// The install namespace.
    pub namespace: String,
    /// The policy ConfigMap's name (the copy is `<name>-last-good`).
    pub policy_configmap: String,
}

/// Copies the policy in force whenever it changes and came from the ConfigMap, until the task
/// is aborted (leadership lost) or the view is dropped.
pub async fn run(
    client: kube::Client,
    view: Arc<ClusterView>,
    target: LastGood,
    leadership: Leadership,
    metrics: Arc<Metrics>,
) {
    let mut changes = view.policy_changes();
    let api: Api<ConfigMap> = Api::namespaced(client, &target.namespace);
    let name = last_good_name(&target.policy_configmap);
    loop {
        if let Some(f) = view
            .policy_in_force()
            .filter(|f| f.origin == Origin::ConfigMap)
        {
            let body = json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": name,
                    "namespace": target.namespace,
                    "labels": {"app.kubernetes.io/part-of": "resize-guard"},
                    "annotations": {
                        "resize-guard.io/copied-from": format!("{}/{}", target.namespace, target.policy_configmap),
                    },
                },
                "data": {POLICY_KEY: &*f.yaml},
            });
            let params = PatchParams::apply("resize-guard-controller").force();
            match leadership
                .fenced(api.patch(&name, &params, &Patch::Apply(&body)))
                .await
            {
                Ok(Ok(_)) => tracing::debug!(configmap = %name, "last good policy persisted"),
                Ok(Err(e)) => {
                    metrics.last_good_write_failed();
                    tracing::warn!(configmap = %name, error = %e, "could not persist the last good policy; retrying");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
                // Not leading: the task is being stopped.
                Err(_) => return,
            }
        }
        if changes.changed().await.is_err() {
            return;
        }
    }
}
