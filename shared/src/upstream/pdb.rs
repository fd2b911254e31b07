//! The scheduler's PDB filter: upstream `filterPodsWithPDBViolation`
//! (`pkg/scheduler/framework/preemption/preemption.go`). Walk the pods in the given order,
//! decrement every matching budget's `disruptionsAllowed` (unless the pod is already listed in
//! `status.disruptedPods`), and flag a pod as violating when any of its budgets goes below zero.
//! A budget matches a pod of its own namespace whose labels its selector matches; a budget with
//! an empty or invalid selector matches nothing, and a pod without labels matches none.
//!
//! Which budgets to offer each pod is the caller's (`crate::budget` indexes them by namespace);
//! the rule above decides alone whether one matches.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::upstream::selector::Selector;

/// One PDB, compiled for matching.
#[derive(Debug, Clone)]
pub struct Budget {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    selector: Option<Selector>,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
    disrupted: BTreeSet<String>,
}

impl Budget {
    /// Compiles a PDB (`metav1.LabelSelectorAsSelector`: an invalid selector becomes none).
    pub fn new(pdb: &PodDisruptionBudget) -> Budget {
        let selector = pdb
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .and_then(|ls| Selector::from_label_selector(ls).ok())
            .filter(|s| !s.is_empty());
        let status = pdb.status.as_ref();
        Budget {
            namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
            name: pdb.metadata.name.clone().unwrap_or_default(),
            selector,
            disruptions_allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
            disrupted: status
                .and_then(|s| s.disrupted_pods.as_ref())
                .map(|d| d.keys().cloned().collect())
                .unwrap_or_default(),
        }
    }

    /// True when this budget covers a pod with these namespace and labels.
    pub fn covers(&self, namespace: &str, labels: Option<&BTreeMap<String, String>>) -> bool {
        let has_labels = labels.is_some_and(|l| !l.is_empty());
        has_labels
            && self.namespace == namespace
            && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }
}

/// A pod as far as budgets care.
#[derive(Debug, Clone, Copy)]
pub struct BudgetSubject<'a> {
    /// Namespace.
    pub namespace: &'a str,
    /// Name (budgets list disrupted pods by name).
    pub name: &'a str,
    /// Labels.
    pub labels: Option<&'a BTreeMap<String, String>>,
}

/// Upstream `filterPodsWithPDBViolation`: for `subjects` in the given order, whether evicting
/// each (together with the ones before it) would break a budget. `offered(namespace)` gives the
/// indices into `budgets` that may cover a pod of that namespace, each at most once: all of them
/// will do (an index by namespace only saves the walk; [`Budget::covers`] checks the namespace).
pub fn violations<I>(
    budgets: &[Budget],
    subjects: &[BudgetSubject<'_>],
    offered: impl Fn(&str) -> I,
) -> Vec<bool>
where
    I: IntoIterator<Item = usize>,
{
    let mut allowed: Vec<i32> = budgets.iter().map(|b| b.disruptions_allowed).collect();
    subjects
        .iter()
        .map(|s| {
            let mut violated = false;
            for i in offered(s.namespace) {
                let (Some(b), Some(left)) = (budgets.get(i), allowed.get_mut(i)) else {
                    continue;
                };
                if !b.covers(s.namespace, s.labels) || b.disrupted.contains(s.name) {
                    continue;
                }
                // Go's int32 wraps; so does this, without a debug-build panic.
                *left = left.wrapping_sub(1);
                if *left < 0 {
                    violated = true;
                }
            }
            violated
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::pdb;

    #[test]
    fn a_budget_of_another_namespace_is_never_consumed_even_when_offered() {
        let budgets = [Budget::new(&pdb("other", "db-pdb", ("app", "db"), 0))];
        let labels: BTreeMap<String, String> = [("app".to_owned(), "db".to_owned())].into();
        let subject = |namespace| BudgetSubject {
            namespace,
            name: "a",
            labels: Some(&labels),
        };
        let all = |_: &str| 0..budgets.len();
        assert_eq!(violations(&budgets, &[subject("ns")], all), vec![false]);
        assert_eq!(violations(&budgets, &[subject("other")], all), vec![true]);
    }
}
