//! Certificates the way a cluster's issuer makes them, for suites that stand in for one: a
//! fresh CA and a serving certificate signed by it ([`serving_certificate`]), and a stand-in for
//! cert-manager where cert-manager itself cannot run (it is not built here): its two CRDs,
//! accepting any spec ([`install_cert_manager_crds`]); what its controller does for a
//! `Certificate` — a CA and a leaf for `spec.dnsNames` in Secret `spec.secretName` with
//! `ca.crt` ([`issue`]); and what its CA injector does for a webhook configuration annotated
//! `cert-manager.io/inject-ca-from: <namespace>/<certificate>` ([`inject`]). The suites read
//! what they act on (DNS names, Secret name, annotation) from the objects as installed, so a
//! wrong name in the manifests fails them.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use serde_json::json;

use crate::admission::{CONFIG_NAME, Webhooks, set_ca_bundle};
use crate::env::Env;
use crate::objects::force_apply;

/// The field manager the stand-in writes with.
const MANAGER: &str = "resize-guard-harness-issuer";

/// PEMs of a fresh CA certificate, of a serving certificate for `names` (DNS names or IP
/// addresses) signed by it (ECDSA P-256), and of that certificate's PKCS#8 key.
pub fn serving_certificate(
    common_name: &str,
    names: Vec<String>,
) -> anyhow::Result<(String, String, String)> {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair, KeyUsagePurpose,
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.distinguished_name.push(
        DnType::CommonName,
        format!("resize-guard-harness {common_name} CA"),
    );
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

    let mut leaf = CertificateParams::new(names)?;
    leaf.distinguished_name
        .push(DnType::CommonName, common_name);
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate()?;
    let cert = leaf.signed_by(&key, &ca)?;
    Ok((ca.pem(), cert.pem(), key.serialize_pem()))
}

/// cert-manager's `Certificate` (cert-manager.io/v1).
fn certificate_resource() -> ApiResource {
    ApiResource {
        group: "cert-manager.io".into(),
        version: "v1".into(),
        api_version: "cert-manager.io/v1".into(),
        kind: "Certificate".into(),
        plural: "certificates".into(),
    }
}

/// Installs CRDs for cert-manager's `Issuer` and `Certificate` that accept any spec (the
/// stand-in checks only what it reads), and waits until the API server serves them.
pub async fn install_cert_manager_crds(env: &Env) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client().await);
    for (kind, plural) in [("Issuer", "issuers"), ("Certificate", "certificates")] {
        let name = format!("{plural}.cert-manager.io");
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": "cert-manager.io", "scope": "Namespaced",
                "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
        }))?;
        force_apply(&crds, &name, MANAGER, &crd).await?;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = env
            .kubectl()
            .run(["get", "certificates.cert-manager.io", "-A"])
            .await?;
        if out.success {
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "cert-manager's CRDs not served after 30 s: {}",
            out.stderr
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Does what cert-manager's controller does for Certificate `namespace/name`: a CA and a leaf
/// for its `spec.dnsNames`, written to Secret `spec.secretName` (`tls.crt`, `tls.key`,
/// `ca.crt`). Returns the DNS names it issued for.
pub async fn issue(env: &Env, namespace: &str, name: &str) -> anyhow::Result<Vec<String>> {
    let client = env.client().await;
    let certs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &certificate_resource());
    let cert = certs.get(name).await?;
    let spec = &cert.data["spec"];
    let names: Vec<String> = spec["dnsNames"]
        .as_array()
        .ok_or_else(|| anyhow::anyhow!("Certificate {namespace}/{name} has no spec.dnsNames"))?
        .iter()
        .filter_map(|n| n.as_str().map(str::to_owned))
        .collect();
    let secret_name = spec["secretName"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("Certificate {namespace}/{name} has no spec.secretName"))?;
    let (ca, cert_pem, key) = serving_certificate(name, names.clone())?;
    let data = BTreeMap::from([
        ("tls.crt".to_owned(), ByteString(cert_pem.into_bytes())),
        ("tls.key".to_owned(), ByteString(key.into_bytes())),
        ("ca.crt".to_owned(), ByteString(ca.into_bytes())),
    ]);
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(secret_name.to_owned()),
            namespace: Some(namespace.to_owned()),
            annotations: Some(BTreeMap::from([(
                "cert-manager.io/certificate-name".to_owned(),
                name.to_owned(),
            )])),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Default::default()
    };
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    force_apply(&secrets, secret_name, MANAGER, &secret).await?;
    // The Ready condition cert-manager sets once the Secret holds the certificate.
    let status = json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
            "message": "Certificate is up to date and has not expired (resize-guard-harness stand-in)"}]}});
    force_apply(&certs, name, MANAGER, &status).await?;
    Ok(names)
}

/// Does what cert-manager's CA injector does for the webhook configuration `which` installs:
/// reads its `cert-manager.io/inject-ca-from` annotation, the Certificate it names and that
/// Certificate's Secret, and writes the Secret's `ca.crt` as caBundle
/// ([`crate::admission::set_ca_bundle`]). Returns the annotation.
pub async fn inject(env: &Env, which: Webhooks) -> anyhow::Result<String> {
    let client = env.client().await;
    let (resource, _) = which.configuration();
    let annotations = Api::<DynamicObject>::all_with(client.clone(), &resource)
        .get(CONFIG_NAME)
        .await?
        .metadata
        .annotations;
    let from = annotations
        .and_then(|a| a.get("cert-manager.io/inject-ca-from").cloned())
        .ok_or_else(|| {
            anyhow::anyhow!("{which:?} {CONFIG_NAME} has no cert-manager.io/inject-ca-from")
        })?;
    let (namespace, certificate) = from
        .split_once('/')
        .ok_or_else(|| anyhow::anyhow!("inject-ca-from {from:?} is not <namespace>/<name>"))?;
    let certs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &certificate_resource());
    let cert = certs.get(certificate).await?;
    let secret_name = cert.data["spec"]["secretName"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("Certificate {from} has no spec.secretName"))?
        .to_owned();
    let ca = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(&secret_name)
        .await?
        .data
        .and_then(|d| d.get("ca.crt").cloned())
        .ok_or_else(|| anyhow::anyhow!("Secret {namespace}/{secret_name} has no ca.crt"))?;
    // ByteString serializes as the base64 text caBundle holds.
    let ca_base64 = serde_json::to_value(&ca)?
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| {
            anyhow::anyhow!("ca.crt of Secret {namespace}/{secret_name} did not encode")
        })?;
    set_ca_bundle(&client, &ca_base64, which).await?;
    Ok(from)
}
