//! Certificates that manage themselves, against the real kube-apiserver: the controller (in
//! process, as admin, `--certificates=self`) creates the CA and serving Secrets, writes caBundle
//! into webhook configurations shipped without one, takes caBundle back within seconds after a
//! garbling or a wiping replace, renews a short-lived leaf at 2/3 of its life without touching
//! the CA, and rotates a short-lived CA in three phases during which the served leaf's issuer is
//! always in caBundle. The configurations are created here (not from `deploy/`), pointing at an
//! unused loopback port with `failurePolicy: Ignore`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use resize_guard_harness::env::{Env, EnvOptions, LogGuard, shared};
use resize_guard_harness::process::free_port;
use resize_guard_harness::text::assert_contains_all;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use serde_json::json;

const T: Duration = Duration::from_secs(30);

/// The controller's logs on the test's output (shown when a test fails).
fn logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| resize_guard_runtime::process::init("text"));
}

/// The suite's environment (with the controller's logs), the guard that prints its logs on
/// failure, an admin client, and a fresh namespace `prefix-…` beside the webhook configurations
/// `configuration` ([`shipped_configurations`]).
async fn setup(
    prefix: &str,
    configuration: &str,
) -> (&'static Env, LogGuard<'static>, kube::Client, String) {
    logs();
    let env = shared(EnvOptions::default());
    let guard = env.guard();
    let client = env.client().await;
    let ns = env.namespace(prefix).await;
    shipped_configurations(&client, configuration).await;
    (env, guard, client, ns)
}

/// Creates a Mutating- and ValidatingWebhookConfiguration `name` without caBundle.
async fn shipped_configurations(client: &kube::Client, name: &str) {
    let port = free_port().unwrap();
    let webhook = |hook: &str, path: &str| {
        json!({
            "name": hook,
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/{path}")},
            "rules": [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods/resize"], "scope": "Namespaced"}],
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "timeoutSeconds": 3,
        })
    };
    let m: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [webhook("mutate.resize-guard.io", "mutate")],
    }))
    .unwrap();
    let v: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [webhook("validate.resize-guard.io", "validate")],
    }))
    .unwrap();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &m)
        .await
        .unwrap();
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &v)
        .await
        .unwrap();
}

/// A controller running in this process until dropped.
struct Controller {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    health_port: u16,
}

impl Controller {
    async fn start(env: &Env, ns: &str, extra: &[String]) -> Controller {
        let health_port = free_port().unwrap();
        let mut argv = vec![
            "resize-guard-controller".to_owned(),
            format!("--health-addr=127.0.0.1:{health_port}"),
            format!("--namespace={ns}"),
            format!("--identity=certs-{ns}"),
            "--lease-duration=4s".into(),
            "--renew-interval=1s".into(),
            "--certificates=self".into(),
            "--serving-host=127.0.0.1".into(),
            "--cert-check-interval=1s".into(),
        ];
        argv.extend_from_slice(extra);
        let admin = resize_guard_harness::control_plane::Identity::Admin;
        let (stop, task) = crate::scenario::webhook::serve_in_process(env, admin, argv).await;
        Controller {
            stop: Some(stop),
            task,
            health_port,
        }
    }

    async fn metrics(&self) -> String {
        resize_guard_harness::install::http_get(self.health_port, "/metrics")
            .await
            .unwrap_or_default()
    }

    async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(T, &mut self.task)
            .await
            .expect("the controller stopped")
            .unwrap()
            .unwrap();
    }
}

/// What the cluster holds.
#[derive(Debug, Clone, PartialEq)]
struct State {
    ca: Option<Secret>,
    tls: Option<Secret>,
    mutating: Vec<Option<Vec<u8>>>,
    validating: Vec<Option<Vec<u8>>>,
}

