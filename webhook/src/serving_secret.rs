//! The default certificate source: the `kubernetes.io/tls` Secret named by `--tls-secret` in
//! the install namespace, read through the API with a watch on that one name (field selector
//! `metadata.name=<secret>`, so RBAC can grant get/list/watch on that Secret alone). Every
//! version the watch delivers is offered to [`ServingCert`]: a usable `tls.crt` + `tls.key` is
//! swapped in for the next handshake, so a rotation written by the controller reaches every
//! replica within seconds, without waiting for a kubelet volume sync. A missing Secret, missing
//! keys or unreadable PEM make `/readyz` fail with the reason (see [`crate::tls`]).
//!
//! The watch runs as a task of the view's [`Supervisor`] ([`spawn`]): a panic, or the stream
//! ending, fails `/livez` with the reason and ends the process ([`crate::server`]), instead of
//! leaving a certificate that no rotation reaches any more.
//!
//! Data flow: watch event → [`pem_pair`] (pure: which keys, non-empty) → [`ServingKey`] (parse,
//! key matches leaf) → [`ServingCert::install`] / [`ServingCert::fail`] + metrics + a log line.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

use resize_guard_runtime::supervisor::Supervisor;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
use crate::tls::{ServingCert, ServingKey};

/// Secret key of the serving certificate (chain, leaf first).
pub const CERT_KEY: &str = "tls.crt";
/// Secret key of the serving certificate's private key.
pub const KEY_KEY: &str = "tls.key";

/// The Secret this source reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret {}/{}", self.namespace, self.name)
    }
}

/// The PEM bytes of `tls.crt` and `tls.key`, or why the Secret does not hold them.
pub fn pem_pair<'a>(secret: &'a Secret, at: &SecretRef) -> Result<(&'a [u8], &'a [u8]), String> {
    let data = secret.data.as_ref();
    let get = |key: &str| -> Result<&'a [u8], String> {
        match data.and_then(|d| d.get(key)) {
            Some(v) if !v.0.is_empty() => Ok(v.0.as_slice()),
            Some(_) => Err(format!("{at} has an empty {key}")),
            None => Err(format!("{at} has no {key}")),
        }
    };
    Ok((get(CERT_KEY)?, get(KEY_KEY)?))
}

/// Parses what `secret` offers into a key for handshakes, or says why it cannot be used.
pub fn serving_key(secret: &Secret, at: &SecretRef) -> Result<ServingKey, String> {
    let (cert, key) = pem_pair(secret, at)?;
    ServingKey::from_pem(
        cert,
        key,
        &format!("{at} key {CERT_KEY}"),
        &format!("{at} key {KEY_KEY}"),
    )
    .map_err(|e| resize_guard_runtime::error_chain(&e))
}

/// Offers one version of the Secret to `cert`: swaps it in when it is new and usable, reports
/// it when unusable, and clears a reported problem when it is the certificate already served.
pub fn offer(cert: &ServingCert, secret: &Secret, at: &SecretRef, metrics: &Metrics) {
    if let Ok((c, k)) = pem_pair(secret, at)
        && cert.serves(c, k)
    {
        cert.recover();
        return;
    }
    match serving_key(secret, at) {
        Ok(key) => {
            let not_after = key.not_after();
            metrics.cert_expiry(not_after);
            let reloaded = cert.install(key);
            if reloaded {
                metrics.cert_reload(true);
            }
            tracing::info!(secret = %at, not_after = %crate::tls::rfc3339(not_after), reloaded,
                "serving the TLS certificate from the Secret");
        }
        Err(problem) => {
            metrics.cert_reload(false);
            tracing::warn!(%problem, "the serving certificate Secret is unusable; /readyz fails until it is fixed");
            cert.fail(problem);
        }
    }
}

/// The supervised task's name (`/livez` and the log say "the serving Secret watch ended: …").
pub const TASK: &str = "the serving Secret watch";

/// Runs [`watch`] as a task of `supervisor`.
pub fn spawn(
    supervisor: &Supervisor,
    client: kube::Client,
    at: SecretRef,
    cert: Arc<ServingCert>,
    metrics: Arc<Metrics>,
) -> JoinHandle<()> {
    supervisor.spawn(TASK, watch(client, at, cert, metrics))
}

