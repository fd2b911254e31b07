//! Pods by node, as ledger entries: what a decision reads of the pods on a node, kept up to date
//! from the pod watch so neither a review nor a reconcile re-reads pod specs.
//!
//! The view holds the index behind a `RwLock`: the pod watch writes (apply, delete, relist),
//! decisions (the webhook's reviews, the controller's reconciles) read. Each node's
//! [`NodeLedger`] is built on first use and cached behind the index's own small `RwLock`, so the
//! hot path — a fresh ledger — takes only read locks (the index's and the cache's); building a
//! missing ledger takes the cache's write lock just to insert it. A pod change on a node drops
//! that node's cached ledger (under the index's write lock); a node change is noticed by its
//! resourceVersion. A ledger is built and cached while the index's read lock is held, so no write
//! can slip between reading the entries and caching the result.
//!
//! Memory is what limits a cluster-wide pod cache, so each pod costs one [`LedgerEntry`] and
//! nothing is stored twice: a node's entries are one vector sorted by UID (a node holds at most a
//! few hundred pods, so an insert's shift is cheaper than a tree's nodes), node names are shared
//! between the two maps, and label sets are interned — the pods of one ReplicaSet share one
//! copy ([`LabelSets`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use resize_guard_policy::ledger::{LedgerEntry, NodeLedger, counts_on};
use resize_guard_policy::pod::node_name;

/// A cached ledger and the node resourceVersion it was built from.
type Cached = (Option<String>, Arc<NodeLedger>);

/// A set of pod labels, shared by every pod that carries exactly these labels.
type Labels = Arc<BTreeMap<String, String>>;

/// Interned label sets: one allocation per distinct set. Sets no entry uses any more are swept
/// once the table has doubled since the last sweep (amortised O(1) per insert).
#[derive(Debug, Default)]
struct LabelSets {
    sets: HashSet<Labels>,
    swept_at: usize,
}

impl LabelSets {
    fn intern(&mut self, labels: Labels) -> Labels {
        if let Some(shared) = self.sets.get(labels.as_ref()) {
            return shared.clone();
        }
        if self.sets.len() >= (2 * self.swept_at).max(1024) {
            // Only the table holds them: no entry (and no cached ledger) uses them.
            self.sets.retain(|l| Arc::strong_count(l) > 1);
            self.swept_at = self.sets.len();
        }
        self.sets.insert(labels.clone());
        labels
    }
}

/// A pod UID as a key of the index: the 16 bytes of a UUID in its canonical text form (what
/// the API server assigns: lowercase hex, hyphens at 8, 13, 18 and 23), the text otherwise.
/// 24 bytes in the map instead of a boxed 36-byte string (~40 B a pod, ~6 MiB at 150,000).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Uid {
    Uuid([u8; 16]),
    Text(Box<str>),
}

impl Uid {
    fn of(uid: &str) -> Uid {
        Self::uuid(uid).map_or_else(|| Uid::Text(uid.into()), Uid::Uuid)
    }

    /// The bytes of a canonical lowercase UUID; `None` for any other text, so that two
    /// different UIDs never share a key.
    fn uuid(uid: &str) -> Option<[u8; 16]> {
        let b = uid.as_bytes();
        if b.len() != 36 {
            return None;
        }
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let mut out = [0u8; 16];
        let mut n = 0;
        let mut high = None;
        for (i, &c) in b.iter().enumerate() {
            if matches!(i, 8 | 13 | 18 | 23) {
                if c != b'-' {
                    return None;
                }
                continue;
            }
            let v = nibble(c)?;
            match high.take() {
                None => high = Some(v),
                Some(h) => {
                    *out.get_mut(n)? = (h << 4) | v;
                    n += 1;
                }
            }
        }
        (n == 16).then_some(out)
    }
}

/// Pods grouped by the node they are bound to, kept as ledger entries (what decisions read),
/// with each node's ledger cached until a pod on it or the node itself changes.
#[derive(Debug, Default)]
pub struct PodIndex {
    /// Each node's entries, sorted by UID.
    by_node: HashMap<Arc<str>, Vec<LedgerEntry>>,
    /// The node of each indexed pod, by UID.
    node_of: HashMap<Uid, Arc<str>>,
    labels: LabelSets,
    cache: RwLock<HashMap<Arc<str>, Cached>>,
}

impl PodIndex {
    /// Adds or replaces a pod (a pod in a terminal phase holds nothing and is dropped).
    pub fn apply(&mut self, pod: &Pod) {
        let uid = pod.uid().unwrap_or_default();
        self.delete(&uid);
        let Some(node) = node_name(pod).filter(|n| counts_on(pod, n)) else {
            return;
        };
        let node: Arc<str> = match self.by_node.get_key_value(node) {
            Some((shared, _)) => shared.clone(),
            None => Arc::from(node),
        };
        self.invalidate(&node);
        let mut entry = LedgerEntry::new(pod);
        entry.labels = entry.labels.map(|l| self.labels.intern(l));
        self.node_of.insert(Uid::of(&uid), node.clone());
        let entries = self.by_node.entry(node).or_default();
        match entries.binary_search_by(|e| e.key.uid.as_str().cmp(&uid)) {
            Ok(i) => entries[i] = entry,
            Err(i) => entries.insert(i, entry),
        }
    }

