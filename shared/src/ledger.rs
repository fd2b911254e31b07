//! The node ledger: what a node can hold and what each pod on it holds, counted the way the kubelet
//! counts when it admits a resize (`canAdmitPod`, `pkg/kubelet/allocation/allocation_manager.go`).
//!
//! Every active pod holds `max(allocated, actual)` ([`Accounting::Admitted`]): the kubelet ignores
//! other pods' pending growth when it admits a resize (each entry still carries its own pending
//! resize, which may take freed room first). Terminating pods still hold their resources until they
//! are gone (`filterOutInactivePods`); pods in phase `Succeeded`/`Failed` hold nothing. The
//! resizing pod itself is looked up by UID and left out of "used", since it is assessed at its
//! desired size.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;

use crate::pod::{self, PodKey};
use crate::resources::Resources;
use crate::upstream;
use crate::upstream::pending::PendingResize;
use crate::upstream::requests::{Accounting, pod_requests};

/// Label that opts a node out of resize preemption on any cluster version.
pub const PREEMPTION_LABEL: &str = "resize-guard.io/preemption";

/// One pod's line in the ledger.
#[derive(Debug, Clone)]
pub struct LedgerEntry {
    /// Who.
    pub key: PodKey,
    /// `spec.priority`.
    pub priority: i32,
    /// What the kubelet counts for it: `max(allocated, actual)`.
    pub held: Resources,
    /// Deletion has started; the space is on its way back.
    pub terminating: bool,
    /// `status.startTime` (older pods are more important among equals).
    pub start_time: Option<Timestamp>,
    /// Labels (policy selectors and PDBs match on them). Shared: the pods of one ReplicaSet
    /// carry the same set, and a pod cache can keep one copy of it (`cluster::index`).
    pub labels: Option<Arc<BTreeMap<String, String>>>,
    /// System-critical or mirror pod: never a victim.
    pub critical: bool,
    /// Mirror pod of a static pod: cannot be evicted through the API.
    pub mirror: bool,
    /// Its own Deferred resize, waiting in the kubelet's queue ([`crate::upstream::pending`]).
    pub pending: Option<PendingResize>,
    /// `spec.terminationGracePeriodSeconds` (a victim's eviction grace is capped by policy).
    pub grace_seconds: Option<i64>,
    /// Its controlling owner (DaemonSet and bare pods are victims only if the policy says so).
    pub controller: pod::Controller,
}

impl LedgerEntry {
    /// The entry for one pod.
    pub fn new(p: &Pod) -> LedgerEntry {
        LedgerEntry {
            key: PodKey::of(p),
            priority: upstream::pod::priority(p),
            held: pod_requests(p, Accounting::Admitted),
            terminating: pod::is_terminating(p),
            start_time: pod::start_time(p).map(|t| t.0),
            labels: p.metadata.labels.clone().map(Arc::new),
            critical: upstream::pod::is_critical(p),
            mirror: upstream::pod::is_mirror(p),
            pending: PendingResize::of(p),
            grace_seconds: p
                .spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds),
            controller: pod::controller(p),
        }
    }
}

/// A node's capacity and its pods' holdings.
#[derive(Debug, Clone)]
pub struct NodeLedger {
    /// Node name.
    pub node: String,
    /// `status.allocatable` cpu and memory (0 where the node reports none; see
    /// [`NodeLedger::allocatable_unknown`]).
    pub allocatable: Resources,
    /// The same, exact (nano-units, as `Quantity.Cmp` compares them): what upstream's
    /// capacity checks read ([`crate::upstream::capacity`]).
    pub allocatable_exact: crate::upstream::capacity::Exact,
    /// Why the node's allocatable is not known (`reports no status.allocatable`, `reports no
    /// allocatable memory`), if it is not: a node registering, or one whose kubelet has not
    /// reported yet. Nothing is judged against an unknown allocatable (`crate::classify`): every
    /// resize on such a node would otherwise look Infeasible against zero.
    pub allocatable_unknown: Option<String>,
    /// Why resize preemption is disabled on this node, if it is.
    pub opt_out: Option<String>,
    /// `status.declaredFeatures` (v1.35+ kubelets; see [`crate::upstream::node_features`]).
    pub declared_features: Vec<String>,
    /// Active pods bound to the node.
    pub pods: Vec<LedgerEntry>,
}

