//! promtool's input series made of what `super::scraped` scraped: the healthy install as
//! scraped, and failing series built from it (the real failures where the test caused them),
//! with the alerts each must raise and when.

use serde_json::{Value, json};

use super::exposition::{Parsed, label_value};
use super::{NAMESPACE, alerts, firing, series, silent, target};

pub(super) const WEBHOOK_POD: &str = "resize-guard-webhook-0";
pub(super) const CONTROLLER_POD: &str = "resize-guard-controller-0";
pub(super) const MUTATE: &str = "mutate.resize-guard.io";
pub(super) const API_DURATION: &str =
    "apiserver_admission_webhook_admission_duration_seconds_bucket";
pub(super) const REVIEW_DURATION: &str = "resize_guard_admission_duration_seconds_bucket";

/// Input series of a histogram's buckets, each growing every minute by `per_minute(le, count)`
/// (`count`: the bucket's cumulative count as scraped).
fn bucket_series(
    name: &str,
    labels: &[(&str, &str)],
    buckets: &[(f64, f64)],
    per_minute: impl Fn(f64, f64) -> f64,
) -> Vec<Value> {
    buckets
        .iter()
        .map(|&(le, count)| {
            let le_text = if le.is_infinite() {
                "+Inf".to_owned()
            } else {
                le.to_string()
            };
            let labels = [labels, &[("le", le_text.as_str())]].concat();
            series(name, &labels, format!("0+{}x30", per_minute(le, count)))
        })
        .collect()
}

/// One series per label value of `family` with the values `values(healthy, broken)` makes of
/// the value scraped healthy and the one scraped broken.
fn state_series(
    family: &str,
    label: &str,
    labels: &[(&str, &str)],
    (healthy, broken): (&Parsed, &Parsed),
    values: impl Fn(f64, f64) -> String,
) -> Vec<Value> {
    healthy
        .samples
        .iter()
        .filter(|(n, _, _)| n == family)
        .map(|(_, l, v)| {
            let value = label_value(l, label).unwrap();
            let broken = broken
                .value(family, &format!("{label}=\"{value}\""))
                .unwrap();
            series(
                family,
                &[labels, &[(label, value)]].concat(),
                values(*v, broken),
            )
        })
        .collect()
}

/// What was scraped, for the input series.
pub(super) struct Scraped<'a> {
    pub(super) webhook: &'a Parsed,
    pub(super) controller: &'a Parsed,
    /// Webhook and controller while the policy ConfigMap was broken.
    pub(super) broken: (&'a Parsed, &'a Parsed),
    /// The API server's call durations to the mutating webhook, by `le`.
    pub(super) calls: &'a [(f64, f64)],
    /// The webhook's review durations, by `le`.
    pub(super) reviews: &'a [(f64, f64)],
}

/// The API server's labels on its call durations to the mutating webhook.
const CALL: [(&str, &str); 4] = [
    ("name", MUTATE),
    ("type", "admit"),
    ("operation", "UPDATE"),
    ("rejected", "false"),
];

