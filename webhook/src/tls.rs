//! TLS for the admission endpoint: rustls with an explicit crypto provider (ring), TLS 1.2 and
//! 1.3 only, and a certificate resolver ([`ServingCert`]) that the certificate sources swap
//! atomically, so every new handshake uses the latest certificate without a restart:
//!
//! | source | module | when |
//! |---|---|---|
//! | Secret `--tls-secret` read through the API (a watch on that one name) | [`crate::serving_secret`] | default |
//! | `tls.crt` / `tls.key` in `--cert-dir` (a mounted Secret, cert-manager), polled | [`crate::cert_dir`] | `--cert-dir` given |
//!
//! [`ServingCert`] also answers readiness: the webhook is ready only while it holds a certificate
//! that has not expired and its source last offered a usable one. A broken update keeps the last
//! good certificate for handshakes (failing closed would only turn every review into a
//! `failurePolicy` decision) but is reported on `/readyz`.

use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The `--cert-dir` files (re-exported where they were read before the Secret source existed).
pub use crate::cert_dir::CertFiles;

/// Why a certificate could not be used.
///
/// `Display` names the failed step and the input; the underlying OS, PEM, X.509 or rustls error
/// is the [`source`](std::error::Error::source), so print the chain
/// ([`resize_guard_runtime::error_chain`]) to show each cause once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    #[error("reading {path}")]
    Read {
        /// Which file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The PEM could not be decoded.
    #[error("{what}: not usable PEM")]
    Pem {
        /// Which input (a file path, or a Secret and key).
        what: String,
        /// The PEM decoder's error.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// The PEM holds no certificate.
    #[error("{what}: no certificate found")]
    NoCertificate {
        /// Which input.
        what: String,
    },
    /// The certificate PEM is not text.
    #[error("{what}: not UTF-8 text")]
    NotText {
        /// Which input.
        what: String,
        /// Where the bytes stop being UTF-8.
        #[source]
        source: std::str::Utf8Error,
    },
    /// The leaf's validity could not be read.
    #[error("{what}: reading the certificate's expiry")]
    Expiry {
        /// Which input.
        what: String,
        /// The X.509 decoder's error.
        #[source]
        source: resize_guard_certs::CertError,
    },
    /// rustls refused the certificate, the key, or the pair.
    #[error("{what}: certificate and key do not form a valid TLS configuration")]
    Config {
        /// Which input.
        what: String,
        /// rustls's error.
        #[source]
        source: rustls::Error,
    },
}

impl TlsError {
    /// A short, stable tag for logs.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Read { .. } => "ReadFailed",
            Self::Pem { .. }
            | Self::NoCertificate { .. }
            | Self::NotText { .. }
            | Self::Expiry { .. } => "InvalidPem",
            Self::Config { .. } => "InvalidKeyPair",
        }
    }
}

/// A certificate chain and key ready for handshakes, with the PEM it came from and its expiry.
#[derive(Clone)]
pub struct ServingKey {
    certified: Arc<CertifiedKey>,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    not_after: SystemTime,
}

impl std::fmt::Debug for ServingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingKey")
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

impl ServingKey {
    /// Parses a PEM certificate chain (leaf first) and PKCS#8/PKCS#1/SEC1 key; the key must
    /// belong to the leaf. `cert_what` / `key_what` name the inputs in errors.
    pub fn from_pem(
        cert_pem: &[u8],
        key_pem: &[u8],
        cert_what: &str,
        key_what: &str,
    ) -> Result<ServingKey, TlsError> {
        let pem_error = |what: &str| {
            let what = what.to_owned();
            move |source| TlsError::Pem { what, source }
        };
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<_, _>>()
            .map_err(pem_error(cert_what))?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                what: cert_what.to_owned(),
            });
        }
        let text = std::str::from_utf8(cert_pem).map_err(|source| TlsError::NotText {
            what: cert_what.to_owned(),
            source,
        })?;
        let not_after = resize_guard_certs::not_after(text).map_err(|source| TlsError::Expiry {
            what: cert_what.to_owned(),
            source,
        })?;
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(pem_error(key_what))?;
        let provider = rustls::crypto::ring::default_provider();
        let certified =
            CertifiedKey::from_der(chain, key, &provider).map_err(|source| TlsError::Config {
                what: format!("{cert_what} + {key_what}"),
                source,
            })?;
        Ok(ServingKey {
            certified: Arc::new(certified),
            cert_pem: cert_pem.to_vec(),
            key_pem: key_pem.to_vec(),
            not_after,
        })
    }

    /// The leaf's `notAfter`.
    pub fn not_after(&self) -> SystemTime {
        self.not_after
    }

    /// Whether this key was built from exactly these PEM bytes.
    pub fn is_from(&self, cert_pem: &[u8], key_pem: &[u8]) -> bool {
        self.cert_pem == cert_pem && self.key_pem == key_pem
    }
}