impl NodeLedger {
    /// Builds the ledger of `node` from any set of pods; pods bound elsewhere and terminal pods
    /// are skipped.
    pub fn new<'a>(node: &Node, pods: impl IntoIterator<Item = &'a Pod>) -> NodeLedger {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let entries = pods
            .into_iter()
            .filter(|p| counts_on(p, name))
            .map(LedgerEntry::new)
            .collect();
        NodeLedger::from_entries(node, entries)
    }

    /// Builds the ledger of `node` from entries the caller already made (and filtered with
    /// [`counts_on`]), e.g. kept up to date from a pod watch.
    pub fn from_entries(node: &Node, entries: Vec<LedgerEntry>) -> NodeLedger {
        let reported = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        NodeLedger {
            allocatable: Resources::from_opt_list(reported),
            allocatable_exact: crate::upstream::capacity::Exact::of_list(reported),
            allocatable_unknown: allocatable_unknown(reported),
            opt_out: node_opt_out(node),
            declared_features: crate::upstream::node_features::declared(node),
            node: node.metadata.name.clone().unwrap_or_default(),
            pods: entries,
        }
    }

    /// The entry of the pod with this UID.
    pub fn entry(&self, uid: &str) -> Option<&LedgerEntry> {
        self.pods.iter().find(|e| e.key.uid == uid)
    }

    /// Everything other pods hold, terminating ones included (the kubelet's "used").
    pub fn used_by_others(&self, uid: &str) -> Resources {
        self.others(uid).map(|e| e.held).sum()
    }

    /// What other terminating pods hold: space that frees itself without new victims.
    pub fn terminating_others(&self, uid: &str) -> Resources {
        self.others(uid)
            .filter(|e| e.terminating)
            .map(|e| e.held)
            .sum()
    }

    /// Pods other than the one with this UID.
    pub fn others<'a>(&'a self, uid: &'a str) -> impl Iterator<Item = &'a LedgerEntry> + 'a {
        self.pods.iter().filter(move |e| e.key.uid != uid)
    }

    /// Allocatable minus everything held (may be negative on an overcommitted node).
    pub fn free(&self) -> Resources {
        self.allocatable - self.pods.iter().map(|e| e.held).sum()
    }
}

/// Why `reported` (a node's `status.allocatable`) does not tell the node's cpu and memory, if it
/// does not.
fn allocatable_unknown(reported: Option<&crate::resources::ResourceList>) -> Option<String> {
    let Some(list) = reported else {
        return Some("reports no status.allocatable".to_owned());
    };
    let missing: Vec<&str> = ["cpu", "memory"]
        .into_iter()
        .filter(|k| !list.contains_key(*k))
        .collect();
    (!missing.is_empty()).then(|| format!("reports no allocatable {}", missing.join(" or ")))
}

/// True when `pod` holds resources on node `node`: bound there and not in a terminal phase.
pub fn counts_on(pod: &Pod, node: &str) -> bool {
    pod::node_name(pod) == Some(node) && !upstream::pod::is_terminal(pod)
}

/// Why a node opted out of resize preemption: the v1.37 alpha field
/// `spec.podPreemptionPolicy.disableResizePreemption` (non-empty list, as upstream's
/// `DeferredPodScheduling` plugin checks) or our label `resize-guard.io/preemption=disabled`.
pub fn node_opt_out(node: &Node) -> Option<String> {
    let owners = node
        .spec
        .as_ref()
        .and_then(|s| s.pod_preemption_policy.as_ref())
        .and_then(|p| p.disable_resize_preemption.as_ref())
        .filter(|o| !o.is_empty());
    if let Some(owners) = owners {
        return Some(format!(
            "node {} disables resize preemption (spec.podPreemptionPolicy.disableResizePreemption: {})",
            node.metadata.name.as_deref().unwrap_or_default(),
            owners.join(", ")
        ));
    }
    let label = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(PREEMPTION_LABEL));
    (label.map(String::as_str) == Some("disabled")).then(|| {
        format!(
            "node {} is labelled {PREEMPTION_LABEL}=disabled",
            node.metadata.name.as_deref().unwrap_or_default()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{node, running};
    use k8s_openapi::api::core::v1::NodePodPreemptionPolicy;

    #[test]
    fn counts_pods_on_this_node_only_and_skips_terminal_ones() {
        let n = node("n1", "1930m", "4Gi");
        let pods = [
            running("a", "n1", "1500m").build(),
            running("b", "n2", "500m").build(),
            running("c", "n1", "100m").phase("Succeeded").build(),
            running("d", "n1", "100m").terminating().build(),
        ];
        let l = NodeLedger::new(&n, &pods);
        assert_eq!(l.pods.len(), 2);
        assert_eq!(l.allocatable.cpu, 1930);
        assert_eq!(l.used_by_others("none").cpu, 1600);
        assert_eq!(l.terminating_others("none").cpu, 100);
        assert_eq!(l.free().cpu, 330);
    }

    #[test]
    fn other_pods_pending_growth_is_not_counted() {
        let n = node("n1", "2", "4Gi");
        let pods = [running("a", "n1", "500m")
            .resize("c", "cpu", "1500m")
            .build()];
        let l = NodeLedger::new(&n, &pods);
        assert_eq!(l.used_by_others("x").cpu, 500);
        assert_eq!(l.used_by_others("ns-a").cpu, 0);
    }

    #[test]
    fn node_opt_out_by_alpha_field_or_label() {
        let mut n = node("n1", "2", "4Gi");
        assert_eq!(node_opt_out(&n), None);
        n.spec.as_mut().unwrap().pod_preemption_policy = Some(NodePodPreemptionPolicy {
            disable_resize_preemption: Some(vec![]),
        });
        assert_eq!(node_opt_out(&n), None, "an empty list does not opt out");
        n.spec.as_mut().unwrap().pod_preemption_policy = Some(NodePodPreemptionPolicy {
            disable_resize_preemption: Some(vec!["autoscaler.example/x".into()]),
        });
        assert!(node_opt_out(&n).unwrap().contains("autoscaler.example/x"));
        let mut m = node("n2", "2", "4Gi");
        m.metadata.labels = Some([(PREEMPTION_LABEL.to_owned(), "disabled".to_owned())].into());
        assert!(node_opt_out(&m).unwrap().contains("n2"));
    }
}
