//! Certificates that manage themselves (`--certificates=self`): while this replica leads, it
//! keeps a CA in Secret `resize-guard-ca`, the webhook's serving certificate in Secret
//! `resize-guard-webhook-tls` and the `caBundle` of both webhook configurations `resize-guard`
//! true to each other, and rotates the CA with an overlap. No install script, no caBundle in the
//! manifests; with `--certificates=external` (cert-manager) none of this runs.
//!
//! Data flow: a watch on each of the four objects (by name) and a ticker every
//! `--cert-check-interval` wake [`run`]'s loop → [`actuator::Actuator::read`] takes a
//! [`actuator::Snapshot`] → [`rotation::decide`] (pure: the decision table is in that module)
//! returns actions → the actuator carries them out in order (Secrets with optimistic concurrency,
//! caBundle with server-side apply, forced) → the loop decides again on what is now stored, until
//! nothing is left to do. Every repair is logged with what and why and counted
//! (`resize_guard_certificate_repairs_total{what}`); failures are logged and counted
//! (`resize_guard_certificate_errors_total{what}`) and retried on the next wake-up.
//!
//! | module | owns |
//! |---|---|
//! | [`secrets`] | the layout of both Secrets, rotation state included |
//! | [`ca_bundle`] | what a configuration trusts and the server-side apply body |
//! | [`rotation`] | the decision ([`rotation::Rotation`]) |
//! | [`actuator`] | reads and writes, nothing else |
//! | [`args`] | the flags ([`CertificateArgs`]) |

pub mod actuator;
pub mod args;
pub mod ca_bundle;
pub mod rotation;
pub mod secrets;

pub use args::{CertificateArgs, CertificateMode};

use std::fmt::Debug;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use resize_guard_certs::CertSpec;
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use crate::lease::fence::Leadership;
use crate::metrics::Metrics;
use actuator::{Actuator, describe};
use rotation::{Expected, Rotation, decide};

/// How many decide-and-act rounds one wake-up may take (a fresh install needs two, a CA
/// rotation step two or three).
const MAX_PASSES: usize = 6;

/// Everything the certificate manager needs to know, from the flags.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The install namespace (both Secrets).
    pub namespace: String,
    /// The CA Secret.
    pub ca_secret: String,
    /// The serving Secret.
    pub tls_secret: String,
    /// Both configurations' name.
    pub configuration: String,
    /// What the certificates should be.
    pub expected: Expected,
    /// Re-check period besides watch events.
    pub check_interval: Duration,
}

impl Settings {
    /// The settings for the install namespace `namespace`: the leaf names the Service's four
    /// DNS forms plus every `--serving-host` (an IP address or a DNS name).
    pub fn new(namespace: &str, args: &CertificateArgs) -> Result<Settings, String> {
        let mut spec = CertSpec::for_service(&args.webhook_service, namespace);
        for host in &args.serving_hosts {
            let host = host.trim();
            if let Ok(ip) = host.parse::<IpAddr>() {
                if !spec.ip_addresses.contains(&ip) {
                    spec.ip_addresses.push(ip);
                }
            } else if host.is_empty()
                || !host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '*'))
            {
                return Err(format!(
                    "--serving-host {host:?} is neither an IP address nor a DNS name"
                ));
            } else if !spec.dns_names.iter().any(|d| d.eq_ignore_ascii_case(host)) {
                spec.dns_names.push(host.to_owned());
            }
        }
        spec.leaf_validity = args.leaf_validity;
        spec.ca_validity = args.ca_validity;
        if args.leaf_validity.is_zero() || args.ca_validity.is_zero() {
            return Err("--leaf-validity and --ca-validity must be positive".into());
        }
        if args.cert_check_interval.is_zero() {
            return Err("--cert-check-interval must be positive".into());
        }
        Ok(Settings {
            namespace: namespace.to_owned(),
            ca_secret: args.ca_secret.clone(),
            tls_secret: args.tls_secret.clone(),
            configuration: args.webhook_configuration.clone(),
            expected: Expected {
                spec,
                overlap: args.ca_overlap,
            },
            check_interval: args.cert_check_interval,
        })
    }
}

