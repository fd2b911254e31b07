//! TLS for the admission endpoint: rustls with an explicit crypto provider (ring), TLS 1.2 and
//! 1.3 only, certificate and key read from a directory and reloaded without restart when the
//! files change (a mounted Secret swaps its `..data` symlink; we compare contents, so any way of
//! replacing the files works).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::metrics::Metrics;

/// A certificate directory that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// Which file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The PEM did not contain what was expected.
    #[error("{path}: {problem}")]
    Pem {
        /// Which file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// rustls refused the pair.
    #[error("certificate and key do not form a valid TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// The PEM contents of a certificate directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl CertFiles {
    /// Reads `tls.crt` and `tls.key`.
    pub fn read(dir: &Path) -> Result<CertFiles, TlsError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| TlsError::Read { path, source })
        };
        Ok(CertFiles {
            cert: read("tls.crt")?,
            key: read("tls.key")?,
        })
    }

    /// Builds the rustls server configuration (ring provider, TLS 1.2+, HTTP/1.1 and h2).
    pub fn server_config(&self, dir: &Path) -> Result<ServerConfig, TlsError> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&self.cert)
            .collect::<Result<_, _>>()
            .map_err(|e| TlsError::Pem {
                path: dir.join("tls.crt"),
                problem: e.to_string(),
            })?;
        if certs.is_empty() {
            return Err(TlsError::Pem {
                path: dir.join("tls.crt"),
                problem: "no certificate found".into(),
            });
        }
        let key = PrivateKeyDer::from_pem_slice(&self.key).map_err(|e| TlsError::Pem {
            path: dir.join("tls.key"),
            problem: e.to_string(),
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// Loads the initial configuration.
pub async fn load(dir: &Path) -> Result<(RustlsConfig, CertFiles), TlsError> {
    let files = CertFiles::read(dir)?;
    let config = RustlsConfig::from_config(Arc::new(files.server_config(dir)?));
    Ok((config, files))
}

/// Re-reads the directory every `interval` and swaps the configuration when the files changed
/// and are valid; a broken update keeps the last good certificate.
pub async fn reload_loop(
    dir: PathBuf,
    config: RustlsConfig,
    mut current: CertFiles,
    interval: Duration,
    metrics: Arc<Metrics>,
) {
    let mut tick = tokio::time::interval(interval);
    loop {
        tick.tick().await;
        let Ok(files) = CertFiles::read(&dir) else {
            continue;
        };
        if files == current {
            continue;
        }
        match files.server_config(&dir) {
            Ok(sc) => {
                config.reload_from_config(Arc::new(sc));
                current = files;
                metrics.cert_reload(true);
                tracing::info!(dir = %dir.display(), "reloaded TLS certificate");
            }
            Err(e) => {
                metrics.cert_reload(false);
                tracing::warn!(error = %e, "new TLS certificate is invalid; keeping the previous one");
            }
        }
    }
}