impl State {
    async fn read(client: &kube::Client, ns: &str, configuration: &str) -> State {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
        let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
            .get(configuration)
            .await
            .unwrap();
        let v = Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .get(configuration)
            .await
            .unwrap();
        State {
            ca: secrets.get_opt("resize-guard-ca").await.unwrap(),
            tls: secrets.get_opt("resize-guard-webhook-tls").await.unwrap(),
            mutating: m
                .webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|w| w.client_config.ca_bundle.map(|b| b.0))
                .collect(),
            validating: v
                .webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|w| w.client_config.ca_bundle.map(|b| b.0))
                .collect(),
        }
    }

    fn key(secret: &Option<Secret>, key: &str) -> Option<String> {
        let bytes = secret.as_ref()?.data.as_ref()?.get(key)?.0.clone();
        String::from_utf8(bytes).ok()
    }

    fn ca_crt(&self) -> Option<String> {
        State::key(&self.ca, "ca.crt")
    }

    fn leaf(&self) -> Option<String> {
        State::key(&self.tls, "tls.crt")
    }

    /// Every webhook's caBundle, as text.
    fn bundles(&self) -> Vec<String> {
        self.mutating
            .iter()
            .chain(&self.validating)
            .map(|b| String::from_utf8(b.clone().unwrap_or_default()).unwrap_or_default())
            .collect()
    }

    /// Converged: both Secrets exist, every caBundle is the CA Secret's ca.crt.
    fn converged(&self) -> bool {
        self.leaf().is_some()
            && self
                .ca_crt()
                .is_some_and(|ca| self.bundles().iter().all(|b| *b == ca))
    }
}

