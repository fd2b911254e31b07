//! The API server's Kubernetes version, read at start-up and reported the three ways an operator
//! looks: one log line per upstream behaviour that differs between minors
//! ([`resize_guard_policy::version::Feature`]), the `resize_guard_kubernetes_info` and
//! `resize_guard_kubernetes_feature` gauges on `/metrics`, and `/readyz`, which fails while the
//! version is unknown and on a minor without `pods/resize` (before v1.33 nothing would ever reach
//! resize-guard, and a ready-looking install would be silently useless).
//!
//! `/version` is read until it answers (1 s, doubling to 30 s); each failure is logged and counted
//! (`resize_guard_kubernetes_version_errors_total`).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use resize_guard_policy::version::{Feature, KubernetesVersion, Support};

/// What is known of the cluster's version (cheap to clone).
#[derive(Debug, Clone, Default)]
pub struct ClusterVersion {
    known: Arc<OnceLock<KubernetesVersion>>,
    errors: Arc<AtomicU64>,
}

impl ClusterVersion {
    /// Reads `/version` in the background until it answers, then reports it.
    pub fn detect(client: kube::Client) -> ClusterVersion {
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
                                return;
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

    /// Records and logs the version (the first one wins).
    pub fn set(&self, version: KubernetesVersion) {
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
        let _ = self.known.set(version);
    }

    /// The version, once read.
    pub fn get(&self) -> Option<&KubernetesVersion> {
        self.known.get()
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
    fn extra_metrics_go_before_eof() {
        assert_eq!(
            append_metrics("a 1\n# EOF\n".into(), "b 2\n"),
            "a 1\nb 2\n# EOF\n"
        );
        assert_eq!(append_metrics("a 1\n".into(), "b 2\n"), "a 1\nb 2\n");
    }
}