#[derive(Debug, Default)]
struct State {
    served: Option<ServingKey>,
    problem: Option<String>,
}

/// The certificate handshakes use, swapped by a source; also the TLS part of readiness.
#[derive(Debug, Default)]
pub struct ServingCert {
    state: RwLock<State>,
}

impl ServingCert {
    /// An empty resolver: handshakes fail until a source [`install`](Self::install)s a key.
    pub fn new() -> ServingCert {
        ServingCert::default()
    }

    /// Serves `key` from the next handshake on and clears any reported problem. Returns true
    /// when it replaced another certificate (a reload), false for the first one.
    pub fn install(&self, key: ServingKey) -> bool {
        match self.state.write() {
            Ok(mut s) => {
                s.problem = None;
                s.served.replace(key).is_some()
            }
            Err(_) => false,
        }
    }

    /// Reports that the source offers no usable certificate (missing, unreadable); the last
    /// good certificate, if any, keeps serving handshakes.
    pub fn fail(&self, problem: String) {
        if let Ok(mut s) = self.state.write() {
            s.problem = Some(problem);
        }
    }

    /// Clears a reported problem while keeping the served certificate (the source offers the
    /// same certificate again).
    pub fn recover(&self) {
        if let Ok(mut s) = self.state.write() {
            s.problem = None;
        }
    }

    /// Whether a certificate is being served.
    pub fn is_loaded(&self) -> bool {
        self.state.read().is_ok_and(|s| s.served.is_some())
    }

    /// Whether the certificate served now came from these PEM bytes.
    pub fn serves(&self, cert_pem: &[u8], key_pem: &[u8]) -> bool {
        self.state.read().is_ok_and(|s| {
            s.served
                .as_ref()
                .is_some_and(|k| k.is_from(cert_pem, key_pem))
        })
    }

    /// `Ok` while a certificate valid at `now` is served and the source reports no problem;
    /// otherwise why not, for `/readyz`.
    pub fn readiness(&self, now: SystemTime) -> Result<(), String> {
        let Ok(s) = self.state.read() else {
            return Err("certificate state poisoned".into());
        };
        if let Some(problem) = &s.problem {
            return Err(format!("no usable serving certificate: {problem}"));
        }
        match &s.served {
            None => Err("no serving certificate loaded yet".into()),
            Some(k) if k.not_after <= now => Err(format!(
                "the serving certificate expired at {}",
                rfc3339(k.not_after)
            )),
            Some(_) => Ok(()),
        }
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let s = self.state.read().ok()?;
        s.served.as_ref().map(|k| k.certified.clone())
    }
}

