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

    /// Secret (in `--namespace`, type `kubernetes.io/tls`) holding the serving certificate,
    /// read through the API with a watch on this one name and swapped in on every change.
    /// Ignored when `--cert-dir` is given.
    #[arg(
        long,
        env = "RESIZE_GUARD_TLS_SECRET",
        default_value = "resize-guard-webhook-tls"
    )]
    pub tls_secret: String,

    /// Directory with `tls.crt` and `tls.key` (a mounted Secret, e.g. from cert-manager); reloaded
    /// when it changes. When given, the files are used and `--tls-secret` is not read.
    #[arg(long, env = "RESIZE_GUARD_CERT_DIR")]
    pub cert_dir: Option<PathBuf>,

    /// How often the certificate directory (`--cert-dir`) is checked for changes.
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

    /// How long a watch of the cluster view (pods, nodes, PDBs, the policy ConfigMap) may keep
    /// failing before `/readyz` fails with the reason.
    #[arg(long, env = "RESIZE_GUARD_WATCH_UNHEALTHY_AFTER", default_value = "60s", value_parser = parse_duration)]
    pub watch_unhealthy_after: Duration,

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
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(
            parse_duration("2160h").unwrap(),
            Duration::from_secs(2160 * 3600)
        );
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(
            parse_duration("1s500ms").unwrap(),
            Duration::from_millis(1500)
        );
        for bad in ["x", "", "1w", "h", "1.5h", "-1s", "1hh", "ms"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn defaults_are_production_values() {
        let a = Args::try_parse_from(["resize-guard-webhook"]).unwrap();
        assert_eq!(a.tls_addr.port(), 8443);
        assert_eq!(a.health_addr.port(), 8080);
        assert_eq!(a.namespace, "resize-guard");
        assert_eq!(a.tls_secret, "resize-guard-webhook-tls");
        assert_eq!(a.cert_dir, None, "the Secret is the default source");
        assert_eq!(a.watch_unhealthy_after, Duration::from_secs(60));
    }

    #[test]
    fn the_watch_threshold_takes_a_duration() {
        let a =
            Args::try_parse_from(["resize-guard-webhook", "--watch-unhealthy-after=2m"]).unwrap();
        assert_eq!(a.watch_unhealthy_after, Duration::from_secs(120));
        assert!(
            Args::try_parse_from(["resize-guard-webhook", "--watch-unhealthy-after=soon"]).is_err()
        );
    }

    #[test]
    fn a_cert_dir_selects_the_files() {
        let a = Args::try_parse_from(["resize-guard-webhook", "--cert-dir=/tls"]).unwrap();
        assert_eq!(a.cert_dir, Some(PathBuf::from("/tls")));
    }
}
