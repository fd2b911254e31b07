//! The policy in force on `/metrics`: `resize_guard_policy_mode{mode}` ([`PolicyMode`]), 1 for
//! the mode of the policy in force (`enforce` or `audit`), 0 for the other, both 0 while no
//! policy is in force; `resize_guard_policy_in_force{origin}` ([`PolicyOrigin`]), 1 for where it
//! came from (`configmap`, `last-good`) or `none`; and `resize_guard_policy_configmap_state{state}`
//! ([`PolicyOrigin::config_map_collector`]), 1 for what the policy ConfigMap holds as last read
//! (`valid`, `invalid`, `missing`, `unread`): a ConfigMap that breaks keeps the policy it held in
//! force with origin `configmap`, so only this one says its edits are not taking effect. All are
//! read from the program's cluster view at each scrape, so a reloaded policy shows at the next
//! scrape without a hook on the reload path (`cluster/src/view.rs`,
//! `ClusterView::policy_in_force`).

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

/// The label of `resize_guard_policy_in_force`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OriginLabels {
    /// Where the policy in force came from, or `none`.
    pub origin: String,
}

/// The label of `resize_guard_policy_configmap_state`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// What the policy ConfigMap holds as last read.
    pub state: String,
}

/// Which one-of gauge a [`PolicyOrigin`] collector encodes.
#[derive(Debug, Clone, Copy)]
enum OneOf {
    /// `resize_guard_policy_in_force{origin}`.
    Origin,
    /// `resize_guard_policy_configmap_state{state}`.
    ConfigMapState,
}

/// A one-of gauge of the policy: one series per value of `values`, 1 for the one `current`
/// answers at the scrape, 0 for the others. `resize_guard_policy_in_force{origin}` (the cluster
/// view's origins, `cluster/src/view.rs` `POLICY_ORIGINS`) and
/// `resize_guard_policy_configmap_state{state}` (`cluster/src/policy_source.rs`
/// `CONFIG_MAP_STATES`).
pub struct PolicyOrigin {
    which: OneOf,
    origins: &'static [&'static str],
    current: Box<dyn Fn() -> &'static str + Send + Sync>,
}

impl fmt::Debug for PolicyOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyOrigin")
            .field("which", &self.which)
            .field("origins", &self.origins)
            .finish_non_exhaustive()
    }
}

impl PolicyOrigin {
    /// The `resize_guard_policy_in_force{origin}` collector to register in the program's
    /// `resize_guard` registry.
    pub fn collector(
        origins: &'static [&'static str],
        current: impl Fn() -> &'static str + Send + Sync + 'static,
    ) -> Box<dyn Collector> {
        Self::boxed(OneOf::Origin, origins, current)
    }

    /// The `resize_guard_policy_configmap_state{state}` collector: what the policy ConfigMap
    /// holds as last read (`valid`, `invalid`, `missing`, `unread`), whatever policy is in force.
    pub fn config_map_collector(
        states: &'static [&'static str],
        current: impl Fn() -> &'static str + Send + Sync + 'static,
    ) -> Box<dyn Collector> {
        Self::boxed(OneOf::ConfigMapState, states, current)
    }

    /// A collector of `which`, one series per value of `values`, the current one at 1.
    fn boxed(
        which: OneOf,
        values: &'static [&'static str],
        current: impl Fn() -> &'static str + Send + Sync + 'static,
    ) -> Box<dyn Collector> {
        Box::new(PolicyOrigin {
            which,
            origins: values,
            current: Box::new(current),
        })
    }

    fn encode_with<L: EncodeLabelSet + Clone + Eq + std::hash::Hash + fmt::Debug>(
        &self,
        mut encoder: DescriptorEncoder,
        (name, help): (&str, &str),
        label: impl Fn(&str) -> L,
    ) -> Result<(), fmt::Error> {
        let family = Family::<L, Gauge>::default();
        let current = (self.current)();
        for value in self.origins {
            family
                .get_or_create(&label(value))
                .set(i64::from(*value == current));
        }
        let metric = encoder.encode_descriptor(name, help, None, family.metric_type())?;
        family.encode(metric)
    }
}

