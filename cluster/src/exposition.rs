//! What `/metrics` reads from the live view at each scrape, registered the same way by both
//! programs: the mode of the policy in force (`resize_guard_policy_mode`), where that policy came
//! from (`resize_guard_policy_in_force{origin}`), what the policy ConfigMap holds
//! (`resize_guard_policy_configmap_state{state}`), and the cluster's Kubernetes version
//! (`resize_guard_kubernetes_*`, `runtime/src/cluster_version.rs`).

use std::sync::Arc;

use resize_guard_runtime::cluster_version::ClusterVersion;
use resize_guard_runtime::exposition::Exposition;
use resize_guard_runtime::policy_mode::PolicyOrigin;

use crate::policy_source::CONFIG_MAP_STATES;
use crate::view::{ClusterView, POLICY_ORIGINS};

/// Registers the view's and the version's metrics in `exposition`. The view is held weakly: it
/// holds the program's metrics through its callbacks, and a strong handle would keep both alive
/// for ever (the embedded servers of the benchmarks start and stop many).
pub fn expose(view: &Arc<ClusterView>, exposition: &Exposition, version: &ClusterVersion) {
    exposition.register_collector(version.collector());
    let weak = Arc::downgrade(view);
    exposition.follow_policy_mode(move || weak.upgrade()?.policy_in_force().map(|f| f.policy.mode));
    let weak = Arc::downgrade(view);
    exposition.register_collector(PolicyOrigin::collector(POLICY_ORIGINS, move || {
        weak.upgrade().map_or("none", |v| v.policy_origin())
    }));
    let weak = Arc::downgrade(view);
    exposition.register_collector(PolicyOrigin::config_map_collector(
        CONFIG_MAP_STATES,
        move || {
            weak.upgrade()
                .map_or("unread", |v| v.policy_config_map_state())
        },
    ));
}
