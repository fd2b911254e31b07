//! The webhook in process, one test binary: its routers on AdmissionReview fixtures and a fixed
//! cluster ([`router`]), and the review path fuzzed on arbitrary bytes, mutated and generated
//! reviews ([`fuzz_review`], `fuzz/README.md`; `make fuzz` runs it longer).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod fuzz_review;
mod router;
