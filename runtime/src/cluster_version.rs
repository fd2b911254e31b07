//! The API server's Kubernetes version, read at start-up and again every [`REREAD_EVERY`] (a
//! control plane upgraded under a running program is noticed: decisions follow the new minor, a
//! WARN line and `resize_guard_kubernetes_version_changes_total` say so), and reported the three
//! ways an operator looks: one log line per upstream behaviour that differs between minors
//! ([`resize_guard_policy::version::Feature`]), the `resize_guard_kubernetes_info` and
//! `resize_guard_kubernetes_feature` gauges on `/metrics`, and `/readyz`, which fails while the
//! version is unknown and on a minor without `pods/resize` (before v1.33 nothing would ever reach
//! resize-guard, and a ready-looking install would be silently useless).
//!
//! `/version` is read until it answers (1 s, doubling to 30 s); each failure is logged and counted
//! (`resize_guard_kubernetes_version_errors_total`). A failed re-read keeps the version last read.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use resize_guard_policy::version::{Feature, KubernetesVersion, Support};

/// How often `/version` is read again once known.
pub const REREAD_EVERY: Duration = Duration::from_secs(300);

/// What is known of the cluster's version (cheap to clone).
#[derive(Debug, Clone, Default)]
pub struct ClusterVersion {
    known: Arc<RwLock<Option<KubernetesVersion>>>,
    errors: Arc<AtomicU64>,
    changes: Arc<AtomicU64>,
}

impl ClusterVersion {
    /// Reads `/version` in the background until it answers, reports it, and reads it again every
    /// [`REREAD_EVERY`].
    pub fn detect(client: kube::Client) -> ClusterVersion {
        ClusterVersion::detect_every(client, REREAD_EVERY)
    }

