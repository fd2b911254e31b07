//! Command-line and environment configuration of the webhook (clap derive, env fallbacks): the
//! flags it shares with the controller ([`CommonArgs`]) plus TLS, draining, and the admission
//! port's limits ([`crate::intake`], [`crate::connections`]: lanes and body deadlines, shares per
//! source address, connection caps and timers, HTTP/2 keep-alive): every one has a default that
//! is safe in production.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use resize_guard_runtime::{CommonArgs, parse_duration};

/// resize-guard admission webhook for `pods/resize`.
#[derive(Debug, Clone, Parser)]
#[command(name = "resize-guard-webhook", version)]
pub struct Args {
    /// HTTPS address kube-apiserver calls (`/mutate`, `/validate`). `[::]` takes IPv4 and IPv6
    /// (`resize_guard_runtime::listener`). Port 10250, as cert-manager's webhook: the one port
    /// besides 443 every managed control plane reaches nodes on (GKE private clusters' firewall
    /// lets nothing else through), so the default install is judged there too; with
    /// `hostNetwork` it is the kubelet's, so pick another.
    #[arg(long, env = "RESIZE_GUARD_TLS_ADDR", default_value = "[::]:10250")]
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

    /// How long in-flight reviews may take to finish on shutdown, and on a connection the idle
    /// or age timer shut down gracefully before it is closed outright.
    #[arg(long, env = "RESIZE_GUARD_SHUTDOWN_GRACE", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// Largest accepted AdmissionReview body, refused (413) before it is read when declared
    /// larger (the default is sized in [`crate::intake::MAX_BODY_BYTES`]).
    #[arg(long, env = "RESIZE_GUARD_MAX_BODY_BYTES", default_value_t = crate::intake::MAX_BODY_BYTES)]
    pub max_body_bytes: usize,

    /// Bodies declared larger than this (or of unknown length) wait for the few permits of the
    /// large lane, so a flood of big bodies cannot delay real reviews.
    #[arg(long, env = "RESIZE_GUARD_LARGE_BODY_BYTES", default_value_t = crate::intake::LARGE_BODY_BYTES)]
    pub large_body_bytes: usize,

