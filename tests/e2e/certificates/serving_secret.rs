//! The webhook reads its serving certificate from a `kubernetes.io/tls` Secret through the API
//! (no `--cert-dir`): the real binary, as the webhook's ServiceAccount whose only access to
//! Secrets here is get/list/watch on that one Secret by name, is unready until the Secret exists,
//! serves exactly the Secret's certificate (checked by a TLS handshake trusting only the CA),
//! swaps in a replaced certificate within seconds, and turns unready with the reason when the
//! Secret is garbled or deleted.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use resize_guard_certs::{Authority, CertSpec, Leaf};
use resize_guard_harness::control_plane::Identity;
use resize_guard_harness::env::{EnvOptions, shared};
use resize_guard_harness::install::{apply_rbac, http_get, spawn_as_service_account};
use resize_guard_harness::process::{Process, free_port};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::json;

const SECRET: &str = "resize-guard-webhook-tls";

fn tls_secret(leaf: &Leaf, ca: &Authority) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": SECRET},
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": leaf.cert_pem, "tls.key": leaf.key_pem, "ca.crt": ca.cert_pem()},
    }))
    .unwrap()
}

/// Lets the ServiceAccount read only this Secret (and the policy ConfigMap) in `ns`.
async fn narrow_rbac(client: &kube::Client, ns: &str) {
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "resize-guard-webhook"},
        "rules": [
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [SECRET],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["resize-guard", "resize-guard-last-good"],
             "verbs": ["get", "list", "watch"]},
        ],
    }))
    .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "resize-guard-webhook"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "resize-guard-webhook"},
        "subjects": [{"kind": "ServiceAccount", "name": "resize-guard-webhook", "namespace": "resize-guard"}],
    }))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// The leaf (DER) the webhook presents to a client trusting only `ca`.
async fn served_leaf(port: u16, ca: &str) -> Result<Vec<u8>, String> {
    let config = resize_guard_harness::tls::client_config(ca, &[]).unwrap();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (_, session) = tls.get_ref();
    session
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.as_ref().to_vec())
        .ok_or_else(|| "no certificate presented".to_owned())
}

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .as_ref()
        .to_vec()
}

/// Waits ([`wait_readyz`], `what` naming the wait) until `/readyz` fails with a body containing
/// `needle`, then asserts it is a 503 that says `says`.
async fn unready_saying(port: u16, process: &Process, what: &str, needle: &str, says: &str) {
    let body = wait_readyz(port, process, what, |ok, b| !ok && b.contains(needle)).await;
    assert!(body.contains("503"), "{body}");
    assert!(body.contains(says), "{body}");
}

/// Polls `/readyz` until `want(ok, body)`; returns the body.
async fn wait_readyz(
    port: u16,
    process: &Process,
    what: &str,
    want: impl Fn(bool, &str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ok, body) = match http_get(port, "/readyz").await {
            Ok(b) => (true, b),
            Err(b) => (false, b),
        };
        if want(ok, &body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: /readyz still says {body:?}\n{}",
            process.log_tail(4000)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_webhook_serves_the_secret_and_follows_its_changes() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    apply_rbac(env).await;
    let client = env.client().await;
    let ns = env.namespace("serving").await;
    narrow_rbac(&client, &ns).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);

    let (port, health) = (free_port().unwrap(), free_port().unwrap());
    let hook = spawn_as_service_account(
        env,
        Identity::Webhook,
        &crate::scenario::program("resize-guard-webhook"),
        &format!("webhook-serving-{port}"),
        &[
            format!("--tls-addr=127.0.0.1:{port}"),
            format!("--health-addr=127.0.0.1:{health}"),
            format!("--namespace={ns}"),
            format!("--tls-secret={SECRET}"),
            "--instance=e2e-serving".into(),
        ],
    );

    // No Secret yet: alive, not ready, and saying why.
    unready_saying(
        health,
        &hook,
        "no Secret",
        "not found",
        &format!("Secret {ns}/{SECRET} not found"),
    )
    .await;
    assert!(http_get(health, "/livez").await.is_ok());

    // The Secret appears: ready, serving exactly its certificate.
    let now = SystemTime::now();
    let ca = Authority::issue(Duration::from_secs(3600), now).unwrap();
    let first = ca.sign(&CertSpec::for_loopback(), now).unwrap();
    secrets
        .create(&PostParams::default(), &tls_secret(&first, &ca))
        .await
        .unwrap();
    wait_readyz(health, &hook, "Secret created", |ok, _| ok).await;
    assert_eq!(
        served_leaf(port, ca.cert_pem()).await.unwrap(),
        der(&first.cert_pem)
    );
    let other_ca = Authority::issue(Duration::from_secs(3600), now).unwrap();
    assert!(
        served_leaf(port, other_ca.cert_pem()).await.is_err(),
        "a client trusting another CA refuses it"
    );
    let metrics = http_get(health, "/metrics").await.unwrap();
    let expiry = resize_guard_certs::not_after(&first.cert_pem)
        .unwrap()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(
        metrics.contains(&format!(
            "resize_guard_certificate_expiry_timestamp_seconds{{certificate=\"serving\"}} {expiry}"
        )),
        "{metrics}"
    );

    // Replaced with a new leaf: served within seconds, no restart.
    let second = ca
        .sign(&CertSpec::for_loopback(), SystemTime::now())
        .unwrap();
    let mut s = secrets.get(SECRET).await.unwrap();
    s.data = None;
    s.string_data = tls_secret(&second, &ca).string_data;
    secrets
        .replace(SECRET, &PostParams::default(), &s)
        .await
        .unwrap();
    let replaced = Instant::now();
    loop {
        if served_leaf(port, ca.cert_pem()).await.ok() == Some(der(&second.cert_pem)) {
            break;
        }
        assert!(
            replaced.elapsed() < Duration::from_secs(5),
            "the new certificate was not served within 5 s\n{}",
            hook.log_tail(4000)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "the replaced certificate was served {:?} after the Secret update",
        replaced.elapsed()
    );
    assert!(http_get(health, "/readyz").await.is_ok());
    assert!(
        http_get(health, "/metrics")
            .await
            .unwrap()
            .contains("resize_guard_certificate_reloads_total{result=\"ok\"} 1")
    );

    // Garbled: unready with the key named; the last good certificate keeps serving.
    let mut s = secrets.get(SECRET).await.unwrap();
    s.data.as_mut().unwrap().insert(
        "tls.crt".into(),
        k8s_openapi::ByteString(b"garbage".to_vec()),
    );
    secrets
        .replace(SECRET, &PostParams::default(), &s)
        .await
        .unwrap();
    let body = wait_readyz(health, &hook, "garbled", |ok, b| {
        !ok && b.contains("tls.crt")
    })
    .await;
    assert!(body.contains("no usable serving certificate"), "{body}");
    assert_eq!(
        served_leaf(port, ca.cert_pem()).await.unwrap(),
        der(&second.cert_pem)
    );

    // Deleted: unready, saying so.
    secrets
        .delete(SECRET, &DeleteParams::default())
        .await
        .unwrap();
    unready_saying(
        health,
        &hook,
        "deleted",
        "deleted",
        &format!("Secret {ns}/{SECRET} was deleted"),
    )
    .await;
}
