//! # resize-guard-cluster
//!
//! What both programs know about the cluster, behind one trait: [`Cluster`] gives the policy in
//! force, a node's [`NodeLedger`] and the PodDisruptionBudgets. [`view::ClusterView`] implements
//! it from live watches (objects [`trim`]med on arrival, pods in an [`index::PodIndex`], each
//! watch's [`watch_health`] behind readiness, every watch task under the process's
//! `resize_guard_runtime::supervisor`); `FixedCluster` (behind the `testing` feature) from given
//! objects, for tests and benchmarks.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod exposition;
#[cfg(any(test, feature = "testing"))]
mod fixed;
pub mod index;
pub mod lean;
pub mod policy_source;
pub mod trim;
pub mod view;
pub mod watch_health;

use resize_guard_policy::budget::Budgets;
use resize_guard_policy::ledger::NodeLedger;
use resize_guard_policy::policy::Policy;

#[cfg(any(test, feature = "testing"))]
pub use fixed::FixedCluster;
pub use view::{ClusterView, PolicyReloadHook, ViewConfig};
pub use watch_health::{WatchErrorHook, Watched};

/// What a decision needs from the cluster: an admission review's or a reconcile's.
pub trait Cluster: Send + Sync {
    /// The policy in force; `None` when resize-guard has read and parsed none (then nothing
    /// is denied, repaired or preempted).
    fn policy(&self) -> Option<std::sync::Arc<Policy>>;
    /// Why [`Cluster::policy`] is `None`, for warnings and annotations.
    fn no_policy_reason(&self) -> String {
        "no policy in force".to_owned()
    }
    /// The ledger of a node, if the node is known.
    fn ledger(&self, node: &str) -> Option<std::sync::Arc<NodeLedger>>;
    /// All PodDisruptionBudgets, compiled (shared: a decision never recompiles them).
    fn budgets(&self) -> std::sync::Arc<Budgets>;
    /// resize-guard's namespace.
    fn install_namespace(&self) -> &str;
    /// The API server's Kubernetes minor (35 for v1.35), once known; `None` judges by the
    /// newest rules.
    fn kubernetes_minor(&self) -> Option<u32> {
        None
    }
}
