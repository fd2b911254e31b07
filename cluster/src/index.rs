//! Pods by node, as ledger entries: what a decision reads of the pods on a node, kept up to date
//! from the pod watch so neither a review nor a reconcile re-reads pod specs.
//!
//! The view holds the index behind a `RwLock`: the pod watch writes (apply, delete, relist),
//! decisions (the webhook's reviews, the controller's reconciles) read. Each node's [`NodeLedger`] is built on first use and cached behind the index's
//! own small `RwLock`, so the hot path — a fresh ledger — takes only read locks (the index's and
//! the cache's); building a missing ledger takes the cache's write lock just to insert it. A pod
//! change on a node drops that node's cached ledger (under the index's write lock); a node change
//! is noticed by its resourceVersion. A ledger is built and cached while the index's read lock is
//! held, so no write can slip between reading the entries and caching the result.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use resize_guard_policy::ledger::{LedgerEntry, NodeLedger, counts_on};
use resize_guard_policy::pod::node_name;

/// A cached ledger and the node resourceVersion it was built from.
type Cached = (Option<String>, Arc<NodeLedger>);

/// Pods grouped by the node they are bound to, kept as ledger entries (what decisions read),
/// with each node's ledger cached until a pod on it or the node itself changes.
#[derive(Debug, Default)]
pub struct PodIndex {
    by_node: HashMap<String, BTreeMap<String, LedgerEntry>>,
    node_of: HashMap<String, String>,
    cache: RwLock<HashMap<String, Cached>>,
}

impl PodIndex {
    /// Adds or replaces a pod (a pod in a terminal phase holds nothing and is dropped).
    pub fn apply(&mut self, pod: &Pod) {
        let uid = pod.uid().unwrap_or_default();
        self.delete(&uid);
        if let Some(node) = node_name(pod)
            .filter(|n| counts_on(pod, n))
            .map(str::to_owned)
        {
            self.invalidate(&node);
            self.node_of.insert(uid.clone(), node.clone());
            self.by_node
                .entry(node)
                .or_default()
                .insert(uid, LedgerEntry::new(pod));
        }
    }

    /// Removes a pod.
    pub fn delete(&mut self, uid: &str) {
        if let Some(node) = self.node_of.remove(uid) {
            self.invalidate(&node);
            if let Some(pods) = self.by_node.get_mut(&node) {
                pods.remove(uid);
                if pods.is_empty() {
                    self.by_node.remove(&node);
                }
            }
        }
    }

    fn invalidate(&mut self, node: &str) {
        // `&mut self`: nobody else can hold the cache lock.
        match self.cache.get_mut() {
            Ok(cache) => {
                cache.remove(node);
            }
            Err(poisoned) => poisoned.into_inner().clear(),
        }
    }

    /// The ledger of `node`, from the cache when neither its pods nor the node (by
    /// resourceVersion) changed since it was built. Takes `&self`: callers share the index.
    pub fn ledger(&self, node: &Node) -> Arc<NodeLedger> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let version = &node.metadata.resource_version;
        if let Ok(cache) = self.cache.read()
            && let Some((v, l)) = cache.get(name)
            && v == version
        {
            return l.clone();
        }
        // Built outside the cache lock: concurrent decisions are not held up. Two decisions on
        // the same stale node may both build it; either result is current.
        let entries = self
            .by_node
            .get(name)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        let ledger = Arc::new(NodeLedger::from_entries(node, entries));
        if let Ok(mut cache) = self.cache.write() {
            cache.insert(name.to_owned(), (version.clone(), ledger.clone()));
        }
        ledger
    }

    /// Number of indexed pods.
    pub fn len(&self) -> usize {
        self.node_of.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.node_of.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resize_guard_policy::fixture::{PodBuilder, container, node};

    fn pod(name: &str, node_name: &str, cpu: &str) -> Pod {
        PodBuilder::new("ns", name)
            .node(node_name)
            .container(container("c").guaranteed(cpu, "64Mi"))
            .running(0)
            .build()
    }

    #[test]
    fn a_fresh_ledger_is_served_from_the_cache_through_a_shared_reference() {
        let mut idx = PodIndex::default();
        idx.apply(&pod("a", "n1", "500m"));
        let n1 = node("n1", "2", "4Gi");
        let shared: &PodIndex = &idx;
        let first = shared.ledger(&n1);
        assert!(Arc::ptr_eq(&first, &shared.ledger(&n1)));
        assert_eq!(first.used_by_others("x").cpu, 500);
    }

    #[test]
    fn a_pod_change_or_a_new_node_version_rebuilds_the_ledger() {
        let mut idx = PodIndex::default();
        idx.apply(&pod("a", "n1", "500m"));
        idx.apply(&pod("b", "n2", "100m"));
        let mut n1 = node("n1", "2", "4Gi");
        let n2 = node("n2", "2", "4Gi");
        let before = idx.ledger(&n1);
        let other = idx.ledger(&n2);
        idx.apply(&pod("c", "n1", "250m"));
        let after = idx.ledger(&n1);
        assert!(!Arc::ptr_eq(&before, &after));
        assert_eq!(after.used_by_others("x").cpu, 750);
        assert!(
            Arc::ptr_eq(&other, &idx.ledger(&n2)),
            "other nodes keep theirs"
        );
        n1.metadata.resource_version = Some("2".into());
        assert!(!Arc::ptr_eq(&after, &idx.ledger(&n1)));
        idx.delete("ns-a");
        assert_eq!(idx.ledger(&n1).used_by_others("x").cpu, 250);
        assert_eq!(idx.len(), 2);
    }

    #[test]
    fn terminal_and_unbound_pods_are_not_indexed() {
        let mut idx = PodIndex::default();
        let done = PodBuilder::new("ns", "done")
            .node("n1")
            .container(container("c").guaranteed("1", "64Mi"))
            .phase("Succeeded")
            .build();
        idx.apply(&done);
        idx.apply(&PodBuilder::new("ns", "pending").build());
        assert!(idx.is_empty());
    }
}
