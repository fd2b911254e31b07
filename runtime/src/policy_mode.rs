//! `resize_guard_policy_mode{mode}`: 1 for the mode of the policy in force (`enforce` or
//! `audit`), 0 for the other; both 0 while no policy is in force. Read from the program's
//! cluster view at each scrape, so a reloaded policy shows at the next scrape without a hook on
//! the reload path (`cluster/src/view.rs`, `ClusterView::policy_in_force`).

use std::fmt;
use std::sync::{Arc, OnceLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use resize_guard_policy::policy::Mode;

/// Where the live mode is read from: `None` while no policy is in force.
pub type ModeSource = Box<dyn Fn() -> Option<Mode> + Send + Sync>;

/// The label of `resize_guard_policy_mode`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModeLabels {
    /// `enforce` or `audit`.
    pub mode: String,
}

/// The policy-mode gauge: register it once ([`PolicyMode::collector`]), then give it its
/// source once the cluster view exists ([`PolicyMode::follow`]). Cheap to clone.
#[derive(Clone, Default)]
pub struct PolicyMode {
    source: Arc<OnceLock<ModeSource>>,
}

impl fmt::Debug for PolicyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyMode")
            .field("following", &self.source.get().is_some())
            .finish()
    }
}

impl PolicyMode {
    /// Reads the live mode from `source` from now on (a second call is ignored and logged: the
    /// gauge follows one view for the life of the process).
    pub fn follow(&self, source: impl Fn() -> Option<Mode> + Send + Sync + 'static) {
        if self.source.set(Box::new(source)).is_err() {
            tracing::warn!("resize_guard_policy_mode already follows a policy source; ignored");
        }
    }

    /// The mode the gauge reports now.
    pub fn current(&self) -> Option<Mode> {
        self.source.get().and_then(|source| source())
    }

    /// The collector to register in the program's `resize_guard` registry.
    pub fn collector(&self) -> Box<dyn Collector> {
        Box::new(self.clone())
    }
}

impl Collector for PolicyMode {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let family = Family::<ModeLabels, Gauge>::default();
        let live = self.current();
        for (mode, label) in [(Mode::Enforce, "enforce"), (Mode::Audit, "audit")] {
            family
                .get_or_create(&ModeLabels {
                    mode: label.to_owned(),
                })
                .set(i64::from(live == Some(mode)));
        }
        let metric = encoder.encode_descriptor(
            "policy_mode",
            "The mode of the policy in force: 1 for enforce or audit, 0 for the other (both 0 while no policy is in force)",
            None,
            family.metric_type(),
        )?;
        family.encode(metric)
    }
}