    /// Reviews in progress at once (body read and judged) in the regular lane.
    #[arg(long, env = "RESIZE_GUARD_MAX_CONCURRENT_REVIEWS", default_value_t = 32,
          value_parser = positive_count)]
    pub max_concurrent_reviews: usize,

    /// Reviews in progress at once in the large lane.
    #[arg(long, env = "RESIZE_GUARD_MAX_CONCURRENT_LARGE_REVIEWS", default_value_t = 2,
          value_parser = positive_count)]
    pub max_concurrent_large_reviews: usize,

    /// How long a review may wait for a free slot before it is answered 503 (the API server
    /// then applies the webhook's failurePolicy). Keep it well under `timeoutSeconds`.
    #[arg(long, env = "RESIZE_GUARD_ADMISSION_QUEUE_TIMEOUT", default_value = "1s", value_parser = parse_duration)]
    pub admission_queue_timeout: Duration,

    /// How long a request's whole body may take to arrive, at most (408 after); a body of
    /// unknown length gets all of it, a declared one `--body-read-grace` plus its size at
    /// `--body-min-bytes-per-second`, when that is sooner.
    #[arg(long, env = "RESIZE_GUARD_BODY_READ_TIMEOUT", default_value = "3s", value_parser = parse_duration)]
    pub body_read_timeout: Duration,

    /// The fixed part of a declared body's deadline (sized in [`crate::intake::BODY_GRACE`]).
    #[arg(long, env = "RESIZE_GUARD_BODY_READ_GRACE", default_value = "500ms", value_parser = parse_duration)]
    pub body_read_grace: Duration,

    /// The slowest rate a declared body may arrive at beyond `--body-read-grace` (0: only
    /// `--body-read-timeout`; sized in [`crate::intake::BODY_MIN_RATE`]).
    #[arg(long, env = "RESIZE_GUARD_BODY_MIN_BYTES_PER_SECOND", default_value_t = crate::intake::BODY_MIN_RATE)]
    pub body_min_bytes_per_second: u64,

    /// Reviews one source address may have in progress at once in the regular lane (more wait
    /// for one of its own, then are shed), so one sender cannot hold the lane.
    #[arg(long, env = "RESIZE_GUARD_MAX_CONCURRENT_REVIEWS_PER_SOURCE", default_value_t = 8,
          value_parser = positive_count)]
    pub max_concurrent_reviews_per_source: usize,

    /// Reviews one source address may have in progress at once in the large lane.
    #[arg(long, env = "RESIZE_GUARD_MAX_CONCURRENT_LARGE_REVIEWS_PER_SOURCE", default_value_t = 1,
          value_parser = positive_count)]
    pub max_concurrent_large_reviews_per_source: usize,

    /// How long a connection may take to send a request's head (the first one after the TLS
    /// handshake, and each one on a kept-alive HTTP/1.1 connection); it is closed after.
    #[arg(long, env = "RESIZE_GUARD_HEADER_READ_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub header_read_timeout: Duration,

    /// How long reading a pod's memory usage from `metrics.k8s.io` may take, for a resize that
    /// lowers a memory limit; after it the memory rule does not judge (allowed with a warning).
    #[arg(long, env = "RESIZE_GUARD_USAGE_TIMEOUT", default_value = "1s", value_parser = parse_duration)]
    pub usage_timeout: Duration,

    /// How long a TLS handshake may take; the connection is closed after.
    #[arg(long, env = "RESIZE_GUARD_TLS_HANDSHAKE_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub tls_handshake_timeout: Duration,

    /// Connections open at once on the admission port; one more is closed on accept.
    #[arg(long, env = "RESIZE_GUARD_MAX_CONNECTIONS", default_value_t = 512,
          value_parser = positive_count)]
    pub max_connections: usize,

    /// Connections one source address may hold open at once; one more is closed on accept.
    #[arg(long, env = "RESIZE_GUARD_MAX_CONNECTIONS_PER_SOURCE", default_value_t = 64,
          value_parser = positive_count)]
    pub max_connections_per_source: usize,

    /// Of `--max-connections`, how many only a source holding fewer than 4 connections may take
    /// (kube-apiserver holds one), so a crowd from a few addresses leaves it room to reconnect.
    #[arg(long, env = "RESIZE_GUARD_RESERVED_CONNECTIONS", default_value_t = 64)]
    pub reserved_connections: usize,

    /// A connection with no request in flight for this long is shut down gracefully (GOAWAY
    /// on HTTP/2; kube-apiserver reconnects for its next review).
    #[arg(long, env = "RESIZE_GUARD_CONNECTION_IDLE_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub connection_idle_timeout: Duration,

    /// A connection open for this long is shut down gracefully (its reviews in flight finish).
    #[arg(long, env = "RESIZE_GUARD_MAX_CONNECTION_AGE", default_value = "5m", value_parser = parse_duration)]
    pub max_connection_age: Duration,

    /// How often an HTTP/2 connection with no frames received is pinged.
    #[arg(long, env = "RESIZE_GUARD_HTTP2_KEEP_ALIVE_INTERVAL", default_value = "20s", value_parser = parse_duration)]
    pub http2_keep_alive_interval: Duration,

    /// How long an HTTP/2 ping may go unanswered before the connection is closed.
    #[arg(long, env = "RESIZE_GUARD_HTTP2_KEEP_ALIVE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub http2_keep_alive_timeout: Duration,

    /// Instance name reported on Events (defaults to the host name).
    #[arg(long, env = "POD_NAME")]
    pub instance: Option<String>,
}

/// A count of at least 1 (a limit of 0 would refuse everything).
fn positive_count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a count: {e}")),
    }
}

