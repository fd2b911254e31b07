//! # resize-guard-cluster
//!
//! What both programs know about the cluster, behind one trait: [`Cluster`] gives the policy in
//! force, a node's [`NodeLedger`] and the PodDisruptionBudgets. [`view::ClusterView`] implements
//! it from live watches (objects [`trim`]med on arrival, pods in an [`index::PodIndex`], each
//! watch's [`watch_health`] behind readiness); [`FixedCluster`] from given objects (tests,
//! benchmarks, what-if checks).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod index;
pub mod jitter;
pub mod process;
pub mod trim;
pub mod view;
pub mod watch_health;

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use resize_guard_policy::budget::Budgets;
use resize_guard_policy::ledger::NodeLedger;
use resize_guard_policy::policy::Policy;

pub use view::{ClusterView, PolicyReloadHook, ViewConfig};
pub use watch_health::{WatchErrorHook, Watched};

pub use process::parse_duration;

/// What a review needs from the cluster.
pub trait Cluster: Send + Sync {
    /// The policy in force.
    fn policy(&self) -> std::sync::Arc<Policy>;
    /// The ledger of a node, if the node is known.
    fn ledger(&self, node: &str) -> Option<std::sync::Arc<NodeLedger>>;
    /// All PodDisruptionBudgets.
    fn budgets(&self) -> Budgets;
    /// resize-guard's namespace.
    fn install_namespace(&self) -> &str;
}

/// A fixed cluster: the given nodes, pods, PDBs and policy. For tests, benchmarks and offline
/// what-if checks. Ledgers are built once per node on first use, as [`crate::view`] caches them.
#[derive(Debug, Default)]
pub struct FixedCluster {
    /// The policy.
    pub policy: std::sync::Arc<Policy>,
    /// Nodes.
    pub nodes: Vec<k8s_openapi::api::core::v1::Node>,
    /// Pods (any node).
    pub pods: Vec<Pod>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
    /// Ledgers built so far.
    pub ledgers: std::sync::Mutex<HashMap<String, std::sync::Arc<NodeLedger>>>,
}

impl FixedCluster {
    /// A cluster of these objects.
    pub fn new(
        policy: Policy,
        nodes: Vec<k8s_openapi::api::core::v1::Node>,
        pods: Vec<Pod>,
        pdbs: Vec<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
    ) -> FixedCluster {
        FixedCluster {
            policy: std::sync::Arc::new(policy),
            nodes,
            pods,
            pdbs,
            ledgers: Default::default(),
        }
    }
}

impl Cluster for FixedCluster {
    fn policy(&self) -> std::sync::Arc<Policy> {
        self.policy.clone()
    }
    fn ledger(&self, name: &str) -> Option<std::sync::Arc<NodeLedger>> {
        let mut cache = self.ledgers.lock().ok()?;
        if let Some(l) = cache.get(name) {
            return Some(l.clone());
        }
        let n = self
            .nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))?;
        let l = std::sync::Arc::new(NodeLedger::new(n, &self.pods));
        cache.insert(name.to_owned(), l.clone());
        Some(l)
    }
    fn budgets(&self) -> Budgets {
        Budgets::new(&self.pdbs)
    }
    fn install_namespace(&self) -> &str {
        "resize-guard"
    }
}
