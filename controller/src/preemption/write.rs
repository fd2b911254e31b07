//! Why one write of the preemption controller was not made or failed: [`WriteError`], fenced
//! (this replica does not lead) or refused by the API server, with what the answer says (its
//! status, a 403's message, a JSON Patch whose `test` no longer held). Below the actuator and the
//! plan seal, both of which write (`crate::preemption::actuator`, `crate::preemption::seal`).

use crate::lease::fence::Fenced;

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

    /// The API server's message when it forbade the write (403).
    pub fn forbidden(&self) -> Option<&str> {
        self.answer()
            .filter(|s| s.code == 403)
            .map(|s| s.message.as_str())
    }

    /// True when the API server refused a JSON Patch write because the patch did not apply to
    /// the object as it now is — for the plan patch, whose operations apply whenever its `test`s
    /// pass, a failed precondition: the object changed since it was read, nothing was written.
    /// kube-apiserver answers a patch that does not apply with 422 `Invalid`, a generic message
    /// and no causes (upstream `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go`
    /// `jsonPatcher.applyJSPatch`, `NewGenericServerResponse`), unlike an invalid object, which it
    /// answers with 422 `Invalid` listing the offending fields as causes (`NewInvalid`).
    pub fn precondition_failed(&self) -> bool {
        self.answer().is_some_and(|s| {
            s.code == 422
                && s.reason == "Invalid"
                && s.details.as_ref().is_none_or(|d| d.causes.is_empty())
        })
    }

    /// The API server's answer, when it gave one.
    pub fn answer(&self) -> Option<&kube::core::Status> {
        match self {
            WriteError::Api(kube::Error::Api(e)) => Some(e),
            _ => None,
        }
    }
}
