//! Command-line and environment configuration of the webhook (clap derive, env fallbacks).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// resize-guard admission webhook for `pods/resize`.
#[derive(Debug, Clone, Parser)]
#[command(name = "resize-guard-webhook", version)]
pub struct Args {
    /// HTTPS address kube-apiserver calls (`/mutate`, `/validate`).
    #[arg(long, env = "RESIZE_GUARD_TLS_ADDR", default_value = "0.0.0.0:8443")]
    pub tls_addr: SocketAddr,

    /// Plain HTTP address for `/livez`, `/readyz` and `/metrics`.
    #[arg(long, env = "RESIZE_GUARD_HEALTH_ADDR", default_value = "0.0.0.0:8080")]
    pub health_addr: SocketAddr,

    /// Directory with `tls.crt` and `tls.key` (a mounted Secret); reloaded when it changes.
    #[arg(
        long,
        env = "RESIZE_GUARD_CERT_DIR",
        default_value = "/etc/resize-guard/tls"
    )]
    pub cert_dir: PathBuf,

    /// How often the certificate directory is checked for changes.
    #[arg(long, env = "RESIZE_GUARD_CERT_RELOAD_INTERVAL", default_value = "2s", value_parser = parse_duration)]
    pub cert_reload_interval: Duration,

    /// The namespace resize-guard runs in (always excluded; holds the policy ConfigMap).
    #[arg(long, env = "POD_NAMESPACE", default_value = "resize-guard")]
    pub namespace: String,

    /// Name of the policy ConfigMap (key `policy.yaml`).
    #[arg(
        long,
        env = "RESIZE_GUARD_POLICY_CONFIGMAP",
        default_value = "resize-guard"
    )]
    pub policy_configmap: String,

    /// How long in-flight reviews may take to finish on shutdown.
    #[arg(long, env = "RESIZE_GUARD_SHUTDOWN_GRACE", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// Largest accepted AdmissionReview body.
    #[arg(long, env = "RESIZE_GUARD_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Log format.
    #[arg(long, env = "RESIZE_GUARD_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,

    /// Instance name reported on Events (defaults to the host name).
    #[arg(long, env = "POD_NAME")]
    pub instance: Option<String>,
}

pub use resize_guard_cluster::parse_duration;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert!(parse_duration("1h").is_err());
        assert!(parse_duration("x").is_err());
    }

    #[test]
    fn defaults_are_production_values() {
        let a = Args::try_parse_from(["resize-guard-webhook"]).unwrap();
        assert_eq!(a.tls_addr.port(), 8443);
        assert_eq!(a.health_addr.port(), 8080);
        assert_eq!(a.namespace, "resize-guard");
    }
}