/// Keeps the certificates until `leadership` is lost (or revoked on shutdown); every write is
/// fenced by it.
pub async fn run(
    client: kube::Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    leadership: Leadership,
) {
    let actuator = Actuator {
        client: client.clone(),
        namespace: settings.namespace.clone(),
        ca_secret: settings.ca_secret.clone(),
        tls_secret: settings.tls_secret.clone(),
        configuration: settings.configuration.clone(),
        spec: settings.expected.spec.clone(),
        leadership: leadership.clone(),
    };
    tracing::info!(namespace = %actuator.namespace, ca_secret = %actuator.ca_secret,
        tls_secret = %actuator.tls_secret, configuration = %actuator.configuration,
        dns_names = ?settings.expected.spec.dns_names, ip_addresses = ?settings.expected.spec.ip_addresses,
        "managing the webhook's certificates");
    let wake = Arc::new(Notify::new());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &actuator.namespace);
    let watches = [
        wake_on(secrets.clone(), &actuator.ca_secret, &wake, &metrics),
        wake_on(secrets, &actuator.tls_secret, &wake, &metrics),
        wake_on(
            Api::<MutatingWebhookConfiguration>::all(client.clone()),
            &actuator.configuration,
            &wake,
            &metrics,
        ),
        wake_on(
            Api::<ValidatingWebhookConfiguration>::all(client),
            &actuator.configuration,
            &wake,
            &metrics,
        ),
    ];
    let mut tick = tokio::time::interval(settings.check_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stop = std::pin::pin!(leadership.lost());
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = wake.notified() => {}
            _ = tick.tick() => {}
        }
        // Leadership may end mid-pass: stop at once (every write is idempotent or guarded by
        // resourceVersion, so a cancelled pass leaves nothing half-done that the next leader
        // would not redo).
        tokio::select! {
            _ = &mut stop => break,
            _ = reconcile(&actuator, &settings.expected, &metrics) => {}
        }
    }
    for w in watches {
        w.abort();
    }
    // A follower's gauges would go stale: only the leader reports expiry.
    metrics.forget_certificate_expiry();
    tracing::info!("stopped managing the webhook's certificates");
}

/// Decides and acts until nothing is left to do (or something fails: the next wake-up retries).
pub async fn reconcile(actuator: &Actuator, expected: &Expected, metrics: &Metrics) {
    for _ in 0..MAX_PASSES {
        let snapshot = match actuator.read().await {
            Ok(s) => s,
            Err(e) => {
                metrics.certificate_error("read");
                tracing::warn!(error = %describe(&e), reason = e.reason(), "certificates: read failed; retrying on the next check");
                return;
            }
        };
        let now = SystemTime::now();
        let decision = decide(now, &snapshot.observed(), expected);
        record_expiry(metrics, &decision);
        if decision.actions.is_empty() {
            return;
        }
        for action in &decision.actions {
            let what = action.what().label();
            match actuator.carry_out(action, &snapshot, now).await {
                Ok(()) => metrics.certificate_repair(what),
                Err(e) => {
                    metrics.certificate_error(what);
                    tracing::warn!(what, why = action.reason(), error = %describe(&e),
                        reason = e.reason(), "certificates: repair failed; retrying on the next check");
                    return;
                }
            }
        }
    }
    metrics.certificate_error("converge");
    tracing::warn!(
        passes = MAX_PASSES,
        "certificates: still changing after every pass; retrying on the next check"
    );
}

fn record_expiry(metrics: &Metrics, decision: &Rotation) {
    if let Some(t) = decision.ca_expiry {
        metrics.certificate_expiry("ca", t);
    }
    if let Some(t) = decision.serving_expiry {
        metrics.certificate_expiry("serving", t);
    }
}

/// Wakes the loop on every change of object `name` (after its first list).
fn wake_on<K>(
    api: Api<K>,
    name: &str,
    wake: &Arc<Notify>,
    metrics: &Arc<Metrics>,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let what = format!("{} {name}", K::kind(&K::DynamicType::default()));
    let (wake, metrics) = (wake.clone(), metrics.clone());
    tokio::spawn(async move {
        let mut stream = watcher(api, config).default_backoff().boxed();
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                Ok(_) => wake.notify_one(),
                Err(e) => {
                    metrics.certificate_error("watch");
                    tracing::warn!(object = %what, error = %e, "certificates: watch failed; the periodic check still runs");
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn settings(extra: &[&str]) -> Result<Settings, String> {
        let mut argv = vec!["resize-guard-controller"];
        argv.extend_from_slice(extra);
        let args = crate::args::Args::try_parse_from(argv).unwrap();
        Settings::new("prod", &args.certificates)
    }

    #[test]
    fn the_leaf_names_the_service_and_every_serving_host() {
        let s = settings(&[
            "--serving-host=127.0.0.1",
            "--serving-host=hook.example.com",
        ])
        .unwrap();
        let spec = &s.expected.spec;
        for name in [
            "resize-guard-webhook",
            "resize-guard-webhook.prod",
            "resize-guard-webhook.prod.svc",
            "resize-guard-webhook.prod.svc.cluster.local",
            "hook.example.com",
        ] {
            assert!(spec.dns_names.iter().any(|n| n == name), "{name}");
        }
        assert_eq!(
            spec.ip_addresses,
            vec!["127.0.0.1".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(spec.leaf_validity, Duration::from_secs(2160 * 3600));
        assert_eq!(s.expected.overlap, Duration::from_secs(3600));
    }

    #[test]
    fn a_serving_host_that_is_no_name_is_refused() {
        let err = settings(&["--serving-host=bad name"]).unwrap_err();
        assert!(err.contains("bad name"), "{err}");
        assert!(settings(&["--leaf-validity=0s"]).is_err());
    }
}
