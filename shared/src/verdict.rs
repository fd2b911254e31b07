//! The result of classifying a resize, its human messages, and what to do about it under a
//! policy.
//!
//! Messages quote the kubelet's own wording where it has one (`Node didn't have enough
//! capacity: …` for Infeasible, `Node didn't have enough resource: …` for Deferred, from
//! `allocation_manager.go` and `lifecycle/predicate.go`), so a user can match our warning to the
//! condition the kubelet will set.

use crate::audience::Audience;
use crate::policy::{OnQosChange, Policy};
use crate::repair::{Culprit, QosRepair};
use crate::resources::Resources;
use crate::upstream::capacity::Excess;
use crate::upstream::qos::QosClass;
use crate::upstream::quantity::ResourceName;
use crate::victims::{NoPlan, PreemptionPlan};

/// How many pod names a message lists before "and N more".
pub const NAMES_IN_MESSAGES: usize = 5;

/// A resize that fits on its node now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fit {
    /// Node name.
    pub node: String,
    /// The pod's request after the resize (kubelet view).
    pub request: Resources,
    /// What other pods hold.
    pub used: Resources,
    /// Node allocatable.
    pub allocatable: Resources,
}

/// A resize the kubelet will mark `Deferred`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferral {
    /// Node name.
    pub node: String,
    /// The pod's request after the resize (kubelet view).
    pub request: Resources,
    /// What other pods hold.
    pub used: Resources,
    /// Node allocatable.
    pub allocatable: Resources,
    /// What is missing: `request + used - allocatable`, per resource.
    pub shortfall: Resources,
    /// How resize-guard can make room, or why it cannot.
    pub plan: Result<PreemptionPlan, NoPlan>,
}

impl Deferral {
    /// The message the kubelet will put on `PodResizePending` (first resource short, cpu first,
    /// as `InsufficientResourceError.Error()`: millicores for cpu, bytes for memory).
    pub fn kubelet_message(&self) -> String {
        let name = if self.shortfall.cpu > 0 {
            ResourceName::Cpu
        } else {
            ResourceName::Memory
        };
        format!(
            "Node didn't have enough resource: {name}, requested: {}, used: {}, capacity: {}",
            self.request.get(name),
            self.used.get(name),
            self.allocatable.get(name)
        )
    }

    /// True when a plan exists (victims to preempt, or terminating pods already on their way).
    pub fn resolvable(&self) -> bool {
        self.plan.is_ok()
    }

    /// What the node lacks, in words: `cpu 500m and memory 1Gi`.
    pub fn shortfall_text(&self) -> String {
        self.shortfall.positive_text()
    }
}

/// A resize larger than the node could ever hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Infeasibility {
    /// Node name.
    pub node: String,
    /// The resource that does not fit (memory is reported first, as the kubelet does).
    pub resource: ResourceName,
    /// The pod's total request of it.
    pub requested: i64,
    /// The node's allocatable of it.
    pub allocatable: i64,
    /// Every resource the pod requests more of than the node's allocatable, cpu first, as the
    /// cluster's minor compares them (`PodResizeValidator` on v1.36+, the kubelet on
    /// v1.33–v1.35: [`crate::upstream::capacity`]).
    pub beyond: Vec<Excess>,
    /// The Kubernetes minor it was judged for (`None`: the newest), which decides what
    /// Kubernetes itself does with it (the messages say so).
    pub minor: Option<u32>,
}

impl Infeasibility {
    /// The `PodResizePending` message a v1.33–v1.35 kubelet sets for it
    /// (`allocation_manager.go`); v1.36+ kubelets no longer mark capacity-Infeasible resizes,
    /// and the API server refuses them first (`NodeCapacity`).
    pub fn kubelet_message(&self) -> String {
        format!(
            "Node didn't have enough capacity: {}, requested: {}, capacity: {}",
            self.resource, self.requested, self.allocatable
        )
    }

    /// Whether the API server itself refuses it (`PodResizeValidator`, v1.36+).
    pub fn refused_by_api_server(&self) -> bool {
        self.minor.is_none_or(|m| m >= 36)
    }

