//! `kubectl resize-guard` against a cluster with resize-guard installed.

mod basics;
mod command;
mod completion;
mod documents;
mod lifecycle;
mod memory;
mod proxy;
mod tenancy;
