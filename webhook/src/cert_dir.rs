//! The `--cert-dir` certificate source: `tls.crt` and `tls.key` in a directory (a Secret volume
//! mounted by the kubelet, cert-manager's Secret, or files written by hand), read at start and
//! re-read every `--cert-reload-interval`. The files' contents are compared, so any way of
//! replacing them works (a Secret volume swaps its `..data` symlink). A broken update keeps the
//! last good certificate; the Secret named by `--tls-secret` is not read in this mode.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::metrics::Metrics;
use crate::tls::{ServingCert, ServingKey, TlsError, server_config};

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

    /// Parses the pair for handshakes.
    pub fn serving_key(&self, dir: &Path) -> Result<ServingKey, TlsError> {
        ServingKey::from_pem(
            &self.cert,
            &self.key,
            &dir.join("tls.crt").display().to_string(),
            &dir.join("tls.key").display().to_string(),
        )
    }

    /// A rustls server configuration serving only this pair (see [`server_config`]).
    pub fn server_config(&self, dir: &Path) -> Result<rustls::ServerConfig, TlsError> {
        let cert = Arc::new(ServingCert::new());
        cert.install(self.serving_key(dir)?);
        server_config(cert).map_err(|source| TlsError::Config {
            what: dir.display().to_string(),
            source,
        })
    }
}

/// Loads the initial certificate into `cert`; an unusable directory is an error (the webhook
/// does not start without its certificate in this mode).
pub fn load(dir: &Path, cert: &ServingCert, metrics: &Metrics) -> Result<CertFiles, TlsError> {
    let files = CertFiles::read(dir)?;
    let key = files.serving_key(dir)?;
    metrics.cert_expiry(key.not_after());
    cert.install(key);
    Ok(files)
}

/// Re-reads the directory every `interval` and swaps the certificate when the files changed
/// and are valid; a broken update keeps the last good certificate.
pub async fn reload_loop(
    dir: PathBuf,
    cert: Arc<ServingCert>,
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
        match files.serving_key(&dir) {
            Ok(key) => {
                metrics.cert_expiry(key.not_after());
                cert.install(key);
                current = files;
                metrics.cert_reload(true);
                tracing::info!(dir = %dir.display(), "reloaded TLS certificate");
            }
            Err(e) => {
                metrics.cert_reload(false);
                tracing::warn!(reason = e.reason(), error = %resize_guard_runtime::error_chain(&e),
                    "new TLS certificate is invalid; keeping the previous one");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resize_guard_certs::{CertSpec, generate, write_dir};

    #[test]
    fn loads_a_secret_volume_and_refuses_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, metrics) = (ServingCert::new(), Metrics::new());
        let err = load(dir.path(), &cert, &metrics).unwrap_err();
        assert!(err.to_string().contains("tls.crt"), "{err}");
        let bundle = generate(&CertSpec::for_loopback()).unwrap();
        write_dir(&bundle, dir.path()).unwrap();
        load(dir.path(), &cert, &metrics).unwrap();
        assert!(cert.serves(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes()));
        assert!(metrics.render().contains(
            "resize_guard_certificate_expiry_timestamp_seconds{certificate=\"serving\"}"
        ));
    }
}
