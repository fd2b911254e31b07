//! Prometheus metrics of the webhook, in the program's one registry
//! (`runtime/src/exposition.rs`: with the process metrics, `resize_guard_build_info` and
//! `resize_guard_policy_mode`), served as OpenMetrics text on `/metrics`. Durations are
//! histograms in seconds with millisecond-scale buckets (ARCHITECTURE.md, "Observability").

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use resize_guard_runtime::certificate_expiry::CertificateExpiry;
use resize_guard_runtime::exposition::Exposition;

/// Buckets from 0.25 ms to 2.5 s.
pub const BUCKETS: [f64; 12] = [
    0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5,
];

/// Labels of one admission review.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReviewLabels {
    /// `mutate` or `validate`.
    pub webhook: String,
    /// The decision label (`fits`, `infeasible`, `would-deny:infeasible`, …).
    pub decision: String,
    /// `true` or `false`.
    pub allowed: String,
}

/// Labels of a policy or certificate reload.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `ok` or `error`.
    pub result: String,
}

/// Which watch of the cluster view an error is about.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchLabels {
    /// `pods`, `nodes`, `poddisruptionbudgets` or `configmap`.
    pub resource: String,
}

/// Why a connection to the admission port was refused or closed by the webhook.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConnectionLabels {
    /// Refused: `limit` (every slot a source may use is taken), `source-limit` (this source
    /// holds `--max-connections-per-source`). Closed: `idle` (`--connection-idle-timeout`),
    /// `max-age` (`--max-connection-age`), and also `forced` when its streams had not finished
    /// `--shutdown-grace` after.
    pub reason: String,
}

/// Labels of a request refused before review.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// `too-large`, `shed`, `source-shed`, `body-timeout`, `body-error`, `bad-length`.
    pub reason: String,
    /// `regular`, `large`, or `none` (refused before a lane was chosen).
    pub lane: String,
}

