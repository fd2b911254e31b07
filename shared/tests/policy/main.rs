//! The policy crate's integration tests, one test binary: properties of victim selection,
//! repair and classification ([`properties`]), plans under pending growth against a model of the
//! kubelet's retry ([`pending_growth`]), the fuzz targets for the policy document, quantities
//! and selectors (`fuzz_*`, on `resize_guard_fuzz`'s loop, `fuzz/README.md`; `make fuzz` runs
//! them longer), and the wall around upstream's mirrors ([`upstream_wall`], `make deps-check`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod fuzz_policy;
mod fuzz_quantity;
mod fuzz_selector;
mod pending_growth;
mod properties;
mod upstream_wall;

use std::fmt::Debug;

use proptest::prelude::*;
use resize_guard_fuzz::{self as harness, Case, Fuzz};

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
