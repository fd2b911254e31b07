//! Does the webhook configuration's `caBundle` verify the certificate the webhook serves? The
//! same question the API server asks on every call, answered with rustls's WebPKI verifier:
//! chain to a `caBundle` certificate, the name the API server dials, and validity now. For a
//! `url` client config the certificate is taken from a real TLS handshake; for a Service (not
//! reachable from outside the cluster) from the serving Secret the webhook reads.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// The certificates in a PEM bundle (`caBundle`, `tls.crt`).
pub fn pem_certs(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .collect()
}

fn verifier(ca_bundle: &[u8]) -> Result<Arc<WebPkiServerVerifier>, String> {
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(pem_certs(ca_bundle));
    if added == 0 {
        return Err("caBundle holds no certificate".into());
    }
    WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|e| e.to_string())
}

/// Verifies `chain` (leaf first) for `host` against `ca_bundle` at `now`.
pub fn verify(
    chain: &[CertificateDer<'static>],
    host: &str,
    ca_bundle: &[u8],
    now: SystemTime,
) -> Result<(), String> {
    let v = verifier(ca_bundle)?;
    let (leaf, rest) = chain.split_first().ok_or("no certificate")?;
    let name = ServerName::try_from(host.to_owned()).map_err(|e| e.to_string())?;
    let now = UnixTime::since_unix_epoch(
        now.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default(),
    );
    v.verify_server_cert(leaf, rest, &name, &[], now)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// What a TLS handshake with the webhook showed.
#[derive(Debug)]
pub struct Served {
    /// The certificate chain the server presented (leaf first); empty if none was seen.
    pub chain: Vec<CertificateDer<'static>>,
    /// Whether `caBundle` verified it (the handshake completed).
    pub verified: Result<(), String>,
}

/// Connects to `host:port` and verifies what it serves against `ca_bundle`.
pub async fn handshake(host: &str, port: u16, ca_bundle: &[u8]) -> Served {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let inner = match verifier(ca_bundle) {
        Ok(v) => Some(v),
        Err(e) => {
            // Still look at the certificate, to report its expiry.
            let served = connect(host, port, seen.clone(), None).await;
            return Served {
                chain: take(&seen),
                verified: served.and(Err(e)),
            };
        }
    };
    let result = connect(host, port, seen.clone(), inner).await;
    Served {
        chain: take(&seen),
        verified: result,
    }
}

fn take(seen: &Mutex<Vec<CertificateDer<'static>>>) -> Vec<CertificateDer<'static>> {
    seen.lock()
        .map(|mut s| std::mem::take(&mut *s))
        .unwrap_or_default()
}

async fn connect(
    host: &str,
    port: u16,
    seen: Arc<Mutex<Vec<CertificateDer<'static>>>>,
    inner: Option<Arc<WebPkiServerVerifier>>,
) -> Result<(), String> {
    let recording = Arc::new(Recording { inner, seen });
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .dangerous()
    .with_custom_certificate_verifier(recording)
    .with_no_client_auth();
    let name = ServerName::try_from(host.to_owned()).map_err(|e| e.to_string())?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let attempt = async {
        let tcp = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
        connector
            .connect(name, tcp)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .map_err(|_| format!("no TLS answer from {host}:{port} within 5s"))?
}

/// Records the presented chain, then verifies it with WebPKI (or refuses when there is no
/// usable `caBundle`).
#[derive(Debug)]
struct Recording {
    inner: Option<Arc<WebPkiServerVerifier>>,
    seen: Arc<Mutex<Vec<CertificateDer<'static>>>>,
}

impl ServerCertVerifier for Recording {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.push(end_entity.clone().into_owned());
            seen.extend(intermediates.iter().map(|c| c.clone().into_owned()));
        }
        match &self.inner {
            Some(v) => v.verify_server_cert(end_entity, intermediates, server_name, ocsp, now),
            None => Err(rustls::Error::General("no caBundle to verify with".into())),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &algorithms())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &algorithms())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        algorithms().supported_schemes()
    }
}

/// The signature algorithms of ring, the provider the plugin's TLS uses.
fn algorithms() -> rustls::crypto::WebPkiSupportedAlgorithms {
    rustls::crypto::ring::default_provider().signature_verification_algorithms
}

/// A certificate's `notAfter`.
pub fn not_after(cert: &CertificateDer<'_>) -> Option<SystemTime> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let secs = parsed.validity().not_after.timestamp();
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_that_issued_a_certificate_verifies_it_and_another_does_not() {
        let spec = resize_guard_certs::CertSpec::for_loopback();
        let now = SystemTime::now();
        let ours = resize_guard_certs::generate(&spec).unwrap();
        let other = resize_guard_certs::generate(&spec).unwrap();
        let chain = pem_certs(ours.cert_pem.as_bytes());
        assert_eq!(
            verify(&chain, "127.0.0.1", ours.ca_cert_pem.as_bytes(), now),
            Ok(())
        );
        let wrong = verify(&chain, "127.0.0.1", other.ca_cert_pem.as_bytes(), now).unwrap_err();
        assert!(wrong.contains("UnknownIssuer"), "{wrong}");
        let late = now + Duration::from_secs(3650 * 86400);
        let expired = verify(&chain, "127.0.0.1", ours.ca_cert_pem.as_bytes(), late).unwrap_err();
        assert!(expired.contains("xpired"), "{expired}");
        assert_eq!(
            verify(&chain, "127.0.0.1", b"", now).unwrap_err(),
            "caBundle holds no certificate"
        );
        let left = not_after(&chain[0]).unwrap().duration_since(now).unwrap();
        assert!(left > Duration::from_secs(80 * 86400), "{left:?}");
    }
}