/// All webhook metrics.
#[derive(Debug)]
pub struct Metrics {
    exposition: Exposition,
    reviews: Family<ReviewLabels, Counter>,
    duration: Family<ReviewLabels, Histogram>,
    policy_reloads: Family<ResultLabels, Counter>,
    cert_reloads: Family<ResultLabels, Counter>,
    cert_expiry: CertificateExpiry,
    bad_requests: Counter,
    watch_errors: Family<WatchLabels, Counter>,
    refusals: Family<RefusalLabels, Counter>,
    connections_open: Gauge,
    connections_refused: Family<ConnectionLabels, Counter>,
    connections_closed: Family<ConnectionLabels, Counter>,
    connection_errors: Counter,
    events_withheld: Counter,
    usage_withheld: Counter,
    usage_lookups: Family<ResultLabels, Counter>,
    usage_duration: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Metrics {
        let exposition = Exposition::new("resize-guard-webhook");
        let reviews = Family::<ReviewLabels, Counter>::default();
        let duration =
            Family::<ReviewLabels, Histogram>::new_with_constructor(|| Histogram::new(BUCKETS));
        let policy_reloads = Family::<ResultLabels, Counter>::default();
        let cert_reloads = Family::<ResultLabels, Counter>::default();
        let cert_expiry = CertificateExpiry::default();
        let bad_requests = Counter::default();
        let watch_errors = Family::<WatchLabels, Counter>::default();
        let refusals = Family::<RefusalLabels, Counter>::default();
        let connections_open = Gauge::default();
        let connections_refused = Family::<ConnectionLabels, Counter>::default();
        let connections_closed = Family::<ConnectionLabels, Counter>::default();
        let connection_errors = Counter::default();
        let events_withheld = Counter::default();
        let usage_withheld = Counter::default();
        let usage_lookups = Family::<ResultLabels, Counter>::default();
        let usage_duration = Histogram::new(BUCKETS);
        exposition.register_with(|registry| {
            registry.register(
                "admission_reviews",
                "Admission reviews answered",
                reviews.clone(),
            );
            registry.register(
                "admission_duration_seconds",
                "Time to answer an admission review",
                duration.clone(),
            );
            registry.register(
                "policy_reloads",
                "Policy ConfigMap reloads",
                policy_reloads.clone(),
            );
            registry.register(
                "certificate_reloads",
                "TLS certificate reloads",
                cert_reloads.clone(),
            );
            cert_expiry.register(
                registry,
                "notAfter of the certificate served, in seconds since the Unix epoch",
            );
            registry.register(
                "admission_bad_requests",
                "Requests refused before review (malformed, wrong type, too large)",
                bad_requests.clone(),
            );
            registry.register(
                "watch_errors",
                "Errors of the cluster view's watches (list, watch start, stream), by resource",
                watch_errors.clone(),
            );
            registry.register(
                "admission_refusals",
                "Admission requests answered before review by the intake (too large, shed under load, shed because the source holds its share of permits, body too slow), by reason and lane",
                refusals.clone(),
            );
            registry.register(
                "connections_open",
                "Open connections to the admission port",
                connections_open.clone(),
            );
            registry.register(
                "connections_refused",
                "Connections to the admission port closed as soon as accepted, by reason: limit (--max-connections open, or all but the --reserved-connections that only sources holding few connections may take), source-limit (the source holds --max-connections-per-source)",
                connections_refused.clone(),
            );
            registry.register(
                "connections_closed",
                "Connections to the admission port the webhook closed gracefully (GOAWAY on HTTP/2), by reason: idle (no request for --connection-idle-timeout), max-age (open for --max-connection-age); forced (also counted) when its streams had not finished --shutdown-grace later and it was closed outright",
                connections_closed.clone(),
            );
            registry.register(
                "connection_errors",
                "Connections to the admission port that failed before a request (TLS handshake failed or timed out)",
                connection_errors.clone(),
            );
            registry.register(
                "events_withheld",
                "Events a decision called for but not recorded: the request named a pod the cluster view does not know with that UID",
                events_withheld.clone(),
            );
            registry.register(
                "usage_withheld",
                "Memory usage not read for a resize that lowers a memory limit: the request named a pod the cluster view does not know with that UID on that node (judged without usage)",
                usage_withheld.clone(),
            );
            registry.register(
                "usage_lookups",
                "Memory usage reads from metrics.k8s.io for resizes that lower a memory limit, by result (ok, not_found, unavailable, timeout, malformed, error)",
                usage_lookups.clone(),
            );
            registry.register(
                "usage_lookup_duration_seconds",
                "Time to read a pod's memory usage from metrics.k8s.io",
                usage_duration.clone(),
            );
        });
        Metrics {
            exposition,
            reviews,
            duration,
            policy_reloads,
            cert_reloads,
            cert_expiry,
            bad_requests,
            watch_errors,
            refusals,
            connections_open,
            connections_refused,
            connections_closed,
            connection_errors,
            events_withheld,
            usage_withheld,
            usage_lookups,
            usage_duration,
        }
    }

    /// Records a read of `metrics.k8s.io` for the memory rule.
    pub fn usage_lookup(&self, result: &str, seconds: f64) {
        self.usage_lookups
            .get_or_create(&ResultLabels {
                result: result.to_owned(),
            })
            .inc();
        self.usage_duration.observe(seconds);
    }

    /// Records a request the intake refused (`lane` is `None` before a lane was chosen).
    pub fn refusal(&self, reason: &str, lane: Option<&str>) {
        self.refusals
            .get_or_create(&RefusalLabels {
                reason: reason.to_owned(),
                lane: lane.unwrap_or("none").to_owned(),
            })
            .inc();
    }

    /// A connection to the admission port was accepted.
    pub fn connection_opened(&self) {
        self.connections_open.inc();
    }

    /// A connection accepted by [`Metrics::connection_opened`] closed.
    pub fn connection_closed(&self) {
        self.connections_open.dec();
    }