    /// [`ClusterVersion::detect`], reading again every `period`.
    pub fn detect_every(client: kube::Client, period: Duration) -> ClusterVersion {
        let version = ClusterVersion::default();
        let filled = version.clone();
        tokio::spawn(async move {
            let mut backoff = Duration::from_secs(1);
            loop {
                match client.apiserver_version().await {
                    Ok(info) => {
                        match KubernetesVersion::parse(&info.major, &info.minor, &info.git_version)
                        {
                            Some(v) => {
                                filled.set(v);
                                backoff = Duration::from_secs(1);
                                tokio::time::sleep(period).await;
                                continue;
                            }
                            None => {
                                filled.errors.fetch_add(1, Ordering::Relaxed);
                                tracing::error!(
                                    major = info.major,
                                    minor = info.minor,
                                    git_version = info.git_version,
                                    "the API server's /version is not a Kubernetes 1.N version"
                                );
                            }
                        }
                    }
                    Err(e) => {
                        filled.errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(error = %crate::error_chain(&e), retry_in = ?backoff, "cannot read the API server's /version");
                    }
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        });
        version
    }

    /// Records the version; when it is new (the first, or a control plane upgraded or downgraded
    /// since), logs it and what it changes, and counts a change.
    pub fn set(&self, version: KubernetesVersion) {
        let before = self.get();
        if before.as_ref() == Some(&version) {
            return;
        }
        if let Some(before) = &before {
            self.changes.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(before = %before, now = %version,
                "the API server's Kubernetes version changed; decisions follow the new minor");
        }
        let support = version.support();
        match support {
            Support::Supported => tracing::info!(kubernetes = %version, "Kubernetes version"),
            Support::Untested => tracing::warn!(
                kubernetes = %version,
                "Kubernetes version newer than the newest tested (v1.37): pods/resize is GA, so resize-guard should work; check the release notes"
            ),
            Support::Unsupported => tracing::error!(
                kubernetes = %version,
                "Kubernetes version not supported: resize-guard needs v1.33 or newer"
            ),
        }
        for feature in Feature::ALL {
            let has = version.has(feature);
            tracing::info!(
                feature = feature.name(),
                available = has,
                "{}",
                feature.consequence(has)
            );
        }
        match self.known.write() {
            Ok(mut known) => *known = Some(version),
            Err(poisoned) => *poisoned.into_inner() = Some(version),
        }
    }

    /// The version last read, once read.
    pub fn get(&self) -> Option<KubernetesVersion> {
        match self.known.read() {
            Ok(known) => known.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// `Err(reason)` while the version is unknown or unsupported.
    pub fn readiness(&self) -> Result<(), String> {
        match self.get() {
            None => Err("the API server's Kubernetes version is not known yet (/version)".into()),
            Some(v) if v.support() == Support::Unsupported => Err(format!(
                "Kubernetes {} has no pods/resize subresource: resize-guard needs v1.33 or newer",
                v.git_version
            )),
            Some(_) => Ok(()),
        }
    }

    /// The collector to register in the program's `resize_guard` registry
    /// (`runtime/src/exposition.rs`): the version's metrics, read at each scrape.
    pub fn collector(&self) -> Box<dyn Collector> {
        Box::new(self.clone())
    }
}

/// The labels of `resize_guard_kubernetes_info`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InfoLabels {
    git_version: String,
    /// `1.N`.
    minor: String,
    /// `supported`, `untested` or `unsupported`.
    support: String,
}

/// The label of `resize_guard_kubernetes_feature`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FeatureLabels {
    feature: String,
}

/// Counters are named without `_total` (prometheus_client's OpenMetrics encoder appends it to the
/// sample); `kubernetes_info` and `kubernetes_feature` are absent while the version is unknown.
impl Collector for ClusterVersion {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        for (name, help, value) in [
            (
                "kubernetes_version_errors",
                "Failed reads of the API server's /version",
                &self.errors,
            ),
            (
                "kubernetes_version_changes",
                "Times a re-read of the API server's /version found another version than before",
                &self.changes,
            ),
        ] {
            let counter = ConstCounter::new(value.load(Ordering::Relaxed));
            let metric = encoder.encode_descriptor(name, help, None, counter.metric_type())?;
            counter.encode(metric)?;
        }
        let Some(v) = self.get() else {
            return Ok(());
        };
        let info = Family::<InfoLabels, Gauge>::default();
        info.get_or_create(&InfoLabels {
            git_version: v.git_version.clone(),
            minor: format!("1.{}", v.minor),
            support: v.support().as_str().to_owned(),
        })
        .set(1);
        let metric = encoder.encode_descriptor(
            "kubernetes_info",
            "The API server's Kubernetes version and whether resize-guard supports it",
            None,
            info.metric_type(),
        )?;
        info.encode(metric)?;
        let features = Family::<FeatureLabels, Gauge>::default();
        for feature in Feature::ALL {
            features
                .get_or_create(&FeatureLabels {
                    feature: feature.name().to_owned(),
                })
                .set(i64::from(v.has(feature)));
        }
        let metric = encoder.encode_descriptor(
            "kubernetes_feature",
            "Whether the cluster's minor has an upstream resize behaviour resize-guard adapts to",
            None,
            features.metric_type(),
        )?;
        features.encode(metric)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{assert_contains, assert_lines};

    /// `cv`'s metrics as `/metrics` shows them (in a `resize_guard` registry).
    fn exposition(cv: &ClusterVersion) -> String {
        let mut registry = prometheus_client::registry::Registry::with_prefix("resize_guard");
        registry.register_collector(cv.collector());
        crate::exposition::encode(&registry)
    }

    #[test]
    fn readiness_and_metrics_follow_the_version() {
        let cv = ClusterVersion::default();
        assert!(cv.readiness().unwrap_err().contains("not known yet"));
        assert!(!exposition(&cv).contains("resize_guard_kubernetes_info"));
        cv.set(KubernetesVersion::parse("1", "35", "v1.35.4").unwrap());
        assert_eq!(cv.readiness(), Ok(()));
        assert_lines(
            &exposition(&cv),
            &[
                "resize_guard_kubernetes_info{git_version=\"v1.35.4\",minor=\"1.35\",support=\"supported\"} 1",
                "resize_guard_kubernetes_feature{feature=\"api_server_capacity_check\"} 0",
                "resize_guard_kubernetes_feature{feature=\"kubelet_marks_capacity_infeasible\"} 1",
            ],
        );

        let old = ClusterVersion::default();
        old.set(KubernetesVersion::parse("1", "32", "v1.32.9").unwrap());
        assert!(
            old.readiness()
                .unwrap_err()
                .contains("needs v1.33 or newer")
        );
        assert!(exposition(&old).contains("support=\"unsupported\"} 1"));
    }

    #[test]
    fn counters_are_openmetrics_families_and_label_values_are_escaped() {
        let cv = ClusterVersion::default();
        cv.errors.fetch_add(2, Ordering::Relaxed);
        let text = exposition(&cv);
        assert_lines(
            &text,
            &[
                "# TYPE resize_guard_kubernetes_version_errors counter",
                "resize_guard_kubernetes_version_errors_total 2",
                "# TYPE resize_guard_kubernetes_version_changes counter",
                "resize_guard_kubernetes_version_changes_total 0",
            ],
        );
        assert!(!text.contains("# TYPE resize_guard_kubernetes_version_errors_total"));
        cv.set(KubernetesVersion::parse("1", "36", "v1.36.0-\"odd\"\\build").unwrap());
        assert_contains(
            &exposition(&cv),
            &[
                "# TYPE resize_guard_kubernetes_info gauge",
                "# TYPE resize_guard_kubernetes_feature gauge",
                "git_version=\"v1.36.0-\\\"odd\\\"\\\\build\"",
            ],
        );
    }

    #[test]
    fn a_changed_version_replaces_the_old_one_and_is_counted() {
        let cv = ClusterVersion::default();
        cv.set(KubernetesVersion::parse("1", "35", "v1.35.4").unwrap());
        cv.set(KubernetesVersion::parse("1", "35", "v1.35.4").unwrap());
        assert!(exposition(&cv).contains("resize_guard_kubernetes_version_changes_total 0"));
        cv.set(KubernetesVersion::parse("1", "36", "v1.36.1").unwrap());
        assert_eq!(cv.get().map(|v| v.minor), Some(36));
        let text = exposition(&cv);
        assert!(!text.contains("minor=\"1.35\""));
        assert_lines(
            &text,
            &[
                "resize_guard_kubernetes_version_changes_total 1",
                "resize_guard_kubernetes_feature{feature=\"api_server_capacity_check\"} 1",
            ],
        );
        assert_contains(&text, &["minor=\"1.36\""]);
    }

    /// A fake API server whose `/version` answers each minor of `minors` in turn (the last one
    /// from then on); returns the client and how many reads it answered.
    fn fake_api_server(minors: Vec<u32>) -> (kube::Client, Arc<AtomicU64>) {
        let (service, mut handle) = tower_test::mock::pair::<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >();
        let reads = Arc::new(AtomicU64::new(0));
        let counted = reads.clone();
        tokio::spawn(async move {
            while let Some((request, respond)) = handle.next_request().await {
                assert_eq!(request.uri().path(), "/version");
                let n = counted.fetch_add(1, Ordering::Relaxed) as usize;
                let minor = minors[n.min(minors.len() - 1)];
                let body = serde_json::json!({
                    "major": "1", "minor": minor.to_string(), "gitVersion": format!("v1.{minor}.0"),
                    "gitCommit": "", "gitTreeState": "", "buildDate": "", "goVersion": "",
                    "compiler": "", "platform": "linux/amd64",
                });
                respond.send_response(
                    http::Response::builder()
                        .header("content-type", "application/json")
                        .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
                        .unwrap(),
                );
            }
        });
        (kube::Client::new(service, "default"), reads)
    }

    #[tokio::test(start_paused = true)]
    async fn an_upgraded_control_plane_is_noticed_at_the_next_read() {
        let (client, reads) = fake_api_server(vec![35, 36]);
        let cv = ClusterVersion::detect_every(client, Duration::from_secs(300));
        while cv.get().is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(cv.get().map(|v| v.minor), Some(35));
        tokio::time::sleep(Duration::from_secs(299)).await;
        assert_eq!(
            cv.get().map(|v| v.minor),
            Some(35),
            "not read again before the period"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(cv.get().map(|v| v.minor), Some(36));
        assert_eq!(reads.load(Ordering::Relaxed), 2);
        assert!(exposition(&cv).contains("resize_guard_kubernetes_version_changes_total 1"));
    }
}