    /// resize-guard's explanation, true for [`minor`](Self::minor): what the pod asks, what the
    /// node has, what Kubernetes does with it, and what to do instead.
    pub fn explanation(&self) -> String {
        // `beyond` is never empty as `classify` builds it; a hand-built value names `resource`.
        let single = [Excess {
            resource: self.resource,
            requested: self.requested,
            allocatable: self.allocatable,
        }];
        let excess = if self.beyond.is_empty() {
            &single[..]
        } else {
            &self.beyond[..]
        };
        let wants = excess
            .iter()
            .map(|e| {
                format!(
                    "{res} {req} but the node's allocatable {res} is {cap}",
                    res = e.resource,
                    req = e.resource.format(e.requested),
                    cap = e.resource.format(e.allocatable)
                )
            })
            .collect::<Vec<_>>()
            .join(", and ");
        let at_most = excess
            .iter()
            .map(|e| format!("{} {}", e.resource.format(e.allocatable), e.resource))
            .collect::<Vec<_>>()
            .join(" and ");
        let kubernetes = match self.minor {
            Some(m) if m < 36 => format!(
                "Kubernetes v1.{m} would store it and the kubelet would mark it Infeasible \
                 (\"{}\") and never apply it, leaving spec and status apart",
                self.kubelet_message()
            ),
            Some(m) => format!(
                "Kubernetes v1.{m} refuses it itself (PodResizeValidator), and no kubelet would \
                 ever apply it"
            ),
            None => "Kubernetes v1.36 and later refuse it themselves (PodResizeValidator), and \
                     no kubelet would ever apply it"
                .to_owned(),
        };
        format!(
            "resize-guard: this resize can never fit on node {node}: the pod would request \
             {wants}; {kubernetes}. Request at most {at_most} for the whole pod, or move the \
             workload to a larger node.",
            node = self.node,
        )
    }
}

/// A resize that would change the pod's QoS class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QosChange {
    /// The class the pod has.
    pub from: QosClass,
    /// The class the resize would give it.
    pub to: QosClass,
    /// What moves it.
    pub culprits: Vec<Culprit>,
    /// A minimal change that keeps the class, when one exists (and passes validation).
    pub repair: Option<QosRepair>,
    /// Another built-in validation error the API server reports with the QoS one, if any
    /// (e.g. a request raised above its limit), in upstream's words.
    pub also_invalid: Option<crate::upstream::validation::Invalidities>,
}

/// A resize refused for what it is, regardless of the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// A cpu or memory quantity is not valid syntax.
    InvalidQuantity(String),
}

/// What a resize is, as far as resize-guard is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// cpu and memory requests and limits are unchanged, and built-in validation lets the
    /// resize through (otherwise it is [`Verdict::Invalid`]).
    NoChange,
    /// resize-guard does not judge this pod (excluded namespace, not on a known node).
    Skipped(String),
    /// The node has room now.
    Fits(Fit),
    /// The node is full now; the kubelet will wait.
    Deferred(Deferral),
    /// The node can never hold it.
    Infeasible(Infeasibility),
    /// The QoS class would change; the API server refuses that.
    QosChange(QosChange),
    /// Refused outright.
    Denied(Denial),
    /// Kubernetes itself will refuse it for something other than a QoS change (built-in
    /// validation or `NodeDeclaredFeatureValidator`, quoted): resize-guard lets it through so
    /// the user sees the API server's own message.
    Invalid(String),
}

/// What the policy rules for a resize: let it through, refuse it, or repair it first (what the
/// admission webhook answers with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ruling {
    /// Let it through.
    Allow,
    /// Refuse it with this message.
    Deny(String),
    /// Apply this repair, then let it through.
    Repair(QosRepair),
}

/// The ruling, the warnings for the user, and a short decision label for audit annotations and
/// metrics (`infeasible`, `would-deny:infeasible`, `deferred-preemptible`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What to do: the ruling.
    pub action: Ruling,
    /// Admission warnings.
    pub warnings: Vec<String>,
    /// Label.
    pub decision: String,
}

