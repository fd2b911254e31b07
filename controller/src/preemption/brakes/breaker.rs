//! The circuit breaker's state per scope (`preemption.circuitBreaker.scope`): the futile plans
//! counted there and the pause they opened. A plan is held by any open breaker it falls under
//! (its namespace's, its node's, the cluster's), so changing the scope never lifts a pause early;
//! futile plans are counted only in the scope the policy names.

use std::collections::VecDeque;
use std::fmt;
use std::time::Instant;

use resize_guard_policy::policy::BreakerScope;

/// What one breaker covers: the key its state is kept (and persisted) under.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reach {
    /// The preemptors of one namespace.
    Namespace(String),
    /// The plans on one node.
    Node(String),
    /// Every plan.
    Cluster,
}

impl Reach {
    /// The breaker `scope` names for a plan of a preemptor in `namespace` on `node`.
    pub fn of(scope: BreakerScope, namespace: &str, node: &str) -> Reach {
        match scope {
            BreakerScope::Namespace => Reach::Namespace(namespace.to_owned()),
            BreakerScope::Node => Reach::Node(node.to_owned()),
            BreakerScope::Cluster => Reach::Cluster,
        }
    }

    /// Every breaker a plan of a preemptor in `namespace` on `node` falls under.
    pub fn all(namespace: &str, node: &str) -> [Reach; 3] {
        [
            Reach::Namespace(namespace.to_owned()),
            Reach::Node(node.to_owned()),
            Reach::Cluster,
        ]
    }

    /// The persisted key: `namespace/<name>`, `node/<name>` or `cluster`.
    pub fn key(&self) -> String {
        match self {
            Reach::Namespace(n) => format!("namespace/{n}"),
            Reach::Node(n) => format!("node/{n}"),
            Reach::Cluster => "cluster".to_owned(),
        }
    }

    /// The reach a persisted key names, if it names one.
    pub fn parse(key: &str) -> Option<Reach> {
        match key.split_once('/') {
            Some(("namespace", n)) if valid_name(n) => Some(Reach::Namespace(n.to_owned())),
            Some(("node", n)) if valid_name(n) => Some(Reach::Node(n.to_owned())),
            None if key == "cluster" => Some(Reach::Cluster),
            _ => None,
        }
    }
}

/// A plausible object name (DNS subdomain length, no separators or controls).
pub(super) fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 253
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
}

impl fmt::Display for Reach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reach::Namespace(n) => write!(f, "namespace {n}"),
            Reach::Node(n) => write!(f, "node {n}"),
            Reach::Cluster => f.write_str("the cluster"),
        }
    }
}

/// One breaker: futile plans within the window, and the pause they opened.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Breaker {
    /// When each futile plan was counted, oldest first.
    pub(super) futile: VecDeque<Instant>,
    /// Open until then.
    pub(super) paused_until: Option<Instant>,
}

impl Breaker {
    /// Nothing counted and not open: equal to no breaker at all.
    pub(super) fn is_idle(&self) -> bool {
        self.futile.is_empty() && self.paused_until.is_none()
    }
}