async fn wait_for(
    client: &kube::Client,
    ns: &str,
    configuration: &str,
    timeout: Duration,
    what: &str,
    pred: impl Fn(&State) -> bool,
) -> (State, Duration) {
    let started = Instant::now();
    loop {
        let s = State::read(client, ns, configuration).await;
        if pred(&s) {
            return (s, started.elapsed());
        }
        assert!(
            started.elapsed() < timeout,
            "{what} not within {timeout:?}: {s:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits ([`wait_for`]) until the configuration and Secrets converged ([`State::converged`]).
async fn converged(
    client: &kube::Client,
    ns: &str,
    configuration: &str,
    timeout: Duration,
    what: &str,
) -> (State, Duration) {
    wait_for(client, ns, configuration, timeout, what, State::converged).await
}

/// Verifies `leaf` as a TLS server certificate for `name` with `ca` as the only root.
fn verify(leaf: &str, ca: &str, name: &str) -> Result<(), rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
    let end_entity = CertificateDer::from_pem_slice(leaf.as_bytes()).unwrap();
    verifier
        .verify_server_cert(
            &end_entity,
            &[],
            &ServerName::try_from(name.to_owned()).unwrap(),
            &[],
            UnixTime::now(),
        )
        .map(|_| ())
}

/// Replaces a configuration with its webhooks' caBundle set to `bundle` (None: removed), as a
/// GitOps tool re-applying the shipped manifest would.
async fn overwrite_bundle(
    client: &kube::Client,
    name: &str,
    mutating: bool,
    bundle: Option<&[u8]>,
) {
    let value = bundle.map(|b| ByteString(b.to_vec()));
    if mutating {
        let api = Api::<MutatingWebhookConfiguration>::all(client.clone());
        let mut c = api.get(name).await.unwrap();
        for w in c.webhooks.iter_mut().flatten() {
            w.client_config.ca_bundle = value.clone();
        }
        api.replace(name, &PostParams::default(), &c).await.unwrap();
    } else {
        let api = Api::<ValidatingWebhookConfiguration>::all(client.clone());
        let mut c = api.get(name).await.unwrap();
        for w in c.webhooks.iter_mut().flatten() {
            w.client_config.ca_bundle = value.clone();
        }
        api.replace(name, &PostParams::default(), &c).await.unwrap();
    }
}

fn issued_at(leaf: &str) -> SystemTime {
    resize_guard_certs::inspect(leaf).unwrap().not_before
        + resize_guard_certs::spec::CLOCK_SKEW_ALLOWANCE
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_keeps_secrets_and_ca_bundles_true_and_repairs_them_within_seconds() {
    let name = "resize-guard";
    let (env, _g, client, ns) = setup("certs", name).await;

    let started = Instant::now();
    let controller = Controller::start(env, &ns, &["--leaf-validity=30s".into()]).await;
    let (state, took) = converged(&client, &ns, name, T, "first install").await;
    eprintln!(
        "fresh install converged in {took:?} (from controller start: {:?})",
        started.elapsed()
    );

    // The Secrets: types and keys as the contract says.
    let (ca_secret, tls_secret) = (state.ca.clone().unwrap(), state.tls.clone().unwrap());
    assert_eq!(ca_secret.type_.as_deref(), Some("Opaque"));
    assert_eq!(tls_secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let ca = state.ca_crt().unwrap();
    assert!(State::key(&state.ca, "ca.key").is_some());
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        assert!(State::key(&state.tls, key).is_some(), "{key}");
    }
    assert_eq!(State::key(&state.tls, "ca.crt").unwrap(), ca);
    assert_eq!(
        state.bundles(),
        vec![ca.clone(); 2],
        "caBundle is ca.crt, on both"
    );

    // The leaf verifies against the CA alone for every name kube-apiserver may dial.
    let leaf = state.leaf().unwrap();
    for host in [
        "127.0.0.1".to_owned(),
        "resize-guard-webhook".to_owned(),
        format!("resize-guard-webhook.{ns}"),
        format!("resize-guard-webhook.{ns}.svc"),
        format!("resize-guard-webhook.{ns}.svc.cluster.local"),
    ] {
        verify(&leaf, &ca, &host).unwrap_or_else(|e| panic!("{host}: {e}"));
    }
    assert!(verify(&leaf, &ca, "other.example.com").is_err());
    let info = resize_guard_certs::inspect(&leaf).unwrap();
    assert_eq!(info.dns_names.len(), 4, "{:?}", info.dns_names);
    assert_eq!(
        info.ip_addresses,
        vec!["127.0.0.1".parse::<std::net::IpAddr>().unwrap()]
    );

    // Garbage caBundle on the validating configuration: repaired.
    overwrite_bundle(&client, name, false, Some(b"garbage")).await;
    let ten = Duration::from_secs(10);
    let (_, garbage_repair) = converged(&client, &ns, name, ten, "garbage repaired").await;
    // caBundle wiped from the mutating configuration: repaired.
    overwrite_bundle(&client, name, true, None).await;
    let (after, wipe_repair) = converged(&client, &ns, name, ten, "wipe repaired").await;
    eprintln!(
        "caBundle repaired after garbage in {garbage_repair:?}, after removal in {wipe_repair:?}"
    );
    assert!(garbage_repair < ten && wipe_repair < ten);
    assert_eq!(
        after.ca_crt().unwrap(),
        ca,
        "the CA is untouched by bundle repairs"
    );

    // The 30 s leaf is replaced after ~20 s, by the same CA; caBundle stays.
    let (renewed, _) = wait_for(&client, &ns, name, T, "leaf renewal", |s| {
        s.leaf().is_some_and(|l| l != leaf)
    })
    .await;
    let age = SystemTime::now().duration_since(issued_at(&leaf)).unwrap();
    eprintln!("the 30 s leaf was replaced {age:?} after it was issued");
    assert!(
        (Duration::from_secs(18)..Duration::from_secs(27)).contains(&age),
        "replaced after {age:?}"
    );
    assert_eq!(renewed.ca_crt().unwrap(), ca);
    assert_eq!(renewed.bundles(), vec![ca.clone(); 2]);
    verify(&renewed.leaf().unwrap(), &ca, "127.0.0.1").unwrap();

    // The counter moves once the actuator's write has returned, which can be after the test saw
    // the renewed Secret: wait for the renewal to be counted, then read everything else.
    let serving_repairs = |metrics: &str| {
        metrics
            .lines()
            .find_map(|l| {
                l.strip_prefix("resize_guard_certificate_repairs_total{what=\"serving\"} ")
            })
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + T;
    let mut metrics = controller.metrics().await;
    while serving_repairs(&metrics) < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        metrics = controller.metrics().await;
    }
    assert!(serving_repairs(&metrics) >= 2, "{metrics}");
    assert_contains_all(
        &metrics,
        &[
            "resize_guard_certificate_repairs_total{what=\"ca\"} 1",
            "resize_guard_certificate_repairs_total{what=\"ca_bundle\"} 4",
            "resize_guard_certificate_expiry_timestamp_seconds{certificate=\"ca\"}",
            "resize_guard_certificate_expiry_timestamp_seconds{certificate=\"serving\"}",
        ],
    );

    // Stopped (leadership given up): nothing repairs caBundle any more. The proof that a repair
    // had its time: a witness — a running controller with its own namespace and configurations —
    // repairs the same wipe, made at the same moment.
    let witness_ns = env.namespace("certs-witness").await;
    let witness_name = "resize-guard-witness";
    shipped_configurations(&client, witness_name).await;
    let witness = Controller::start(
        env,
        &witness_ns,
        &[format!("--webhook-configuration={witness_name}")],
    )
    .await;
    converged(&client, &witness_ns, witness_name, T, "witness install").await;
    controller.shutdown().await;
    overwrite_bundle(&client, name, false, None).await;
    overwrite_bundle(&client, witness_name, false, None).await;
    converged(&client, &witness_ns, witness_name, ten, "witness repair").await;
    let s = State::read(&client, &ns, name).await;
    assert_eq!(
        s.validating,
        vec![None],
        "no repair after the leader stopped"
    );
    witness.shutdown().await;
}

/// A CA living 60 s rotates at ~40 s: its successor joins caBundle, signs 5 s later (the leaf is
/// re-issued), and the old CA leaves caBundle 5 s after that. At no observed moment is the leaf's
/// issuer missing from caBundle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_rotates_in_three_phases_and_the_leaf_is_always_trusted() {
    let name = "resize-guard-rotation";
    let (env, _g, client, ns) = setup("rotate", name).await;
    let controller = Controller::start(
        env,
        &ns,
        &[
            format!("--webhook-configuration={name}"),
            "--ca-validity=60s".into(),
            "--leaf-validity=60s".into(),
            "--ca-overlap=5s".into(),
        ],
    )
    .await;
    let (first, _) = converged(&client, &ns, name, T, "first install").await;
    let old_ca = first.ca_crt().unwrap();
    let ca_born = issued_at(&old_ca);

    let mut phases_seen = [false; 3];
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut new_ca = None;
    loop {
        let s = State::read(&client, &ns, name).await;
        let (Some(leaf), Some(current)) = (s.leaf(), s.ca_crt()) else {
            panic!("a Secret vanished: {s:#?}");
        };
        // The leaf's issuer is trusted by every webhook, whatever the phase.
        for bundle in s.bundles() {
            verify(&leaf, &bundle, "127.0.0.1").unwrap_or_else(|e| {
                panic!(
                    "leaf not trusted by caBundle at {:?}: {e}",
                    ca_born.elapsed()
                )
            });
        }
        let bundle = s.bundles()[0].clone();
        let next = State::key(&s.ca, "next-ca.crt");
        let previous = State::key(&s.ca, "previous-ca.crt");
        if let Some(next) = &next
            && bundle.contains(next.trim())
            && bundle.contains(old_ca.trim())
        {
            phases_seen[0] = true; // both trusted, the old one signs
            assert!(resize_guard_certs::signed_by(&leaf, &old_ca).unwrap());
        }
        if current != old_ca && previous.as_deref() == Some(old_ca.as_str()) {
            phases_seen[1] = true; // the new one signs, the old one still trusted
            new_ca = Some(current.clone());
        }
        if phases_seen[1] && current != old_ca && previous.is_none() && s.converged() {
            phases_seen[2] = true; // the old one is gone
            assert!(resize_guard_certs::signed_by(&leaf, &current).unwrap());
            assert_eq!(s.bundles(), vec![current.clone(); 2]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "rotation incomplete, phases seen {phases_seen:?}: {s:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "CA rotated: phases {phases_seen:?}, finished {:?} after the first CA was issued",
        ca_born.elapsed().unwrap_or_default()
    );
    assert_eq!(phases_seen, [true; 3]);
    assert_ne!(new_ca.as_deref(), Some(old_ca.as_str()));
    controller.shutdown().await;
}
