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

use std::fmt::Debug;

use harness::{Case, Fuzz};
use proptest::prelude::*;

/// The inputs every fuzz target mixes in, of which nothing is known: random bytes up to `bytes`
/// long (weight 1), runs of up to `tokens` words of the target's dictionary (weight
/// `token_weight`) and mutations of its seeds (weight 3).
fn unstructured<E: Default + Clone + Debug + 'static>(
    fuzz: &Fuzz,
    dictionary: &'static [&'static str],
    bytes: usize,
    tokens: usize,
    token_weight: u32,
) -> BoxedStrategy<Case<E>> {
    prop_oneof![
        1 => harness::bytes(bytes).prop_map(Case::raw),
        token_weight => harness::tokens(dictionary, tokens).prop_map(Case::raw),
        3 => fuzz.mutated(dictionary).prop_map(Case::raw),
    ]
    .boxed()
}