    /// Removes a pod.
    pub fn delete(&mut self, uid: &str) {
        if let Some(node) = self.node_of.remove(&Uid::of(uid)) {
            self.invalidate(&node);
            if let Some(entries) = self.by_node.get_mut(&node) {
                if let Ok(i) = entries.binary_search_by(|e| e.key.uid.as_str().cmp(uid)) {
                    entries.remove(i);
                }
                if entries.is_empty() {
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

    /// The entry of the indexed pod with this UID (bound, not terminal), on any node.
    pub fn entry(&self, uid: &str) -> Option<&LedgerEntry> {
        let entries = self.by_node.get(self.node_of.get(&Uid::of(uid))?)?;
        let i = entries
            .binary_search_by(|e| e.key.uid.as_str().cmp(uid))
            .ok()?;
        entries.get(i)
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
        let entries = self.by_node.get(name).cloned().unwrap_or_default();
        let ledger = Arc::new(NodeLedger::from_entries(node, entries));
        if let Ok(mut cache) = self.cache.write() {
            cache.insert(Arc::from(name), (version.clone(), ledger.clone()));
        }
        ledger
    }

    /// Releases what a full list left spare: each node's vector and the maps grown by doubling
    /// while the list was indexed (about a quarter of the index's memory at 150,000 pods); called
    /// once a relist is complete, before the fresh index is swapped in.
    pub fn compact(&mut self) {
        for entries in self.by_node.values_mut() {
            entries.shrink_to_fit();
        }
        self.by_node.shrink_to_fit();
        self.node_of.shrink_to_fit();
        self.labels.sets.shrink_to_fit();
    }

    /// Number of indexed pods.
    pub fn len(&self) -> usize {
        self.node_of.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.node_of.is_empty()
    }

    /// Number of distinct label sets held (interned).
    pub fn label_sets(&self) -> usize {
        self.labels.sets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resize_guard_policy::fixture::{PodBuilder, container, node, running};

    fn pod(name: &str, node_name: &str, cpu: &str) -> Pod {
        running(name, node_name, cpu).build()
    }

    #[test]
    fn only_a_canonical_uuid_is_packed_so_no_two_uids_share_a_key() {
        let canonical = "0b6a3f2e-9c41-4d7e-8a55-1f2e3d4c5b6a";
        assert!(matches!(Uid::of(canonical), Uid::Uuid(_)));
        for other in [
            "0B6A3F2E-9C41-4D7E-8A55-1F2E3D4C5B6A",
            "0b6a3f2e9c414d7e8a551f2e3d4c5b6a----",
            "0b6a3f2e-9c41-4d7e-8a55-1f2e3d4c5b6",
            "0b6a3f2e-9c41-4d7e-8a55-1f2e3d4c5b6g",
            "uid-1",
            "",
        ] {
            assert_eq!(Uid::of(other), Uid::Text(other.into()), "{other}");
        }
        assert_ne!(
            Uid::of(canonical),
            Uid::of("0b6a3f2e-9c41-4d7e-8a55-1f2e3d4c5b6b")
        );
    }

    #[test]
    fn pods_with_uuid_uids_are_found_and_deleted_by_them() {
        let mut idx = PodIndex::default();
        let mut p = pod("a", "n1", "500m");
        let uid = "0b6a3f2e-9c41-4d7e-8a55-1f2e3d4c5b6a";
        p.metadata.uid = Some(uid.into());
        idx.apply(&p);
        assert_eq!(idx.entry(uid).map(|e| e.key.name.as_str()), Some("a"));
        assert!(idx.entry("0b6a3f2e-9c41-4d7e-8a55-1f2e3d4c5b6b").is_none());
        idx.delete(uid);
        assert!(idx.is_empty() && idx.entry(uid).is_none());
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

    #[test]
    fn pods_with_the_same_labels_share_one_copy_and_entries_are_found_by_uid() {
        let mut idx = PodIndex::default();
        let labelled = |name: &str, node_name: &str| {
            PodBuilder::new("ns", name)
                .node(node_name)
                .label("app", "web")
                .label("pod-template-hash", "abc")
                .container(container("c").guaranteed("100m", "64Mi"))
                .running(0)
                .build()
        };
        for (name, n) in [("a", "n1"), ("b", "n1"), ("c", "n2")] {
            idx.apply(&labelled(name, n));
        }
        idx.apply(&pod("other", "n2", "100m"));
        let (a, c) = (idx.entry("ns-a").unwrap(), idx.entry("ns-c").unwrap());
        assert!(Arc::ptr_eq(
            a.labels.as_ref().unwrap(),
            c.labels.as_ref().unwrap()
        ));
        assert_eq!(c.key.name, "c");
        assert_eq!(idx.label_sets(), 1, "the unlabelled pod adds none");
        // Replacing a pod keeps one entry, in UID order.
        idx.apply(&labelled("b", "n1"));
        let n1 = node("n1", "2", "4Gi");
        let uids: Vec<_> = idx
            .ledger(&n1)
            .pods
            .iter()
            .map(|e| e.key.uid.clone())
            .collect();
        assert_eq!(uids, ["ns-a", "ns-b"]);
        idx.delete("ns-b");
        assert!(idx.entry("ns-b").is_none());
        assert_eq!(idx.len(), 3);
    }

    #[test]
    fn label_sets_no_pod_uses_are_swept() {
        let mut idx = PodIndex::default();
        for i in 0..3000 {
            let p = PodBuilder::new("ns", &format!("p{i}"))
                .node("n1")
                .label("hash", &i.to_string())
                .container(container("c").guaranteed("1m", "1Mi"))
                .running(0)
                .build();
            idx.apply(&p);
            idx.delete(&format!("ns-p{i}"));
        }
        assert!(idx.label_sets() <= 2048, "{}", idx.label_sets());
        assert!(idx.is_empty());
    }
}