impl Args {
    /// The intake's limits from these flags.
    pub fn limits(&self) -> crate::intake::Limits {
        crate::intake::Limits {
            max_body_bytes: self.max_body_bytes,
            large_body_bytes: self.large_body_bytes,
            body_read_timeout: self.body_read_timeout,
            body_grace: self.body_read_grace,
            body_min_rate: self.body_min_bytes_per_second,
            queue_timeout: self.admission_queue_timeout,
            max_reviews: self.max_concurrent_reviews,
            max_large_reviews: self.max_concurrent_large_reviews,
            max_reviews_per_source: self.max_concurrent_reviews_per_source,
            max_large_reviews_per_source: self.max_concurrent_large_reviews_per_source,
        }
    }

    /// The connection caps from these flags (the reserve is kept below the limit).
    pub fn connection_caps(&self) -> crate::connections::Caps {
        crate::connections::Caps {
            max: self.max_connections,
            reserved: self
                .reserved_connections
                .min(self.max_connections.saturating_sub(1)),
            per_source: self.max_connections_per_source,
        }
    }

    /// The connection timers from these flags.
    pub fn connection_timers(&self) -> crate::connections::Timers {
        crate::connections::Timers {
            idle: self.connection_idle_timeout,
            max_age: self.max_connection_age,
            grace: self.shutdown_grace,
        }
    }
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
        assert_eq!(a.tls_addr.port(), 10250);
        assert!(a.tls_addr.ip().is_unspecified() && a.tls_addr.is_ipv6());
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
    fn the_admission_limits_default_to_safe_values_and_refuse_nonsense() {
        let a = Args::try_parse_from(["resize-guard-webhook"]).unwrap();
        assert_eq!(a.max_body_bytes, 1536 * 1024);
        assert_eq!(a.large_body_bytes, 256 * 1024);
        assert_eq!(
            (a.max_concurrent_reviews, a.max_concurrent_large_reviews),
            (32, 2)
        );
        assert_eq!(a.max_connections, 512);
        assert_eq!(a.header_read_timeout, Duration::from_secs(5));
        assert_eq!(a.tls_handshake_timeout, Duration::from_secs(5));
        assert_eq!(a.body_read_timeout, Duration::from_secs(3));
        assert_eq!(a.usage_timeout, Duration::from_secs(1));
        assert_eq!(a.admission_queue_timeout, Duration::from_secs(1));
        let limits = a.limits();
        assert_eq!(limits.max_reviews, 32);
        assert_eq!(
            (
                limits.max_reviews_per_source,
                limits.max_large_reviews_per_source
            ),
            (8, 1)
        );
        assert_eq!(limits.body_grace, Duration::from_millis(500));
        assert_eq!(limits.body_min_rate, 1024 * 1024);
        let caps = a.connection_caps();
        assert_eq!((caps.max, caps.reserved, caps.per_source), (512, 64, 64));
        let timers = a.connection_timers();
        assert_eq!(
            (timers.idle, timers.max_age),
            (Duration::from_secs(30), Duration::from_secs(300))
        );
        assert_eq!(
            (a.http2_keep_alive_interval, a.http2_keep_alive_timeout),
            (Duration::from_secs(20), Duration::from_secs(10))
        );
        // A reserve as large as the limit would leave nothing for anyone else.
        let all = Args::try_parse_from([
            "resize-guard-webhook",
            "--max-connections=8",
            "--reserved-connections=100",
        ])
        .unwrap();
        assert_eq!(all.connection_caps().reserved, 7);
        for bad in [
            "--max-concurrent-reviews=0",
            "--max-connections=-1",
            "--max-connections-per-source=0",
            "--max-concurrent-reviews-per-source=0",
            "--connection-idle-timeout=30",
            "--body-min-bytes-per-second=fast",
            "--header-read-timeout=5",
            "--max-body-bytes=lots",
        ] {
            assert!(
                Args::try_parse_from(["resize-guard-webhook", bad]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_cert_dir_selects_the_files() {
        let a = Args::try_parse_from(["resize-guard-webhook", "--cert-dir=/tls"]).unwrap();
        assert_eq!(a.cert_dir, Some(PathBuf::from("/tls")));
    }
}
