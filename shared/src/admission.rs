//! One admission decision for one stage, as a value: [`admit`] takes the stage, the old and new
//! pod and the [`Context`], and returns everything the webhook answers with — allow, deny with a
//! message, or a repaired pod — plus the decision label, the warnings and the audit annotations.
//! The webhook only encodes it (`webhook/src/review.rs`); every branch here is a plain test.
//!
//! The two stages see different objects (ARCHITECTURE.md, "webhook/"): `/mutate` runs before the
//! resize strategy and built-in validation, so it is the only place to explain or repair a QoS
//! change and where an Infeasible resize is refused first; `/validate` sees the final object.
//!
//! **One call per resize.** The default install registers only the mutating webhook, and it
//! judges everything: the resize strategy keeps nothing of a resize but its resources
//! (`dropNonResizeUpdates`, pkg/registry/core/pod/strategy.go), which [`classify`] mirrors, so the
//! mutating stage already judges the resources the pod will have; a later mutating webhook that
//! changes them re-invokes it (`reinvocationPolicy: IfNeeded`). Only what built-in validation
//! will refuse anyway ([`Verdict::Invalid`]) is left to the API server. The validating stage
//! (`deploy/overlays/validating-only`, for clusters that forbid mutating webhooks) acts on the
//! same verdicts except a QoS change, which the API server refuses before it runs.
//!
//! A denial carries the refusal's whole shape ([`crate::refusal`]): where Kubernetes would
//! refuse the resize too (beyond allocatable, a QoS change), its code, reason, details and
//! message, then resize-guard's explanation.
//!
//! A repair is judged again before it is offered: a repaired resize may itself be refused (now
//! Infeasible), and then the stage denies instead.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;

use crate::audience::Audience;
use crate::memory::{MemoryCheck, judge, lowered_limits};
use crate::refusal::{Refusal, cause, pod_name};
use crate::usage::Evidence;
use crate::verdict::clip;
use crate::{Context, Ruling, Verdict, classify};

/// Which webhook is answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// `/mutate`: before the resize strategy and built-in validation.
    Mutate,
    /// `/validate`: the final object.
    Validate,
}

impl Stage {
    /// `mutate` or `validate`.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Mutate => "mutate",
            Stage::Validate => "validate",
        }
    }
}

/// The warning a stage adds to a dry-run answer: its decision label, the same value as its
/// `decision` audit annotation (audit annotations reach only the audit log). This is how
/// `kubectl resize-guard what-if` and `check` learn what resize-guard decided, and how anyone
/// running `kubectl patch --subresource resize --dry-run=server` sees it.
pub fn dry_run_note(stage: Stage, decision: &str) -> String {
    format!("{DRY_RUN_PREFIX}{} decision {decision}", stage.name())
}

/// Reads a [`dry_run_note`] back from a warning: the stage name and the decision.
pub fn parse_dry_run_note(warning: &str) -> Option<(&str, &str)> {
    warning
        .strip_prefix(DRY_RUN_PREFIX)?
        .split_once(" decision ")
}

const DRY_RUN_PREFIX: &str = "resize-guard (dry run): ";

/// What the stage answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Let it through as sent.
    Allow,
    /// Refuse it; `ResizeRejected` Warning Event with the same message.
    Deny {
        /// The status to answer with: code, reason, details and the message for the user (and
        /// the Event), in Kubernetes' shape where Kubernetes would refuse it too
        /// ([`crate::refusal`]).
        refusal: Refusal,
        /// The verdict label it was refused for (the Event's action).
        label: &'static str,
    },
    /// Let it through as `pod` (a QoS repair); `ResizeRepaired` Event.
    Repair {
        /// The repaired pod.
        pod: Box<Pod>,
        /// What was changed, for the `repair` audit annotation.
        describe: String,
    },
}

/// One stage's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    /// What to answer.
    pub effect: Effect,
    /// Decision label for audit annotations, metrics and logs.
    pub decision: String,
    /// Admission warnings.
    pub warnings: Vec<String>,
    /// Audit annotations (the API server prefixes each key with the webhook's name).
    pub annotations: HashMap<String, String>,
    /// Whether this stage acts on the verdict (else it only annotates).
    pub acts: bool,
    /// The resize lowers a memory limit and was judged without usage
    /// ([`Evidence::NotFetched`]): fetch the pod's usage and call [`admit_with`] again.
    pub wants_usage: bool,
}

