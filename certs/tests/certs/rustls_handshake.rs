//! The generated material works with rustls as the webhook uses it: a `ServerConfig` accepts
//! the leaf and key, and a client that trusts only `ca.crt` completes a handshake (in memory,
//! no sockets) for the names the spec put in the SANs, and refuses anything else.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{Read as _, Write as _};
use std::sync::Arc;

use resize_guard_certs::{Bundle, CertSpec, generate, renew_leaf};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn server_config(bundle: &Bundle) -> Result<ServerConfig, rustls::Error> {
    let chain = CertificateDer::pem_slice_iter(bundle.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(bundle.key_pem.as_bytes()).unwrap();
    ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)
}

fn client_config(
    ca_pem: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> ClientConfig {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// Moves every pending TLS record from one side to the other; returns whether anything moved.
fn transfer(
    from: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>,
    to: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>,
) -> Result<bool, rustls::Error> {
    let mut moved = false;
    while from.wants_write() {
        let mut buf = Vec::new();
        from.write_tls(&mut buf).unwrap();
        let mut rest = buf.as_slice();
        while !rest.is_empty() {
            to.read_tls(&mut rest).unwrap();
            to.process_new_packets()?;
        }
        moved = true;
    }
    Ok(moved)
}

/// Runs a full handshake for `name` and echoes one message client -> server.
fn handshake(
    bundle_for_server: &Bundle,
    trusted_ca_pem: &str,
    name: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<(), rustls::Error> {
    let server_config = Arc::new(server_config(bundle_for_server)?);
    let client_config = Arc::new(client_config(trusted_ca_pem, versions));
    let server_name = ServerName::try_from(name.to_owned()).unwrap();
    let mut client = ClientConnection::new(client_config, server_name)?;
    let mut server = ServerConnection::new(server_config)?;

    for _ in 0..20 {
        let a = transfer(&mut client, &mut server)?;
        let b = transfer(&mut server, &mut client)?;
        if !a && !b {
            break;
        }
    }
    assert!(!client.is_handshaking() && !server.is_handshaking());

    client.writer().write_all(b"AdmissionReview").unwrap();
    transfer(&mut client, &mut server)?;
    let mut got = [0u8; 15];
    server.reader().read_exact(&mut got).unwrap();
    assert_eq!(&got, b"AdmissionReview");
    Ok(())
}

/// A handshake for `name` with a fresh bundle for `spec`, the client trusting its own CA.
fn own_ca_handshake(
    spec: &CertSpec,
    name: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<(), rustls::Error> {
    let bundle = generate(spec).unwrap();
    handshake(&bundle, &bundle.ca_cert_pem, name, versions)
}

const ALL: &[&rustls::SupportedProtocolVersion] = rustls::DEFAULT_VERSIONS;
const TLS12: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];

#[test]
fn server_config_accepts_the_generated_leaf_and_key() {
    for spec in [
        CertSpec::for_loopback(),
        CertSpec::for_service("resize-guard", "resize-guard-system"),
    ] {
        let bundle = generate(&spec).unwrap();
        server_config(&bundle).unwrap();
    }
}

#[test]
fn client_trusting_ca_crt_completes_a_handshake_for_127_0_0_1() {
    own_ca_handshake(&CertSpec::for_loopback(), "127.0.0.1", ALL).unwrap();
}

#[test]
fn loopback_leaf_also_serves_ipv6_loopback_and_localhost() {
    let bundle = generate(&CertSpec::for_loopback()).unwrap();
    handshake(&bundle, &bundle.ca_cert_pem, "::1", ALL).unwrap();
    handshake(&bundle, &bundle.ca_cert_pem, "localhost", ALL).unwrap();
}

#[test]
fn handshake_also_works_over_tls12() {
    own_ca_handshake(&CertSpec::for_loopback(), "127.0.0.1", TLS12).unwrap();
}

#[test]
fn service_leaf_serves_the_service_dns_name() {
    let spec = CertSpec::for_service("resize-guard", "ops");
    own_ca_handshake(&spec, "resize-guard.ops.svc", ALL).unwrap();
}

#[test]
fn client_refuses_a_name_outside_the_sans() {
    let spec = CertSpec::for_service("resize-guard", "ops");
    let err = own_ca_handshake(&spec, "127.0.0.1", ALL).unwrap_err();
    assert!(
        matches!(err, rustls::Error::InvalidCertificate(_)),
        "{err:?}"
    );
}

#[test]
fn client_trusting_another_ca_refuses_the_leaf() {
    let bundle = generate(&CertSpec::for_loopback()).unwrap();
    let stranger = generate(&CertSpec::for_loopback()).unwrap();
    let err = handshake(&bundle, &stranger.ca_cert_pem, "127.0.0.1", ALL).unwrap_err();
    assert!(
        matches!(
            err,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)
        ),
        "{err:?}"
    );
}

#[test]
fn a_renewed_leaf_is_trusted_through_the_original_ca_bundle() {
    let spec = CertSpec::for_loopback();
    let original = generate(&spec).unwrap();
    let renewed = renew_leaf(&original.ca_cert_pem, &original.ca_key_pem, &spec).unwrap();
    handshake(&renewed, &original.ca_cert_pem, "127.0.0.1", ALL).unwrap();
}
