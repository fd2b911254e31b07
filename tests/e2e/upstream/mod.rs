//! Upstream behaviour pinned without resize-guard (the platform the product relies on), and
//! upstream's alpha scheduler preemption beside resize-guard's.

mod alpha_preemption;
mod platform;
mod scheduler;
