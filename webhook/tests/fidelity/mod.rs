//! The fidelity suite's machinery: a deterministic generator of pods and resizes ([`cases`],
//! [`quantities`], [`rng`]),
//! the named disagreement classes ([`scenarios`]), phase 1 — upstream's answers recorded before
//! resize-guard is installed ([`baseline`]) — and how answers are read and compared ([`answer`]).

pub mod answer;
pub mod baseline;
pub mod cases;
pub mod quantities;
pub mod rng;
pub mod scenarios;
