//! `kubectl resize-guard check`: is resize-guard installed and working? One line per check,
//! `linkerd check` style — ✓ passed, ✗ failed (with the fix on the next line), ‼ worth a look —
//! and exit status 1 on any ✗. Each check asks the cluster the question the failure would
//! otherwise surface as at 3 a.m.: can the API server call the webhook (configuration, target,
//! `caBundle` against the certificate actually served, expiry, and a real dry-run resize whose
//! decision comes back), is a controller leading, does the policy parse, and do the
//! ServiceAccounts hold what the programs need and nothing more.

mod rbac;
mod tls;

use std::time::{Duration, SystemTime};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use resize_guard_policy::policy::Policy;
use resize_guard_policy::version::{KubernetesVersion, NEWEST_TESTED_MINOR, OLDEST_MINOR, Support};
use serde::Serialize;
use serde_json::json;

use crate::args::CheckArgs;
use crate::connection::Connection;
use crate::dry_run;
use crate::facts::{CONTROLLER_LEASE, LeaseState, POLICY_CONFIGMAP, lease, policy, split_name};
use crate::table::{Mark, age, bold};

/// The serving Secret the webhook reads (its `--serving-secret` default).
const SERVING_SECRET: &str = "resize-guard-webhook-tls";
/// A serving certificate must have at least this long left.
const MIN_VALIDITY: Duration = Duration::from_secs(30 * 86400);

/// One check's result.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    /// The group it belongs to.
    pub section: &'static str,
    /// Passed, failed, or worth a look.
    pub mark: Mark,
    /// What was found.
    pub text: String,
    /// What to do, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn line(section: &'static str, mark: Mark, text: impl Into<String>) -> Line {
    Line {
        section,
        mark,
        text: text.into(),
        fix: None,
    }
}

fn fail(section: &'static str, text: impl Into<String>, fix: impl Into<String>) -> Line {
    Line {
        section,
        mark: Mark::Fail,
        text: text.into(),
        fix: Some(fix.into()),
    }
}

/// Runs every check.
pub async fn run(conn: &Connection, args: &CheckArgs) -> Vec<Line> {
    let mut out = Vec::new();
    out.push(version(conn).await);
    webhooks(conn, &mut out).await;
    // Read once: its line below, and the namespaces the probe must not pick.
    let policy = policy(conn).await;
    let excluding = policy.as_ref().ok().cloned().flatten().unwrap_or_default();
    out.push(probe(conn, args, &excluding).await);
    out.push(controller(conn).await);
    out.push(policy_line(conn, policy));
    for (sa, needs, must_not) in [
        (
            "resize-guard-webhook",
            rbac::webhook_needs(),
            rbac::WEBHOOK_MUST_NOT,
        ),
        (
            "resize-guard-controller",
            rbac::controller_needs(),
            rbac::CONTROLLER_MUST_NOT,
        ),
    ] {
        out.push(permissions(conn, sa, &needs, must_not).await);
    }
    out
}

async fn version(conn: &Connection) -> Line {
    const S: &str = "kubernetes";
    let info = match conn.client.apiserver_version().await {
        Ok(i) => i,
        Err(e) => {
            return fail(
                S,
                format!("cannot read the API server's version: {e}"),
                "check the kubeconfig, context and that the API server is up",
            );
        }
    };
    let Some(v) = KubernetesVersion::parse(&info.major, &info.minor, &info.git_version) else {
        return line(
            S,
            Mark::Warn,
            format!("cannot tell the minor of Kubernetes {}", info.git_version),
        );
    };
    let range = format!("v1.{OLDEST_MINOR}–v1.{NEWEST_TESTED_MINOR}");
    match v.support() {
        Support::Supported => line(
            S,
            Mark::Ok,
            format!(
                "Kubernetes {} is supported ({range} are tested)",
                v.git_version
            ),
        ),
        Support::Untested => line(
            S,
            Mark::Warn,
            format!(
                "Kubernetes {} is newer than resize-guard is tested on ({range})",
                v.git_version
            ),
        ),
        Support::Unsupported => fail(
            S,
            format!(
                "Kubernetes {} has no pods/resize subresource (v1.{OLDEST_MINOR}+)",
                v.git_version
            ),
            "upgrade the cluster to v1.33 or later",
        ),
    }
}

/// One webhook entry of either configuration.
struct Entry {
    kind: &'static str,
    name: String,
    client: WebhookClientConfig,
}

