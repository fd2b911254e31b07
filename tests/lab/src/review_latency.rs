//! Review latency through kube-apiserver: `deploy/`'s webhook configurations registered against a
//! local webhook, and dry-run `pods/<name>/resize` PATCHes timed with and without them.
//!
//! The configurations are taken as `deploy/` ships them at that moment — `kubectl kustomize
//! deploy/`, every Mutating- and ValidatingWebhookConfiguration and every webhook in each — with
//! each webhook's `clientConfig` replaced by a URL (the local webhook plus the path the shipped
//! `clientConfig` names) and the local webhook's `caBundle`, then written with server-side apply.
//! Nothing here names a webhook, so a layout change in `deploy/` is measured as shipped.
//!
//! kube-apiserver picks configurations up through an informer, so [`wait_called`] probes with a
//! dry-run PATCH until the webhook's own `resize_guard_admission_reviews_total` moves (or, after
//! [`Registration::remove`], stops moving).

use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::programs::Programs;
use resize_guard_harness::install::repo_root;
use resize_guard_harness::kubectl::Kubectl;

/// The field manager the configurations are written with.
pub const FIELD_MANAGER: &str = "resize-guard-scale";

/// The configuration kinds taken from `deploy/`.
const KINDS: [&str; 2] = [
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// The webhook configurations of `kubectl kustomize deploy/`, as JSON documents.
pub async fn shipped_configurations(kubectl: &Kubectl) -> anyhow::Result<Vec<Value>> {
    let deploy = repo_root().join("deploy");
    let out = kubectl
        .run(["kustomize", &deploy.display().to_string()])
        .await?;
    anyhow::ensure!(
        out.success,
        "kubectl kustomize {}: {}",
        deploy.display(),
        out.stderr
    );
    let mut configs = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&out.stdout) {
        let value = <Value as serde::Deserialize>::deserialize(doc)
            .context("a document of kubectl kustomize deploy/")?;
        if KINDS.contains(&value["kind"].as_str().unwrap_or_default()) {
            configs.push(value);
        }
    }
    anyhow::ensure!(!configs.is_empty(), "deploy/ has no webhook configuration");
    Ok(configs)
}

/// `config` with every webhook's `clientConfig` set to `{url: base_url + path, caBundle}`, the
/// path being the shipped `service.path` (or the shipped URL's path; `/` when none).
pub fn pointed_at(config: &Value, base_url: &str, ca_base64: &str) -> Value {
    let mut config = config.clone();
    if let Some(hooks) = config["webhooks"].as_array_mut() {
        for hook in hooks {
            let shipped = &hook["clientConfig"];
            let path = match (shipped["service"]["path"].as_str(), shipped["url"].as_str()) {
                (Some(p), _) => p.to_owned(),
                (None, Some(url)) => url
                    .split_once("://")
                    .and_then(|(_, rest)| rest.find('/').map(|i| rest[i..].to_owned()))
                    .unwrap_or_else(|| "/".to_owned()),
                (None, None) => "/".to_owned(),
            };
            hook["clientConfig"] =
                json!({"url": format!("{base_url}{path}"), "caBundle": ca_base64});
        }
    }
    config
}

/// Configurations written by [`Registration::apply`].
#[derive(Debug, Clone)]
pub struct Registration {
    /// (kind, name) of each configuration written.
    pub objects: Vec<(String, String)>,
    /// Webhooks across them (each dry-run resize is reviewed by every one that matches).
    pub webhooks: usize,
}

impl Registration {
    /// Writes `configs` pointed at `base_url` trusting `ca_base64` (server-side apply).
    pub async fn apply(
        client: &kube::Client,
        configs: &[Value],
        base_url: &str,
        ca_base64: &str,
    ) -> anyhow::Result<Registration> {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let mut objects = Vec::new();
        let mut webhooks = 0;
        for config in configs {
            let body = pointed_at(config, base_url, ca_base64);
            let kind = body["kind"].as_str().unwrap_or_default().to_owned();
            let name = body["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            webhooks += body["webhooks"].as_array().map_or(0, Vec::len);
            match kind.as_str() {
                "MutatingWebhookConfiguration" => {
                    Api::<MutatingWebhookConfiguration>::all(client.clone())
                        .patch(&name, &params, &Patch::Apply(&body))
                        .await
                        .with_context(|| format!("{kind} {name}"))?;
                }
                _ => {
                    Api::<ValidatingWebhookConfiguration>::all(client.clone())
                        .patch(&name, &params, &Patch::Apply(&body))
                        .await
                        .with_context(|| format!("{kind} {name}"))?;
                }
            }
            objects.push((kind, name));
        }
        Ok(Registration { objects, webhooks })
    }

    /// Deletes the configurations (absent ones are fine).
    pub async fn remove(&self, client: &kube::Client) -> anyhow::Result<()> {
        let params = DeleteParams::default();
        for (kind, name) in &self.objects {
            let result = if kind == "MutatingWebhookConfiguration" {
                Api::<MutatingWebhookConfiguration>::all(client.clone())
                    .delete(name, &params)
                    .await
                    .map(|_| ())
            } else {
                Api::<ValidatingWebhookConfiguration>::all(client.clone())
                    .delete(name, &params)
                    .await
                    .map(|_| ())
            };
            match result {
                Ok(()) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e).with_context(|| format!("deleting {kind} {name}")),
            }
        }
        Ok(())
    }
}

