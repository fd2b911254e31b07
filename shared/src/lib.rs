//! # resize-guard-policy
//!
//! Everything resize-guard decides about an in-place pod resize, as pure synchronous functions
//! over k8s-openapi types: the webhook and the controller call the same code, so what one denies
//! the other refuses to act on. No kube client, no async runtime, no HTTP.
//!
//! Data flow: a [`pod`] and a node become a [`ledger::NodeLedger`] (kubelet accounting from
//! [`upstream::requests`]); [`classify::classify`] compares the old and new pod
//! ([`upstream::qos`], feasibility, shortfall) and, for a Deferred resize, asks
//! [`victims::select_victims`] for a plan; the result is a [`verdict::Verdict`] whose
//! [`verdict::Verdict::outcome`] under a [`policy::Policy`] says allow, warn, repair or deny.
//!
//! [`upstream`] holds the code that mirrors upstream Kubernetes line for line (quantities, label
//! selectors, the small pod helpers, QoS, defaulting, validation, the request formula, the
//! kubelet's queue, the victim order, the PDB filter), and callers name it there
//! (`resize_guard_policy::upstream::qos`); everything else is resize-guard's own policy.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod admission;
pub mod admission_probe;
pub mod audience;
pub mod budget;
pub mod classify;
pub mod dry_run;
pub mod event_reason;
#[cfg(any(test, feature = "testing"))]
pub mod fixture;
pub mod ledger;
pub mod memory;
pub mod plan;
pub mod pod;
pub mod policy;
pub mod refusal;
pub mod repair;
pub mod resources;
pub mod upstream;
pub mod usage;
pub mod verdict;
pub mod version;
pub mod victims;
pub mod warning;

pub use classify::{Context, assess, classify};
pub use verdict::{Outcome, Ruling, Verdict};
