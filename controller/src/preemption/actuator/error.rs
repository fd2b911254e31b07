//! Why carrying out a decision failed: [`ActuateError`], named after the operation that failed
//! (each over one write's [`WriteError`], `crate::preemption::write`), with a stable
//! [`ActuateError::reason`] for metrics. A write the API server forbids (403: RBAC without the
//! grant a policy needs, or one of the ValidatingAdmissionPolicies of
//! `deploy/base/controller-writes.yaml`) gets [`ActuateError::forbidden_note`], the
//! `WriteForbidden` Event's text: what was refused, the API server's own words and the grant to
//! install. A conditional write refused because the object changed since it was read
//! ([`WriteError::precondition_failed`], [`ActuateError::plan_changed`]) is told apart from an
//! invalid one: it is no fault.

use crate::preemption::seal::KeyError;
pub use crate::preemption::write::WriteError;

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
    /// The key that seals plan records could not be had, or a record could not be sealed
    /// with it (nothing is resumed or recorded without it).
    #[error("loading the plan-sealing key or sealing the plan record with it")]
    PlanKey(#[source] KeyError),
    /// A plan reached the actuator without the brakes' admission (a bug in the reconciler):
    /// nothing was written.
    #[error(
        "the plan for {pod} reached the actuator without the brakes' admission; nothing was done"
    )]
    Unadmitted {
        /// The preemptor.
        pod: String,
    },
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

/// Where the grants a policy needs come from (`deploy/components/`, the chart's `rbac.controller`).
const GRANTS: &str = "preemption.pdb: bestEffort needs `delete pods` (kustomize component \
     deploy/components/best-effort-deletes, Helm value rbac.controller.deletePods) and \
     feasibility.revertInfeasible needs `patch pods/resize` (deploy/components/revert-infeasible, \
     rbac.controller.resizePods)";

impl ActuateError {
    /// The write that failed, when one did.
    fn write(&self) -> Option<&WriteError> {
        match self {
            ActuateError::RecordPlan { source, .. }
            | ActuateError::Revert { source, .. }
            | ActuateError::Preempt { source, .. }
            | ActuateError::PlanKey(KeyError::Create { source, .. }) => Some(source),
            ActuateError::PlanKey(_) | ActuateError::Unadmitted { .. } => None,
        }
    }

    /// True when the plan annotation was not written because it no longer held what the
    /// decision read (the pod's author, or another writer, changed it since): no fault, the pod
    /// is read and judged again ([`Actuator::apply`](super::Actuator::apply)).
    pub fn plan_changed(&self) -> bool {
        matches!(self, ActuateError::RecordPlan { source, .. } if source.precondition_failed())
    }

    /// The `WriteForbidden` Event's note when the API server forbade the write (403): nothing
    /// was done past it, and the note says what, why and which grant a policy needs.
    pub fn forbidden_note(&self) -> Option<String> {
        let said = self.write()?.forbidden()?;
        let what = match self {
            ActuateError::Preempt { victim, .. } => format!("preempting {victim}"),
            ActuateError::Revert { .. } => "reverting the Infeasible resize".to_owned(),
            ActuateError::RecordPlan { .. } => "recording the preemption plan".to_owned(),
            ActuateError::PlanKey(_) => "creating the plan-sealing key".to_owned(),
            ActuateError::Unadmitted { .. } => return None,
        };
        Some(format!(
            "resize-guard did nothing more for this resize: the API server forbade {what} (403: \
             {said}). A missing grant: {GRANTS}; `kubectl resize-guard check` lists what the \
             controller lacks."
        ))
    }

    /// Stable reason for metrics.
    pub fn reason(&self) -> &'static str {
        let (source, reason) = match self {
            ActuateError::RecordPlan { source, .. } => (Some(source), "RecordPlan"),
            ActuateError::Revert { source, .. } => (Some(source), "Revert"),
            ActuateError::Preempt { source, .. } => (Some(source), "Preempt"),
            ActuateError::PlanKey(KeyError::Create { source, .. }) => (Some(source), "PlanKey"),
            ActuateError::PlanKey(_) => (None, "PlanKey"),
            ActuateError::Unadmitted { .. } => (None, "Unadmitted"),
        };
        if matches!(source, Some(WriteError::Fenced(_))) {
            "NotLeader"
        } else if source.and_then(WriteError::forbidden).is_some() {
            "Forbidden"
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
    use crate::lease::fence::Fenced;

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

    fn refused(code: u16, message: &str) -> WriteError {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": code, "reason": "Forbidden", "message": message,
        }))
        .unwrap();
        WriteError::Api(kube::Error::Api(Box::new(status)))
    }

    #[test]
    fn a_forbidden_write_names_what_was_refused_the_servers_words_and_the_grant() {
        let said = "pods \"v\" is forbidden: User \"system:serviceaccount:resize-guard:resize-guard-controller\" cannot delete resource \"pods\"";
        let e = ActuateError::Preempt {
            victim: "batch/v".into(),
            source: refused(403, said),
        };
        assert_eq!(e.reason(), "Forbidden");
        let note = e.forbidden_note().unwrap();
        assert!(note.contains("forbade preempting batch/v"), "{note}");
        assert!(note.contains(said), "{note}");
        assert!(
            note.contains("deploy/components/best-effort-deletes"),
            "{note}"
        );
        let revert = ActuateError::Revert {
            pod: "t/app".into(),
            source: refused(403, "denied"),
        };
        assert!(
            revert
                .forbidden_note()
                .unwrap()
                .contains("reverting the Infeasible resize")
        );
        assert!(
            revert
                .forbidden_note()
                .unwrap()
                .contains("deploy/components/revert-infeasible")
        );
        // Anything but a 403 is not a refusal of the grant.
        let other = ActuateError::Preempt {
            victim: "batch/v".into(),
            source: refused(500, "etcd"),
        };
        assert_eq!(other.reason(), "Preempt");
        assert!(other.forbidden_note().is_none());
    }
}
