//! Command-line and environment configuration of the webhook (clap derive, env fallbacks): the
//! flags it shares with the controller ([`CommonArgs`]) plus TLS, draining and body limits.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use resize_guard_runtime::{CommonArgs, parse_duration};

/// resize-guard admission webhook for `pods/resize`.
#[derive(Debug, Clone, Parser)]
#[command(name = "resize-guard-webhook", version)]
pub struct Args {
    /// HTTPS address kube-apiserver calls (`/mutate`, `/validate`).
    #[arg(long, env = "RESIZE_GUARD_TLS_ADDR", default_value = "0.0.0.0:8443")]
    pub tls_addr: SocketAddr,

    /// Namespace, policy ConfigMap, health address, watch threshold, log format.
    #[command(flatten)]
    pub common: CommonArgs,

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

    /// How long in-flight reviews may take to finish on shutdown.
    #[arg(long, env = "RESIZE_GUARD_SHUTDOWN_GRACE", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// Largest accepted AdmissionReview body.
    #[arg(long, env = "RESIZE_GUARD_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Instance name reported on Events (defaults to the host name).
    #[arg(long, env = "POD_NAME")]
    pub instance: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_flags_take_the_shared_syntax() {
        let a = Args::try_parse_from([
            "resize-guard-webhook",
            "--cert-reload-interval=200ms",
            "--shutdown-grace=1m30s",
        ])
        .unwrap();
        assert_eq!(a.cert_reload_interval, Duration::from_millis(200));
        assert_eq!(a.shutdown_grace, Duration::from_secs(90));
        assert!(Args::try_parse_from(["resize-guard-webhook", "--shutdown-grace=10"]).is_err());
    }

    #[test]
    fn defaults_are_production_values() {
        let a = Args::try_parse_from(["resize-guard-webhook"]).unwrap();
        assert_eq!(a.tls_addr.port(), 8443);
        assert_eq!(a.common.health_addr.port(), 8080);
        assert_eq!(a.common.namespace, "resize-guard");
        assert_eq!(a.tls_secret, "resize-guard-webhook-tls");
        assert_eq!(a.cert_dir, None, "the Secret is the default source");
        assert_eq!(a.common.watch_unhealthy_after, Duration::from_secs(60));
    }

    #[test]
    fn the_watch_threshold_takes_a_duration() {
        let a =
            Args::try_parse_from(["resize-guard-webhook", "--watch-unhealthy-after=2m"]).unwrap();
        assert_eq!(a.common.watch_unhealthy_after, Duration::from_secs(120));
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
