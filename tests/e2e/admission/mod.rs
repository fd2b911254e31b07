//! The webhook on `pods/resize`: answers, warnings, audit annotations and Events for each kind of
//! resize, the policy it reads, the two webhook layouts, and how it behaves when it is overloaded,
//! restarted or killed.

mod basics;
mod chaos;
mod fidelity;
mod layout;
mod memory;
mod overload;
mod policy;
mod restart;
mod tenancy;
mod validating_only;
