//! The controller: a Deferred resize to its victims, the plan that survives a crash, failover
//! between replicas, the brakes (and a breaker tripped by futile plans), a stalled wait, and
//! supervision of its own tasks.

mod basics;
mod breaker;
mod chaos;
mod failover;
mod pending_growth;
mod resume;
mod stall;
mod supervision;
mod tenants;
