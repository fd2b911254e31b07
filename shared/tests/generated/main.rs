//! The policy crate's generated-input tests, one test binary: properties of victim selection,
//! repair and classification ([`properties`]), plans under pending growth against a model of the
//! kubelet's retry ([`pending_growth`]), and the fuzz targets for the policy document, quantities
//! and selectors (`fuzz_*`, `fuzz/README.md`; `make fuzz` runs them longer).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

// Each target uses a part of the fuzz harness.
#[allow(dead_code)]
#[path = "../../../fuzz/harness.rs"]
mod harness;

mod fuzz_policy;
mod fuzz_quantity;
mod fuzz_selector;
mod pending_growth;
mod properties;
