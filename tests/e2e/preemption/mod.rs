//! The controller: a Deferred resize to its victims, the plan that survives a crash, failover
//! between replicas, the brakes, a stalled wait, and supervision of its own tasks.

mod basics;
mod chaos;
mod failover;
mod pending_growth;
mod resume;
mod stall;
mod supervision;
mod tenants;