/// Reviews the webhook has answered (the sum of `resize_guard_admission_reviews_total` over its
/// labels) in a `/metrics` text.
pub fn reviews_answered(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("resize_guard_admission_reviews_total"))
        .filter_map(|l| l.rsplit_once(' ')?.1.trim().parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// A dry-run resize patch of container `container` to a cpu request of `cpu`.
pub fn cpu_request_patch(container: &str, cpu: &str) -> Value {
    json!({"spec": {"containers": [{"name": container, "resources": {"requests": {"cpu": cpu}}}]}})
}

/// The outcome of one dry-run resize.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The API server accepted it (nothing stored: dry run).
    Accepted,
    /// Refused; the API server's message.
    Refused(String),
}

/// `PATCH <ns>/<name>/resize?dryRun=All` with `patch` (strategic merge); its wall time and
/// outcome. Transport errors are errors.
pub async fn dry_run_resize(
    client: &kube::Client,
    ns: &str,
    name: &str,
    patch: &Value,
) -> anyhow::Result<(Duration, Outcome)> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let params = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let started = Instant::now();
    let result = api
        .patch_subresource("resize", name, &params, &Patch::Strategic(patch))
        .await;
    let took = started.elapsed();
    match result {
        Ok(_) => Ok((took, Outcome::Accepted)),
        Err(kube::Error::Api(e)) => Ok((took, Outcome::Refused(e.message))),
        Err(e) => Err(e).with_context(|| format!("dry-run resize of {ns}/{name}")),
    }
}

/// Latencies of dry-run resizes, one at a time, of each `(namespace, name)` in `targets`.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Wall times, sorted.
    pub sorted: Vec<Duration>,
    /// Accepted calls.
    pub accepted: usize,
    /// Refused calls and the first refusal's message.
    pub refused: (usize, Option<String>),
}

/// Times one dry-run resize per target, sequentially, after `warm_up` untimed calls.
pub async fn time_resizes(
    client: &kube::Client,
    targets: &[(String, String)],
    patch: &Value,
    warm_up: usize,
) -> anyhow::Result<Sample> {
    for (ns, name) in targets.iter().take(warm_up) {
        dry_run_resize(client, ns, name, patch).await?;
    }
    let mut sample = Sample::default();
    for (ns, name) in targets {
        let (took, outcome) = dry_run_resize(client, ns, name, patch).await?;
        sample.sorted.push(took);
        match outcome {
            Outcome::Accepted => sample.accepted += 1,
            Outcome::Refused(message) => {
                sample.refused.0 += 1;
                sample.refused.1.get_or_insert(message);
            }
        }
    }
    sample.sorted.sort();
    Ok(sample)
}

/// Probes with dry-run resizes of `probe` until the webhook's review counter moves with each
/// probe (`called`), or stays still for three probes in a row (`!called`); fails after
/// `timeout`.
pub async fn wait_called(
    client: &kube::Client,
    programs: &Programs,
    probe: (&str, &str),
    patch: &Value,
    called: bool,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut still = 0;
    while Instant::now() < deadline {
        let before = reviews_answered(&programs.webhook_metrics().await?);
        dry_run_resize(client, probe.0, probe.1, patch).await?;
        let after = reviews_answered(&programs.webhook_metrics().await?);
        match (called, after > before) {
            (true, true) => return Ok(()),
            (false, false) => {
                still += 1;
                if still >= 3 {
                    return Ok(());
                }
            }
            (false, true) => still = 0,
            (true, false) => {}
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!(
        "kube-apiserver {} calling the webhook within {timeout:?}",
        if called {
            "did not start"
        } else {
            "did not stop"
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_webhook_is_pointed_at_the_url_with_its_own_path() {
        let shipped = json!({
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "x"},
            "webhooks": [
                {"name": "a", "clientConfig": {"service": {"name": "s", "namespace": "n", "path": "/validate"}}},
                {"name": "b", "clientConfig": {"url": "https://elsewhere:8443/other"}},
                {"name": "c", "clientConfig": {"service": {"name": "s", "namespace": "n"}}},
            ],
        });
        let out = pointed_at(&shipped, "https://127.0.0.1:9", "Q0E=");
        let urls: Vec<&str> = out["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["clientConfig"]["url"].as_str().unwrap())
            .collect();
        assert_eq!(
            urls,
            [
                "https://127.0.0.1:9/validate",
                "https://127.0.0.1:9/other",
                "https://127.0.0.1:9/"
            ]
        );
        assert!(out["webhooks"][0]["clientConfig"].get("service").is_none());
        assert_eq!(out["webhooks"][1]["clientConfig"]["caBundle"], "Q0E=");
    }

    #[test]
    fn review_counts_sum_over_labels() {
        let text = "# HELP x\nresize_guard_admission_reviews_total{webhook=\"mutate\",decision=\"fits\",allowed=\"true\"} 3\n\
                    resize_guard_admission_reviews_total{webhook=\"validate\",decision=\"fits\",allowed=\"true\"} 4\n\
                    resize_guard_admission_duration_seconds_count 7\n";
        assert_eq!(reviews_answered(text), 7);
    }
}