/// Watches the Secret for ever, offering every version to `cert` (the watcher retries with
/// backoff); the stream ending is an error.
pub async fn watch(
    client: kube::Client,
    at: SecretRef,
    cert: Arc<ServingCert>,
    metrics: Arc<Metrics>,
) -> Result<(), String> {
    let api: Api<Secret> = Api::namespaced(client, &at.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", at.name));
    let stream = watcher(api, config).default_backoff().boxed();
    tracing::info!(secret = %at, "reading the serving certificate from the Secret");
    follow(stream, &at, &cert, &metrics).await
}

/// Offers every event of `stream` to `cert`; returns (an error) only when the stream ends.
pub async fn follow<S>(
    mut stream: S,
    at: &SecretRef,
    cert: &ServingCert,
    metrics: &Metrics,
) -> Result<(), String>
where
    S: Stream<Item = Result<watcher::Event<Secret>, watcher::Error>> + Unpin,
{
    let mut seen_in_list = false;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => seen_in_list = false,
            Ok(watcher::Event::InitApply(s) | watcher::Event::Apply(s)) => {
                seen_in_list = true;
                offer(cert, &s, at, metrics);
            }
            Ok(watcher::Event::InitDone) => {
                if !seen_in_list {
                    tracing::warn!(secret = %at, "the serving certificate Secret does not exist");
                    cert.fail(format!("{at} not found"));
                }
            }
            Ok(watcher::Event::Delete(_)) => {
                tracing::warn!(secret = %at, "the serving certificate Secret was deleted");
                cert.fail(format!("{at} was deleted"));
            }
            Err(e) => {
                tracing::warn!(secret = %at, error = %e, "watching the serving certificate Secret");
                // Before the first certificate this is why the webhook is not ready; afterwards
                // the last certificate keeps serving while the watch recovers.
                if !cert.is_loaded() {
                    cert.fail(format!("reading {at}: {e}"));
                }
            }
        }
    }
    Err(format!("the watch of {at} ended"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::SystemTime;

    use k8s_openapi::ByteString;

    use super::*;
    use resize_guard_certs::{Bundle, CertSpec, generate};
    use resize_guard_runtime::exposition::assert_contains;

    fn at() -> SecretRef {
        SecretRef {
            namespace: "resize-guard".into(),
            name: "resize-guard-webhook-tls".into(),
        }
    }

    fn secret(entries: &[(&str, &[u8])]) -> Secret {
        let data: BTreeMap<String, ByteString> = entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
            .collect();
        Secret {
            type_: Some("kubernetes.io/tls".into()),
            data: Some(data),
            ..Default::default()
        }
    }

    fn tls(bundle: &Bundle) -> Secret {
        secret(&[
            ("tls.crt", bundle.cert_pem.as_bytes()),
            ("tls.key", bundle.key_pem.as_bytes()),
            ("ca.crt", bundle.ca_cert_pem.as_bytes()),
        ])
    }

    /// A fresh CA and leaf for 127.0.0.1.
    fn loopback() -> Bundle {
        generate(&CertSpec::for_loopback()).unwrap()
    }

    /// A serving certificate and its metrics, offered Secrets as the watched
    /// `resize-guard/resize-guard-webhook-tls`.
    struct Slot {
        cert: ServingCert,
        metrics: Metrics,
    }

    impl Slot {
        fn new() -> Slot {
            Slot {
                cert: ServingCert::new(),
                metrics: Metrics::new(),
            }
        }

        fn offer(&self, secret: &Secret) {
            offer(&self.cert, secret, &at(), &self.metrics);
        }

        /// Asserts the metrics hold `sample`.
        fn shows(&self, sample: &str) {
            let text = self.metrics.render();
            assert!(text.contains(sample), "{sample} not in {text}");
        }

        /// Why it is not ready (it must not be).
        fn unready(&self) -> String {
            self.cert.readiness(SystemTime::now()).unwrap_err()
        }

        fn serves(&self, bundle: &Bundle) -> bool {
            let (cert, key) = (bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes());
            self.cert.serves(cert, key)
        }
    }

    #[test]
    fn a_usable_secret_is_served_and_ready() {
        let slot = Slot::new();
        let bundle = loopback();
        slot.offer(&tls(&bundle));
        assert_eq!(slot.cert.readiness(SystemTime::now()), Ok(()));
        assert!(slot.serves(&bundle));
        slot.shows("resize_guard_certificate_expiry_timestamp_seconds{certificate=\"serving\"}");
    }

    #[test]
    fn missing_keys_are_named_in_the_readiness_reason() {
        let bundle = loopback();
        for (s, want) in [
            (Secret::default(), "has no tls.crt"),
            (
                secret(&[("tls.crt", bundle.cert_pem.as_bytes())]),
                "has no tls.key",
            ),
            (
                secret(&[("tls.crt", b""), ("tls.key", bundle.key_pem.as_bytes())]),
                "has an empty tls.crt",
            ),
        ] {
            let slot = Slot::new();
            slot.offer(&s);
            let named = "Secret resize-guard/resize-guard-webhook-tls";
            assert_contains(&slot.unready(), &[want, named]);
        }
    }

    #[test]
    fn unreadable_pem_is_unready_and_keeps_the_last_good_certificate() {
        let slot = Slot::new();
        let good = loopback();
        slot.offer(&tls(&good));
        let garbage = secret(&[("tls.crt", b"garbage"), ("tls.key", b"garbage")]);
        slot.offer(&garbage);
        let why = slot.unready();
        assert!(why.contains("key tls.crt"), "{why}");
        assert!(slot.serves(&good));
        slot.shows("resize_guard_certificate_reloads_total{result=\"error\"} 1");
        // The good version again: ready, no reload counted.
        slot.offer(&tls(&good));
        assert_eq!(slot.cert.readiness(SystemTime::now()), Ok(()));
        assert!(!slot.metrics.render().contains("result=\"ok\""));
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let (a, b) = (loopback(), loopback());
        let mixed = secret(&[
            ("tls.crt", a.cert_pem.as_bytes()),
            ("tls.key", b.key_pem.as_bytes()),
        ]);
        let why = serving_key(&mixed, &at()).unwrap_err();
        assert_contains(&why, &["do not form a valid TLS configuration"]);
    }

    #[test]
    fn a_rotated_secret_is_a_counted_reload() {
        let slot = Slot::new();
        let first = loopback();
        let renewed = resize_guard_certs::renew_leaf(
            &first.ca_cert_pem,
            &first.ca_key_pem,
            &CertSpec::for_loopback(),
        )
        .unwrap();
        slot.offer(&tls(&first));
        slot.offer(&tls(&renewed));
        assert!(slot.serves(&renewed));
        slot.shows("resize_guard_certificate_reloads_total{result=\"ok\"} 1");
    }

    /// The supervisor's first task exit, which must come within seconds.
    async fn first_exit(supervisor: &Supervisor) -> resize_guard_runtime::supervisor::TaskExit {
        let within = std::time::Duration::from_secs(5);
        tokio::time::timeout(within, supervisor.exited())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_watch_ending_is_a_supervised_exit_that_says_which_secret() {
        let supervisor = Supervisor::new();
        let (cert, metrics) = (Arc::new(ServingCert::new()), Arc::new(Metrics::new()));
        let first = loopback();
        let events = futures::stream::iter([
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(tls(&first))),
            Ok(watcher::Event::InitDone),
        ]);
        let task = {
            let (cert, metrics) = (cert.clone(), metrics.clone());
            supervisor.spawn(
                TASK,
                async move { follow(events, &at(), &cert, &metrics).await },
            )
        };
        let exit = first_exit(&supervisor).await;
        task.await.unwrap();
        assert_eq!(exit.task, TASK);
        assert_eq!(
            exit.how,
            "ended: the watch of Secret resize-guard/resize-guard-webhook-tls ended"
        );
        // What it saw before it ended was still served.
        assert!(cert.is_loaded());
    }

    #[tokio::test]
    async fn a_panic_in_the_watch_is_a_supervised_exit() {
        let supervisor = Supervisor::new();
        let (cert, metrics) = (Arc::new(ServingCert::new()), Arc::new(Metrics::new()));
        let boom = futures::stream::poll_fn(
            |_| -> std::task::Poll<Option<Result<watcher::Event<Secret>, watcher::Error>>> {
                panic!("boom")
            },
        );
        supervisor.spawn(
            TASK,
            async move { follow(boom, &at(), &cert, &metrics).await },
        );
        let exit = first_exit(&supervisor).await;
        assert_eq!(exit.to_string(), "the serving Secret watch panicked: boom");
    }
}
