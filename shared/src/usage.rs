//! What a pod's containers use, as the resource metrics API (`metrics.k8s.io/v1beta1`
//! `PodMetrics`, served by metrics-server from the kubelets' `/metrics/resource`) reports it, and
//! the evidence the memory rule ([`crate::memory`]) judges with.
//!
//! Reading a `PodMetrics` document is pure: the caller passes the time to measure its age
//! against, so the webhook and `kubectl resize-guard` read it the same way and tests pin it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;

use crate::upstream::quantity::value;

/// A pod's memory usage: each container's working set, and when it was measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodUsage {
    /// Container name → working-set bytes (`container_memory_working_set_bytes`).
    pub containers: BTreeMap<String, i64>,
    /// How long before the caller's "now" the sample was taken (zero for a timestamp in the
    /// future, which a clock skew between nodes can give).
    pub age: Duration,
    /// The sampling window metrics-server reports (`window`), for messages.
    pub window: String,
}

impl PodUsage {
    /// The pod's usage: the sum of its containers' working sets (metrics-server reports no
    /// pod-level number).
    pub fn total(&self) -> i64 {
        self.containers.values().sum()
    }

    /// Reads a `PodMetrics` JSON document, measuring its age against `now`. A document that is
    /// not a `PodMetrics`, has no timestamp, or a container without a readable memory usage is
    /// an error that says which: never a usage of zero.
    pub fn from_pod_metrics(body: &[u8], now: Timestamp) -> Result<PodUsage, UsageError> {
        let doc: PodMetrics = serde_json::from_slice(body).map_err(UsageError::Malformed)?;
        if doc.kind.as_deref().is_some_and(|k| k != "PodMetrics") {
            return Err(UsageError::NotPodMetrics(doc.kind.unwrap_or_default()));
        }
        let taken = doc.timestamp.ok_or(UsageError::NoTimestamp)?;
        let age = now.duration_since(taken.0);
        let age = Duration::try_from(age).unwrap_or(Duration::ZERO);
        let mut containers = BTreeMap::new();
        for c in doc.containers {
            let memory = c
                .usage
                .get("memory")
                .ok_or_else(|| UsageError::NoMemory(c.name.clone()))?;
            let bytes = value(memory).map_err(|e| UsageError::BadQuantity {
                container: c.name.clone(),
                reason: e.to_string(),
            })?;
            containers.insert(c.name, bytes);
        }
        Ok(PodUsage {
            containers,
            age,
            window: doc.window.unwrap_or_default(),
        })
    }
}

/// The API path of pod `namespace/name`'s `PodMetrics` (`metrics.k8s.io/v1beta1`).
pub fn pod_metrics_path(namespace: &str, name: &str) -> String {
    format!("/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/{name}")
}

/// A `PodMetrics` document that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// Not JSON of the `PodMetrics` shape.
    #[error("the PodMetrics document does not decode")]
    Malformed(#[source] serde_json::Error),
    /// Another kind.
    #[error("expected kind PodMetrics, got {0:?}")]
    NotPodMetrics(String),
    /// No `timestamp`: its age is unknown.
    #[error("the PodMetrics document has no timestamp")]
    NoTimestamp,
    /// A container without `usage.memory`.
    #[error("container {0:?} has no memory usage")]
    NoMemory(String),
    /// A memory usage that is not a quantity.
    #[error("container {container:?} has an unreadable memory usage: {reason}")]
    BadQuantity {
        /// The container.
        container: String,
        /// Why.
        reason: String,
    },
}

/// The fields of `metrics.k8s.io/v1beta1` `PodMetrics` the memory rule reads
/// (k8s.io/metrics `pkg/apis/metrics/v1beta1/types.go`).
#[derive(Deserialize)]
struct PodMetrics {
    kind: Option<String>,
    timestamp: Option<Time>,
    window: Option<String>,
    #[serde(default)]
    containers: Vec<ContainerMetrics>,
}

#[derive(Deserialize)]
struct ContainerMetrics {
    name: String,
    #[serde(default)]
    usage: BTreeMap<String, Quantity>,
}

/// What the memory rule knows about the pod's usage when it judges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evidence {
    /// Nothing was fetched yet: the first pass of a review, which only learns whether the rule
    /// needs usage ([`crate::admission::Admission::wants_usage`]).
    NotFetched,
    /// The resource metrics API answered.
    Measured(PodUsage),
    /// No usage could be had: why (metrics-server down, no sample yet, a timeout, an error).
    Unavailable(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-12-03T12:00:30Z".parse().unwrap()
    }

    #[test]
    fn reads_a_metrics_server_answer() {
        let body = br#"{"kind":"PodMetrics","apiVersion":"metrics.k8s.io/v1beta1",
            "metadata":{"name":"app","namespace":"shop"},"timestamp":"2026-12-03T12:00:18Z",
            "window":"10.5s","containers":[{"name":"app","usage":{"cpu":"200m","memory":"153600Ki"}},
            {"name":"proxy","usage":{"cpu":"1m","memory":"20Mi"}}]}"#;
        let u = PodUsage::from_pod_metrics(body, now()).unwrap();
        assert_eq!(u.containers["app"], 150 << 20);
        assert_eq!(u.containers["proxy"], 20 << 20);
        assert_eq!(u.total(), 170 << 20);
        assert_eq!(u.age, Duration::from_secs(12));
        assert_eq!(u.window, "10.5s");
    }

    #[test]
    fn a_future_timestamp_is_zero_old() {
        let body = br#"{"timestamp":"2026-12-03T12:01:00Z","containers":[]}"#;
        assert_eq!(
            PodUsage::from_pod_metrics(body, now()).unwrap().age,
            Duration::ZERO
        );
    }

    #[test]
    fn bad_documents_are_errors_never_zero() {
        for (body, want) in [
            (&b"not json"[..], "does not decode"),
            (br#"{"kind":"NodeMetrics","timestamp":"2026-12-03T12:00:18Z"}"#, "NodeMetrics"),
            (br#"{"kind":"PodMetrics","containers":[]}"#, "no timestamp"),
            (
                br#"{"timestamp":"2026-12-03T12:00:18Z","containers":[{"name":"a","usage":{"cpu":"1m"}}]}"#,
                "no memory usage",
            ),
            (
                br#"{"timestamp":"2026-12-03T12:00:18Z","containers":[{"name":"a","usage":{"memory":"lots"}}]}"#,
                "unreadable",
            ),
        ] {
            let err = PodUsage::from_pod_metrics(body, now()).unwrap_err();
            assert!(err.to_string().contains(want), "{err} ~ {want}");
        }
    }
}
