//! What carrying out a decision came to ([`Outcome`]), for the reconciler to hand to the next
//! decision: the actuator reports, and decides nothing from it (`crate::preemption::reconcile`
//! owns the loop decide → brakes → apply → outcome). An eviction the API server refused is told
//! apart here by the answer alone ([`Refusal::of`]); what the refusal means for the plan is the
//! decision's (`crate::preemption::decision::eviction_refused`).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use resize_guard_policy::pod::PodKey;

/// How carrying out one decision ended, short of an error.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Carried out whole.
    Done,
    /// The plan annotation no longer held what the decision read (the pod's author, or another
    /// writer, changed it since): nothing was written from there on, no victim touched. No
    /// fault: the pod is read and judged again.
    PlanChanged,
    /// The Eviction API refused `victim`; no later victim was touched.
    Refused {
        /// The victim.
        victim: PodKey,
        /// What the answer says.
        refusal: Refusal,
        /// The pod as this plan's own record left it, when the plan recorded itself before its
        /// evictions (what a clear of that record tests for).
        written: Option<Box<Pod>>,
    },
}

/// An eviction the API server refused, by its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A PodDisruptionBudget refused it; `detail` is the API server's own account (the budget
    /// and its numbers), empty when it gave none.
    Budget {
        /// The API server's words.
        detail: String,
    },
    /// The API server is throttling or briefly unavailable; the eviction was not carried out.
    Throttled {
        /// The HTTP status (429, 503 or 504).
        code: u16,
        /// The answer's message.
        message: String,
        /// How long the server asks to wait (`details.retryAfterSeconds`; zero when it asks
        /// nothing).
        retry_after: Duration,
    },
}

impl Refusal {
    /// The refusal `answer` (the Eviction API's) is, if it is one:
    /// - a `DisruptionBudget` cause (upstream `createTooManyRequestsError` and
    ///   `checkAndDecrement`, `pkg/registry/core/pod/storage/eviction.go`: a budget allows no
    ///   disruption, or its status is still being computed) → [`Refusal::Budget`];
    /// - a 500 saying more than one budget covers the victim (upstream `EvictionREST.Create`
    ///   answers so, with no cause) → [`Refusal::Budget`] too;
    /// - any other 429, or a 503/504 (API Priority and Fairness, an overloaded or restarting
    ///   server) → [`Refusal::Throttled`];
    /// - anything else is not a refusal: `None` (an error, retried with back-off).
    ///
    /// The client does not retry evictions (`resize_guard_runtime::api_client`), so the answer
    /// is the server's own.
    pub fn of(answer: &kube::core::Status) -> Option<Refusal> {
        const DISRUPTION_BUDGET: &str = "DisruptionBudget";
        let details = answer.details.as_ref();
        let causes = details.map(|d| d.causes.as_slice()).unwrap_or_default();
        if answer.code == 429 && causes.iter().any(|c| c.reason == DISRUPTION_BUDGET) {
            let detail = causes
                .iter()
                .filter(|c| c.reason == DISRUPTION_BUDGET && !c.message.is_empty())
                .map(|c| c.message.as_str())
                .collect::<Vec<_>>()
                .join("; ");
            return Some(Refusal::Budget { detail });
        }
        if answer.code == 500 && answer.message.contains("more than one PodDisruptionBudget") {
            return Some(Refusal::Budget {
                detail: answer.message.clone(),
            });
        }
        if !matches!(answer.code, 429 | 503 | 504) {
            return None;
        }
        let retry_after = details
            .map(|d| Duration::from_secs(u64::from(d.retry_after_seconds)))
            .unwrap_or_default();
        Some(Refusal::Throttled {
            code: answer.code,
            message: answer.message.clone(),
            retry_after,
        })
    }
}
