//! The controller's Lease: who may write.
//!
//! - [`elector`] takes and renews a `coordination.k8s.io/v1` Lease with client-go's semantics
//!   (expiry judged from when this replica observed the record change, never from wall clocks).
//! - [`fence`] is the token that proves leadership: [`fence::Leadership`], extended by each
//!   renewal and checked before every write, so no write outlives the Lease.
//!
//! The work the Lease guards is the wiring's (`crate::leading`): `crate::run` loops
//! `elector.acquire` → `Leading::start` → `elector.keep` until the fence is lost →
//! `Leading::abort`. Nothing here knows what that work is.

pub mod elector;
pub mod fence;