/// Judges the resize `old` → `new` for `stage`, without the pod's usage: a resize that lowers a
/// memory limit comes back with [`Admission::wants_usage`].
pub fn admit(stage: Stage, old: &Pod, new: &Pod, ctx: &Context<'_>) -> Admission {
    admit_with(stage, old, new, ctx, &Evidence::NotFetched)
}

/// Judges the resize `old` → `new` for `stage` with what is known of the pod's memory usage
/// (the memory rule, [`crate::memory`], judges the pod as it will be admitted: repaired or as
/// sent, and only when nothing else refuses it). Its texts name every pod
/// ([`Audience::Cluster`]); an answer to the pod's user is [`admit_for`].
pub fn admit_with(
    stage: Stage,
    old: &Pod,
    new: &Pod,
    ctx: &Context<'_>,
    usage: &Evidence,
) -> Admission {
    admit_for(stage, old, new, ctx, usage, Audience::Cluster)
}

/// [`admit_with`], answered to `audience`: the warnings, the denial and the audit annotations
/// name only the pods it may see ([`Audience::list`]) and count the rest. The webhook answers
/// the resizing pod's namespace (`request.namespace`), or [`Audience::Unknown`] when its
/// cluster view does not know the pod (ARCHITECTURE.md, "webhook/").
pub fn admit_for(
    stage: Stage,
    old: &Pod,
    new: &Pod,
    ctx: &Context<'_>,
    usage: &Evidence,
    audience: Audience<'_>,
) -> Admission {
    let verdict = classify(old, new, ctx);
    let mut annotations = annotations_for(&verdict, audience);
    // The mutating stage acts on everything but a validation error: built-in validation runs
    // after it and refuses that resize with its own message. The validating stage sees what
    // built-in validation already accepted, so a QoS change or validation error it computes can
    // only be an artefact of objects changed after validation (v1.37.2's PodResizeValidator
    // adds RuntimeClass overhead into a pod-level request spelled as a fraction, sharing the
    // quantity: `applyPodLevelResources` in component-helpers/resource) and is never a reason to
    // deny.
    let acts = match stage {
        Stage::Mutate => !matches!(verdict, Verdict::Invalid(_)),
        Stage::Validate => !matches!(verdict, Verdict::QosChange(_) | Verdict::Invalid(_)),
    };
    if !acts {
        annotations.insert("decision".into(), verdict.label().into());
        return Admission {
            effect: Effect::Allow,
            decision: verdict.label().to_owned(),
            warnings: vec![],
            annotations,
            acts,
            wants_usage: false,
        };
    }
    let outcome = verdict.outcome_for(ctx.policy, audience);
    let mut decision = outcome.decision.clone();
    let mut warnings = outcome.warnings;
    let effect = match outcome.action {
        Ruling::Allow => Effect::Allow,
        Ruling::Deny(message) => Effect::Deny {
            refusal: refusal_for(&verdict, &message, old, new),
            label: verdict.label(),
        },
        Ruling::Repair(fix) => {
            let mut repaired = new.clone();
            if let Some(spec) = repaired.spec.as_mut() {
                fix.apply(spec);
            }
            // The repaired resize must itself be acceptable (it may now be Infeasible).
            let again = classify(old, &repaired, ctx);
            match again.outcome_for(ctx.policy, audience).action {
                Ruling::Deny(message) => {
                    decision = format!("qos-repaired-then-{}", again.label());
                    warnings.clear();
                    Effect::Deny {
                        refusal: refusal_for(&again, &message, old, new),
                        label: again.label(),
                    }
                }
                _ => Effect::Repair {
                    pod: Box::new(repaired),
                    describe: fix.describe(),
                },
            }
        }
    };
    let mut judged = Judged {
        effect,
        decision,
        warnings,
        annotations,
        wants_usage: false,
    };
    if !matches!(verdict, Verdict::Skipped(_)) {
        judged.memory(old, new, ctx, usage);
    }
    let Judged {
        effect,
        decision,
        warnings,
        mut annotations,
        wants_usage,
    } = judged;
    annotations.insert("decision".into(), decision.clone());
    if let Effect::Repair { describe, .. } = &effect {
        annotations.insert("repair".into(), clip(describe, 1024));
    }
    Admission {
        effect,
        decision,
        warnings,
        annotations,
        acts,
        wants_usage,
    }
}

/// An answer being built: the memory rule may still turn it into a denial.
struct Judged {
    effect: Effect,
    decision: String,
    warnings: Vec<String>,
    annotations: HashMap<String, String>,
    wants_usage: bool,
}

