//! The pod's memory usage for the memory rule: one `GET` of `metrics.k8s.io/v1beta1` `PodMetrics`
//! for the pod under review, made only for a resize that lowers a memory limit
//! ([`resize_guard_policy::admission::Admission::wants_usage`]), with a short timeout, and only
//! for a pod the cluster view knows by UID on the named node, under the view's namespace and
//! name (`Reviewed::usage_of`, `webhook/src/review.rs`): a review's body is unauthenticated, so
//! naming another tenant's pod in one reads nothing (`resize_guard_usage_withheld_total`).
//!
//! Every way it can fail — metrics-server not installed or down (the aggregated API answers 404
//! or 503), no sample yet for a new pod (404), a timeout, a body that does not decode — becomes
//! [`Evidence::Unavailable`] with the reason, which the rule never denies on: it is logged,
//! counted in `resize_guard_usage_lookups_total{result}`, and said in the warning and the
//! audit annotation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use resize_guard_policy::usage::{Evidence, PodUsage, pod_metrics_path};

use crate::metrics::Metrics;

/// Reads `PodMetrics` through the API server (the aggregation layer routes it to
/// metrics-server), as the webhook's own ServiceAccount: `get` on `pods.metrics.k8s.io`.
#[derive(Clone)]
pub struct MetricsApi {
    client: kube::Client,
    timeout: Duration,
    metrics: Arc<Metrics>,
}

impl MetricsApi {
    /// A reader that gives up after `timeout`.
    pub fn new(client: kube::Client, timeout: Duration, metrics: Arc<Metrics>) -> MetricsApi {
        MetricsApi {
            client,
            timeout,
            metrics,
        }
    }

    /// The usage of pod `namespace/name`, or why there is none.
    pub async fn fetch(&self, namespace: &str, name: &str) -> Evidence {
        let started = Instant::now();
        let (evidence, result) =
            match tokio::time::timeout(self.timeout, self.get(namespace, name)).await {
                Ok(Ok(usage)) => (Evidence::Measured(usage), "ok"),
                Ok(Err((result, why))) => (Evidence::Unavailable(why), result),
                Err(_) => (
                    Evidence::Unavailable(format!(
                        "metrics.k8s.io did not answer within {} ms",
                        self.timeout.as_millis()
                    )),
                    "timeout",
                ),
            };
        self.metrics
            .usage_lookup(result, started.elapsed().as_secs_f64());
        if let Evidence::Unavailable(why) = &evidence {
            tracing::warn!(namespace, pod = name, result, reason = %why,
                "no memory usage for a resize that lowers a memory limit; the memory rule does not judge it");
        }
        evidence
    }

    async fn get(&self, namespace: &str, name: &str) -> Result<PodUsage, (&'static str, String)> {
        let path = pod_metrics_path(namespace, name);
        let request = http::Request::get(&path)
            .body(Vec::new())
            .map_err(|e| ("error", format!("could not build the request: {e}")))?;
        let body = self
            .client
            .request_text(request)
            .await
            .map_err(|e| classify_error(&e))?;
        PodUsage::from_pod_metrics(body.as_bytes(), Timestamp::now()).map_err(|e| {
            (
                "malformed",
                format!("metrics.k8s.io answered with an unusable PodMetrics: {e}"),
            )
        })
    }
}

/// The `result` label and the reason for a failed request.
fn classify_error(e: &kube::Error) -> (&'static str, String) {
    match e {
        kube::Error::Api(status) if status.code == 404 => (
            "not_found",
            format!(
                "metrics.k8s.io has no usage for this pod (metrics-server not installed, or no sample yet): {}",
                status.message
            ),
        ),
        kube::Error::Api(status) if status.code == 503 => (
            "unavailable",
            format!("metrics.k8s.io is unavailable: {}", status.message),
        ),
        kube::Error::Api(status) => (
            "error",
            format!(
                "metrics.k8s.io answered {}: {}",
                status.code, status.message
            ),
        ),
        other => ("error", format!("metrics.k8s.io: {other}")),
    }
}
