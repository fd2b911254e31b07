//! [`FixedCluster`]: a [`Cluster`] of given objects, for tests and benchmarks. Behind the
//! `testing` feature (enabled from dev-dependencies only), so no release build carries it.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use resize_guard_policy::budget::Budgets;
use resize_guard_policy::ledger::NodeLedger;
use resize_guard_policy::policy::Policy;

use crate::Cluster;

/// A fixed cluster: the given nodes, pods, PDBs and policy. Ledgers are built once per node on
/// first use, as [`crate::view`] caches them.
#[derive(Debug, Default)]
pub struct FixedCluster {
    /// The policy in force (`None`: none was read and parsed).
    pub policy: Option<std::sync::Arc<Policy>>,
    /// Nodes.
    pub nodes: Vec<k8s_openapi::api::core::v1::Node>,
    /// Pods (any node).
    pub pods: Vec<Pod>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
    /// Ledgers built so far.
    pub ledgers: std::sync::Mutex<HashMap<String, std::sync::Arc<NodeLedger>>>,
    /// The Kubernetes minor the API server reports (`None`: the newest rules).
    pub minor: Option<u32>,
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
            policy: Some(std::sync::Arc::new(policy)),
            nodes,
            pods,
            pdbs,
            ledgers: Default::default(),
            minor: None,
        }
    }
}

impl Cluster for FixedCluster {
    fn policy(&self) -> Option<std::sync::Arc<Policy>> {
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
    fn budgets(&self) -> std::sync::Arc<Budgets> {
        std::sync::Arc::new(Budgets::new(&self.pdbs))
    }
    fn install_namespace(&self) -> &str {
        "resize-guard"
    }
    fn kubernetes_minor(&self) -> Option<u32> {
        self.minor
    }
}
