//! `kubectl resize-guard` against a cluster with resize-guard installed.

mod basics;
mod memory;
mod proxy;
mod tenancy;