impl Collector for PolicyOrigin {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        match self.which {
            OneOf::Origin => self.encode_with(
                encoder,
                (
                    "policy_in_force",
                    "Where the policy in force came from (none: nothing is denied, repaired or preempted)",
                ),
                |v| OriginLabels {
                    origin: v.to_owned(),
                },
            ),
            OneOf::ConfigMapState => self.encode_with(
                encoder,
                (
                    "policy_configmap_state",
                    "What the policy ConfigMap holds as last read: valid (its policy is in force), invalid or missing (an earlier policy, the last good copy or none is in force), unread",
                ),
                |v| StateLabels {
                    state: v.to_owned(),
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use prometheus_client::registry::Registry;

    use super::*;

    use crate::exposition::{assert_contains, assert_lines, encode as exposition};

    /// A registry with the collector `make` builds over a source that reads `first` until the
    /// returned slot is set.
    fn following(
        first: &'static str,
        make: impl FnOnce(Box<dyn Fn() -> &'static str + Send + Sync>) -> Box<dyn Collector>,
    ) -> (Registry, Arc<Mutex<&'static str>>) {
        let live = Arc::new(Mutex::new(first));
        let read = live.clone();
        let mut registry = Registry::with_prefix("resize_guard");
        registry.register_collector(make(Box::new(move || *read.lock().unwrap())));
        (registry, live)
    }

    #[test]
    fn the_origin_gauge_follows_its_source_at_each_scrape() {
        let (registry, live) = following("none", |current| {
            PolicyOrigin::collector(&["configmap", "last-good", "none"], current)
        });
        let text = exposition(&registry);
        assert_lines(
            &text,
            &[
                "# TYPE resize_guard_policy_in_force gauge",
                "resize_guard_policy_in_force{origin=\"configmap\"} 0",
                "resize_guard_policy_in_force{origin=\"last-good\"} 0",
                "resize_guard_policy_in_force{origin=\"none\"} 1",
            ],
        );
        *live.lock().unwrap() = "last-good";
        let text = exposition(&registry);
        assert!(text.contains("resize_guard_policy_in_force{origin=\"last-good\"} 1"));
        assert!(text.contains("resize_guard_policy_in_force{origin=\"none\"} 0"));
    }

    #[test]
    fn the_config_map_state_gauge_follows_its_source_at_each_scrape() {
        let (registry, live) = following("valid", |current| {
            PolicyOrigin::config_map_collector(&["valid", "invalid", "missing", "unread"], current)
        });
        assert_lines(
            &exposition(&registry),
            &[
                "# TYPE resize_guard_policy_configmap_state gauge",
                "resize_guard_policy_configmap_state{state=\"valid\"} 1",
                "resize_guard_policy_configmap_state{state=\"invalid\"} 0",
                "resize_guard_policy_configmap_state{state=\"missing\"} 0",
                "resize_guard_policy_configmap_state{state=\"unread\"} 0",
            ],
        );
        *live.lock().unwrap() = "invalid";
        let text = exposition(&registry);
        assert_contains(
            &text,
            &[
                "resize_guard_policy_configmap_state{state=\"valid\"} 0",
                "resize_guard_policy_configmap_state{state=\"invalid\"} 1",
            ],
        );
    }

    #[test]
    fn the_mode_gauge_reads_zero_until_it_follows_a_source() {
        let mode = PolicyMode::default();
        let mut registry = Registry::with_prefix("resize_guard");
        registry.register_collector(mode.collector());
        assert!(exposition(&registry).contains("resize_guard_policy_mode{mode=\"enforce\"} 0"));
        mode.follow(|| Some(Mode::Enforce));
        let text = exposition(&registry);
        assert_contains(
            &text,
            &[
                "resize_guard_policy_mode{mode=\"enforce\"} 1",
                "resize_guard_policy_mode{mode=\"audit\"} 0",
            ],
        );
    }
}
