//! What `/metrics` reads from the live view at each scrape, registered the same way by both
//! programs: the mode of the policy in force (`resize_guard_policy_mode`), where that policy came
//! from (`resize_guard_policy_in_force{origin}`), what the policy ConfigMap holds
//! (`resize_guard_policy_configmap_state{state}`), and the cluster's Kubernetes version
//! (`resize_guard_kubernetes_*`, `runtime/src/cluster_version.rs`).

use std::sync::Arc;

use resize_guard_policy::policy::Mode;
use resize_guard_runtime::cluster_version::ClusterVersion;
use resize_guard_runtime::exposition::Exposition;
use resize_guard_runtime::policy_mode::PolicyOrigin;

use crate::policy_source::CONFIG_MAP_STATES;
use crate::view::{ClusterView, POLICY_ORIGINS};

/// Registers the view's and the version's metrics in `exposition`. The view is held weakly: it
/// holds the program's metrics through its callbacks, and a strong handle would keep both alive
/// for ever (the embedded servers of the benchmarks start and stop many).
pub fn expose(view: &Arc<ClusterView>, exposition: &Exposition, version: &ClusterVersion) {
    let (mode, origin, state) = (
        Arc::downgrade(view),
        Arc::downgrade(view),
        Arc::downgrade(view),
    );
    register(
        exposition,
        version,
        Readings {
            mode: Box::new(move || mode.upgrade()?.policy_in_force().map(|f| f.policy.mode)),
            origin: Box::new(move || origin.upgrade().map_or("none", |v| v.policy_origin())),
            config_map_state: Box::new(move || {
                state
                    .upgrade()
                    .map_or("unread", |v| v.policy_config_map_state())
            }),
        },
    );
}

/// What the view's metrics read at each scrape ([`expose`] reads them from the view).
pub struct Readings {
    /// The mode of the policy in force, `None` while none is.
    pub mode: Box<dyn Fn() -> Option<Mode> + Send + Sync>,
    /// Where the policy in force came from (one of `POLICY_ORIGINS`).
    pub origin: Box<dyn Fn() -> &'static str + Send + Sync>,
    /// What the policy ConfigMap holds as last read (one of `CONFIG_MAP_STATES`).
    pub config_map_state: Box<dyn Fn() -> &'static str + Send + Sync>,
}

/// Registers the metrics [`expose`] registers, read from `readings`: what the programs serve,
/// and what the generated metrics reference (`docs/tool`) builds without a cluster.
pub fn register(exposition: &Exposition, version: &ClusterVersion, readings: Readings) {
    exposition.register_collector(version.collector());
    exposition.follow_policy_mode(readings.mode);
    exposition.register_collector(PolicyOrigin::collector(POLICY_ORIGINS, readings.origin));
    exposition.register_collector(PolicyOrigin::config_map_collector(
        CONFIG_MAP_STATES,
        readings.config_map_state,
    ));
}
