//! Pointing the webhook configurations `deploy/` installs at a local webhook process: the
//! install itself is [`crate::install::install`] (`kubectl apply -k`, `clientConfig.url` set to
//! the process); `caBundle` is then written with server-side apply, as the controller's
//! certificate owner (or cert-manager's CA injector) does in a cluster, for suites whose webhook
//! serves a test certificate; plus a canary that waits until kube-apiserver really calls the
//! webhook (its informer picks up new configurations asynchronously).

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject};
use serde_json::json;

use crate::env::Env;
use crate::install::{Install, install};
use crate::objects::force_apply;

/// Name of the configuration object (either kind).
pub const CONFIG_NAME: &str = "resize-guard";
/// The mutating webhook's name (audit annotations are prefixed with it).
pub const MUTATING_NAME: &str = "mutate.resize-guard.io";
/// The validating webhook's name (audit annotations are prefixed with it).
pub const VALIDATING_NAME: &str = "validate.resize-guard.io";
/// The admission probe's webhook, in either configuration (`controller/src/admission_probe.rs`).
pub const PROBE_NAME: &str = "probe.resize-guard.io";
/// The field manager the harness writes `caBundle` with.
pub const FIELD_MANAGER: &str = "resize-guard-harness";

/// Which configurations to install.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhooks {
    /// The MutatingWebhookConfiguration alone (`deploy/`): one call per resize.
    Mutating,
    /// Only the ValidatingWebhookConfiguration (`deploy/overlays/validating-only`).
    ValidatingOnly,
}

impl Webhooks {
    /// The resource of the configuration installed, and the name of its judging webhook.
    pub fn configuration(self) -> (ApiResource, &'static str) {
        match self {
            Webhooks::ValidatingOnly => (
                ApiResource::erase::<ValidatingWebhookConfiguration>(&()),
                VALIDATING_NAME,
            ),
            Webhooks::Mutating => (
                ApiResource::erase::<MutatingWebhookConfiguration>(&()),
                MUTATING_NAME,
            ),
        }
    }
}

/// Installs `deploy/` with the webhook configurations pointing at a webhook served at
/// `base_url` (`https://127.0.0.1:PORT`) and trusting `ca_base64`.
pub async fn register(
    env: &Env,
    base_url: &str,
    ca_base64: &str,
    which: Webhooks,
) -> anyhow::Result<()> {
    install(
        env,
        &Install {
            webhook_url: Some(base_url.to_owned()),
            validating_only: which == Webhooks::ValidatingOnly,
            ..Default::default()
        },
    )
    .await;
    set_ca_bundle(&env.client().await, ca_base64, which).await
}

/// Writes `caBundle` on the webhooks of the configuration `which` installs (server-side apply):
/// the judging one and the admission probe's.
pub async fn set_ca_bundle(
    client: &kube::Client,
    ca_base64: &str,
    which: Webhooks,
) -> anyhow::Result<()> {
    let (resource, name) = which.configuration();
    let body = json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": CONFIG_NAME},
        "webhooks": [
            {"name": name, "clientConfig": {"caBundle": ca_base64}},
            {"name": PROBE_NAME, "clientConfig": {"caBundle": ca_base64}},
        ],
    });
    let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
    force_apply(&api, CONFIG_NAME, FIELD_MANAGER, &body).await?;
    Ok(())
}

/// Deletes the configurations (either kind) if present.
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
