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

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

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

    /// The version's metrics in the text exposition format (no `# EOF`).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP resize_guard_kubernetes_version_errors_total Failed reads of the API server's /version.\n\
             # TYPE resize_guard_kubernetes_version_errors_total counter\n\
             resize_guard_kubernetes_version_errors_total {}",
            self.errors.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP resize_guard_kubernetes_version_changes_total Times a re-read of the API server's /version found another version than before.\n\
             # TYPE resize_guard_kubernetes_version_changes_total counter\n\
             resize_guard_kubernetes_version_changes_total {}",
            self.changes.load(Ordering::Relaxed)
        );
        let Some(v) = self.get() else {
            return out;
        };
        let _ = writeln!(
            out,
            "# HELP resize_guard_kubernetes_info The API server's Kubernetes version and whether resize-guard supports it.\n\
             # TYPE resize_guard_kubernetes_info gauge\n\
             resize_guard_kubernetes_info{{git_version=\"{}\",minor=\"1.{}\",support=\"{}\"}} 1",
            escape(&v.git_version),
            v.minor,
            v.support().as_str()
        );
        out.push_str(
            "# HELP resize_guard_kubernetes_feature Whether the cluster's minor has an upstream resize behaviour resize-guard adapts to.\n\
             # TYPE resize_guard_kubernetes_feature gauge\n",
        );
        for feature in Feature::ALL {
            let _ = writeln!(
                out,
                "resize_guard_kubernetes_feature{{feature=\"{}\"}} {}",
                feature.name(),
                u8::from(v.has(feature))
            );
        }
        out
    }
}

/// A label value in the text format: backslash, double quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `program`'s exposition with `extra` added before its closing `# EOF` (OpenMetrics ends there).
pub fn append_metrics(program: String, extra: &str) -> String {
    match program.rfind("# EOF") {
        Some(at) => {
            let mut out = program;
            out.insert_str(at, extra);
            out
        }
        None => program + extra,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_and_metrics_follow_the_version() {
        let cv = ClusterVersion::default();
        assert!(cv.readiness().unwrap_err().contains("not known yet"));
        assert!(!cv.render().contains("resize_guard_kubernetes_info"));
        cv.set(KubernetesVersion::parse("1", "35", "v1.35.4").unwrap());
        assert_eq!(cv.readiness(), Ok(()));
        let text = cv.render();
        assert!(text.contains(
            "resize_guard_kubernetes_info{git_version=\"v1.35.4\",minor=\"1.35\",support=\"supported\"} 1"
        ));
        assert!(
            text.contains(
                "resize_guard_kubernetes_feature{feature=\"api_server_capacity_check\"} 0"
            )
        );
        assert!(text.contains(
            "resize_guard_kubernetes_feature{feature=\"kubelet_marks_capacity_infeasible\"} 1"
        ));

        let old = ClusterVersion::default();
        old.set(KubernetesVersion::parse("1", "32", "v1.32.9").unwrap());
        assert!(
            old.readiness()
                .unwrap_err()
                .contains("needs v1.33 or newer")
        );
        assert!(old.render().contains("support=\"unsupported\"} 1"));
    }

    #[test]
    fn a_changed_version_replaces_the_old_one_and_is_counted() {
        let cv = ClusterVersion::default();
        cv.set(KubernetesVersion::parse("1", "35", "v1.35.4").unwrap());
        cv.set(KubernetesVersion::parse("1", "35", "v1.35.4").unwrap());
        assert!(
            cv.render()
                .contains("resize_guard_kubernetes_version_changes_total 0")
        );
        cv.set(KubernetesVersion::parse("1", "36", "v1.36.1").unwrap());
        assert_eq!(cv.get().map(|v| v.minor), Some(36));
        let text = cv.render();
        assert!(text.contains("resize_guard_kubernetes_version_changes_total 1"));
        assert!(text.contains("minor=\"1.36\""));
        assert!(!text.contains("minor=\"1.35\""));
        assert!(
            text.contains(
                "resize_guard_kubernetes_feature{feature=\"api_server_capacity_check\"} 1"
            )
        );
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
        assert!(
            cv.render()
                .contains("resize_guard_kubernetes_version_changes_total 1")
        );
    }

    #[test]
    fn extra_metrics_go_before_eof() {
        assert_eq!(
            append_metrics("a 1\n# EOF\n".into(), "b 2\n"),
            "a 1\nb 2\n# EOF\n"
        );
        assert_eq!(append_metrics("a 1\n".into(), "b 2\n"), "a 1\nb 2\n");
    }
}
