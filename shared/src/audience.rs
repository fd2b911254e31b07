//! Who reads a message, and so which pods it may name.
//!
//! A Deferred resize's answer, its audit annotations and the controller's Events list other
//! pods of the node (victims, terminating pods, pending resizes). Those texts reach whoever may
//! read the resizing pod's namespace: the user who sent the resize (a warning, a denial, a
//! `--dry-run=server` answer), its namespace's Events. A pod of another namespace is named to
//! them only if they could have read it themselves, which resize-guard cannot know, so it is
//! counted instead (`2 pods in other namespaces`). The controller's log and metrics, and the
//! plugin that lists the node's pods with its user's own credentials, keep every name.
//!
//! **What a tenant learns about its node.** The node's name, its allocatable, what the other
//! pods hold in total and the shortfall stay in every text: the kubelet itself writes them into
//! the resizing pod's status for any reader of that pod (`PodResizePending`'s `Node didn't have
//! enough resource: cpu, requested: …, used: …, capacity: …`, `pkg/kubelet/allocation/
//! allocation_manager.go`, `canAdmitPod`), and a pod's spec names its node. How many pods of
//! other namespaces a plan would preempt is a count the tenant's own pod's fate depends on; who
//! they are is not.

use std::fmt;

use crate::pod::PodKey;
use crate::victims::Victim;

/// The readers of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience<'a> {
    /// Readers of every namespace (the controller's log, the plugin's own reads): every pod
    /// is named.
    Cluster,
    /// The users of one namespace: its pods are named, the others counted.
    Namespace(&'a str),
    /// Readers resize-guard cannot place: a review about a pod its cluster view does not know
    /// with that UID on that node (a review's body is unauthenticated content). No pod is
    /// named.
    Unknown,
}

/// Something a message lists by its pod.
pub trait Named: fmt::Display {
    /// The pod.
    fn pod(&self) -> &PodKey;
}

impl Named for PodKey {
    fn pod(&self) -> &PodKey {
        self
    }
}

impl Named for Victim {
    fn pod(&self) -> &PodKey {
        &self.key
    }
}

impl<T: Named + ?Sized> Named for &T {
    fn pod(&self) -> &PodKey {
        (**self).pod()
    }
}

impl Audience<'_> {
    /// Whether `pod` may be named to these readers.
    pub fn may_name(&self, pod: &PodKey) -> bool {
        match self {
            Audience::Cluster => true,
            Audience::Namespace(ns) => pod.namespace == *ns,
            Audience::Unknown => false,
        }
    }

    /// Lists `items` as `ns/a, ns/b and 3 more, and 2 pods in other namespaces`: at most
    /// `limit` names of pods these readers may see, how many of those were left out, then how
    /// many others there are. With every pod visible this is
    /// [`name_list`](crate::victims::name_list)'s `ns/a, ns/b and 3 more`.
    pub fn list<T: Named>(&self, items: impl Iterator<Item = T>, limit: usize) -> String {
        let (shown, hidden): (Vec<T>, Vec<T>) = items.partition(|i| self.may_name(i.pod()));
        let mut out = crate::victims::name_list(shown.iter(), limit);
        let more = shown.len() > limit;
        if !hidden.is_empty() {
            let others = self.others(hidden.len());
            out = match (out.is_empty(), more) {
                (true, _) => others,
                (false, false) => format!("{out} and {others}"),
                (false, true) => format!("{out}, and {others}"),
            };
        }
        out
    }

    /// How many pods of other namespaces: `1 pod in another namespace`, `2 pods in other
    /// namespaces` (`2 pods` for readers resize-guard cannot place).
    fn others(&self, n: usize) -> String {
        let pods = if n == 1 { "pod" } else { "pods" };
        match self {
            Audience::Unknown => format!("{n} {pods}"),
            _ if n == 1 => "1 pod in another namespace".to_owned(),
            _ => format!("{n} {pods} in other namespaces"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::pod_key as key;
    use crate::victims::name_list;

    #[test]
    fn a_namespace_sees_its_own_pods_by_name_and_a_count_of_the_rest() {
        let pods = [key("prod", "a"), key("batch", "x"), key("prod", "b")];
        let ns = Audience::Namespace("prod");
        assert_eq!(
            ns.list(pods.iter(), 5),
            "prod/a, prod/b and 1 pod in another namespace"
        );
        assert_eq!(
            ns.list(pods.iter(), 1),
            "prod/a and 1 more, and 1 pod in another namespace"
        );
        assert_eq!(
            Audience::Namespace("batch").list(pods.iter(), 5),
            "batch/x and 2 pods in other namespaces"
        );
        assert_eq!(
            Audience::Namespace("dev").list(pods.iter(), 5),
            "3 pods in other namespaces"
        );
        assert_eq!(Audience::Unknown.list(pods.iter(), 5), "3 pods");
        assert_eq!(Audience::Unknown.list(pods[..1].iter(), 5), "1 pod");
        assert_eq!(ns.list(std::iter::empty::<&PodKey>(), 5), "");
    }

    #[test]
    fn the_cluster_sees_every_name_as_name_list_writes_them() {
        let pods: Vec<PodKey> = (0..7).map(|i| key(&format!("ns{i}"), "p")).collect();
        for limit in [0, 2, 7, 9] {
            assert_eq!(
                Audience::Cluster.list(pods.iter(), limit),
                name_list(pods.iter(), limit)
            );
        }
    }
}