impl Verdict {
    /// A short label for the verdict itself.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::NoChange => "no-change",
            Verdict::Skipped(_) => "skipped",
            Verdict::Fits(_) => "fits",
            Verdict::Deferred(d) => match &d.plan {
                Ok(p) if p.victims.is_empty() => "deferred-awaiting-termination",
                Ok(_) => "deferred-preemptible",
                Err(_) => "deferred-stuck",
            },
            Verdict::Infeasible(_) => "infeasible",
            Verdict::QosChange(_) => "qos-change",
            Verdict::Denied(_) => "denied",
            Verdict::Invalid(_) => "invalid",
        }
    }

    /// The human explanation of the verdict, naming every pod (for readers of every
    /// namespace: [`Audience::Cluster`]).
    pub fn message(&self) -> String {
        self.message_for(Audience::Cluster)
    }

    /// The human explanation of the verdict for `audience`: other pods (victims, terminating
    /// pods, pending resizes) are named only where it may see them, and counted otherwise.
    pub fn message_for(&self, audience: Audience<'_>) -> String {
        match self {
            Verdict::NoChange => "resize changes no cpu or memory value".to_owned(),
            Verdict::Skipped(why) => format!("resize-guard skipped this pod: {why}"),
            Verdict::Fits(f) => format!(
                "resize fits on node {}: pod requests {}, other pods hold {}, allocatable {}",
                f.node, f.request, f.used, f.allocatable
            ),
            Verdict::Deferred(d) => deferred_message(d, audience),
            Verdict::Infeasible(i) => i.explanation(),
            Verdict::QosChange(q) => qos_message(q),
            Verdict::Denied(Denial::InvalidQuantity(e)) => format!("resize-guard: {e}"),
            Verdict::Invalid(why) => {
                format!(
                    "the API server refuses this resize itself ({why}); resize-guard stays out of its way"
                )
            }
        }
    }

    /// A one-line form for admission warnings, which the API server may cut after 256
    /// characters: what happens and what resize-guard will do, without the kubelet quote.
    pub fn summary(&self) -> String {
        self.summary_for(Audience::Cluster)
    }

    /// [`summary`](Self::summary) for `audience` (see [`message_for`](Self::message_for)).
    pub fn summary_for(&self, audience: Audience<'_>) -> String {
        let text = match self {
            Verdict::Deferred(d) => {
                let head = format!(
                    "node {} lacks {}; the resize will be Deferred",
                    d.node,
                    d.shortfall_text()
                );
                match &d.plan {
                    Ok(p) if p.victims.is_empty() => format!(
                        "{head} until terminating pods {} are gone",
                        audience.list(p.awaiting.iter(), 2)
                    ),
                    Ok(p) => format!(
                        "{head}; resize-guard will preempt {}",
                        p.victim_names_for(audience, 2)
                    ),
                    Err(why) => format!("{head} and wait: {}", why.brief()),
                }
            }
            Verdict::Infeasible(i) => format!(
                "{} {} exceeds node {} allocatable {}; it can never fit there",
                i.resource,
                i.resource.format(i.requested),
                i.node,
                i.resource.format(i.allocatable)
            ),
            Verdict::QosChange(q) => {
                format!("resize would change QoS class {} -> {}", q.from, q.to)
            }
            other => other.message_for(audience),
        };
        clip(&format!("resize-guard: {text}"), 256)
    }

    /// What to do under `policy`. In audit mode nothing is denied or repaired: the would-be
    /// ruling becomes a warning and the decision label starts with `would-`.
    pub fn outcome(&self, policy: &Policy) -> Outcome {
        self.outcome_for(policy, Audience::Cluster)
    }

    /// [`outcome`](Self::outcome) with its messages for `audience` (see
    /// [`message_for`](Self::message_for)): what the admission webhook answers the pod's user.
    pub fn outcome_for(&self, policy: &Policy, audience: Audience<'_>) -> Outcome {
        let label = self.label().to_owned();
        let allow = |warnings: Vec<String>| Outcome {
            action: Ruling::Allow,
            warnings,
            decision: label.clone(),
        };
        let enforced = match self {
            Verdict::NoChange | Verdict::Skipped(_) | Verdict::Fits(_) | Verdict::Invalid(_) => {
                allow(vec![])
            }
            Verdict::Deferred(d) => {
                if d.plan.is_err() && policy.feasibility.reject_stuck_deferred {
                    deny(&label, self.message_for(audience))
                } else {
                    allow(vec![self.summary_for(audience)])
                }
            }
            Verdict::Infeasible(_) => {
                if policy.feasibility.reject_infeasible {
                    deny(&label, self.message_for(audience))
                } else {
                    allow(vec![self.summary_for(audience)])
                }
            }
            Verdict::QosChange(q) => match (&q.repair, policy.qos.on_change) {
                (Some(r), OnQosChange::Repair) => Outcome {
                    action: Ruling::Repair(r.clone()),
                    warnings: vec![clip(
                        &format!(
                            "resize-guard repaired this resize to keep QoS class {}: {}",
                            r.class,
                            r.describe()
                        ),
                        256,
                    )],
                    decision: "qos-repaired".to_owned(),
                },
                _ => deny(&label, self.message_for(audience)),
            },
            Verdict::Denied(_) => deny(&label, self.message_for(audience)),
        };
        if !policy.is_audit() {
            return enforced;
        }
        match enforced.action {
            Ruling::Allow => enforced,
            Ruling::Deny(_) => Outcome {
                action: Ruling::Allow,
                warnings: vec![clip(
                    &format!(
                        "resize-guard (audit mode) would deny this resize: {}",
                        self.summary_for(audience)
                            .trim_start_matches("resize-guard: ")
                    ),
                    256,
                )],
                decision: format!("would-deny:{}", enforced.decision),
            },
            Ruling::Repair(r) => Outcome {
                action: Ruling::Allow,
                warnings: vec![clip(
                    &format!(
                        "resize-guard (audit mode) would repair this resize to keep QoS class {}: {}",
                        r.class,
                        r.describe()
                    ),
                    256,
                )],
                decision: "would-repair".to_owned(),
            },
        }
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut with `…`.
pub fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn deny(label: &str, message: String) -> Outcome {
    Outcome {
        action: Ruling::Deny(message),
        warnings: vec![],
        decision: label.to_owned(),
    }
}

fn deferred_message(d: &Deferral, audience: Audience<'_>) -> String {
    let head = format!(
        "resize-guard: node {} is short of {} for this resize, so the kubelet will mark it Deferred (\"{}\")",
        d.node,
        d.shortfall_text(),
        d.kubelet_message()
    );
    match &d.plan {
        Ok(p) if p.victims.is_empty() => format!(
            "{head}; terminating pods {} will free enough room, after which it completes",
            audience.list(p.awaiting.iter(), NAMES_IN_MESSAGES)
        ),
        Ok(p) => format!(
            "{head}; resize-guard will preempt: {}{}",
            audience.list(p.victims.iter(), NAMES_IN_MESSAGES),
            p.race_note_for(audience, NAMES_IN_MESSAGES)
        ),
        Err(why) => format!(
            "{head}; no lower-priority pods can make room ({why}); this resize will wait until room appears"
        ),
    }
}

fn qos_message(q: &QosChange) -> String {
    let why = q
        .culprits
        .iter()
        .map(Culprit::describe)
        .collect::<Vec<_>>()
        .join("; ");
    let fix = match (q.from, q.to) {
        (QosClass::Guaranteed, _) => match &q.repair {
            Some(r) => format!(
                "keep requests equal to limits for cpu and memory in every container, e.g. {} \
                 (or let resize-guard do it: qos.onChange: repair)",
                r.describe()
            ),
            None => "keep requests equal to limits for cpu and memory in every container".to_owned(),
        },
        (QosClass::BestEffort, _) => {
            "a BestEffort pod cannot gain cpu or memory requests or limits in place; recreate it with resources".to_owned()
        }
        (QosClass::Burstable, QosClass::Guaranteed) => {
            "keep at least one cpu or memory request below its limit (or a limit unset), or recreate the pod to make it Guaranteed".to_owned()
        }
        (QosClass::Burstable, _) => "requests cannot be removed in place; keep at least one cpu or memory request".to_owned(),
    };
    let also = q
        .also_invalid
        .as_ref()
        .map(|e| format!(" Kubernetes also reports: {e}."))
        .unwrap_or_default();
    format!(
        "resize-guard: this resize would change the pod's QoS class from {} to {}, which Kubernetes \
         refuses (\"Pod QOS Class may not change as a result of resizing\"). Cause: {}. Fix: {}.{also}",
        q.from,
        q.to,
        if why.is_empty() {
            "the combined requests and limits".to_owned()
        } else {
            why
        },
        fix
    )
}