async fn webhooks(conn: &Connection, out: &mut Vec<Line>) {
    const S: &str = "webhook";
    let mut entries = Vec::new();
    let mut present = Vec::new();
    match Api::<MutatingWebhookConfiguration>::all(conn.client.clone())
        .get_opt("resize-guard")
        .await
    {
        Ok(Some(c)) => {
            present.push("MutatingWebhookConfiguration");
            entries.extend(c.webhooks.into_iter().flatten().map(|w| Entry {
                kind: "MutatingWebhookConfiguration",
                name: w.name,
                client: w.client_config,
            }));
        }
        Ok(None) => {}
        Err(e) => out.push(line(
            S,
            Mark::Warn,
            format!("cannot read MutatingWebhookConfigurations: {e}"),
        )),
    }
    match Api::<ValidatingWebhookConfiguration>::all(conn.client.clone())
        .get_opt("resize-guard")
        .await
    {
        Ok(Some(c)) => {
            present.push("ValidatingWebhookConfiguration");
            entries.extend(c.webhooks.into_iter().flatten().map(|w| Entry {
                kind: "ValidatingWebhookConfiguration",
                name: w.name,
                client: w.client_config,
            }));
        }
        Ok(None) => {}
        Err(e) => out.push(line(
            S,
            Mark::Warn,
            format!("cannot read ValidatingWebhookConfigurations: {e}"),
        )),
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
        certificate(conn, e, out).await;
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

async fn certificate(conn: &Connection, e: &Entry, out: &mut Vec<Line>) {
    const S: &str = "certificates";
    let bundle: Vec<u8> = e
        .client
        .ca_bundle
        .as_ref()
        .map(|b| b.0.clone())
        .unwrap_or_default();
    if bundle.is_empty() {
        out.push(fail(
            S,
            format!("{} has no caBundle: the API server cannot verify the webhook", e.name),
            "the controller injects caBundle when it leads (see the controller check); with the cert-manager overlay, cert-manager's CA injector does",
        ));
    }
    let now = SystemTime::now();
    let (chain, verified, served_at) = if let Some(url) = &e.client.url {
        let Some((host, port)) = host_port(url) else {
            out.push(fail(
                S,
                format!("{} has an unusable URL {url}", e.name),
                "fix clientConfig.url",
            ));
            return;
        };
        let served = tls::handshake(&host, port, &bundle).await;
        (
            served.chain,
            served.verified,
            format!("served at {host}:{port}"),
        )
    } else if let Some(svc) = &e.client.service {
        let secret = Api::<Secret>::namespaced(conn.client.clone(), &svc.namespace)
            .get_opt(SERVING_SECRET)
            .await;
        let pem = match secret {
            Ok(Some(s)) => s
                .data
                .and_then(|d| d.get("tls.crt").map(|b| b.0.clone()))
                .unwrap_or_default(),
            Ok(None) => {
                out.push(fail(
                    S,
                    format!(
                        "Secret {}/{SERVING_SECRET} (the webhook's certificate) does not exist",
                        svc.namespace
                    ),
                    "the controller creates it when it leads (see the controller check)",
                ));
                return;
            }
            Err(err) => {
                out.push(line(
                    S,
                    Mark::Warn,
                    format!(
                        "cannot read Secret {}/{SERVING_SECRET} to verify caBundle: {err}",
                        svc.namespace
                    ),
                ));
                return;
            }
        };
        let chain = tls::pem_certs(&pem);
        let host = format!("{}.{}.svc", svc.name, svc.namespace);
        let verified = tls::verify(&chain, &host, &bundle, now);
        (
            chain,
            verified,
            format!("in Secret {}/{SERVING_SECRET}", svc.namespace),
        )
    } else {
        return;
    };
    if !bundle.is_empty() {
        out.push(match &verified {
            Ok(()) => line(S, Mark::Ok, format!("{}'s caBundle verifies the certificate {served_at}", e.name)),
            Err(why) => fail(
                S,
                format!("{}'s caBundle does not verify the certificate {served_at}: {why}", e.name),
                "the API server cannot call the webhook, and failurePolicy Ignore lets resizes through unjudged. \
                 The controller re-injects caBundle and renews the certificate within seconds when it leads (see the controller check); \
                 kubectl -n resize-guard delete secret resize-guard-webhook-tls makes it issue a new one",
            ),
        });
    }
    out.push(expiry_line(
        chain.first().and_then(tls::not_after),
        now,
        &served_at,
    ));
}

/// The serving certificate's remaining validity.
fn expiry_line(not_after: Option<SystemTime>, now: SystemTime, served_at: &str) -> Line {
    const S: &str = "certificates";
    let Some(not_after) = not_after else {
        return fail(
            S,
            format!("no readable certificate {served_at}"),
            "see the webhook's log: kubectl -n resize-guard logs deploy/resize-guard-webhook",
        );
    };
    let renew = "the controller renews the certificate at 2/3 of its lifetime when it leads (see the controller check); \
                 kubectl -n resize-guard delete secret resize-guard-webhook-tls makes it issue a new one now";
    match not_after.duration_since(now) {
        Err(past) => fail(
            S,
            format!(
                "the certificate {served_at} expired {} ago",
                age(past.duration())
            ),
            renew,
        ),
        Ok(left) if left < MIN_VALIDITY => fail(
            S,
            format!(
                "the certificate {served_at} expires in {} (less than 30d)",
                age(left)
            ),
            renew,
        ),
        Ok(left) => line(
            S,
            Mark::Ok,
            format!(
                "the certificate {served_at} is valid for {} more",
                age(left)
            ),
        ),
    }
}

/// `https://host:port/path` → host and port.
fn host_port(url: &str) -> Option<(String, u16)> {
    let uri: http::Uri = url.parse().ok()?;
    let host = uri
        .host()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    Some((host, uri.port_u16().unwrap_or(443)))
}

/// Sends a no-op resize of a running pod as a dry run and looks for resize-guard's decision.
async fn probe(conn: &Connection, args: &CheckArgs, policy: &Policy) -> Line {
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

async fn controller(conn: &Connection) -> Line {
    const S: &str = "controller";
    let ns = &conn.install_namespace;
    let fix = format!(
        "kubectl -n {ns} get pods -l app.kubernetes.io/component=controller; kubectl -n {ns} logs deploy/resize-guard-controller"
    );
    match lease(conn).await {
        Ok(Some(l)) => lease_line(&LeaseState::of(&l, Timestamp::now()), ns, &fix),
        Ok(None) => fail(
            S,
            format!("no Lease {ns}/{CONTROLLER_LEASE}: the controller has never led"),
            fix,
        ),
        Err(e) => line(S, Mark::Warn, format!("{e:#}")),
    }
}

/// Whether a controller leads.
fn lease_line(state: &LeaseState, ns: &str, fix: &str) -> Line {
    let lease = format!("Lease {ns}/{CONTROLLER_LEASE}");
    match (&state.holder, state.is_held()) {
        (Some(h), true) => line(
            "controller",
            Mark::Ok,
            format!(
                "{h} leads ({lease} renewed {} ago)",
                state.renewed_ago.map(age).unwrap_or_default()
            ),
        ),
        (Some(h), false) => fail(
            "controller",
            format!(
                "no controller leads: {lease} was last renewed by {h} {} ago (lease duration {})",
                state.renewed_ago.map(age).unwrap_or_else(|| "?".into()),
                state.duration.map(age).unwrap_or_else(|| "?".into())
            ),
            fix,
        ),
        (None, _) => fail(
            "controller",
            format!("no controller leads: {lease} is released (no holder)"),
            fix,
        ),
    }
}

fn policy_line(conn: &Connection, policy: anyhow::Result<Option<Policy>>) -> Line {
    const S: &str = "policy";
    let cm = format!("ConfigMap {}/{POLICY_CONFIGMAP}", conn.install_namespace);
    match policy {
        Ok(Some(p)) => line(S, Mark::Ok, format!("{cm} parses: {}", summary(&p))),
        Ok(None) => line(
            S,
            Mark::Warn,
            format!("{cm} does not exist: both programs run with the default policy"),
        ),
        Err(e) => fail(
            S,
            format!("{e:#}"),
            format!(
                "fix the document (kubectl -n {} edit configmap {POLICY_CONFIGMAP}); the programs keep their last good policy meanwhile",
                conn.install_namespace
            ),
        ),
    }
}

fn summary(p: &Policy) -> String {
    format!(
        "mode {}, qos.onChange {}, preemption {}",
        if p.is_audit() { "audit" } else { "enforce" },
        format!("{:?}", p.qos.on_change).to_lowercase(),
        if p.preemption.enabled {
            format!("on (max {} victims)", p.preemption.max_victims_per_resize)
        } else {
            "off".to_owned()
        }
    )
}

async fn permissions(
    conn: &Connection,
    sa: &str,
    needs: &[rbac::Permission],
    must_not: &[rbac::Permission],
) -> Line {
    const S: &str = "permissions";
    let ns = &conn.install_namespace;
    match rbac::audit(conn, sa, needs, must_not).await {
        Ok((lacking, excess)) if lacking.is_empty() && excess.is_empty() => line(
            S,
            Mark::Ok,
            format!(
                "ServiceAccount {ns}/{sa} has the {} permissions it needs and none of {} it must not have",
                needs.len(),
                must_not.len()
            ),
        ),
        Ok((lacking, excess)) => {
            let list = |v: &[rbac::Permission]| {
                v.iter()
                    .map(|p| p.describe(ns))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut problems = Vec::new();
            if !lacking.is_empty() {
                problems.push(format!("lacks {}", list(&lacking)));
            }
            if !excess.is_empty() {
                problems.push(format!("may also {}", list(&excess)));
            }
            fail(
                S,
                format!("ServiceAccount {ns}/{sa} {}", problems.join("; ")),
                format!(
                    "re-apply deploy/base/rbac-{}.yaml, and remove any other binding that grants more",
                    sa.trim_start_matches("resize-guard-")
                ),
            )
        }
        Err(e) => line(
            S,
            Mark::Warn,
            format!("cannot review {sa}'s permissions (needs create subjectaccessreviews): {e}"),
        ),
    }
}

/// The text form: sections with underlined headings, one line per check, the fix under a
/// failure, and the verdict.
pub fn render_text(lines: &[Line]) -> String {
    let mut out = String::new();
    let mut section = "";
    for l in lines {
        if l.section != section {
            if !section.is_empty() {
                out.push('\n');
            }
            section = l.section;
            out.push_str(&format!(
                "{}\n{}\n",
                bold(section),
                "-".repeat(section.len())
            ));
        }
        out.push_str(&format!("{} {}\n", l.mark.symbol(), l.text));
        if let Some(fix) = &l.fix {
            out.push_str(&format!("    fix: {fix}\n"));
        }
    }
    let failed = lines.iter().filter(|l| l.mark == Mark::Fail).count();
    if failed == 0 {
        out.push_str(&format!(
            "\nStatus check results are {}\n",
            Mark::Ok.symbol()
        ));
    } else {
        out.push_str(&format!(
            "\nStatus check results are {}: {failed} check(s) failed\n",
            Mark::Fail.symbol()
        ));
    }
    out
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

    #[test]
    fn a_certificate_needs_thirty_days_left() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let day = Duration::from_secs(86400);
        let l = expiry_line(Some(now + 89 * day), now, "served at h:1");
        assert_eq!(
            (l.mark, l.text.as_str()),
            (
                Mark::Ok,
                "the certificate served at h:1 is valid for 89d more"
            )
        );
        let l = expiry_line(Some(now + 12 * day), now, "served at h:1");
        assert_eq!(l.mark, Mark::Fail);
        assert_eq!(
            l.text,
            "the certificate served at h:1 expires in 12d (less than 30d)"
        );
        let l = expiry_line(Some(now - 3 * day), now, "served at h:1");
        assert_eq!(l.text, "the certificate served at h:1 expired 3d ago");
        assert_eq!(expiry_line(None, now, "x").mark, Mark::Fail);
    }

    #[test]
    fn a_controller_leads_only_while_it_renews() {
        let held = LeaseState {
            holder: Some("c-1".into()),
            renewed_ago: Some(Duration::from_secs(2)),
            duration: Some(Duration::from_secs(15)),
        };
        assert_eq!(
            lease_line(&held, "resize-guard", "f").text,
            "c-1 leads (Lease resize-guard/resize-guard-controller renewed 2s ago)"
        );
        let stale = LeaseState {
            renewed_ago: Some(Duration::from_secs(40)),
            ..held.clone()
        };
        let l = lease_line(&stale, "resize-guard", "f");
        assert_eq!(l.mark, Mark::Fail);
        assert_eq!(
            l.text,
            "no controller leads: Lease resize-guard/resize-guard-controller was last renewed by c-1 40s ago (lease duration 15s)"
        );
        let released = LeaseState {
            holder: None,
            ..held
        };
        assert_eq!(
            lease_line(&released, "rg", "f").text,
            "no controller leads: Lease rg/resize-guard-controller is released (no holder)"
        );
    }

    #[test]
    fn urls_give_host_and_port() {
        assert_eq!(
            host_port("https://127.0.0.1:8443/mutate"),
            Some(("127.0.0.1".into(), 8443))
        );
        assert_eq!(
            host_port("https://[::1]:9443/x"),
            Some(("::1".into(), 9443))
        );
        assert_eq!(
            host_port("https://hook.example/x"),
            Some(("hook.example".into(), 443))
        );
    }
}
