//! PodDisruptionBudgets as the preemption code sees them: compiled once, indexed by namespace,
//! asked which budgets cover a pod and which pods in an order would break one.
//!
//! Whether a budget covers a pod and whether an order breaks it are upstream's
//! (`filterPodsWithPDBViolation`, mirrored in [`crate::upstream::pdb`]). What is resize-guard's:
//! a budget only ever covers pods of its own namespace, so [`Budgets`] indexes them by
//! namespace, and judging a pod costs the budgets of its namespace, not every budget of the
//! cluster.

use std::collections::HashMap;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::upstream::pdb::{self, Budget, BudgetSubject};

/// All PDBs of the cluster (or of the namespaces of interest), compiled once and indexed by
/// namespace.
#[derive(Debug, Clone, Default)]
pub struct Budgets {
    budgets: Vec<Budget>,
    /// Indices into `budgets`, per namespace.
    by_namespace: HashMap<String, Vec<usize>>,
}

impl Budgets {
    /// Compiles a set of PDBs.
    pub fn new<'a>(pdbs: impl IntoIterator<Item = &'a PodDisruptionBudget>) -> Budgets {
        let budgets: Vec<Budget> = pdbs.into_iter().map(Budget::new).collect();
        let mut by_namespace: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, b) in budgets.iter().enumerate() {
            by_namespace.entry(b.namespace.clone()).or_default().push(i);
        }
        Budgets {
            budgets,
            by_namespace,
        }
    }

    /// True when there are no budgets.
    pub fn is_empty(&self) -> bool {
        self.budgets.is_empty()
    }

    /// Number of budgets.
    pub fn len(&self) -> usize {
        self.budgets.len()
    }

    /// The budgets of `namespace`, with their indices.
    fn in_namespace<'a>(&'a self, namespace: &str) -> impl Iterator<Item = (usize, &'a Budget)> {
        self.by_namespace
            .get(namespace)
            .into_iter()
            .flatten()
            .map(|&i| (i, &self.budgets[i]))
    }

    /// Names of the budgets covering a pod.
    pub fn covering(&self, subject: BudgetSubject<'_>) -> Vec<&str> {
        self.in_namespace(subject.namespace)
            .filter(|(_, b)| b.covers(subject.namespace, subject.labels))
            .map(|(_, b)| b.name.as_str())
            .collect()
    }

    /// Upstream `filterPodsWithPDBViolation` ([`pdb::violations`]): for pods in the given
    /// order, whether evicting each (together with the ones before it) would break a budget.
    pub fn violations(&self, subjects: &[BudgetSubject<'_>]) -> Vec<bool> {
        pdb::violations(&self.budgets, subjects, |namespace: &str| {
            self.by_namespace
                .get(namespace)
                .into_iter()
                .flatten()
                .copied()
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use k8s_openapi::api::policy::v1::{PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
    use k8s_openapi::jiff::Timestamp;

    fn pdb(ns: &str, app: Option<&str>, allowed: i32, disrupted: &[&str]) -> PodDisruptionBudget {
        let mut p = PodDisruptionBudget::default();
        p.metadata.namespace = Some(ns.into());
        p.metadata.name = Some(format!("pdb-{}", app.unwrap_or("empty")));
        p.spec = Some(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: app.map(|a| [("app".to_owned(), a.to_owned())].into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        p.status = Some(PodDisruptionBudgetStatus {
            disruptions_allowed: Some(allowed),
            disrupted_pods: Some(
                disrupted
                    .iter()
                    .map(|n| ((*n).to_owned(), Time(Timestamp::UNIX_EPOCH)))
                    .collect(),
            ),
            ..Default::default()
        });
        p
    }

    fn labels(app: &str) -> BTreeMap<String, String> {
        [("app".to_owned(), app.to_owned())].into()
    }

    #[test]
    fn budget_is_consumed_in_order_and_then_violated() {
        let b = Budgets::new(&[pdb("ns", Some("db"), 1, &[])]);
        let l = labels("db");
        let s = |name| BudgetSubject {
            namespace: "ns",
            name,
            labels: Some(&l),
        };
        assert_eq!(
            b.violations(&[s("a"), s("b"), s("c")]),
            vec![false, true, true]
        );
    }

    #[test]
    fn already_disrupted_pods_do_not_consume_the_budget() {
        let b = Budgets::new(&[pdb("ns", Some("db"), 0, &["a"])]);
        let l = labels("db");
        let s = |name| BudgetSubject {
            namespace: "ns",
            name,
            labels: Some(&l),
        };
        assert_eq!(b.violations(&[s("a"), s("b")]), vec![false, true]);
    }

    #[test]
    fn other_namespaces_empty_selectors_and_unlabelled_pods_never_match() {
        let b = Budgets::new(&[pdb("other", Some("db"), 0, &[]), pdb("ns", None, 0, &[])]);
        let l = labels("db");
        let subject = BudgetSubject {
            namespace: "ns",
            name: "a",
            labels: Some(&l),
        };
        assert_eq!(b.violations(&[subject]), vec![false]);
        let b = Budgets::new(&[pdb("ns", Some("db"), 0, &[])]);
        let bare = BudgetSubject {
            namespace: "ns",
            name: "a",
            labels: None,
        };
        assert_eq!(b.violations(&[bare]), vec![false]);
        assert_eq!(b.covering(subject), vec!["pdb-db"]);
    }
}
