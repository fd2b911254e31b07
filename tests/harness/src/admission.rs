//! Registering resize-guard's admission webhooks with the harness's API server: the same
//! configurations as `deploy/`, but with `clientConfig.url` pointing at a local process and the
//! test CA as `caBundle` (the envtest pattern), plus a canary that waits until kube-apiserver
//! really calls the webhook (its informer picks up new configurations asynchronously).

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

/// Name of both configuration objects.
pub const CONFIG_NAME: &str = "resize-guard";
/// The mutating webhook's name (audit annotations are prefixed with it).
pub const MUTATING_NAME: &str = "mutate.resize-guard.io";
/// The validating webhook's name (audit annotations are prefixed with it).
pub const VALIDATING_NAME: &str = "validate.resize-guard.io";

/// Which configurations to install.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhooks {
    /// Mutating and validating.
    Both,
    /// Only the ValidatingWebhookConfiguration.
    ValidatingOnly,
}

fn webhook(name: &str, url: String, ca_base64: &str, failure_policy: &str) -> Value {
    json!({
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca_base64},
        "rules": [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/resize"], "scope": "Namespaced"}],
        "admissionReviewVersions": ["v1"],
        "sideEffects": "NoneOnDryRun",
        "failurePolicy": failure_policy,
        "timeoutSeconds": 3,
        "matchPolicy": "Equivalent",
        "namespaceSelector": {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "resize-guard"]
        }]},
    })
}

/// Creates (replacing existing) webhook configurations for a webhook served at `base_url`
/// (`https://127.0.0.1:PORT`). Tests use `failurePolicy: Fail` so an unreachable webhook shows.
pub async fn install(
    client: &kube::Client,
    base_url: &str,
    ca_base64: &str,
    which: Webhooks,
    failure_policy: &str,
) -> anyhow::Result<()> {
    remove(client).await?;
    let validating: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIG_NAME},
        "webhooks": [webhook(VALIDATING_NAME, format!("{base_url}/validate"), ca_base64, failure_policy)],
    }))?;
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &validating)
        .await?;
    if which == Webhooks::Both {
        let mut m = webhook(
            MUTATING_NAME,
            format!("{base_url}/mutate"),
            ca_base64,
            failure_policy,
        );
        m["reinvocationPolicy"] = json!("Never");
        let mutating: MutatingWebhookConfiguration = serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": CONFIG_NAME},
            "webhooks": [m],
        }))?;
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .create(&PostParams::default(), &mutating)
            .await?;
    }
    Ok(())
}

/// Deletes both configurations if present.
pub async fn remove(client: &kube::Client) -> anyhow::Result<()> {
    for r in [
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .delete(CONFIG_NAME, &DeleteParams::default())
            .await
            .map(|_| ()),
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .delete(CONFIG_NAME, &DeleteParams::default())
            .await
            .map(|_| ()),
    ] {
        match r {
            Ok(()) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Retries `probe` until it reports that the webhook answered (returns true) or `timeout`.
pub async fn wait_active<F, Fut>(timeout: Duration, mut probe: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if probe().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("the API server did not start calling the webhook within {timeout:?}")
}
