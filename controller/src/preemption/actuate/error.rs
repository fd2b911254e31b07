//! Why a write of the preemption actuator was not made or failed: [`WriteError`] for one API
//! write (fenced, or refused by the API server), [`ActuateError`] for carrying out a decision,
//! named after the operation that failed, with a stable [`ActuateError::reason`] for metrics.

use crate::lease::fence::Fenced;
use crate::preemption::seal::KeyError;

/// A write that was not made or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// Not made: this replica does not lead (or stopped leading while it was in flight).
    #[error(transparent)]
    Fenced(#[from] Fenced),
    /// The API server refused or could not be reached.
    #[error("the API request failed")]
    Api(#[source] kube::Error),
}

impl WriteError {
    /// The API server's HTTP status, when it answered.
    pub fn status(&self) -> Option<u16> {
        self.answer().map(|s| s.code)
    }

    /// The API server's answer, when it gave one.
    pub fn answer(&self) -> Option<&kube::core::Status> {
        match self {
            WriteError::Api(kube::Error::Api(e)) => Some(e),
            _ => None,
        }
    }
}

/// Errors carrying out a decision.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ActuateError {
    /// Writing (or clearing) the plan annotation failed.
    #[error("recording the plan on {pod}")]
    RecordPlan {
        /// The preemptor.
        pod: String,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// Reverting an Infeasible resize failed.
    #[error("reverting the Infeasible resize of {pod}")]
    Revert {
        /// The pod.
        pod: String,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// The key that seals plan records could not be had (nothing is resumed or recorded
    /// without it).
    #[error("loading the plan-sealing key")]
    PlanKey(#[source] KeyError),
    /// Preempting a victim failed.
    #[error("preempting {victim}")]
    Preempt {
        /// The victim.
        victim: String,
        /// Why.
        #[source]
        source: WriteError,
    },
}

impl ActuateError {
    /// Stable reason for metrics.
    pub fn reason(&self) -> &'static str {
        let (source, reason) = match self {
            ActuateError::RecordPlan { source, .. } => (Some(source), "RecordPlan"),
            ActuateError::Revert { source, .. } => (Some(source), "Revert"),
            ActuateError::Preempt { source, .. } => (Some(source), "Preempt"),
            ActuateError::PlanKey(KeyError::Create { source, .. }) => (Some(source), "PlanKey"),
            ActuateError::PlanKey(_) => (None, "PlanKey"),
        };
        if matches!(source, Some(WriteError::Fenced(_))) {
            "NotLeader"
        } else {
            reason
        }
    }

    /// The error and its causes, each once, for logs.
    pub fn chain(&self) -> String {
        resize_guard_runtime::error_chain(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_print_each_cause_once() {
        let e = ActuateError::Preempt {
            victim: "batch/v1".into(),
            source: WriteError::Fenced(Fenced::NotLeader),
        };
        let chain = e.chain();
        assert_eq!(chain.matches("not the leader").count(), 1, "{chain}");
        assert!(chain.starts_with("preempting batch/v1: "), "{chain}");
    }
}
