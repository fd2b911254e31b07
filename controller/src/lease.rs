//! The controller's Lease: who may write, and the work that right guards.
//!
//! - [`elector`] takes and renews a `coordination.k8s.io/v1` Lease with client-go's semantics
//!   (expiry judged from when this replica observed the record change, never from wall clocks).
//! - [`fence`] is the token that proves leadership: [`fence::Leadership`], extended by each
//!   renewal and checked before every write, so no write outlives the Lease.
//! - [`duties`] is the work only the holder does (the preemption controller, the certificate
//!   manager, the last good policy copy, the deferred-pods gauge), started on gaining the
//!   Lease and stopped on losing it.
//!
//! Data flow: `crate::run` loops `elector.acquire` → `Leading::start` → `elector.keep` until the
//! fence is lost → `Leading::abort`.

pub mod duties;
pub mod elector;
pub mod fence;