/// The rustls server configuration (ring provider, TLS 1.2+, HTTP/1.1 and h2) resolving every
/// handshake through `cert`.
pub fn server_config(cert: Arc<ServingCert>) -> Result<ServerConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// `t` as RFC 3339 (for messages).
pub fn rfc3339(t: SystemTime) -> String {
    k8s_openapi::jiff::Timestamp::try_from(t)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| format!("{t:?}"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use resize_guard_certs::{CertSpec, generate};

    fn key(bundle: &resize_guard_certs::Bundle) -> ServingKey {
        ServingKey::from_pem(
            bundle.cert_pem.as_bytes(),
            bundle.key_pem.as_bytes(),
            "tls.crt",
            "tls.key",
        )
        .unwrap()
    }

    #[test]
    fn not_ready_until_a_certificate_is_installed() {
        let cert = ServingCert::new();
        let now = SystemTime::now();
        assert!(
            cert.readiness(now)
                .unwrap_err()
                .contains("no serving certificate")
        );
        let bundle = generate(&CertSpec::for_loopback()).unwrap();
        assert!(
            !cert.install(key(&bundle)),
            "the first install is not a reload"
        );
        assert_eq!(cert.readiness(now), Ok(()));
        assert!(cert.serves(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes()));
    }

    #[test]
    fn a_reported_problem_makes_it_unready_but_keeps_serving() {
        let cert = ServingCert::new();
        let bundle = generate(&CertSpec::for_loopback()).unwrap();
        cert.install(key(&bundle));
        cert.fail("Secret ns/tls not found".into());
        let why = cert.readiness(SystemTime::now()).unwrap_err();
        assert!(why.contains("Secret ns/tls not found"), "{why}");
        assert!(cert.is_loaded());
        cert.recover();
        assert_eq!(cert.readiness(SystemTime::now()), Ok(()));
    }

    #[test]
    fn an_expired_certificate_is_not_ready() {
        let cert = ServingCert::new();
        let bundle = generate(&CertSpec::for_loopback()).unwrap();
        let k = key(&bundle);
        let expiry = k.not_after();
        cert.install(k);
        assert_eq!(cert.readiness(expiry - Duration::from_secs(1)), Ok(()));
        let why = cert.readiness(expiry).unwrap_err();
        assert!(why.contains("expired at"), "{why}");
    }

    #[test]
    fn a_second_install_is_a_reload() {
        let cert = ServingCert::new();
        let (a, b) = (
            generate(&CertSpec::for_loopback()).unwrap(),
            generate(&CertSpec::for_loopback()).unwrap(),
        );
        assert!(!cert.install(key(&a)));
        assert!(cert.install(key(&b)));
        assert!(cert.serves(b.cert_pem.as_bytes(), b.key_pem.as_bytes()));
    }

    #[test]
    fn garbage_and_mismatched_keys_are_refused_with_the_input_named() {
        let (a, b) = (
            generate(&CertSpec::for_loopback()).unwrap(),
            generate(&CertSpec::for_loopback()).unwrap(),
        );
        let err = ServingKey::from_pem(b"junk", a.key_pem.as_bytes(), "x/tls.crt", "x/tls.key")
            .unwrap_err();
        assert!(err.to_string().contains("x/tls.crt"), "{err}");
        let key = a
            .key_pem
            .replace("PRIVATE KEY-----\n", "PRIVATE KEY-----\n!!");
        let err =
            ServingKey::from_pem(a.cert_pem.as_bytes(), key.as_bytes(), "c", "k").unwrap_err();
        assert!(matches!(err, TlsError::Pem { .. }), "{err:?}");
        let chain = resize_guard_runtime::error_chain(&err);
        let cause = std::error::Error::source(&err).unwrap().to_string();
        assert_eq!(chain.matches(&cause).count(), 1, "{chain}");
        assert!(chain.starts_with("k: "), "{chain}");
        let err =
            ServingKey::from_pem(a.cert_pem.as_bytes(), b"junk", "c", "x/tls.key").unwrap_err();
        assert!(err.to_string().contains("x/tls.key"), "{err}");
        let err = ServingKey::from_pem(a.cert_pem.as_bytes(), b.key_pem.as_bytes(), "c", "k")
            .unwrap_err();
        assert!(matches!(err, TlsError::Config { .. }), "{err}");
    }

    #[test]
    fn the_server_config_speaks_h2_and_http1() {
        let config = server_config(Arc::new(ServingCert::new())).unwrap();
        assert_eq!(
            config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
    }
}