    /// A connection was refused on accept (`limit` or `source-limit`).
    pub fn connection_refused(&self, reason: &str) {
        self.connections_refused
            .get_or_create(&ConnectionLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// A connection was closed gracefully by the webhook (`idle` or `max-age`).
    pub fn connection_closed_by(&self, reason: &str) {
        self.connections_closed
            .get_or_create(&ConnectionLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// A connection failed before its first request.
    pub fn connection_error(&self) {
        self.connection_errors.inc();
    }

    /// An Event was not recorded because the request named an unknown pod.
    pub fn event_withheld(&self) {
        self.events_withheld.inc();
    }

    /// A pod's usage was not read because the request named a pod the view does not know.
    pub fn usage_withheld(&self) {
        self.usage_withheld.inc();
    }

    /// Records one answered review.
    pub fn review(&self, webhook: &str, decision: &str, allowed: bool, seconds: f64) {
        let labels = ReviewLabels {
            webhook: webhook.to_owned(),
            decision: decision.to_owned(),
            allowed: allowed.to_string(),
        };
        self.reviews.get_or_create(&labels).inc();
        self.duration.get_or_create(&labels).observe(seconds);
    }

    /// Records a policy reload.
    pub fn policy_reload(&self, ok: bool) {
        self.policy_reloads.get_or_create(&result(ok)).inc();
    }

    /// Records a certificate reload.
    pub fn cert_reload(&self, ok: bool) {
        self.cert_reloads.get_or_create(&result(ok)).inc();
    }

    /// Records the serving certificate's `notAfter`.
    pub fn cert_expiry(&self, not_after: std::time::SystemTime) {
        self.cert_expiry.set("serving", not_after);
    }

    /// Records a refused request.
    pub fn bad_request(&self) {
        self.bad_requests.inc();
    }

    /// Records an error of the cluster view's watch of `resource`.
    pub fn watch_error(&self, resource: &str) {
        self.watch_errors
            .get_or_create(&WatchLabels {
                resource: resource.to_owned(),
            })
            .inc();
    }

    /// The program's registry: its policy-mode source and later collectors go there.
    pub fn exposition(&self) -> &Exposition {
        &self.exposition
    }

    /// The OpenMetrics exposition of the program's one registry (process metrics, build info,
    /// policy mode and the metrics above), `# EOF` included.
    pub fn render(&self) -> String {
        self.exposition.render()
    }
}

fn result(ok: bool) -> ResultLabels {
    ResultLabels {
        result: if ok { "ok" } else { "error" }.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resize_guard_policy::policy::Mode;
    use resize_guard_runtime::exposition::{assert_contains, assert_lines};

    #[test]
    fn one_registry_carries_build_info_process_metrics_and_the_live_mode() {
        let m = Metrics::new();
        assert_lines(
            &m.render(),
            &["resize_guard_policy_mode{mode=\"enforce\"} 0"],
        );
        let mode = std::sync::Arc::new(std::sync::Mutex::new(Some(Mode::Audit)));
        let live = mode.clone();
        m.exposition()
            .follow_policy_mode(move || *live.lock().unwrap());
        let text = m.render();
        assert_contains(
            &text,
            &[
                "program=\"resize-guard-webhook\"} 1",
                "# TYPE process_resident_memory_bytes gauge",
                "resize_guard_policy_mode{mode=\"enforce\"} 0",
                "resize_guard_policy_mode{mode=\"audit\"} 1",
            ],
        );
        assert!(text.ends_with("# EOF\n"));
        *mode.lock().unwrap() = Some(Mode::Enforce);
        assert_lines(
            &m.render(),
            &["resize_guard_policy_mode{mode=\"enforce\"} 1"],
        );
    }

    #[test]
    fn renders_reviews_with_millisecond_buckets() {
        let m = Metrics::new();
        m.review("validate", "fits", true, 0.0004);
        assert_lines(
            &m.render(),
            &[
                "resize_guard_admission_reviews_total{webhook=\"validate\",decision=\"fits\",allowed=\"true\"} 1",
                "resize_guard_admission_duration_seconds_bucket{le=\"0.0005\",webhook=\"validate\",decision=\"fits\",allowed=\"true\"} 1",
            ],
        );
    }

    #[test]
    fn counts_watch_errors_by_resource() {
        let m = Metrics::new();
        m.watch_error("pods");
        m.watch_error("pods");
        m.watch_error("configmap");
        assert_lines(
            &m.render(),
            &[
                "resize_guard_watch_errors_total{resource=\"pods\"} 2",
                "resize_guard_watch_errors_total{resource=\"configmap\"} 1",
            ],
        );
    }

    #[test]
    fn renders_the_serving_certificate_expiry_in_unix_seconds() {
        let m = Metrics::new();
        m.cert_expiry(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_900_000_000));
        assert_lines(
            &m.render(),
            &[
                "resize_guard_certificate_expiry_timestamp_seconds{certificate=\"serving\"} 1900000000",
            ],
        );
    }
}
