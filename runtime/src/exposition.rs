//! Each program's one metrics registry and its exposition on `/metrics`.
//!
//! ```text
//! root Registry (no prefix)
//! ├── ProcessMetrics collector      process_* (src/process_metrics.rs)
//! └── "resize_guard" sub-registry   resize_guard_build_info (src/build_info.rs),
//!                                   resize_guard_policy_mode (src/policy_mode.rs),
//!                                   and every metric of the program (webhook/src/metrics.rs,
//!                                   controller/src/metrics.rs)
//! ```
//!
//! [`encode`] writes OpenMetrics text (prometheus_client's only text encoder,
//! `prometheus_client::encoding::text::encode`, ends with `# EOF` and names counter families
//! without `_total`), so `/metrics` is labelled [`CONTENT_TYPE`]: a scraper that read it as the
//! classic `text/plain; version=0.0.4` would find samples `x_total` under a family `x` and lose
//! the counter type.

use std::sync::Mutex;

use prometheus_client::collector::Collector;
use prometheus_client::registry::Registry;
use resize_guard_policy::policy::Mode;

use crate::build_info;
use crate::policy_mode::PolicyMode;
use crate::process_metrics::ProcessMetrics;

/// The OpenMetrics 1.0 text `Content-Type` (what Prometheus's scraper expects for it,
/// github.com/prometheus/prometheus `model/textparse/interface.go`, `New`).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The prefix of every resize-guard metric.
pub const PREFIX: &str = "resize_guard";

/// A program's root registry: the process collector, and `resize_guard_build_info` for
/// `program` (`resize-guard-webhook`, `resize-guard-controller`). Register the program's own
/// metrics in `registry.sub_registry_with_prefix(PREFIX)`.
pub fn program_registry(program: &str) -> Registry {
    let mut root = Registry::default();
    root.register_collector(Box::new(ProcessMetrics::default()));
    build_info::register(root.sub_registry_with_prefix(PREFIX), program);
    root
}

/// A program's one registry, behind its `Metrics`: the process collector,
/// `resize_guard_build_info`, `resize_guard_policy_mode`, the program's metrics
/// ([`Exposition::register_with`]) and collectors of parts made after the metrics (the
/// Kubernetes version, the cluster view's policy origin).
#[derive(Debug)]
pub struct Exposition {
    registry: Mutex<Registry>,
    policy_mode: PolicyMode,
}

impl Exposition {
    /// `program`'s registry (`resize-guard-webhook`, `resize-guard-controller`).
    pub fn new(program: &str) -> Exposition {
        let mut root = program_registry(program);
        let policy_mode = PolicyMode::default();
        root.sub_registry_with_prefix(PREFIX)
            .register_collector(policy_mode.collector());
        Exposition {
            registry: Mutex::new(root),
            policy_mode,
        }
    }

    /// Lets `register` add metrics to the `resize_guard` sub-registry.
    pub fn register_with(&self, register: impl FnOnce(&mut Registry)) {
        // A panic while the lock was held leaves nothing half-written that matters more than
        // losing /metrics: take the registry back.
        let mut registry = match self.registry.lock() {
            Ok(registry) => registry,
            Err(poisoned) => poisoned.into_inner(),
        };
        register(registry.sub_registry_with_prefix(PREFIX));
    }

    /// Reads the mode of the policy in force from `source` at each scrape, for
    /// `resize_guard_policy_mode` (both series 0 until called; `source` answers `None` while no
    /// policy is in force).
    pub fn follow_policy_mode(&self, source: impl Fn() -> Option<Mode> + Send + Sync + 'static) {
        self.policy_mode.follow(source);
    }

    /// Registers `collector` in the program's `resize_guard` registry.
    pub fn register_collector(&self, collector: Box<dyn Collector>) {
        self.register_with(|registry| registry.register_collector(collector));
    }

    /// The OpenMetrics exposition of the registry, `# EOF` included.
    pub fn render(&self) -> String {
        match self.registry.lock() {
            Ok(registry) => encode(&registry),
            Err(poisoned) => encode(&poisoned.into_inner()),
        }
    }
}

/// The registry's OpenMetrics text, `# EOF` included. An encoding error (a collector that
/// failed) is logged and ends the text early rather than failing the scrape.
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, registry) {
        tracing::error!(error = %e, "encoding the metrics failed; /metrics is cut short");
    }
    out
}

/// Asserts that each of `lines` is a whole line of the exposition `text` (tests only: this
/// crate's and, through the `testing` feature, the programs').
#[cfg(any(test, feature = "testing"))]
pub fn assert_lines(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(
            text.lines().any(|l| l == *line),
            "{line} missing from\n{text}"
        );
    }
}

/// Asserts that `text` contains each of `parts` (tests only, as [`assert_lines`]).
#[cfg(any(test, feature = "testing"))]
pub fn assert_contains(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part} missing from\n{text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_registry_carries_build_info_and_process_metrics_and_ends_with_eof() {
        let mut root = program_registry("resize-guard-webhook");
        let c = prometheus_client::metrics::counter::Counter::<u64>::default();
        root.sub_registry_with_prefix(PREFIX)
            .register("things", "Things", c.clone());
        c.inc();
        let text = encode(&root);
        assert_contains(
            &text,
            &[
                "# TYPE resize_guard_build_info gauge",
                &format!(
                    "resize_guard_build_info{{version=\"{}\",revision=\"{}\",program=\"resize-guard-webhook\"}} 1",
                    build_info::VERSION,
                    build_info::REVISION
                ),
                "# TYPE process_cpu_seconds counter",
                "# TYPE process_resident_memory_bytes gauge",
                "# TYPE process_start_time_seconds gauge",
                "# TYPE resize_guard_things counter",
                "resize_guard_things_total 1",
            ],
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