impl Scraped<'_> {
    /// The series every test starts from: the latency histograms as really observed (each
    /// minute the same reviews again), the policy state, certificate errors and refusals as
    /// scraped (none here), both programs up.
    pub(super) fn healthy(&self) -> Vec<Value> {
        let wh = target(WEBHOOK_POD, "webhook");
        let ct = target(CONTROLLER_POD, "controller");
        let mut input = bucket_series(API_DURATION, &CALL, self.calls, |_, count| count);
        input.extend(bucket_series(
            REVIEW_DURATION,
            &wh,
            self.reviews,
            |_, count| count,
        ));
        for (labels, parsed) in [(&wh, self.webhook), (&ct, self.controller)] {
            for family in [
                "resize_guard_policy_configmap_state",
                "resize_guard_policy_in_force",
            ] {
                let label = if family.ends_with("state") {
                    "state"
                } else {
                    "origin"
                };
                input.extend(state_series(
                    family,
                    label,
                    labels,
                    (parsed, parsed),
                    |v, _| format!("{v}x30"),
                ));
            }
            input.push(series("up", labels, "1x30".into()));
        }
        let errors = self
            .controller
            .sum("resize_guard_certificate_errors_total", &[]);
        let reloads = self.webhook.sum(
            "resize_guard_certificate_reloads_total",
            &["result=\"error\""],
        );
        let shed = self.webhook.sum(
            "resize_guard_admission_refusals_total",
            &["reason=\"shed\""],
        );
        let refused = self
            .webhook
            .sum("resize_guard_connections_refused_total", &[]);
        assert_eq!(
            (reloads, shed, refused),
            (0.0, 0.0, 0.0),
            "a healthy webhook"
        );
        input.extend([
            series(
                "resize_guard_certificate_errors_total",
                &[&ct[..], &[("what", "serving")]].concat(),
                format!("{errors}x30"),
            ),
            series(
                "resize_guard_certificate_reloads_total",
                &[&wh[..], &[("result", "error")]].concat(),
                format!("{reloads}x30"),
            ),
            series(
                "resize_guard_admission_refusals_total",
                &[&wh[..], &[("reason", "shed"), ("lane", "regular")]].concat(),
                format!("{shed}x30"),
            ),
            series(
                "resize_guard_connections_refused_total",
                &[&wh[..], &[("reason", "limit")]].concat(),
                format!("{refused}x30"),
            ),
            series(
                "resize_guard_preemptions_total",
                &[&ct[..], &[("outcome", "started")]].concat(),
                "0+1x30".into(),
            ),
        ]);
        input
    }

    /// The failing test: the real fail-open count and broken policy state, and failing series
    /// made from the scraped ones; each alert quiet before its condition held long enough and
    /// firing after.
    pub(super) fn failing(
        &self,
        (before, after, fail_open): (f64, f64, &str),
        (leader, fenced): (f64, f64),
        not_after: f64,
        rule: &Value,
    ) -> Value {
        let wh = target(WEBHOOK_POD, "webhook");
        let ct = target(CONTROLLER_POD, "controller");
        // Every review lands in the bucket holding the alert's threshold, or above: slow.
        let threshold = threshold(rule);
        let slow = |le: f64, _| if le < threshold { 0.0 } else { 10.0 };
        let mut input = bucket_series(API_DURATION, &CALL, self.calls, slow);
        input.extend(bucket_series(REVIEW_DURATION, &wh, self.reviews, slow));
        // The policy ConfigMap: valid for 5 minutes, then as scraped while broken; the webhook
        // stops being scraped after 5 minutes, the controller stays up (not leading).
        for (labels, healthy, broken, up) in [
            (&wh, self.webhook, self.broken.0, "1x5 0x25"),
            (&ct, self.controller, self.broken.1, "1x30"),
        ] {
            input.extend(state_series(
                "resize_guard_policy_configmap_state",
                "state",
                labels,
                (healthy, broken),
                |h, b| format!("{h}x5 {b}x25"),
            ));
            input.push(series("up", labels, up.into()));
        }
        let ns = [("namespace", NAMESPACE)];
        input.extend([
            series(
                fail_open,
                &[("name", MUTATE), ("type", "admit")],
                format!("{before}x10 {after}x20"),
            ),
            series(
                "resize_guard_admission_refusals_total",
                &[&wh[..], &[("reason", "shed"), ("lane", "regular")]].concat(),
                "0x10 0+5x20".into(),
            ),
            series(
                "resize_guard_certificate_errors_total",
                &[&ct[..], &[("what", "ca_bundle")]].concat(),
                "0x10 0+1x20".into(),
            ),
            // No policy in force on a restarted webhook: no ConfigMap and no last good copy.
            series(
                "resize_guard_policy_in_force",
                &[&wh[..], &[("origin", "configmap")]].concat(),
                "1x5 0x25".into(),
            ),
            series(
                "resize_guard_policy_in_force",
                &[&wh[..], &[("origin", "none")]].concat(),
                "0x5 1x25".into(),
            ),
            series("resize_guard_leader", &ct, format!("{leader}x5 0x25")),
            series(
                "resize_guard_fenced_writes_total",
                &ct,
                format!("{fenced}x10 {fenced}+1x20"),
            ),
            series(
                "resize_guard_preemptions_total",
                &[&ct[..], &[("outcome", "breaker_opened")]].concat(),
                "0x10 0+1x20".into(),
            ),
            // A resize Deferred from minute 6 on: 900 s old at minute 21, past 15 minutes after.
            series(
                "resize_guard_deferred_oldest_seconds",
                &ct,
                "0x5 0+60x25".into(),
            ),
            series(
                "resize_guard_certificate_expiry_timestamp_seconds",
                &[&wh[..], &[("certificate", "serving")]].concat(),
                format!("{not_after}x30"),
            ),
        ]);
        let ct_pod = [("namespace", NAMESPACE), ("pod", CONTROLLER_POD)];
        let wh_pod = [("namespace", NAMESPACE), ("pod", WEBHOOK_POD)];
        json!({
            "name": "failing: the webhook stopped (fail-open as the API server counted it), the policy ConfigMap broken (as scraped), slow reviews, shedding, certificate errors, no policy, no leader, a fence, the breaker, an old Deferred resize, the certificate near notAfter",
            "interval": "1m",
            // The evaluation starts 6 days before the served certificate's notAfter.
            "start_timestamp": format!("{}", (not_after - 6.0 * 86_400.0) as i64),
            "input_series": input,
            "alert_rule_test": [
                silent("ResizeGuardFailingOpen", "5m"),
                firing("ResizeGuardFailingOpen", "12m", "critical", &[&[("name", MUTATE)]]),
                silent("ResizeGuardReviewLatencyNearTimeout", "3m"),
                firing("ResizeGuardReviewLatencyNearTimeout", "10m", "warning", &[&[("name", MUTATE)], &ns]),
                silent("ResizeGuardLoadShedding", "9m"),
                firing("ResizeGuardLoadShedding", "15m", "warning", &[&[("namespace", NAMESPACE), ("reason", "shed")]]),
                silent("ResizeGuardPolicyConfigMapBroken", "8m"),
                firing("ResizeGuardPolicyConfigMapBroken", "12m", "warning", &[&ns]),
                silent("ResizeGuardNoPolicy", "8m"),
                firing("ResizeGuardNoPolicy", "12m", "critical", &[&ns]),
                firing("ResizeGuardCertificateExpiringSoon", "1m", "warning", &[&wh_pod]),
                silent("ResizeGuardCertificateErrors", "9m"),
                firing("ResizeGuardCertificateErrors", "15m", "warning", &[&ct_pod]),
                silent("ResizeGuardNoControllerLeading", "7m"),
                firing("ResizeGuardNoControllerLeading", "12m", "critical", &[&ns]),
                silent("ResizeGuardResizeDeferredTooLong", "21m"),
                firing("ResizeGuardResizeDeferredTooLong", "22m", "warning", &[&ns]),
                silent("ResizeGuardFencedWrites", "9m"),
                firing("ResizeGuardFencedWrites", "15m", "warning", &[&ct_pod]),
                silent("ResizeGuardCircuitBreakerOpen", "9m"),
                firing("ResizeGuardCircuitBreakerOpen", "15m", "warning", &[&ns]),
                silent("ResizeGuardWebhookDown", "8m"),
                firing("ResizeGuardWebhookDown", "12m", "critical", &[&[]]),
                silent("ResizeGuardControllerDown", "20m"),
            ],
        })
    }
}

/// The latency threshold in seconds the rendered ReviewLatencyNearTimeout compares with.
fn threshold(rule: &Value) -> f64 {
    let expr = alerts(rule)["ResizeGuardReviewLatencyNearTimeout"]["expr"]
        .as_str()
        .unwrap()
        .to_owned();
    let first = expr.lines().next().unwrap();
    first.rsplit("> ").next().unwrap().trim().parse().unwrap()
}