impl Judged {
    /// Applies the memory rule to a resize the rest of the policy lets through.
    fn memory(&mut self, old: &Pod, new: &Pod, ctx: &Context<'_>, usage: &Evidence) {
        let admitted = match &self.effect {
            Effect::Deny { .. } => return,
            Effect::Allow => new,
            Effect::Repair { pod, .. } => pod.as_ref(),
        };
        let rule = &ctx.policy.memory.decrease;
        if rule.below_usage == crate::policy::BelowUsage::Allow {
            return;
        }
        let check = judge(lowered_limits(old, admitted), usage, rule);
        if let Some(a) = check.annotation() {
            self.annotations.insert("memory".into(), clip(&a, 1024));
        }
        match &check {
            MemoryCheck::NotApplicable | MemoryCheck::Clear(_) => {}
            MemoryCheck::NeedsUsage(_) => {
                self.wants_usage = true;
                self.warnings.push(clip(&check.summary(), 256));
            }
            MemoryCheck::Unjudged(_) => self.warnings.push(clip(&check.summary(), 256)),
            MemoryCheck::Below { .. } => {
                let reject = rule.below_usage == crate::policy::BelowUsage::Reject;
                if reject && !ctx.policy.is_audit() {
                    self.effect = Effect::Deny {
                        refusal: Refusal::own(
                            cause::MEMORY_BELOW_USAGE,
                            &check.message(rule),
                            &pod_name(new, old),
                        ),
                        label: MemoryCheck::LABEL,
                    };
                    self.decision = MemoryCheck::LABEL.to_owned();
                    self.warnings.clear();
                } else if reject {
                    self.decision = format!("would-deny:{}", MemoryCheck::LABEL);
                    self.warnings.push(clip(
                        &format!(
                            "resize-guard (audit mode) would deny this resize: {}",
                            check.summary().trim_start_matches("resize-guard: ")
                        ),
                        256,
                    ));
                } else {
                    self.warnings.push(clip(&check.summary(), 256));
                }
            }
        }
    }
}

/// The refusal of a resize the policy denies for `verdict`, with `explanation` (resize-guard's
/// words for the pod's audience) in Kubernetes' shape where Kubernetes refuses it too.
fn refusal_for(verdict: &Verdict, explanation: &str, old: &Pod, new: &Pod) -> Refusal {
    let name = pod_name(new, old);
    match verdict {
        Verdict::Infeasible(i) => Refusal::node_capacity(i, explanation, &name),
        Verdict::QosChange(q) => Refusal::qos(q, explanation, old, &name),
        Verdict::Deferred(_) => Refusal::own(cause::DEFERRED_STUCK, explanation, &name),
        // `Verdict::outcome_for` denies nothing else but an invalid quantity.
        _ => Refusal::own(cause::INVALID_QUANTITY, explanation, &name),
    }
}

/// Audit annotations describing the verdict, naming the pods `audience` may see.
fn annotations_for(verdict: &Verdict, audience: Audience<'_>) -> HashMap<String, String> {
    let mut a = HashMap::new();
    match verdict {
        Verdict::Deferred(d) => {
            a.insert("shortfall".into(), d.shortfall.to_string());
            match &d.plan {
                Ok(p) if !p.victims.is_empty() => {
                    a.insert(
                        "victims".into(),
                        clip(&p.victim_names_for(audience, 20), 1024),
                    );
                }
                Ok(p) => {
                    a.insert(
                        "awaiting".into(),
                        clip(&audience.list(p.awaiting.iter(), 20), 1024),
                    );
                }
                Err(why) => {
                    a.insert("no-plan".into(), why.reason().into());
                }
            }
        }
        Verdict::Infeasible(i) => {
            a.insert(
                "infeasible".into(),
                format!(
                    "{} requested {} > allocatable {}",
                    i.resource,
                    i.resource.format(i.requested),
                    i.resource.format(i.allocatable)
                ),
            );
        }
        Verdict::QosChange(q) => {
            a.insert("qos".into(), format!("{}->{}", q.from, q.to));
        }
        Verdict::Invalid(why) => {
            a.insert("invalid".into(), clip(why, 1024));
        }
        // Why resize-guard judged nothing (an excluded namespace, an unknown node, a node that
        // reports no allocatable), for the audit log.
        Verdict::Skipped(why) => {
            a.insert("skipped".into(), clip(why, 1024));
        }
        _ => {}
    }
    a
}

#[cfg(test)]
mod tests;
