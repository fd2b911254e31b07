//! The TLS client side of a test or bench talking to a webhook: a rustls client that trusts
//! only the CA that signed the webhook's serving certificate, on the ring provider the programs
//! use.

use std::sync::Arc;

use anyhow::Context;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// A client config trusting only the certificates in `ca_pem`, offering `alpn` (empty: none).
pub fn client_config(ca_pem: &str, alpn: &[&[u8]]) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(cert.context("reading the CA bundle")?)
            .context("adding a CA certificate")?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}
