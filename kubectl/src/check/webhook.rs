//! Are resize-guard's webhook configurations there, and does each call something that answers:
//! a URL, or a Service with ready endpoints? Each entry's certificate is checked next
//! ([`super::certificate`]).

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};

use super::{Line, certificate, fail, line};
use crate::connection::Connection;
use crate::table::Mark;

/// One webhook entry of either configuration.
pub(super) struct Entry {
    pub(super) kind: &'static str,
    pub(super) name: String,
    pub(super) client: WebhookClientConfig,
}

/// The configuration of kind `K` named `resize-guard`, as its entries' names and client configs
/// (`None` when there is none).
async fn configuration<K>(
    conn: &Connection,
    webhooks: impl FnOnce(K) -> Vec<(String, WebhookClientConfig)>,
) -> Result<Option<Vec<(String, WebhookClientConfig)>>, kube::Error>
where
    K: kube::Resource<Scope = kube::core::ClusterResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let found = Api::<K>::all(conn.client.clone())
        .get_opt("resize-guard")
        .await?;
    Ok(found.map(webhooks))
}

/// The webhook configurations, and for each entry its target and its certificate.
pub async fn webhooks(conn: &Connection, out: &mut Vec<Line>) {
    const S: &str = "webhook";
    let mutating = configuration(conn, |c: MutatingWebhookConfiguration| {
        let webhooks = c.webhooks.into_iter().flatten();
        webhooks.map(|w| (w.name, w.client_config)).collect()
    });
    let validating = configuration(conn, |c: ValidatingWebhookConfiguration| {
        let webhooks = c.webhooks.into_iter().flatten();
        webhooks.map(|w| (w.name, w.client_config)).collect()
    });
    let mut entries = Vec::new();
    let mut present = Vec::new();
    for (kind, read) in [
        ("MutatingWebhookConfiguration", mutating.await),
        ("ValidatingWebhookConfiguration", validating.await),
    ] {
        match read {
            Ok(Some(found)) => {
                present.push(kind);
                entries.extend(found.into_iter().map(|(name, client)| Entry {
                    kind,
                    name,
                    client,
                }));
            }
            Ok(None) => {}
            Err(e) => out.push(line(S, Mark::Warn, format!("cannot read {kind}s: {e}"))),
        }
    }
    if entries.is_empty() {
        out.push(fail(
            S,
            "no webhook configuration named resize-guard (Mutating or Validating)",
            "install resize-guard: kubectl apply -k deploy/ (or the Helm chart)",
        ));
        return;
    }
    out.push(line(
        S,
        Mark::Ok,
        format!(
            "{} resize-guard present: {}",
            present.join(" and "),
            entries
                .iter()
                .map(|e| e.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ));
    for e in &entries {
        target(conn, e, out).await;
        certificate::certificate(conn, e, out).await;
    }
}

async fn target(conn: &Connection, e: &Entry, out: &mut Vec<Line>) {
    const S: &str = "webhook";
    if let Some(url) = &e.client.url {
        out.push(line(
            S,
            Mark::Ok,
            format!("{} calls {url} (a URL, not a Service)", e.name),
        ));
        return;
    }
    let Some(svc) = &e.client.service else {
        out.push(fail(
            S,
            format!("{} ({}) names neither a Service nor a URL", e.name, e.kind),
            "re-apply deploy/base/webhook-configurations.yaml",
        ));
        return;
    };
    let port = svc.port.unwrap_or(443);
    let service = Api::<Service>::namespaced(conn.client.clone(), &svc.namespace)
        .get_opt(&svc.name)
        .await;
    let slices = Api::<EndpointSlice>::namespaced(conn.client.clone(), &svc.namespace)
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={}", svc.name)))
        .await;
    out.push(match (service, slices) {
        (Ok(None), _) => fail(
            S,
            format!(
                "{} calls Service {}/{}, which does not exist",
                e.name, svc.namespace, svc.name
            ),
            "re-apply deploy/ (kubectl apply -k deploy/)",
        ),
        (Ok(Some(_)), Ok(list)) => {
            service_line(&e.name, &svc.namespace, &svc.name, port, &list.items)
        }
        (Err(err), _) | (_, Err(err)) => line(
            S,
            Mark::Warn,
            format!("cannot read Service {}/{}: {err}", svc.namespace, svc.name),
        ),
    });
}

/// Whether a Service has ready endpoints.
fn service_line(hook: &str, ns: &str, name: &str, port: i32, slices: &[EndpointSlice]) -> Line {
    let ready = slices
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
        .count();
    if ready == 0 {
        fail(
            "webhook",
            format!("{hook} calls Service {ns}/{name}:{port}, which has no ready endpoints"),
            format!(
                "kubectl -n {ns} get pods -l app.kubernetes.io/component=webhook; kubectl -n {ns} describe deploy/resize-guard-webhook"
            ),
        )
    } else {
        line(
            "webhook",
            Mark::Ok,
            format!("{hook} calls Service {ns}/{name}:{port} ({ready} ready endpoint(s))"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions};

    #[test]
    fn a_service_needs_a_ready_endpoint() {
        let slice = |ready: Option<bool>| EndpointSlice {
            endpoints: Some(vec![Endpoint {
                conditions: Some(EndpointConditions {
                    ready,
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let l = service_line(
            "mutate.resize-guard.io",
            "resize-guard",
            "resize-guard-webhook",
            443,
            &[slice(Some(false))],
        );
        assert_eq!(l.mark, Mark::Fail);
        assert_eq!(
            l.text,
            "mutate.resize-guard.io calls Service resize-guard/resize-guard-webhook:443, which has no ready endpoints"
        );
        let l = service_line("m", "ns", "svc", 443, &[slice(Some(false)), slice(None)]);
        assert_eq!(
            (l.mark, l.text.as_str()),
            (Mark::Ok, "m calls Service ns/svc:443 (1 ready endpoint(s))")
        );
    }
}
