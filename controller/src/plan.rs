//! The preemption plan recorded on the preemptor, so a restarted or newly elected controller
//! resumes the same plan instead of choosing again. The record's type lives in the policy crate
//! ([`resize_guard_policy::plan`]) because `kubectl resize-guard explain` reads it too; when it
//! is written is decided with the plan ([`crate::decision::Record`]).

pub use resize_guard_policy::plan::{PLAN_ANNOTATION, PlanRecord};
